"""The chat page's tests share an example server whose chat model is the tests' scripted one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scenarios.model_stubs import openai_stub
from tests.servers import ExampleServer, running

TASK = (
    "Berechne die Kfz-Versicherung bei Pfefferminzia für einen Skoda Octavia, "
    "Erstzulassung 2021-03-15, 110 kW, 1968 ccm, Diesel, 45 000 km im Jahr."
)


@pytest.fixture(scope="package")
def chatting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    """The example server with the scripted model as its chat model (priced as gpt-4.1-mini)."""
    folder = Path(tmp_path_factory.mktemp("chat"))
    with openai_stub() as base_url, running(ExampleServer(
        folder / "s.sqlite3",
        extra_args=["--chat-model", "openai:gpt-4.1-mini", "--chat-model-base-url", base_url,
                    "--request-log", str(folder / "mcp-requests.jsonl")],
    )) as started:  # fmt: skip
        yield started
