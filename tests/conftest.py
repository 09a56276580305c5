from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import settings

from tests.servers import ExampleServer, RedisServer, stop_all

# No test asserts an absolute time: hypothesis's deadline per example (200 ms by default) would,
# and on a machine busy with the other tests' servers an example takes longer now and then.
settings.register_profile("omds-ld", deadline=None)
settings.load_profile("omds-ld")


def receipt_keys(folder: Path) -> Path:
    """A receipt key for MCP servers run apart (``receipt-key.pem`` in ``folder``, which
    ``tests.mcp.clients.stdio_parameters`` passes on), and its public JWKS for the insurers,
    made as an operator makes them (``omds-ld auth receipt-key``)."""
    import subprocess
    import sys

    public = folder / "receipt-keys.jwks"
    subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "auth", "receipt-key",
         "--out", str(folder / "receipt-key.pem"), "--jwks", str(public)],
        check=True, capture_output=True,
    )  # fmt: skip
    return public


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    """One example server with all three insurers for the session, on its own SQLite file."""
    folder = Path(tmp_path_factory.mktemp("store"))
    database = folder / "omds-ld.sqlite3"
    running = ExampleServer(
        database,
        extra_args=[
            "--access-log", str(folder / "access.jsonl"),
            "--request-log", str(folder / "mcp-requests.jsonl"),
            # the MCP servers the tests run apart (stdio) sign receipts its insurers trust
            "--trust-receipt-keys", str(receipt_keys(folder)),
        ],
    )  # fmt: skip
    running.start()
    yield running
    running.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as http:
        yield http


def start_redis(folder: Path) -> RedisServer:
    """Start a real Redis, or skip the test that needs it where ``redis-server`` is absent,
    unless OMDS_LD_REQUIRE_REDIS=1 (CI sets it) makes that a failure."""
    running = RedisServer(folder)
    try:
        running.start()
    except FileNotFoundError:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("OMDS_LD_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return running


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real Redis for shared state, shared by the tests of a session (skipped without one)."""
    running = start_redis(Path(tmp_path_factory.mktemp("redis")))
    yield running
    running.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No process a test started outlives the run (each xdist worker ends its own): a server
    whose start failed, or one a test left running."""
    stop_all()
