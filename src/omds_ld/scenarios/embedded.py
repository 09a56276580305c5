"""The example server as a subprocess on a free loopback port, for runs that bring their own."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

from omds_ld.example_config import DEMO_PASSWORD_ENV
from omds_ld.scenarios.person import DEMO_PASSWORD


def free_port() -> int:
    """A loopback port that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# how long a server may take to start at most (``OMDS_LD_START_SECONDS``): it is ready when it
# says so (healthz answers), on a busy machine much later than on an idle one
START_SECONDS = 300.0


def start_seconds(environment: Mapping[str, str]) -> float:
    """The longest a server may take to start: ``OMDS_LD_START_SECONDS`` or ``START_SECONDS``."""
    try:
        return float(environment.get("OMDS_LD_START_SECONDS", START_SECONDS))
    except ValueError:
        return START_SECONDS


def wait_until_healthy(
    process: subprocess.Popen[bytes], url: str, log: Path, what: str, seconds: float | None = None
) -> None:
    """Until ``url``/healthz answers 200 (the process's own word that it is ready), however long
    that takes on a busy machine, up to ``seconds`` (``start_seconds``); the process's log in
    the error if it exits or never says so. The caller stops a process that did not start."""
    deadline = time.monotonic() + (start_seconds(os.environ) if seconds is None else seconds)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def example_server(timeout: float | None = None, extra_args: Sequence[str] = ()) -> Iterator[str]:
    """Start ``omds-ld serve`` on a fresh store (with ``extra_args``); yield its base URL; stop
    it afterwards."""
    with tempfile.TemporaryDirectory(prefix="omds-ld-") as folder:
        port = free_port()
        log = Path(folder) / "server.log"
        command = [
            sys.executable, "-m", "omds_ld.cli", "serve", "--port", str(port),
            "--database", str(Path(folder) / "store.sqlite3"), "--log-level", "warning",
            "--request-log", str(Path(folder) / "mcp-requests.jsonl"), *extra_args,
        ]  # fmt: skip
        # a run's own server: its scripted person (omds_ld.scenarios.person) logs in with the
        # password it is started with; nothing else reaches it (a free loopback port, a fresh store)
        environment = {**os.environ, DEMO_PASSWORD_ENV: DEMO_PASSWORD}
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=environment
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(process, url, log, "the example server", timeout)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
