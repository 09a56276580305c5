"""Real servers for tests: ``omds-ld serve`` as a subprocess on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from omds_ld.scenarios.embedded import free_port, start_seconds, wait_until_healthy
from omds_ld.scenarios.person import DEMO_PASSWORD

# every process a test helper started, so that none outlives the test run whatever happened
# (a start that failed, a test that never stopped its server): conftest ends them all
STARTED: list[subprocess.Popen[bytes]] = []


def started(process: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """``process``, kept in ``STARTED``."""
    STARTED.append(process)
    return process


def stop_all() -> list[int]:
    """End every process a helper started that still runs (SIGTERM, then SIGKILL); their ids."""
    ended = []
    for process in STARTED:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            ended.append(process.pid)
    STARTED.clear()
    return ended


def _started_or_stopped(process: subprocess.Popen[bytes], wait: Any) -> None:
    """Wait until the process is ready; one that never is, is stopped before the error goes on."""
    try:
        wait()
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise


@dataclass
class ExampleServer:
    """``omds-ld serve`` in a subprocess, on its own SQLite file; restartable."""

    database: Path
    extra_args: Sequence[str] = ()
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    # how the interpreter runs the command line: the module, or a script that calls its main
    command: Sequence[str] = ("-m", "omds_ld.cli")
    # the environment beside this process's (and the demo password the tests log in with)
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, insurer: str) -> str:
        return f"{self.url}/omds-ld/insurers/{insurer}/api"

    def mcp(self, insurer: str) -> str:
        return f"{self.url}/omds-ld/insurers/{insurer}/mcp"

    @property
    def access_log(self) -> Path:
        return self.database.parent / "access.jsonl"

    @property
    def request_log(self) -> Path:
        return self.database.parent / "mcp-requests.jsonl"

    def access_entries(self) -> list[dict[str, Any]]:
        """What the insurers' interfaces were asked, one entry per HTTP request."""
        if not self.access_log.exists():
            return []
        return [json.loads(line) for line in self.access_log.read_text().splitlines()]

    def request_entries(self) -> list[dict[str, Any]]:
        """The MCP request log of the example server's MCP endpoints."""
        if not self.request_log.exists():
            return []
        return [json.loads(line) for line in self.request_log.read_text().splitlines()]

    def start(self) -> None:
        self.log = self.database.with_suffix(".log")
        command = [
            sys.executable, *self.command, "serve",
            "--port", str(self.port), "--database", str(self.database),
            "--log-level", "warning", *self.extra_args,
        ]  # fmt: skip
        # the demo brokers' password the tests log in with (serve makes one of its own, printed
        # on its terminal, where none is given)
        environment = {**os.environ, "OMDS_LD_DEMO_PASSWORD": DEMO_PASSWORD, **self.environment}
        with self.log.open("ab") as out:
            self.process = started(
                subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment)
            )
        process, log = self.process, self.log
        _started_or_stopped(process, lambda: wait_until_healthy(process, self.url, log, "server"))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """End the process at once (SIGKILL): a crash, nothing written on the way out."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every business table, read from the SQLite file itself."""
        with sqlite3.connect(self.database) as db:
            return {
                table: sorted(db.execute(f"SELECT * FROM {table}").fetchall())
                for table in ("cases", "offers")
            }


def step(answer: Mapping[str, Any], operation: str, **match: str) -> dict[str, Any]:
    """The next step of an answer with this operation (and these parameters); fails if none."""
    for candidate in answer["bc:nextStep"]:
        if candidate["bc:operation"] != operation:
            continue
        params = candidate.get("bc:parameters", {})
        if all(params.get(k) == v for k, v in match.items()):
            return dict(candidate)
    offered = [s["bc:operation"] for s in answer["bc:nextStep"]]
    raise AssertionError(f"{operation} {match} is not offered; next steps: {offered}")


def call(
    client: httpx.Client,
    server: ExampleServer,
    next_step: Mapping[str, Any],
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """Call a next step exactly as the answer describes it: its method and href."""
    query = {
        k: v for k, v in next_step.get("bc:parameters", {}).items() if k in ("offset", "limit")
    }
    return client.request(
        next_step["bc:method"],
        server.url + next_step["bc:href"],
        params=query,
        json=body,
        headers={"Content-Type": "application/ld+json", **(headers or {})},
    )


@contextlib.contextmanager
def in_thread(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on a free loopback port, in a thread of the test's
    process, for the block; yields its base URL."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def running(server: ExampleServer) -> Iterator[ExampleServer]:
    """The server started for the block, and stopped after it, however the block ends."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class RedisServer:
    """A real ``redis-server`` on a free loopback port, nothing written to disk."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        self.process = started(subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        deadline = time.monotonic() + start_seconds(os.environ)
        while time.monotonic() < deadline and self.process.poll() is None:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """End the process at once (SIGKILL): a crash, nothing written on the way out."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


@dataclass
class McpServer:
    """``omds-ld mcp --http --config`` in a subprocess: one replica of a standalone MCP server."""

    config: Path
    port: int
    extra_args: Sequence[str] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mcp(self, name: str) -> str:
        return f"{self.url}/omds-ld/insurers/{name}/mcp"

    def start(self) -> None:
        log = self.config.with_suffix(f".{self.port}.log")
        # authorization is said, never assumed: off unless the test configures it
        said = "--auth-issuer" in self.extra_args or "[auth]" in self.config.read_text()
        with log.open("ab") as out:
            self.process = started(subprocess.Popen(
                [sys.executable, "-m", "omds_ld.cli", "mcp", "--http", "--config", str(self.config),
                 "--port", str(self.port), "--log-level", "warning",
                 *([] if said else ["--no-auth"]), *self.extra_args],
                stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        process = self.process
        _started_or_stopped(
            process, lambda: wait_until_healthy(process, self.url, log, "MCP server")
        )

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """End the process at once (SIGKILL): a crash, nothing written on the way out."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc: what the benchmarks measure
    a server's work by."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_per_call(
    arms: Sequence[tuple[Callable[[], Awaitable[Any]], Sequence[int]]],
    count: int,
    size: int = 50,
    pace: float = 0.0,
) -> list[float]:
    """CPU ms per call of each arm (a call, and the processes it runs in): ``count`` calls of
    each, in rounds of ``size`` calls of one arm, the arms taking turns, so that the machine's
    drift falls on every arm alike (a round is long enough for the CPU clock's 10 ms ticks to
    average out over the rounds). ``pace``: seconds from the start of one call to the next
    (0: back to back). Each arm is called five times first."""
    return [sum(each) for each in await cpu_per_call_by_process(arms, count, size, pace)]


async def cpu_per_call_by_process(
    arms: Sequence[tuple[Callable[[], Awaitable[Any]], Sequence[int]]],
    count: int,
    size: int = 50,
    pace: float = 0.0,
) -> list[list[float]]:
    """``cpu_per_call``, each arm's figure apart for each of its processes, in their order."""
    for call, _ in arms:
        for _ in range(5):
            await call()
    spent = [[0.0] * len(pids) for _, pids in arms]
    size = max(1, min(size, count))
    rounds = max(1, count // size)
    for _ in range(rounds):
        for index, (call, pids) in enumerate(arms):
            before = [cpu_seconds(pid) for pid in pids]
            for _ in range(size):
                started = time.perf_counter()
                await call()
                if pace:
                    await asyncio.sleep(max(0.0, pace - (time.perf_counter() - started)))
            for at, pid in enumerate(pids):
                spent[index][at] += cpu_seconds(pid) - before[at]
    return [[seconds * 1000 / (rounds * size) for seconds in each] for each in spent]
