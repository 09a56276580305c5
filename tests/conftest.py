from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ExampleServer, RedisServer


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
        ],
    )  # fmt: skip
    running.start()
    yield running
    running.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as http:
        yield http


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real Redis for shared state. Without ``redis-server`` the tests that need it are skipped,
    unless OMDS_LD_REQUIRE_REDIS=1 (CI sets it) makes that a failure."""
    running = RedisServer(Path(tmp_path_factory.mktemp("redis")))
    try:
        running.start()
    except FileNotFoundError:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("OMDS_LD_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    yield running
    running.stop()
