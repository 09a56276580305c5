"""Bounded resources: slow and idle connections are cut, sessions are capped, callers are rate
limited; every refusal says how long to wait."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.embedded import start_seconds
from tests.mcp.clients import Client
from tests.mcp.test_http import HEADERS, INITIALIZE
from tests.servers import ExampleServer, McpServer, free_port, started


def _closed(sock: socket.socket, within: float) -> float | None:
    """Seconds until the server closed this connection, or None if it stayed open."""
    sock.settimeout(within)
    started = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except OSError:
        pass
    return time.monotonic() - started


def test_slow_and_silent_connections_are_cut_after_the_read_deadline(tmp_path: Path) -> None:
    server = ExampleServer(tmp_path / "s.sqlite3", extra_args=["--request-read-seconds", "1"])
    server.start()
    try:
        silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(200)]
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
        with httpx.Client() as client:  # meanwhile, a normal request is answered
            assert client.get(server.url + "/healthz").status_code == 200
        assert _closed(slow, within=10) is not None, "a slow request is cut"
        assert all(_closed(s, within=10) is not None for s in silent), "silent ones too"
        with httpx.Client() as client:
            assert client.get(server.url + "/healthz").status_code == 200
    finally:
        for sock in [*silent, slow]:
            sock.close()
        server.stop()


def test_a_head_beyond_its_cap_and_a_body_that_never_ends_are_cut(tmp_path: Path) -> None:
    server = ExampleServer(tmp_path / "s.sqlite3", extra_args=["--request-read-seconds", "1"])
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as endless:
            endless.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            with contextlib.suppress(OSError):  # the server may close while this still sends
                for _ in range(64):  # 64 KiB of headers, in pieces, quickly
                    endless.sendall(b"x-filler: " + b"a" * 1012 + b"\r\n")
            endless.settimeout(10)
            answer = endless.recv(4096)
            assert answer.startswith(b"HTTP/1.1 431 "), answer
            assert b"exceed 16384 bytes" in answer
            assert _closed(endless, within=10) is not None
        with socket.create_connection(("127.0.0.1", server.port)) as trickle:
            trickle.sendall(
                b"POST /omds-ld/insurers/pfefferminzia/api/calculations HTTP/1.1\r\n"
                b"Host: 127.0.0.1\r\nContent-Type: application/ld+json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )  # and never the other 99 bytes
            assert _closed(trickle, within=10) is not None, "a body that never ends is cut"
        with httpx.Client() as client:  # the server itself is as it was
            assert client.get(server.url + "/healthz").status_code == 200
    finally:
        server.stop()


def _answers(sock: socket.socket) -> bytes:
    """Everything the server sends on this connection until it closes it."""
    sock.settimeout(10)
    received = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_the_head_cap_holds_whatever_the_reads(server: ExampleServer) -> None:
    """The cap counts where the parser counts: one header of 100 KiB in one write, 3 000
    headers in one write, a 60 KiB head pipelined behind a request: each 431, never the app."""
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    heads = {
        "one big header": start + b"x-big: " + b"a" * 100 * 1024 + b"\r\n\r\n",
        "many headers": start + b"".join(b"x-%d: 1\r\n" % i for i in range(3000)) + b"\r\n",
        "pipelined": start + b"\r\n" + start + b"x-big: " + b"a" * 60 * 1024 + b"\r\n\r\n",
    }
    for what, head in heads.items():
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            with contextlib.suppress(OSError):  # the server may close while this still sends
                sock.sendall(head)
            answered = _answers(sock)
        assert b"HTTP/1.1 431 " in answered, (what, answered[:200])
        assert answered.count(b"HTTP/1.1 200") <= (1 if what == "pipelined" else 0), what
    with httpx.Client() as client:  # the server itself is as it was
        assert client.get(server.url + "/healthz").status_code == 200


def _get(sock: socket.socket, path: str) -> bytes:
    """One request on this connection, and its whole answer (a length given, as here)."""
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
    sock.settimeout(30)
    answer = b""
    while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    while length and len(body) < int(length[1]) and (chunk := sock.recv(65536)):
        body += chunk
    return answer if not length else head + b"\r\n\r\n" + body


def test_a_connection_idle_as_long_as_clients_keep_one_is_still_served(
    server: ExampleServer,
) -> None:
    """httpx (the MCP SDK's client) sends on a connection idle up to 5 s, aiohttp up to 15 s:
    the server must not be closing it then, or the request is lost in the close."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        assert _get(sock, "/healthz").startswith(b"HTTP/1.1 200 ")
        time.sleep(6)
        assert _get(sock, "/healthz").startswith(b"HTTP/1.1 200 ")


# A server whose loop lags, as under load: /busy holds the loop twice with a turn between (the
# keep-alive timer of another connection, due by then, is queued behind its second stretch)
LAGGING = """
import asyncio, sys, time
from omds_ld import serving
from omds_ld.settings import Limits

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/busy":
        time.sleep(2.0)
        await asyncio.sleep(0)
        time.sleep(3.0)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})

serving.run(app, "127.0.0.1", int(sys.argv[1]), "warning", Limits(keep_alive_seconds=2))
"""


def test_a_request_that_arrives_while_the_loop_lags_is_never_lost_to_the_keep_alive_close(
    tmp_path: Path,
) -> None:
    """The keep-alive timer of an idle connection comes due while the loop is busy; the client
    sends its next request in good time, before the timer has run. uvicorn's timer closed the
    connection then, with the request unread (a reset: the client's ReadError); it is served."""
    port = free_port()
    with (tmp_path / "lagging.log").open("wb") as log:
        process = started(
            subprocess.Popen([sys.executable, "-c", LAGGING, str(port)], stdout=log, stderr=log)
        )
    try:
        deadline = time.monotonic() + start_seconds(os.environ)
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            assert process.poll() is None and time.monotonic() < deadline, "it did not start"
            time.sleep(0.05)
        with (
            socket.create_connection(("127.0.0.1", port)) as idle,
            socket.create_connection(("127.0.0.1", port)) as busy,
        ):
            # half a second's slack at every edge, so that a busy machine still sets the race up
            assert _get(idle, "/").startswith(b"HTTP/1.1 200 ")  # its timer: due in 2 s
            time.sleep(0.5)
            busy.sendall(b"GET /busy HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # 0.5-2.5, 2.5-5.5
            time.sleep(3.0)
            answer = _get(idle, "/")  # at 3.5: the timer is due, queued behind the second stretch
            assert answer.startswith(b"HTTP/1.1 200 "), answer
            busy.settimeout(30)
            assert busy.recv(4096).startswith(b"HTTP/1.1 200 ")
    finally:
        process.terminate()
        process.wait(timeout=30)


def _replica(tmp_path: Path, server: ExampleServer, settings: str) -> McpServer:
    config = tmp_path / "mcp.toml"
    config.write_text(
        settings + f'\n[[instance]]\nname = "disrupto"\napi = "{server.api("disrupto")}"\n'
    )
    replica = McpServer(config, free_port())
    replica.start()
    return replica


def test_sessions_are_capped_per_client_and_in_all(server: ExampleServer, tmp_path: Path) -> None:
    per_client = _replica(
        tmp_path, server, "[http]\nmax_sessions = 10\nmax_sessions_per_client = 3"
    )
    try:
        url = per_client.mcp("disrupto")
        with httpx.Client() as client:
            opened = [client.post(url, json=INITIALIZE, headers=HEADERS) for _ in range(3)]
            assert all(r.status_code == 200 for r in opened)
            refused = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert refused.status_code == 429
            assert int(refused.headers["Retry-After"]) >= 1
            assert "rate-limited" in refused.json()["error"]["message"]
            first = opened[0].headers["mcp-session-id"]
            closed = client.delete(url, headers={**HEADERS, "Mcp-Session-Id": first})
            assert closed.status_code in (200, 204)
            again = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert again.status_code == 200, "a closed session frees its place"
    finally:
        per_client.stop()
    in_all = _replica(tmp_path, server, "[http]\nmax_sessions = 2\nmax_sessions_per_client = 5")
    try:
        url = in_all.mcp("disrupto")
        with httpx.Client() as client:
            assert all(
                client.post(url, json=INITIALIZE, headers=HEADERS).status_code == 200
                for _ in range(2)
            )
            full = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert full.status_code == 503 and int(full.headers["Retry-After"]) >= 1
    finally:
        in_all.stop()


def test_a_caller_over_its_rate_gets_a_tool_error_with_the_time_to_wait(
    server: ExampleServer, tmp_path: Path
) -> None:
    replica = _replica(tmp_path, server, "calls_per_minute = 6\ncall_burst = 3")

    async def run() -> list[object]:
        async with Client(replica.mcp("disrupto"), mode="2026-07-28") as client:
            return [await client.call_tool("listProducts", {}) for _ in range(4)]

    try:
        results = asyncio.run(run())
    finally:
        replica.stop()
    assert [r.is_error for r in results] == [False, False, False, True]  # type: ignore[attr-defined]
    problem = answer_of(results[3])["problem"]
    assert problem["type"].endswith("/rate-limited") and problem["kind"] == "rate-limited"
    assert 1 <= problem["retryAfterSeconds"] <= 10
    assert "wait" in results[3].content[0].text  # type: ignore[attr-defined]
