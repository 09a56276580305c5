"""The example server as a subprocess on a free loopback port, for runs that bring their own."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    """A loopback port that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_healthy(
    process: subprocess.Popen[bytes], url: str, log: Path, what: str, seconds: float = 30.0
) -> None:
    """Until ``url``/healthz answers 200; the process's log in the error if it exits or hangs."""
    deadline = time.monotonic() + seconds
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
def example_server(timeout: float = 30.0, extra_args: Sequence[str] = ()) -> Iterator[str]:
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
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
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
