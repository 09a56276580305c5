from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ExampleServer


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
