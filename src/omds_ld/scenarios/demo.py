"""The demo: the reference agent on the seed's two examples, against an embedded example server."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.embedded import example_server
from omds_ld.scenarios.protocol import FINAL, TOOL_CALL, read_protocol
from omds_ld.scenarios.runner import run_once
from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario

SEED_EXAMPLES = ("pfefferminzia-skoda", "disrupto-skoda")


def came_back(event: Mapping[str, Any]) -> str:
    """What a tool call returned, in a few words."""
    content: Mapping[str, Any] = answer_of(event["mcp.tool.result"])
    if event.get("is_error"):
        return f"refused: {content.get('problem', {}).get('type', 'error')}"
    if content.get("premium"):
        premium = content["premium"]
        report = "conforms" if content.get("validation", {}).get("conforms") else "does not conform"
        per = (premium.get("per") or {}).get("en") or f"per {premium['period']}"
        return f"premium {premium['gross']} {premium['currency']} {per}; report {report}"
    if "products" in content:
        return f"{len(content['products'])} product(s): " + ", ".join(
            p["label"] for p in content["products"]
        )
    if "case" in content:
        validation = content.get("validation", {})
        if validation.get("conforms"):
            return f"business case {content['case']['caseId']} ({content['case']['status']}); report conforms"
        first = (validation.get("violations") or [{}])[0].get("message", "")
        return f"business case {content['case']['caseId']} ({content['case']['status']}); missing: {first}"
    if "body" in content:
        return "the default instance as a ready body for inquireTariff"
    return str(event.get("text", "")).splitlines()[0]


def target(event: Mapping[str, Any]) -> str:
    arguments: Mapping[str, Any] = event["gen_ai.tool.call.arguments"]
    body = arguments.get("body") or {}
    named = body.get("p:hasRootProduct") or (body.get("p:instance") or {}).get("p:instanceOf")
    if named:
        return str(named)
    return " ".join(f"{k}={v}" for k, v in arguments.items() if k != "body") or "—"


def run_demo(out: Callable[[str], None]) -> int:
    """Run the seed's examples with the reference agent, printing each step and the premium."""
    scenarios = {s.id: s for s in (load_scenario(p) for p in builtin_scenarios())}
    passed = True
    with example_server() as url, tempfile.TemporaryDirectory() as folder:
        out(f"omds-ld demo: the reference agent (no model) against the example server at {url}")
        for scenario_id in SEED_EXAMPLES:
            scenario = scenarios[scenario_id]
            out(f"\n{scenario.title}\nTask: {scenario.task}")
            record = asyncio.run(run_once(scenario, ReferenceAgent(), url, Path(folder), 1))
            for event in read_protocol(record.protocol):
                if event["event"] == TOOL_CALL:
                    out(
                        f"  {event['gen_ai.tool.name']} · {target(event)}\n      → {came_back(event)}"
                    )
                elif event["event"] == FINAL:
                    out("Answer: " + event["text"].replace("\n", "\n        "))
            verdict = "passes" if record.grade.passed else "FAILS"
            failed = [c.reason for c in record.grade.criteria if not c.passed]
            out(
                f"Grade: {verdict} all {len(record.grade.criteria)} criteria"
                + (f" ({'; '.join(failed)})" if failed else "")
            )
            passed = passed and record.grade.passed
    return 0 if passed else 1
