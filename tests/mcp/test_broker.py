"""The broker endpoint: every insurer's tools once with an ``insurer`` argument, each call as at
the insurer's own MCP server. Against the example server as a process, with the SDK client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, follow, step
from tests.servers import ExampleServer

BROKER = "/omds-ld/insurers/mcp"


def run(url: str, body: Callable[[Client], Awaitable[None]], mode: str = "legacy") -> None:
    async def go() -> None:
        async with Client(url, mode=mode) as client:
            await body(client)

    asyncio.run(go())


async def premium_at(client: Client, insurer: str) -> Decimal:
    """The Skoda's premium at one insurer, following only the answers' next steps."""
    products = await client.call_tool("listProducts", {"insurer": insurer})
    assert not products.is_error, products.content[0].text
    if answer_of(products)["process"] == "inquiry":
        instance = await follow(client, step(products, "readDefaultInstance"))
        body = answer_of(instance)["body"]
        body["p:instance"]["p:hasRiskObject"] = [SKODA]
        priced = await follow(client, step(instance, "inquireTariff"), body)
    else:
        case = await follow(client, step(products, "createCalculation"))
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        priced = await follow(client, step(added, "calculatePremium"))
    return Decimal(str(answer_of(priced)["premium"]["gross"]))


def test_every_tool_is_listed_once_with_the_insurer_to_call(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        # the draft's tools (Pfefferminzia, AngloAmerican) and the inquiry's (Disrupto), once
        assert {"createCalculation", "inquireTariff", "readDefaultInstance"} <= set(tools)
        for tool in tools.values():
            assert tool.input_schema["required"][0] == "insurer"
        listing = tools["listProducts"].input_schema["properties"]["insurer"]
        assert listing["enum"] == ["angloamerican", "disrupto", "pfefferminzia"]

    run(server.url + BROKER, body)


def test_a_comparison_follows_the_next_steps_which_carry_the_insurer(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        products = await client.call_tool("listProducts", {"insurer": "pfefferminzia"})
        assert "Next steps, each with insurer=pfefferminzia:" in products.content[0].text
        for entry in answer_of(products)["nextSteps"]:
            assert entry["arguments"]["insurer"] == "pfefferminzia"
        assert await premium_at(client, "pfefferminzia") == Decimal("1684.88")
        assert await premium_at(client, "disrupto") == Decimal("1327.06")

    run(server.url + BROKER, body)

    async def alone(client: Client) -> None:  # the same premium at the insurer's own endpoint
        products = await client.call_tool("listProducts", {})
        case = await follow(client, step(products, "createCalculation"))
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        priced = await follow(client, step(added, "calculatePremium"))
        assert Decimal(str(answer_of(priced)["premium"]["gross"])) == Decimal("1684.88")

    run(server.mcp("pfefferminzia"), alone)


def test_a_call_naming_no_insurer_or_one_that_does_not_offer_the_tool_is_refused(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        unknown = await client.call_tool("listProducts", {"insurer": "nobody"})
        assert unknown.is_error
        problem = answer_of(unknown)["problem"]
        assert problem["type"].endswith("/invalid-parameter")
        assert problem["known"] == ["angloamerican", "disrupto", "pfefferminzia"]
        assert {s["arguments"]["insurer"] for s in answer_of(unknown)["nextSteps"]} == {
            "angloamerican", "disrupto", "pfefferminzia"
        }  # fmt: skip
        missing = await client.call_tool("listProducts", {})
        assert missing.is_error and "names no insurer" in missing.content[0].text
        draft = await client.call_tool(
            "createCalculation",
            {"insurer": "disrupto", "body": {"p:hasRootProduct": "https://disrupto.example/x"}},
        )
        assert draft.is_error
        assert "not offered by Disrupto Insurance Tech: it keeps no draft" in draft.content[0].text
        inquiry = await client.call_tool(
            "readDefaultInstance", {"insurer": "pfefferminzia", "productId": "kraftfahrt-2025"}
        )
        assert inquiry.is_error and "keeps the draft at the server" in inquiry.content[0].text

    run(server.url + BROKER, body, mode="2026-07-28")
