"""The seed's examples through the MCP server, with the SDK client, following next steps only."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import FLAT, SKODA
from tests.mcp.clients import TRANSPORTS, connect, follow, step
from tests.servers import ExampleServer

DRAFT_TOOLS = {
    "createCalculation", "readCalculation", "createRiskObject", "updateRiskObject",
    "deleteRiskObject", "includeComponent", "excludeComponent", "setAttributes",
    "validateCalculation", "calculatePremium", "createOffer", "readOffer",
}  # fmt: skip


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pfefferminzia_skoda_by_next_steps(
    transport: str, server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> None:
        async with connect(transport, server, "pfefferminzia", tmp_path / "log.jsonl") as client:
            products = await client.call_tool("listProducts", {})
            assert not products.is_error
            case = await follow(client, step(products, "createCalculation"))
            assert answer_of(case)["case"]["status"] == "draft"
            add_vehicle = step(case, "createRiskObject")
            assert add_vehicle["expects"] == ["https://pfefferminzia.example/shapes/VehicleShape"]
            shape = next(
                s for s in answer_of(case)["shapes"] if s["iri"] == add_vehicle["expects"][0]
            )
            required = {f["name"] for f in shape["fields"] if f["required"]}
            assert required == {k for k in SKODA if k != "@type"}
            with_vehicle = await follow(client, add_vehicle, SKODA)
            assert answer_of(with_vehicle)["validation"]["conforms"] is True
            priced = await follow(client, step(with_vehicle, "calculatePremium"))
            premium = answer_of(priced)["premium"]
            assert Decimal(str(premium["gross"])) == Decimal("1684.88")
            assert "1684.88 EUR" in priced.content[0].text

    asyncio.run(run())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_disrupto_inquiry_by_next_steps(
    transport: str, server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> None:
        async with connect(transport, server, "disrupto", tmp_path / "log.jsonl") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert not names & DRAFT_TOOLS
            assert {"listProducts", "readDefaultInstance", "inquireTariff"} <= names
            products = await client.call_tool("listProducts", {})
            instance = await follow(client, step(products, "readDefaultInstance"))
            inquire = step(instance, "inquireTariff")
            assert "https://disrupto.example/shapes/VehicleShape" in inquire["expects"]
            body = answer_of(instance)["body"]
            body["p:instance"].setdefault("p:hasRiskObject", []).append(SKODA)
            priced = await follow(client, inquire, body)
            assert answer_of(priced)["validation"]["conforms"] is True
            assert Decimal(str(answer_of(priced)["premium"]["gross"])) == Decimal("1327.06")

    asyncio.run(run())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_angloamerican_household_by_next_steps(
    transport: str, server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> None:
        async with connect(transport, server, "angloamerican", tmp_path / "log.jsonl") as client:
            products = await client.call_tool("listProducts", {})
            home = next(p for p in answer_of(products)["products"] if p["label"] == "Home 2024")
            start = next(
                s for s in answer_of(products)["nextSteps"]
                if s["tool"] == "createCalculation" and s["target"] == home["iri"]
            )  # fmt: skip
            case = await follow(client, start)
            add_dwelling = step(case, "createRiskObject")
            assert add_dwelling["expects"] == ["https://angloamerican.example/shapes/DwellingShape"]
            with_flat = await follow(client, add_dwelling, FLAT)
            priced = await follow(client, step(with_flat, "calculatePremium"))
            assert Decimal(str(answer_of(priced)["premium"]["gross"])) == Decimal("416.25")

    asyncio.run(run())
