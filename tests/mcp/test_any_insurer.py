"""Any interface that speaks the norm: the MCP server reads an independently written insurer
(Petcare, ``tests/independent_insurer.py``) as it reads ours, lists only what it publishes, and
names a broken answer for what it is."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.runner import run_all
from omds_ld.scenarios.scenario import parse_scenario
from tests.independent_insurer import DEFECTS, OPERATIONS, VOCAB, Petcare, premium_of
from tests.mcp.clients import Client, follow, step
from tests.servers import McpServer, free_port

DOG = {"@type": VOCAB + "Dog", VOCAB + "breed": "Beagle", VOCAB + "ageYears": 5}
EXPECTED = premium_of(5, 0)["https://w3id.org/omds-ld/bc#gross"]  # 159.84: 120 x 1.2, 11 % tax


@pytest.fixture
def petcare() -> Iterator[Petcare]:
    with Petcare() as insurer:
        yield insurer


def _standalone(tmp_path: Path, api: str) -> McpServer:
    config = tmp_path / "petcare.toml"
    config.write_text(f'[[instance]]\nname = "petcare"\ndisplay_name = "Petcare"\napi = "{api}"\n')
    replica = McpServer(config, free_port())
    replica.start()
    return replica


def _stdio(api: str, log: Path) -> StdioServerParameters:
    import sys

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "omds_ld.cli", "mcp", "--stdio", "--api", api, "--name", "petcare",
              "--request-log", str(log), "--log-level", "warning"],
    )  # fmt: skip


async def _flow(client: Client) -> tuple[set[str], Any, Any, Any]:
    names = {t.name for t in (await client.list_tools()).tools}
    products = await client.call_tool("listProducts", {})
    assert not products.is_error, products.content[0].text
    instance = await follow(client, step(products, "readDefaultInstance"))
    body = json.loads(json.dumps(answer_of(instance)["body"]))
    body["p:instance"]["p:hasRiskObject"] = [DOG]
    priced = await follow(client, step(instance, "inquireTariff"), body)
    return names, products, instance, priced


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_server_completes_a_calculation_at_an_independent_insurer(
    transport: str, petcare: Petcare, tmp_path: Path
) -> None:
    async def run() -> tuple[set[str], Any, Any, Any]:
        if transport == "stdio":
            async with Client(_stdio(petcare.api, tmp_path / "log.jsonl")) as client:
                return await _flow(client)
        replica = _standalone(tmp_path, petcare.api)
        try:
            async with Client(replica.mcp("petcare"), mode="2026-07-28") as client:
                return await _flow(client)
        finally:
            replica.stop()

    names, products, instance, priced = asyncio.run(run())
    assert names == set(OPERATIONS), "only the operations the interface publishes"
    [product] = answer_of(products)["products"]
    assert product["productId"] == "dog-health"  # no bc:productId: its IRI's last segment
    assert "bc:productId of product Dog health" in answer_of(products)["missing"]
    draft = answer_of(instance)["draft"]
    assert draft["attributes"][0]["label"] == "deductible (EUR)"
    assert answer_of(priced)["premium"]["gross"] == EXPECTED
    assert answer_of(priced)["validation"]["conforms"] is True
    defaults = answer_of(priced)["defaults"]
    assert [d["label"] for d in defaults] == ["deductible (EUR)"]


def test_the_reference_agent_passes_a_scenario_at_an_independent_insurer(
    petcare: Petcare, tmp_path: Path
) -> None:
    scenario = parse_scenario(
        {
            "id": "petcare-dog",
            "task": "Calculate the pet health insurance at Petcare for a Beagle, 5 years old.",
            "servers": ["petcare"],
            "facts": DOG,
            "expected": {"premium": EXPECTED, "currency": "EUR"},
            "assumptions": [{"name": "deductible", "wordings": {"en": ["deductible"]}}],
            "budget": {"tool_calls": 6, "tokens": 1, "cost": 0, "seconds": 60},
            "runs": 2,
        }
    )
    replica = _standalone(tmp_path, petcare.api)
    try:
        records = asyncio.run(run_all([scenario], ReferenceAgent, None, replica.url, tmp_path))
    finally:
        replica.stop()
    for record in records:
        assert record.grade.passed, [(c.name, c.reason) for c in record.grade.criteria]


@pytest.mark.parametrize(
    "defect", [d for d in DEFECTS if d not in ("none", "no published operations")]
)
def test_a_broken_answer_is_named_not_temporary_and_never_cached(
    defect: str, tmp_path: Path
) -> None:
    with Petcare(defect) as insurer:

        async def run() -> list[Any]:
            async with Client(_stdio(insurer.api, tmp_path / "log.jsonl")) as client:
                return [await client.call_tool("listProducts", {}) for _ in range(2)]

        results = asyncio.run(run())
        asked = [a for a in insurer.asked if a.startswith("GET /products")]
    for result in results:
        assert result.is_error
        problem = answer_of(result)["problem"]
        assert problem["type"].endswith("/insurer-answer-invalid"), problem
        assert problem["kind"] == "invalid answer"
        assert "Petcare" in problem["detail"] or "petcare" in problem["detail"]
        assert "listProducts" in problem["detail"]
    assert len(asked) == 2, "a broken answer is never served from the cache"


def test_without_a_published_document_every_operation_is_listed_and_a_missing_one_named(
    tmp_path: Path,
) -> None:
    with Petcare("no published operations") as insurer:

        async def run() -> tuple[set[str], Any]:
            async with Client(_stdio(insurer.api, tmp_path / "log.jsonl")) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                return names, await client.call_tool("readProduct", {"productId": "dog-health"})

        names, missing = asyncio.run(run())
    assert "readProduct" in names and "inquireTariff" in names
    assert "createCalculation" not in names, "no draft at the server"
    assert missing.is_error
    problem = answer_of(missing)["problem"]
    assert problem["type"].endswith("/operation-not-admissible")
    assert "does not offer readProduct" in problem["detail"]
