"""Nothing a caller sends grows the server without bound, and no cap locks out what it does not
cap. Fault and load tests against the example server as a process: unknown tool names add no
metric series, large bodies are refused (413) without growing the process, sessionless calls are
served while an address is at its session cap, and hibernation never loses a session in use."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from mcp import Client

from tests.servers import ExampleServer

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bounds", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bounds", "version": "1"}},
}  # fmt: skip


def _sessionless(
    method: str, params: dict[str, object], name: str = ""
) -> tuple[bytes, dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name:
        headers["Mcp-Name"] = name
    return json.dumps(body).encode(), headers


def _rss_kib(server: ExampleServer) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _series(server: ExampleServer) -> list[str]:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_unknown_tool_names_add_no_metric_series(server: ExampleServer) -> None:
    own_server = server
    url = own_server.mcp("disrupto")
    with httpx.Client(timeout=30) as client:

        def unknown(size: int) -> None:
            name = "x" + "".join(random.choices("abcdefghij", k=size))
            body, headers = _sessionless("tools/call", {"name": name, "arguments": {}}, name)
            answer = client.post(url, content=body, headers=headers)
            assert answer.status_code == 200, answer.text

        unknown(10)  # the one series of unknown tools exists from now on
        before = _series(own_server)
        for n in range(300):
            unknown(10_000 if n % 10 == 0 else 40)
        after = _series(own_server)
    names = {line.split("{")[0] for line in before}
    assert len(after) == len(before), set(after) - set(before)
    assert sum(map(len, after)) < sum(map(len, before)) + 2_000  # counts grew, never names
    assert "omds_ld_mcp_tool_calls_total" in names
    assert any('tool="unknown"' in line for line in after)


def _post_chunked(url: str, size: int, **headers: str) -> int:
    """POST ``size`` bytes sent in chunks (no Content-Length): what the server answers, or 413
    if it closed the connection on us after answering it."""

    def chunks() -> Iterator[bytes]:
        piece = b'{"client_name": "' + b"x" * (64 * 1024)
        sent = 0
        while sent < size:
            yield piece
            sent += len(piece)
        yield b'"}'

    try:
        return httpx.post(url, content=chunks(), headers=headers, timeout=60).status_code
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        return 413  # it answered 413 and closed while the body still came


def test_large_bodies_are_refused_and_the_server_does_not_grow(server: ExampleServer) -> None:
    """Registrations and chat calls of 20 MiB, twenty times each, declared and streamed: every
    one 413 from the first bytes past the cap, nothing stored, the process's memory flat."""
    own_server = server
    base = own_server.url
    with httpx.Client(timeout=30) as client:
        page = client.get(f"{base}/chat")
        conversation = client.post(
            f"{base}/chat/api/conversations", json={}, headers={"Origin": base}
        ).json()["id"]
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    assert page.status_code == 200
    auth_store = own_server.database.with_name(own_server.database.stem + "-auth.sqlite3")
    stored_before = auth_store.stat().st_size
    rss_before = _rss_kib(own_server)
    huge = 20 * 1024 * 1024
    targets = [
        (f"{base}/oauth/register", {"Content-Type": "application/json"}),
        (f"{base}/chat/api/conversations/{conversation}/calls",
         {"Content-Type": "application/json", "Origin": base, "Cookie": cookie}),
    ]  # fmt: skip
    for url, headers in targets:
        for _ in range(10):
            assert _post_chunked(url, huge, **headers) == 413
            declared = httpx.post(
                url, content=b"x" * (2 * 1024 * 1024), headers=headers, timeout=60
            )
            assert declared.status_code == 413
            assert declared.json()["type"].endswith("/payload-too-large")
    grown = _rss_kib(own_server) - rss_before
    assert grown < 64 * 1024, f"the server grew by {grown} KiB"
    assert auth_store.stat().st_size < stored_before + 64 * 1024
    assert httpx.get(f"{base}/healthz").status_code == 200


def test_sessionless_calls_are_served_while_an_address_is_at_its_session_cap(
    tmp_path: Path,
) -> None:
    server = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--max-sessions-per-client", "3", "--hibernate-seconds", "3"],
    )
    server.start()
    try:
        url = server.mcp("pfefferminzia")
        with httpx.Client(timeout=30) as client:
            for _ in range(3):  # abandoned sessions fill the address's slots
                assert client.post(url, json=INITIALIZE, headers=HEADERS).status_code == 200
            full = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert full.status_code == 429
            wait = int(full.headers["Retry-After"])
            assert 1 <= wait <= 4, "a slot frees when the idle session hibernates"
            body, headers = _sessionless("tools/list", {})
            listed = client.post(url, content=body, headers=headers)
            assert listed.status_code == 200 and listed.json()["result"]["tools"]
            # the chat page lists every server's tools, and says what refuses it
            servers = client.get(f"{server.url}/chat/api/servers")
            assert servers.status_code == 200
            assert all(s["tools"] and "error" not in s for s in servers.json()["servers"])
            client.get(f"{server.url}/chat")
            conversation = client.post(
                f"{server.url}/chat/api/conversations", json={},
                headers={"Origin": server.url},
            ).json()["id"]  # fmt: skip
            by_hand = client.post(
                f"{server.url}/chat/api/conversations/{conversation}/calls",
                json={"server": "pfefferminzia", "tool": "listProducts", "arguments": {}},
                headers={"Origin": server.url},
            )
            assert by_hand.status_code == 502
            assert "refused: Too many open sessions" in by_hand.json()["detail"], by_hand.text
            assert "Too many open sessions" in by_hand.json()["detail"]

        async def sessionless() -> bool:
            async with Client(url, mode="2026-07-28") as mcp:
                return bool((await mcp.call_tool("listProducts", {})).is_error)

        assert asyncio.run(sessionless()) is False
        time.sleep(wait + 1)
        with httpx.Client(timeout=30) as client:
            again = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert again.status_code == 200, "the hibernated sessions freed their slots"
    finally:
        server.stop()


def test_no_session_in_use_is_lost_under_hibernation_sweeps(tmp_path: Path) -> None:
    """Sessions hibernating every fraction of a second while their clients keep coming back at
    random: every request of every session is answered, none with 404."""
    server = ExampleServer(tmp_path / "s.sqlite3", extra_args=["--hibernate-seconds", "0.1"])
    server.start()
    failures: list[str] = []
    answered = [0]
    lock = threading.Lock()

    def agent() -> None:
        url = server.mcp("disrupto")
        with httpx.Client(timeout=30) as client:
            opened = client.post(url, json=INITIALIZE, headers=HEADERS)
            session = opened.headers["mcp-session-id"]
            headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=headers)  # fmt: skip
            for n in range(12):
                time.sleep(random.uniform(0.05, 0.4))
                answer = client.post(
                    url, json={"jsonrpc": "2.0", "id": n + 2, "method": "tools/list"},
                    headers=headers,
                )  # fmt: skip
                with lock:
                    if answer.status_code != 200:
                        failures.append(f"{answer.status_code}: {answer.text[:120]}")
                    else:
                        answered[0] += 1

    try:
        threads = [threading.Thread(target=agent) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.stop()
    assert failures == [], f"{len(failures)} of {40 * 12}: {failures[:3]}"
    assert answered[0] == 40 * 12
