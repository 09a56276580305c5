"""The operator's kill switch: a tool switched off is not listed, not offered, and refused."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from omds_ld.mcp.condense import answer_of
from tests.mcp.clients import Client, stdio_parameters
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.servers import ExampleServer


def test_a_switched_off_tool_is_not_listed_not_offered_and_refused(
    server: ExampleServer, tmp_path: Path
) -> None:
    parameters = stdio_parameters(
        server, "pfefferminzia", tmp_path / "requests.jsonl", ["--disable-tool", "createRiskObject"]
    )

    async def run() -> tuple[set[str], Any, Any]:
        async with Client(parameters, mode="legacy") as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            refused = await client.call_tool(
                "createRiskObject",
                {"caseId": answer_of(case)["case"]["caseId"], "body": {}},
            )
            return listed, case, refused

    before = len(insurer_calls(server))
    listed, case, refused = asyncio.run(run())
    assert "createRiskObject" not in listed and "createCalculation" in listed
    steps_text = case.content[0].text.split("Next steps", 1)[1]
    assert "createRiskObject" not in steps_text and "validateCalculation" in steps_text
    assert all(s["tool"] != "createRiskObject" for s in answer_of(case)["nextSteps"])
    assert any(s["tool"] == "validateCalculation" for s in answer_of(case)["nextSteps"])
    assert refused.is_error
    problem = answer_of(refused)["problem"]
    assert problem["type"].endswith("/operation-not-admissible")
    assert "switched off by the operator" in problem["detail"]
    asked = [e for e in insurer_calls(server)[before:] if "risk-objects" in e["path"]]
    assert asked == [], "a switched-off tool reached the insurer"


def test_switching_off_a_tool_the_norm_does_not_have_stops_the_start(
    server: ExampleServer, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(
        f"""
[[instance]]
name = "pfefferminzia"
api = "{server.api("pfefferminzia")}"
disabled_tools = ["createRiskObjekt"]
"""
    )
    started = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "mcp", "--stdio", "--config", str(config)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode != 0
    assert "disabled_tools names no operation of the norm: ['createRiskObjekt']" in started.stderr
