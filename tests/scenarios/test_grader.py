"""Each criterion on recorded protocols: a passing run, and for each a run that violates exactly it."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.grader import grade
from omds_ld.scenarios.protocol import FINAL, RUN_END, TOOL_CALL, read_protocol
from omds_ld.scenarios.runner import run_once
from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario
from tests.servers import ExampleServer

Protocol = list[dict[str, Any]]


@pytest.fixture(scope="module")
def recorded(server: ExampleServer, tmp_path_factory: pytest.TempPathFactory) -> Protocol:
    """A real passing run of the seed's Pfefferminzia example, as its protocol file holds it."""
    path = next(p for p in builtin_scenarios() if p.stem == "pfefferminzia-skoda")
    out = Path(tmp_path_factory.mktemp("protocols"))
    record = asyncio.run(run_once(load_scenario(path), ReferenceAgent(), server.url, out, 1))
    return read_protocol(record.protocol)


def line_of(protocol: Protocol, event: str, tool: str | None = None) -> int:
    for index, entry in enumerate(protocol):
        if entry["event"] == event and (tool is None or entry.get("gen_ai.tool.name") == tool):
            return index + 1
    raise AssertionError(f"no {event} {tool}")


def no_conforming_premium(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "calculatePremium")
    p[line - 1]["mcp.tool.result"]["structuredContent"]["validation"]["conforms"] = False
    return line


def unoffered_edit(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "calculatePremium")
    call = copy.deepcopy(p[line - 1])
    call["gen_ai.tool.name"] = "includeComponent"
    call["gen_ai.tool.call.arguments"] = {"caseId": "x", "componentId": "vollkasko"}
    p.insert(line, call)
    return line + 1


def unseen_iri(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "createCalculation")
    p[line - 1]["gen_ai.tool.call.arguments"]["body"]["p:hasRootProduct"] = (
        "https://pfefferminzia.example/products/made-up"
    )
    return line


def unnamed_assumption(p: Protocol) -> int:
    line = line_of(p, FINAL)
    text = p[line - 1]["text"]
    p[line - 1]["text"] = text.split("\n")[0]
    return line


def wrong_premium(p: Protocol) -> int:
    line = line_of(p, FINAL)
    p[line - 1]["text"] = (
        p[line - 1]["text"].replace("1684.88", "1684.98").replace("1.684,88", "1.684,98")
    )
    return line


def over_budget(p: Protocol) -> int:
    line = line_of(p, RUN_END)
    p[line - 1]["seconds"] = 999.0
    return line


VIOLATIONS: dict[str, Callable[[Protocol], int]] = {
    "premium": no_conforming_premium,
    "offered": unoffered_edit,
    "iris": unseen_iri,
    "assumptions": unnamed_assumption,
    "stated": wrong_premium,
    "budget": over_budget,
}


def test_a_passing_run_passes_every_criterion(recorded: Protocol) -> None:
    verdict = grade(recorded)
    assert verdict.passed, [c for c in verdict.criteria if not c.passed]
    assert [c.name for c in verdict.criteria] == list(VIOLATIONS)


@pytest.mark.parametrize("criterion", list(VIOLATIONS))
def test_a_run_violating_one_criterion_fails_exactly_it(criterion: str, recorded: Protocol) -> None:
    protocol = json.loads(json.dumps(recorded))
    evidence = VIOLATIONS[criterion](protocol)
    verdict = grade(protocol)
    failed = [c for c in verdict.criteria if not c.passed]
    assert [c.name for c in failed] == [criterion], [(c.name, c.reason) for c in failed]
    if evidence:
        assert evidence in failed[0].evidence, failed[0]
    assert failed[0].reason
