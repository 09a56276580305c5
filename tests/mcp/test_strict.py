"""The strict variant of the tools' input schemas (``…/mcp?schemas=strict``, ``--schemas strict``)
for OpenAI's strict function calling: the OpenAI Agents SDK's own strict conversion takes every
tool of every insurer, and a body sent as its JSON text is checked exactly as any other."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from omds_ld.mcp.condense import answer_of
from tests.mcp.clients import Client, stdio_parameters
from tests.servers import ExampleServer

INSURERS = ("pfefferminzia", "disrupto", "angloamerican")


def converted(tools: list[Any], url: str) -> dict[str, bool]:
    """Each tool through the Agents SDK's MCP conversion in strict mode: whether it stayed
    strict (the SDK falls back to non-strict where it cannot convert)."""
    from agents.mcp import MCPServerStreamableHttp
    from agents.mcp.util import MCPUtil

    server = MCPServerStreamableHttp(params={"url": url})
    return {
        tool.name: MCPUtil.to_function_tool(
            tool, server, convert_schemas_to_strict=True
        ).strict_json_schema
        for tool in tools
    }


async def listed(url: str) -> list[Any]:
    async with Client(url) as client:
        return list((await client.list_tools()).tools)


def test_the_agents_sdk_converts_every_tool_of_every_endpoints_strict_variant(
    server: ExampleServer,
) -> None:
    endpoints = [server.mcp(name) for name in INSURERS] + [server.url + "/omds-ld/insurers/mcp"]
    for endpoint in endpoints:  # each insurer's, and the broker endpoint
        url = endpoint + "?schemas=strict"
        strict = converted(asyncio.run(listed(url)), url)
        assert strict and all(strict.values()), {t: s for t, s in strict.items() if not s}
    # the lean default stays what other clients load best; strict mode cannot take its bodies
    lean = converted(asyncio.run(listed(server.mcp("pfefferminzia"))), server.mcp("pfefferminzia"))
    assert not lean["createRiskObject"] and lean["readOffer"]


def test_a_body_as_its_json_text_is_checked_as_any_other(
    server: ExampleServer, tmp_path: Path
) -> None:
    parameters = stdio_parameters(
        server, "pfefferminzia", tmp_path / "log.jsonl", ["--schemas", "strict"]
    )

    async def run() -> None:
        async with Client(parameters, mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            schema = tools["createCalculation"].input_schema
            assert schema["properties"]["body"]["type"] == "string"
            assert schema["required"] == list(schema["properties"])
            assert schema["properties"]["full"]["type"] == ["boolean", "null"]
            body = {"p:hasRootProduct": "https://pfefferminzia.example/products/kraftfahrt-2025"}
            started = await client.call_tool(
                "createCalculation",
                {"body": json.dumps(body), "idempotencyKey": None, "full": None},
            )
            assert not started.is_error, started.content[0].text
            assert answer_of(started)["case"]["status"] == "draft"
            wrong = await client.call_tool(
                "createCalculation",
                {"body": json.dumps({"p:hasRootProduct": 7}), "idempotencyKey": None, "full": None},
            )
            assert wrong.is_error and "invalid-body" in wrong.content[0].text
            broken = await client.call_tool(
                "createCalculation", {"body": "{not json", "idempotencyKey": None, "full": None}
            )
            assert broken.is_error
            assert "the body's JSON text does not parse" in broken.content[0].text

    asyncio.run(run())
