from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ExampleServer


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    """One example server with all three insurers for the session, on its own SQLite file."""
    database = Path(tmp_path_factory.mktemp("store")) / "omds-ld.sqlite3"
    running = ExampleServer(database)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as http:
        yield http
