"""Peer tools against our MCP server: the MCP Inspector CLI and the official conformance suite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omds_ld.contract.conformance import (
    ERAS,
    baselined,
    count,
    not_run,
    required,
    results,
    run_suite,
)
from omds_ld.mcp.condense import ANSWER_META, answer_of
from tests.servers import ExampleServer

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tools" / "node" / "node_modules" / ".bin"


def node_tool(name: str) -> list[str]:
    """Run a peer tool with the pinned Node 22 (installed by `npm install --prefix tools/node`)."""
    node, tool = BIN / "node", BIN / name
    if not node.exists() or not tool.exists():
        pytest.fail(
            f"{tool} is missing: run `npm install --prefix tools/node` (the README test command does)"
        )
    return [str(node), str(tool)]


def run(command: list[str], home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, cwd=home
    )


def test_inspector_lists_and_calls_tools_over_http(server: ExampleServer, tmp_path: Path) -> None:
    inspector = [*node_tool("mcp-inspector"), "--cli", server.mcp("disrupto")]
    listed = run([*inspector, "--method", "tools/list", "--strict"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert "inquireTariff" in names and "createCalculation" not in names
    assert "Warning" not in listed.stderr, "tool schemas should be portable across clients"
    called = run([*inspector, "--method", "tools/call", "--tool-name", "listProducts"], tmp_path)
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    # a client that declares no extension is sent what a model's host shows: the text and
    # structuredContent, not the whole structured answer
    assert "kraftfahrt-2022" in result["content"][0]["text"]
    assert result["structuredContent"]["operation"] == "listProducts"
    assert ANSWER_META not in (result.get("_meta") or {})
    assert not result.get("isError")


INSPECTOR_015 = ROOT / "tools" / "inspector-0.15" / "node_modules" / ".bin" / "mcp-inspector"


def test_the_inspector_npx_gives_on_node_20_loads_and_calls_every_endpoint(
    server: ExampleServer, tmp_path: Path
) -> None:
    """``npx -y @modelcontextprotocol/inspector`` on Node 20 gives 0.15, which sent a write
    tool's body as a string while the schema had no ``"type": "object"``: now every tool loads
    and a body goes as the object it is."""
    if not INSPECTOR_015.exists():
        pytest.fail(f"{INSPECTOR_015} is missing: run `npm install --prefix tools/inspector-0.15`")
    node = str(BIN / "node")
    for name in ("pfefferminzia", "disrupto", "angloamerican"):
        inspector = [node, str(INSPECTOR_015), "--cli", server.mcp(name)]
        listed = run([*inspector, "--method", "tools/list"], tmp_path)
        assert listed.returncode == 0, listed.stderr
        tools = json.loads(listed.stdout)["tools"]
        assert tools and all(t["inputSchema"]["type"] == "object" for t in tools)
    inspector = [node, str(INSPECTOR_015), "--cli", server.mcp("pfefferminzia")]
    body = json.dumps(
        {"p:hasRootProduct": "https://pfefferminzia.example/products/kraftfahrt-2025"}
    )
    called = run(
        [*inspector, "--method", "tools/call", "--tool-name", "createCalculation",
         "--tool-arg", f"body={body}"],
        tmp_path,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert not result.get("isError"), result
    assert answer_of(result)["case"]["status"] == "draft"


def test_inspector_lists_and_calls_tools_over_stdio(server: ExampleServer, tmp_path: Path) -> None:
    command = [
        *node_tool("mcp-inspector"), "--cli",
        sys.executable, "-m", "omds_ld.cli", "mcp", "--stdio",
        "--api", server.api("pfefferminzia"), "--name", "pfefferminzia", "--language", "de",
        "--log-level", "warning",
    ]  # fmt: skip
    listed = run([*command, "--method", "tools/list"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "createCalculation" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    called = run(
        [*command, "--method", "tools/call", "--tool-name", "readProduct",
         "--tool-arg", "productId=kraftfahrt-2025"],
        tmp_path,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert "Kraftfahrt 2025" in result["content"][0]["text"]
    assert ANSWER_META not in (result.get("_meta") or {})


@pytest.mark.parametrize("endpoint", ["pfefferminzia", "insurers"])
@pytest.mark.parametrize("era", ERAS)
def test_conformance_suite_passes_what_each_revision_requires_but_its_baseline(
    server: ExampleServer, era: str, endpoint: str
) -> None:
    """``--requirements ERA`` against an insurer's MCP server and the broker endpoint: every
    scenario the revision requires ran, and passed but for the baseline's entries (each with
    its reason); the two that pass only against the suite's fixture tools are not counted."""
    node_tool("conformance")  # fails the test where the suite is not installed
    url = server.mcp(endpoint) if endpoint != "insurers" else server.url + "/omds-ld/insurers/mcp"
    outcome = run_suite(url, era, ROOT / "tools" / "node")
    assert outcome.passed, outcome.detail
    # three figures, each named: what passed, what the baseline expects to fail, false passes
    figures = re.search(
        r"(\d+) of the (\d+) scenarios \S+ requires passed; (\d+) baselined .*; (\d+) false passes",
        outcome.detail,
    )
    assert figures, outcome.detail
    passed, required_, base, false = (int(x) for x in figures.groups())
    assert passed + base + false == required_ and passed > 0
    assert "tools-call-error" in outcome.detail and "tools-call-simple-text" in outcome.detail
    if era == "2026-07-28":
        assert "input-required-result-ignore-extra-params" in outcome.detail


def test_a_required_scenario_that_did_not_run_fails_the_run(tmp_path: Path) -> None:
    """What each revision requires is the suite's own list; a required scenario without results,
    or whose every check was skipped, is named (a run that skipped it proves nothing)."""
    listing = subprocess.run(
        [*node_tool("conformance"), "list", "--server", "--requirements", "2026-07-28"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)},
    ).stdout  # fmt: skip
    scenarios = required(listing)
    assert {"server-stateless", "caching", "sep-2164-resource-not-found"} <= set(scenarios)
    assert sum(s.startswith("input-required-result-") for s in scenarios) == 14
    ran = tmp_path / "results"
    for scenario in scenarios:
        folder = ran / f"server-{scenario}-2026-12-06T20-05-52-576Z"
        folder.mkdir(parents=True)
        status = "SKIPPED" if scenario == "caching" else "SUCCESS"
        (folder / "checks.json").write_text(json.dumps([{"id": scenario, "status": status}]))
    (ran / "server-server-stateless-2026-12-06T20-05-52-576Z" / "checks.json").unlink()
    # the generic check the suite adds to every scenario is no sign the scenario itself ran
    generic = ran / "server-sep-2164-resource-not-found-2026-12-06T20-05-52-576Z" / "checks.json"
    generic.write_text(json.dumps([{"id": "sep-2164-x", "status": "SKIPPED"},
                                   {"id": "wire-schema-valid", "status": "SUCCESS"}]))  # fmt: skip
    assert set(not_run(scenarios, results(ran))) == {
        "server-stateless", "caching", "sep-2164-resource-not-found"
    }  # fmt: skip


def test_the_verdict_counts_what_passed_apart_from_the_baseline_and_false_passes() -> None:
    """Each required scenario counts as one of three, named: passed (its checks ran, none
    failed), baselined (its failure is expected, with a reason), a false pass (never counted)."""
    era = "2026-07-28"
    expected = baselined(era)
    assert all(reasons and all(reasons) for reasons in expected.values())  # each with a reason
    some_baselined = next(iter(expected))
    ran = {
        "caching": [{"id": "a", "status": "SUCCESS"}],
        some_baselined: [{"id": "b", "status": "FAILURE"}],
        "tools-call-error": [{"id": "c", "status": "SUCCESS"}],
        "sep-2164-resource-not-found": [{"id": "d", "status": "FAILURE"}],  # no baseline names it
    }
    counted = count(era, list(ran), ran)
    assert counted.passed == ("caching",)
    assert counted.baselined == (some_baselined, "sep-2164-resource-not-found")
    assert counted.false_passes == ("tools-call-error",)
    line = counted.line(era)
    assert line.startswith(f"1 of the 4 scenarios {era} requires passed; 2 baselined")
    assert "1 false passes, never counted (tools-call-error)" in line


@pytest.mark.parametrize("endpoint", ["pfefferminzia", "disrupto", "angloamerican", "insurers"])
def test_gemini_takes_every_tool_of_the_gemini_variant_and_why_it_is_needed(
    server: ExampleServer, endpoint: str
) -> None:
    """Google's SDK (google-genai) turns the listed MCP tools into Gemini function declarations
    (``tools=[...]``) and sends them to Gemini's API; a loopback stand-in checks them against
    the schema rules the API documents. At ``?schemas=gemini`` every tool of every endpoint
    passes; the lean variant's open ``body`` is an OBJECT without properties, which the API
    refuses; the strict variant's ``additionalProperties: false`` is not even converted."""
    import asyncio

    from google import genai
    from google.genai import types

    from tests.mcp.clients import Client
    from tests.mcp.gemini_stub import GeminiStub

    base = server.mcp(endpoint) if endpoint != "insurers" else server.url + "/omds-ld/insurers/mcp"

    async def ask(url: str, stub: GeminiStub) -> tuple[list[Any], str]:
        gemini = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=stub.url))
        async with Client(url) as client:
            listed = list((await client.list_tools()).tools)
        try:
            config = types.GenerateContentConfig(tools=listed)  # type: ignore[arg-type]
            answer = await gemini.aio.models.generate_content(
                model="gemini-2.5-flash", contents="Compare motor insurance", config=config
            )
            return listed, f"answered: {answer.text}"
        except Exception as error:  # the API's 400, or the SDK's own conversion failing
            return listed, f"{type(error).__name__}: {error}"

    with GeminiStub() as stub:
        listed, said = asyncio.run(ask(f"{base}?schemas=gemini", stub))
        assert said == "answered: ok", said
        assert {d["name"] for d in stub.declarations} == {t.name for t in listed}
        _, lean = asyncio.run(ask(base, stub))
        _, strict = asyncio.run(ask(f"{base}?schemas=strict", stub))
    assert "should be non-empty for OBJECT type" in lean, lean
    assert "AttributeError" in strict, strict


MCP_USE = ROOT / "tools" / "mcp-use"


@pytest.mark.parametrize("endpoint", ["pfefferminzia", "insurers"])
def test_mcp_use_lists_the_tools_at_once_where_no_login_is_required(
    server: ExampleServer, endpoint: str, tmp_path: Path
) -> None:
    """mcp-use (1.7, its default configuration, in its own environment: it needs the MCP SDK
    1.x) against ``serve`` without --require-token: it lists the tools, never waiting for an
    OAuth login in a browser (it did for 300 s while the endpoints published protected-resource
    metadata with tokens optional)."""
    python = MCP_USE / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: the README's test command installs mcp-use there")
    url = server.mcp(endpoint) if endpoint != "insurers" else server.url + "/omds-ld/insurers/mcp"
    env = {**os.environ, "HOME": str(tmp_path), "MCP_USE_ANONYMIZED_TELEMETRY": "false"}
    listed = subprocess.run(
        [str(python), str(MCP_USE / "list_tools.py"), url],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert {"listProducts", "createCalculation"} <= set(listed.stdout.split()), listed.stdout
