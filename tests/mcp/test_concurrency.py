"""Many agents at once on one endpoint: each completes its own case, nothing leaks or acts twice."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.servers import ExampleServer

AGENTS = 8


def step(result: Any, tool: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = answer_of(result)["nextSteps"]
    return next(s for s in steps if s["tool"] == tool)


async def agent(url: str, mode: str) -> tuple[str, Any, list[str]]:
    """The seed's Pfefferminzia example, following next steps only."""
    async with Client(url, mode=mode) as client:
        products = await client.call_tool("listProducts", {})
        create = step(products, "createCalculation")
        case = await client.call_tool("createCalculation", {"body": create["body"]})
        case_id = answer_of(case)["case"]["caseId"]
        add = step(case, "createRiskObject")
        added = await client.call_tool("createRiskObject", {**add["arguments"], "body": SKODA})
        premium = await client.call_tool(
            "calculatePremium", step(added, "calculatePremium")["arguments"]
        )
        assert not premium.is_error, premium.content[0].text
        named = [s["arguments"].get("caseId") for s in answer_of(premium)["nextSteps"]]
        return case_id, answer_of(premium)["premium"]["gross"], named


def test_concurrent_agents_each_complete_their_own_case(server: ExampleServer) -> None:
    url = server.mcp("pfefferminzia")

    async def run() -> list[tuple[str, Any, list[str]]]:
        modes = ["legacy", "2026-07-28"] * (AGENTS // 2)
        return await asyncio.gather(*(agent(url, mode) for mode in modes))

    results = asyncio.run(run())
    cases = [case for case, _, _ in results]
    assert len(set(cases)) == AGENTS
    assert {gross for _, gross, _ in results} == {1684.88}
    for case, _, named in results:  # every next step names the agent's own case, no other
        assert {c for c in named if c} == {case}


def test_concurrent_creates_with_one_key_act_once(server: ExampleServer) -> None:
    key = f"concurrent-{uuid.uuid4().hex}"
    url = server.mcp("pfefferminzia")

    async def create(client: Client) -> Any:
        return await client.call_tool(
            "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}
        )

    async def run() -> list[Any]:
        async with Client(url, mode="legacy") as first, Client(url, mode="2026-07-28") as second:
            return await asyncio.gather(*(create(c) for c in [first, second] * (AGENTS // 2)))

    before = [e for e in insurer_calls(server) if e["method"] == "POST"]
    results = asyncio.run(run())
    created = {answer_of(r)["case"]["caseId"] for r in results if not r.is_error}
    busy = [r for r in results if r.is_error]
    assert len(created) == 1, "one key made more than one case"
    for refused in busy:  # a duplicate that came while the first was running: told to retry
        assert answer_of(refused)["problem"]["type"].endswith("/idempotency-request-in-progress")
    posts = [e for e in insurer_calls(server) if e["method"] == "POST"][len(before) :]
    assert len([e for e in posts if e["path"].endswith("/calculations")]) == 1
