"""Hostile input to the MCP server is invalid input: the same tool error in both protocol eras,
refused (never cleaned), nothing asked of the insurer, the log kept small."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, follow, step
from tests.mcp.test_http import HEADERS, open_session
from tests.servers import ExampleServer

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# arguments as raw JSON text: a lone surrogate cannot even be written by a Python client
HOSTILE = {
    "a lone surrogate": '{"caseId": "\\ud800"}',
    "a control character": '{"caseId": "abc\\u0000"}',
    "a newline at the end": '{"caseId": "abc\\n"}',
    "nesting 40 deep": '{"caseId": ' + "[" * 40 + "]" * 40 + "}",
    "nesting 600 deep": '{"caseId": ' + "[" * 600 + "]" * 600 + "}",
}


def raw_call(client: httpx.Client, url: str, arguments: str, session: str | None) -> httpx.Response:
    """A tools/call posted as raw JSON, in a 2025-11-25 session or sessionless (2026-07-28)."""
    if session is None:
        params = '{"name": "readCalculation", "arguments": ' + arguments
        params += ', "_meta": ' + json.dumps(META) + "}"
        headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                   "Mcp-Name": "readCalculation"}  # fmt: skip
    else:
        params = '{"name": "readCalculation", "arguments": ' + arguments + "}"
        headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    body = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": ' + params + "}"
    return client.post(url, content=body.encode(), headers=headers)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_arguments_are_invalid_input_in_both_eras(
    name: str, client: httpx.Client, server: ExampleServer
) -> None:
    url = server.mcp("pfefferminzia")
    asked_before = len(server.access_entries())
    answers = []
    for session in (None, open_session(client, url)):
        response = raw_call(client, url, HOSTILE[name], session)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is True
        problem = answer_of(result)["problem"]
        answers.append((problem["type"], problem["kind"], problem["errors"][0]["detail"]))
    assert answers[0] == answers[1], "the same in both eras"
    assert answers[0][0].endswith("/invalid-parameter") and answers[0][1] == "invalid input"
    asked = [e for e in server.access_entries()[asked_before:] if "/calculations/" in e["path"]]
    assert asked == [], "the insurer was not asked"


def test_a_message_too_deep_to_read_is_a_parse_error_in_both_eras(
    client: httpx.Client, server: ExampleServer
) -> None:
    url = server.mcp("pfefferminzia")
    deep = '{"caseId": ' + "[" * 5000 + "]" * 5000 + "}"
    for session in (None, open_session(client, url)):
        response = raw_call(client, url, deep, session)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700


def test_control_characters_are_refused_not_stripped(server: ExampleServer, tmp_path: Path) -> None:
    """``<id>\\u0000`` does not read the case, and key ``k\\u0000`` does not collide with ``k``."""

    async def run() -> tuple[Any, Any, Any, Any]:
        async with Client(server.mcp("pfefferminzia"), mode="2026-07-28") as client:
            products = await client.call_tool("listProducts", {})
            case = await follow(client, step(products, "createCalculation"), idempotencyKey="k")
            case_id = answer_of(case)["case"]["caseId"]
            read = await client.call_tool("readCalculation", {"caseId": case_id + "\u0000"})
            other_key = await client.call_tool(
                "createCalculation",
                {"body": step(products, "createCalculation")["body"], "idempotencyKey": "k\u0000"},
            )
            plate = await client.call_tool(
                "createRiskObject",
                {"caseId": case_id, "body": {**SKODA, "p:licensePlate": "W-12345A\n"}},
            )
            unchanged = await client.call_tool("readCalculation", {"caseId": case_id})
            return read, other_key, plate, unchanged

    read, other_key, plate, unchanged = asyncio.run(run())
    for refused, pointer in ((read, "/caseId"), (other_key, "/idempotencyKey")):
        assert refused.is_error
        assert answer_of(refused)["problem"]["errors"][0]["pointer"] == pointer
    assert plate.is_error
    problem = answer_of(plate)["problem"]
    assert problem["type"].endswith("/invalid-body")
    assert problem["errors"][0]["pointer"] == "/body/p:licensePlate"
    assert answer_of(unchanged)["riskObjects"] == []


def test_the_mcp_endpoint_compares_host_and_port_exactly(
    client: httpx.Client, server: ExampleServer
) -> None:
    url = server.mcp("pfefferminzia")
    port = server.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}.evil.example", f"127.0.0.1.evil.example:{port}"):
        refused = client.post(url, json={}, headers={**HEADERS, "Host": host})
        assert refused.status_code == 421, host
    origin = {**HEADERS, "Origin": f"http://127.0.0.1:{port}.evil.example"}
    assert client.post(url, json={}, headers=origin).status_code == 403


def test_the_request_log_keeps_no_session_id_and_no_flood(
    client: httpx.Client, server: ExampleServer
) -> None:
    url = server.mcp("pfefferminzia")
    session = open_session(client, url)
    before = server.request_log.stat().st_size if server.request_log.exists() else 0
    arguments = '{"caseId": "' + "\\u0000" * 300 + '", ' + '"x": ' + "[" * 30 + "]" * 30 + "}"
    raw_call(client, url, arguments, session)
    written = server.request_log.read_bytes()[before:]
    assert 0 < len(written) < 4096, "a hostile request writes a short line"
    assert session not in server.request_log.read_text()
