from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ExampleServer, running


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    """The example server with authorization required, logging what the insurers are asked."""
    folder = Path(tmp_path_factory.mktemp("secured"))
    with running(ExampleServer(
        folder / "s.sqlite3",
        extra_args=["--require-token", "--access-log", str(folder / "access.jsonl"),
                    "--request-log", str(folder / "mcp-requests.jsonl")],
    )) as started:  # fmt: skip
        yield started
