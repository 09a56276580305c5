"""Reads go through one cache shared by all tools; writes make sure no stale read is served."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml
from mcp import Client

from omds_ld.norm.catalogue import _data_text
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import connect, stdio_parameters
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.servers import ExampleServer


def test_a_repeated_read_comes_from_the_cache(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> tuple[bool, bool]:
        async with connect("stdio", server, "pfefferminzia", tmp_path / "l") as client:
            first = await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
            before = len(insurer_calls(server))
            second = await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
            assert len(insurer_calls(server)) == before, "a fresh cached read asked the insurer"
            return (
                first.structured_content["provenance"]["fromCache"],
                second.structured_content["provenance"]["fromCache"],
            )

    assert asyncio.run(run()) == (False, True)


def test_a_read_after_a_write_is_never_stale(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> list[int]:
        async with connect("stdio", server, "pfefferminzia", tmp_path / "l") as client:
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case_id = case.structured_content["case"]["caseId"]
            counts = []
            for _ in range(2):
                read = await client.call_tool("readCalculation", {"caseId": case_id})
                counts.append(len(read.structured_content["riskObjects"]))
            await client.call_tool("createRiskObject", {"caseId": case_id, "body": SKODA})
            read = await client.call_tool("readCalculation", {"caseId": case_id})
            counts.append(len(read.structured_content["riskObjects"]))
            return counts

    assert asyncio.run(run()) == [0, 0, 1]


def test_tools_follow_another_version_of_the_norm(server: ExampleServer, tmp_path: Path) -> None:
    norm = yaml.safe_load(_data_text("openapi.yaml"))
    del norm["paths"]["/shapes/{shapeId}"]
    norm["paths"]["/products"]["get"]["description"] = "List the products (version 2 of the norm)."
    openapi = tmp_path / "openapi-v2.yaml"
    openapi.write_text(yaml.safe_dump(norm))

    async def run() -> dict[str, str]:
        parameters = stdio_parameters(
            server, "disrupto", tmp_path / "l", ["--openapi", str(openapi)]
        )
        async with Client(parameters, mode="legacy") as client:
            return {t.name: t.description or "" for t in (await client.list_tools()).tools}

    listed = asyncio.run(run())
    assert "readShape" not in listed
    assert listed["listProducts"] == "List the products (version 2 of the norm)."
