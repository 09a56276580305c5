"""`omds-ld mcp --http --config`: the MCP server as a process of its own, several instances."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.servers import ExampleServer, McpServer, free_port


@pytest.fixture
def standalone(server: ExampleServer, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "mcp.toml"
    config.write_text(
        f"""
request_log = "{tmp_path / "requests.jsonl"}"
[http]
port = {port}
session_binding_minutes = 5
[[instance]]
name = "pf"
display_name = "Pfefferminzia (standalone)"
api = "{server.api("pfefferminzia")}"
language = "de"
[[instance]]
name = "dis"
display_name = "Disrupto (standalone)"
api = "{server.api("disrupto")}"
"""
    )
    replica = McpServer(config, port)
    replica.start()
    try:
        yield replica.url
    finally:
        replica.stop()


def test_each_configured_instance_has_its_endpoint(standalone: str) -> None:
    async def run() -> tuple[set[str], set[str], str]:
        async with (
            Client(f"{standalone}/omds-ld/insurers/pf/mcp", mode="legacy") as pf,
            Client(f"{standalone}/omds-ld/insurers/dis/mcp", mode="legacy") as dis,
        ):
            pf_tools = {t.name for t in (await pf.list_tools()).tools}
            dis_tools = {t.name for t in (await dis.list_tools()).tools}
            products = await pf.call_tool("listProducts", {})
            return pf_tools, dis_tools, products.content[0].text

    pf_tools, dis_tools, text = asyncio.run(run())
    assert "createCalculation" in pf_tools and "createCalculation" not in dis_tools
    assert text.startswith("Pfefferminzia (standalone) · listProducts")
