"""A hostile insurer cannot stall ``omds-ld mcp``: one process serves a hostile insurer and a
right one (a multi-insurer ``mcp.toml``); whatever the hostile one sends, the calls to the right
one keep their latency, each hostile call ends in time as a tool error, the next call on the
pool is answered right, and SIGTERM stops the process while hostile answers are in flight."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from omds_ld.mcp.condense import answer_of
from tests.mcp.clients import Client
from tests.mcp.test_hostile import raw_call
from tests.mcp.test_http_client import _read_request, _tcp_server
from tests.servers import ExampleServer, McpServer, free_port

TIMEOUT = 1.0
FILLER = b"x-filler: aaaaaaaaaaaaaaaaaaaa\r\n" * 100_000  # three megabytes of headers
HOSTILE = ("headers by the megabyte", "a head after a whole answer", "an endless chunked answer",
           "a trickled head")  # fmt: skip


class Insurer:
    """Pfefferminzia's interface behind a server that, while ``mode`` names an attack, answers
    every request with it, and otherwise passes it on to the example server."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.mode = "right"

    def handle(self, connection: socket.socket, number: int) -> None:
        reader = connection.makefile("rb")
        while (request := _read_request(reader)) is not None:
            mode = self.mode
            if mode == "right":
                connection.sendall(self._passed_on(*request))
            elif mode == "headers by the megabyte":
                connection.sendall(b"HTTP/1.1 200 OK\r\n" + FILLER + b"content-length: 0\r\n\r\n")
            elif mode == "a head after a whole answer":
                connection.sendall(
                    self._passed_on(*request) + b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n"
                )
            elif mode == "an endless chunked answer":
                connection.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                while True:
                    connection.sendall(b"10000\r\n" + b"a" * 0x10000 + b"\r\n")
            elif mode == "a trickled head":
                for byte in b"HTTP/1.1 200 OK\r\n" + b"x-slow: yes\r\n" * 100:
                    connection.sendall(bytes([byte]))
                    time.sleep(0.1)

    def _passed_on(self, line: str, headers: dict[str, str], body: bytes) -> bytes:
        method, target, _ = line.split()
        sent = {k: v for k, v in headers.items() if k not in ("host", "accept-encoding")}
        asked = urllib.request.Request(
            self.upstream + target, data=body or None, headers=sent, method=method
        )
        try:
            with urllib.request.urlopen(asked, timeout=10) as answer:
                status, reason, kept, content = (
                    answer.status,
                    answer.reason,
                    answer.headers,
                    answer.read(),
                )
        except urllib.error.HTTPError as error:
            status, reason, kept, content = error.code, error.reason, error.headers, error.read()
        drop = ("content-length", "transfer-encoding", "connection")
        head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in kept.items() if k.lower() not in drop
        )
        return f"{head}content-length: {len(content)}\r\n\r\n".encode("latin-1") + content


@contextlib.contextmanager
def _replica(tmp_path: Path, server: ExampleServer, hostile: str) -> Iterator[McpServer]:
    config = tmp_path / "mcp.toml"
    config.write_text(
        f'[[instance]]\nname = "pfefferminzia"\napi = "{server.api("pfefferminzia")}"\n\n'
        f'[[instance]]\nname = "hostile"\napi = "{hostile}"\n'
    )
    replica = McpServer(config, free_port(), ["--timeout-seconds", str(TIMEOUT)])
    replica.start()
    try:
        yield replica
    finally:
        replica.stop()


def _case(server: ExampleServer) -> str:
    """A calculation at Pfefferminzia's interface: its case id."""
    api = server.api("pfefferminzia")
    headers = {"accept": "application/ld+json", "content-type": "application/ld+json"}
    product = httpx.get(f"{api}/products", headers=headers).json()["p:product"][0]["@id"]
    created = httpx.post(f"{api}/calculations", json={"p:hasRootProduct": product}, headers=headers)
    created.raise_for_status()
    return str(created.headers["location"]).rstrip("/").rsplit("/", 1)[1]


async def _latencies(
    client: Client, case: str, count: int, for_at_least: float = 0.0
) -> list[float]:
    """``count`` reads of the case (each asks the insurer: a case is never served from the
    cache unchecked), one after the other and for at least so many seconds: how long each
    took."""
    taken: list[float] = []
    until = time.monotonic() + for_at_least
    while len(taken) < count or time.monotonic() < until:
        started = time.perf_counter()
        result = await client.call_tool("readCalculation", {"caseId": case})
        taken.append(time.perf_counter() - started)
        assert not result.is_error, result
    return taken


async def _attack(client: Client, case: str, failures: list[tuple[str, float]]) -> None:
    """Reads of the case at the hostile insurer, one after the other, until cancelled: each
    failure's problem type and how long the call took."""
    while True:
        started = time.monotonic()
        result = await client.call_tool("readCalculation", {"caseId": case})
        if result.is_error:
            problem = answer_of(result)["problem"]["type"].rsplit("/", 1)[1]
            failures.append((problem, time.monotonic() - started))
        await asyncio.sleep(0.05)


Seen = dict[str, tuple[float, list[tuple[str, float]], bool]]


async def _under_attack(insurer: Insurer, replica: McpServer, case: str) -> Seen:
    """For each attack: the right insurer's mean latency under it against idle (a stall of the
    process shows in the mean, however rare), the hostile calls' failures, and whether the
    next call to the hostile insurer was answered right."""
    seen: Seen = {}
    async with (
        Client(replica.mcp("pfefferminzia"), mode="2026-07-28") as right,
        Client(replica.mcp("hostile"), mode="2026-07-28") as hostile,
    ):
        assert not (await hostile.call_tool("readCalculation", {"caseId": case})).is_error
        await _latencies(right, case, 10)  # warm
        for mode in HOSTILE:
            idle = statistics.mean(await _latencies(right, case, 20))
            insurer.mode = mode
            failures: list[tuple[str, float]] = []
            attackers = [asyncio.create_task(_attack(hostile, case, failures)) for _ in range(2)]
            # long enough for the slowest attack to reach its timeout
            taken = await _latencies(right, case, 20, for_at_least=2.5 * TIMEOUT)
            under_attack = statistics.mean(taken)
            for task in attackers:
                task.cancel()
            await asyncio.gather(*attackers, return_exceptions=True)
            insurer.mode = "right"
            after = await hostile.call_tool("readCalculation", {"caseId": case})
            seen[mode] = (under_attack / idle, failures, not after.is_error)
    return seen


def test_a_hostile_insurer_does_not_stall_the_other_insurers_of_the_process(
    tmp_path: Path, server: ExampleServer
) -> None:
    insurer = Insurer(server.url)
    case = _case(server)
    hostile_api = "/omds-ld/insurers/pfefferminzia/api"
    with (
        _tcp_server(insurer.handle) as port,
        _replica(tmp_path, server, f"http://127.0.0.1:{port}{hostile_api}") as replica,
    ):
        seen = asyncio.run(_under_attack(insurer, replica, case))
        insurer.mode = "a trickled head"  # hostile answers in flight while the process stops
        calls = [
            threading.Thread(target=_call_quietly, args=(replica.mcp("hostile"),), daemon=True)
            for _ in range(4)
        ]
        for call in calls:
            call.start()
        time.sleep(0.5)
        assert replica.process is not None
        replica.process.terminate()
        try:
            stopped = replica.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not stop the process within 10 s, hostile answers in flight")
    # ended by the signal, not killed: uvicorn re-raises the signal it stopped by
    assert stopped in (0, -15), f"SIGTERM stops the process cleanly, not with {stopped}"
    for mode, (ratio, failures, answered) in seen.items():
        assert ratio < 4, f"{mode}: the right insurer's calls took {ratio:.1f} times as long"
        assert answered, f"{mode}: the next call on the pool was answered right"
        if mode == "a head after a whole answer":
            assert failures == [], "each answer was whole: what followed it was not read"
            continue
        assert failures, mode
        for problem, took in failures:
            assert problem in ("insurer-unavailable", "insurer-timeout"), (mode, problem)
            assert took < 2 * TIMEOUT, f"{mode}: a call ended within its timeout"


def _call_quietly(url: str) -> None:
    """A sessionless tools/call to ``url`` whose answer nobody waits for."""
    with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=15) as client:
        raw_call(client, url, '{"caseId": "c-1"}', None)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
