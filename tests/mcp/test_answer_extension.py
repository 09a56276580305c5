"""The whole structured answer (``_meta["omds-ld/answer"]``) goes to a client that declares its
extension, and to no other: a model's host gets the text and structuredContent (a draft's answer:
some four times fewer bytes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp
import pytest

from omds_ld.mcp.condense import ANSWER_META, answer_extension, answer_of
from tests.mcp.clients import TRANSPORTS, stdio_parameters
from tests.servers import ExampleServer


async def _read_product(target: Any, mode: str, declared: bool) -> Any:
    extensions = [answer_extension()] if declared else []
    async with mcp.Client(target, mode=mode, extensions=extensions) as client:  # type: ignore[arg-type]
        return await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_whole_answer_goes_only_to_a_client_that_declares_its_extension(
    transport: str, server: ExampleServer, tmp_path: Path
) -> None:
    if transport == "stdio":
        target: Any = stdio_parameters(server, "pfefferminzia", tmp_path / "requests.jsonl")
        mode = "legacy"
    else:
        target = server.mcp("pfefferminzia")
        mode = "legacy" if transport.endswith("2025-11-25") else "2026-07-28"
    plain = asyncio.run(_read_product(target, mode, declared=False))
    declared = asyncio.run(_read_product(target, mode, declared=True))

    assert ANSWER_META not in (plain.meta or {})
    # the same text but for its first line (where it came from: the second read is cached)
    assert [r.content[0].text.split("\n")[1:] for r in (plain, declared)] == [
        declared.content[0].text.split("\n")[1:]
    ] * 2
    steady = [{k: v for k, v in r.structured_content.items() if k != "provenance"}
              for r in (plain, declared)]  # fmt: skip
    assert steady[0] == steady[1]
    assert plain.structured_content["operation"] == "readProduct"
    whole = answer_of(declared)
    assert whole["product"]["iri"].endswith("/kraftfahrt-2025") and whole["nextSteps"]
