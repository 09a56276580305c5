"""Peer tools against our MCP server: the MCP Inspector CLI and the official conformance suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omds_ld.contract.conformance import ERAS, run_suite
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


@pytest.mark.parametrize("era", ERAS)
def test_conformance_suite_passes_all_but_its_baseline_in_both_eras(
    server: ExampleServer, era: str
) -> None:
    node_tool("conformance")  # fails the test where the suite is not installed
    outcome = run_suite(server.mcp("pfefferminzia"), era, ROOT / "tools" / "node")
    assert outcome.passed, outcome.detail


def test_google_genai_loads_every_tool_of_every_endpoint(server: ExampleServer) -> None:
    """Google's SDK turns MCP tools into Gemini function declarations with its own converter
    (``tools=[session]``): every tool of every endpoint must survive it, with its arguments."""
    import asyncio

    from google.genai import _mcp_utils
    from mcp import Client

    async def listed(url: str) -> list[Any]:
        async with Client(url) as client:
            return list((await client.list_tools()).tools)

    urls = [server.mcp(name) for name in ("pfefferminzia", "disrupto", "angloamerican")]
    for url in [*urls, server.url + "/omds-ld/insurers/mcp"]:
        tools = asyncio.run(listed(url))
        for tool in tools:
            declaration = _mcp_utils.mcp_to_gemini_tool(tool).function_declarations[0]
            assert declaration.name == tool.name
            parameters = declaration.parameters
            assert parameters is not None and set(parameters.properties or {}) == set(
                tool.input_schema["properties"]
            ), tool.name
            assert list(parameters.required or []) == tool.input_schema["required"], tool.name
