"""An insurer that is down is temporary: the MCP server lists the norm's tools, answers
service-unavailable until it reaches the insurer, learns its process knowledge in the background
and tells the sessions when the tools change; a call waits one timeout, never two."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import mcp_types as types

from omds_ld.mcp.condense import answer_of
from omds_ld.norm import load_norm
from tests.mcp.clients import Client
from tests.servers import ExampleServer, McpServer, free_port

NORM_TOOLS = set(load_norm().operations)


def _config(tmp_path: Path, api: str) -> Path:
    config = tmp_path / "mcp.toml"
    config.write_text(f'[[instance]]\nname = "disrupto"\napi = "{api}"\n')
    return config


def test_an_insurer_down_at_start_is_learned_when_it_comes(tmp_path: Path) -> None:
    insurer = ExampleServer(tmp_path / "store.sqlite3")  # not started yet: the insurer is down
    replica = McpServer(_config(tmp_path, insurer.api("disrupto")), free_port())
    replica.start()
    received: list[Any] = []

    async def remember(message: Any) -> None:
        received.append(message)

    def changed() -> bool:
        return any(isinstance(m, types.ToolListChangedNotification) for m in received)

    async def run() -> tuple[set[str], Any, set[str], Any]:
        async with Client(replica.mcp("disrupto"), mode="legacy", message_handler=remember) as c:
            listed = {t.name for t in (await c.list_tools()).tools}
            down = await c.call_tool("listProducts", {})
            await asyncio.to_thread(insurer.start)
            for _ in range(300):
                if changed():
                    break
                await asyncio.sleep(0.1)
            after = {t.name for t in (await c.list_tools()).tools}
            up = await c.call_tool("listProducts", {})
            return listed, down, after, up

    try:
        listed, down, after, up = asyncio.run(run())
    finally:
        replica.stop()
        insurer.stop()
    assert listed == NORM_TOOLS, "a failed read says nothing about the draft: all the norm's tools"
    assert down.is_error
    problem = answer_of(down)["problem"]
    assert problem["type"].endswith("/service-unavailable") and problem["kind"] == "temporary"
    assert changed(), "the sessions were told that the tools changed"
    assert "createCalculation" not in after and {"inquireTariff", "listProducts"} <= after
    assert not up.is_error


def test_a_call_to_an_insurer_that_never_answers_waits_one_timeout(tmp_path: Path) -> None:
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    port = silent.getsockname()[1]
    timeout = 2.0
    replica = McpServer(
        _config(tmp_path, f"http://127.0.0.1:{port}/omds-ld/insurers/disrupto/api"),
        free_port(),
        ["--timeout-seconds", str(timeout)],
    )
    replica.start()

    async def run() -> tuple[Any, float]:
        async with Client(replica.mcp("disrupto"), mode="2026-07-28") as client:
            started = time.monotonic()
            result = await client.call_tool("listProducts", {})
            return result, time.monotonic() - started

    try:
        result, seconds = asyncio.run(run())
    finally:
        replica.stop()
        silent.close()
    assert result.is_error
    assert answer_of(result)["problem"]["kind"] == "temporary"
    # one timeout and what surrounds it, not two timeouts in a row
    assert seconds < 1.75 * timeout, seconds
