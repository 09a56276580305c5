"""The example server as a subprocess on a free loopback port, for runs that bring their own."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def example_server(timeout: float = 30.0) -> Iterator[str]:
    """Start ``omds-ld serve`` on a fresh store; yield its base URL; stop it afterwards."""
    with tempfile.TemporaryDirectory(prefix="omds-ld-") as folder:
        port = _free_port()
        log = Path(folder) / "server.log"
        command = [
            sys.executable, "-m", "omds_ld.cli", "serve", "--port", str(port),
            "--database", str(Path(folder) / "store.sqlite3"), "--log-level", "warning",
            "--request-log", str(Path(folder) / "mcp-requests.jsonl"),
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the example server exited: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the example server did not start") from None
                    time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
