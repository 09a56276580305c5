"""The draft's tools follow the insurer's process knowledge, and a change is announced."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from omds_ld.insurer.data import builtin_insurers_folder
from tests.mcp.clients import stdio_parameters
from tests.servers import ExampleServer


def test_process_knowledge_is_read_at_start(tmp_path: Path) -> None:
    """A server of its own, asked nothing yet: each insurer's MCP server has read its process
    knowledge once it is up."""
    started = ExampleServer(
        tmp_path / "s.sqlite3", extra_args=["--access-log", str(tmp_path / "access.jsonl")]
    )
    started.start()
    try:
        asked = [e["path"] for e in started.access_entries()]
    finally:
        started.stop()
    for insurer in ("pfefferminzia", "disrupto", "angloamerican"):
        assert f"/omds-ld/insurers/{insurer}/api/process-knowledge" in asked


def test_a_change_of_process_knowledge_changes_the_tools_and_is_announced(tmp_path: Path) -> None:
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    insurer = ExampleServer(tmp_path / "store.sqlite3", extra_args=["--insurers", str(folder)])
    insurer.start()
    received: list[Any] = []

    async def remember(message: Any) -> None:
        received.append(message)

    async def run() -> tuple[set[str], set[str]]:
        parameters = stdio_parameters(
            insurer, "disrupto", tmp_path / "log.jsonl", ["--refresh-seconds", "0.2"]
        )
        async with Client(parameters, mode="legacy", message_handler=remember) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            settings = folder / "disrupto" / "insurer.yaml"
            settings.write_text(
                settings.read_text().replace("draftAtServer: false", "draftAtServer: true")
            )
            await asyncio.to_thread(insurer.restart)
            await asyncio.sleep(0.5)
            await client.call_tool("readProcessKnowledge", {})
            for _ in range(50):
                if any(isinstance(m, types.ToolListChangedNotification) for m in received):
                    break
                await asyncio.sleep(0.1)
            after = {t.name for t in (await client.list_tools()).tools}
            return before, after

    try:
        before, after = asyncio.run(run())
    finally:
        insurer.stop()
    assert "createCalculation" not in before
    assert {"createCalculation", "createRiskObject", "calculatePremium"} <= after
    assert any(isinstance(m, types.ToolListChangedNotification) for m in received)
