"""A tool call whose client cannot be asked within it is answered beside the SDK's session
machinery (``SessionBinding._answer_directly``): what it is answered is what the SDK answers, in
both protocol eras.

The reference is a client that declares elicitation in form mode (its 2025 session's answers
come as a stream, SSE): the SDK answers all of its calls (tests/mcp/test_endpoint_steps.py shows
which calls reach the SDK). Both make the same calls, in the same order, on the same server;
their results must be the same but for the moment each was made.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from omds_ld.mcp.condense import ANSWER_META
from tests.insurer.test_flows import SKODA
from tests.mcp.test_errors import PRODUCT
from tests.servers import ExampleServer

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VOLATILE = {"time", "durationMs", "ageSeconds", "reusableForSeconds", "reusableUntil"}


class Session:
    """A 2025-11-25 session over plain HTTP, its answers read as JSON or as SSE."""

    def __init__(self, http: httpx.Client, url: str, capabilities: dict[str, Any]) -> None:
        self.http, self.url, self.next_id = http, url, 1
        opening = {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "a test client", "version": "1"},
        }  # fmt: skip
        opened = http.post(url, headers=HEADERS, json=self.message("initialize", opening))
        assert opened.status_code == 200, opened.text
        self.headers = {
            **HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, headers=self.headers, json=initialized).status_code == 202
        self.media: list[str] = []

    def message(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    def send(self, method: str, params: Any) -> dict[str, Any]:
        answer = self.http.post(self.url, headers=self.headers, json=self.message(method, params))
        assert answer.status_code == 200, answer.text
        media = answer.headers["content-type"].split(";")[0]
        self.media.append(media)
        if media == "text/event-stream":
            data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
            return dict(json.loads(data[-1]))
        return dict(answer.json())

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        return self.send("tools/call", {"name": name, "arguments": arguments})


class Sessionless:
    """2026-07-28 over plain HTTP: each call a request of its own, with its envelope."""

    def __init__(self, http: httpx.Client, url: str, capabilities: dict[str, Any]) -> None:
        self.http, self.url, self.next_id = http, url, 1
        self.envelope = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "a test client", "version": "1"},
        }
        self.media: list[str] = []

    def send(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        name = params.get("name") if isinstance(params, dict) else None
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                "params": {**params, "_meta": self.envelope}}  # fmt: skip
        headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
                   "Mcp-Name": str(name)}  # fmt: skip
        answer = self.http.post(self.url, headers=headers, json=body)
        assert answer.status_code in (200, 400), answer.text
        self.media.append(answer.headers["content-type"].split(";")[0])
        return dict(answer.json())

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        return self.send("tools/call", {"name": name, "arguments": arguments})


def _steady(value: Any) -> Any:
    """An answer without what differs by the moment it was made (an age, a duration)."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\b\d+ s\b", "N s", value)
    return value


def _case_free(answer: dict[str, Any], case: str, placeholder: str) -> dict[str, Any]:
    """The answer with this session's case id written as a placeholder, and the seen a client
    without a session carries (digests of what it was shown, the case's IRIs among it) too."""
    text = json.dumps(answer).replace(case, placeholder)
    text = re.sub(r'(seen=|"seen": ")[A-Za-z0-9_-]+', r"\1SEEN", text)
    return dict(json.loads(text))


@pytest.mark.parametrize("declared", [False, True], ids=["plain", "whole answer declared"])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_tool_call_answered_beside_the_sdk_is_answered_as_the_sdk_answers_it(
    era: str, declared: bool, server: ExampleServer
) -> None:
    url = server.mcp("pfefferminzia")
    kind = Session if era == "2025-11-25" else Sessionless
    extension = {"extensions": {ANSWER_META: {}}} if declared else {}
    with httpx.Client(timeout=30) as http:
        plain = kind(http, url, {**extension})
        asking = kind(http, url, {"elicitation": {"form": {}}, **extension})
        answers: dict[str, list[dict[str, Any]]] = {"plain": [], "asking": []}
        warm = Session(http, url, {})  # the reads come from the MCP server's cache for both
        warm.call("listProducts", {}), warm.call("readProduct", {"productId": "kraftfahrt-2025"})
        for label, session in (("plain", plain), ("asking", asking)):
            kept = answers[label]
            kept.append(session.call("listProducts", {}))
            kept.append(session.call("readProduct", {"productId": "kraftfahrt-2025"}))
            created = session.call("createCalculation", {"body": {"p:hasRootProduct": PRODUCT}})
            case = created["result"]["structuredContent"]["case"]["caseId"]
            for answer in (
                created,
                session.call("createRiskObject", {"caseId": case, "body": SKODA}),
                session.call("readCalculation", {"caseId": case}),
                session.call("calculatePremium", {"caseId": case}),
                # refused by the MCP server, by the insurer, and a tool that is not there
                session.call("createRiskObject", {"caseId": case, "body": {"@type": 5}}),
                session.call("readCalculation", {"caseId": "no-such-case"}),
                session.call("noSuchTool", {}),
            ):
                kept.append(_case_free(answer, case, "CASE"))
            # params that are no tools/call at all: the SDK's JSON-RPC error, in both
            kept.append(session.send("tools/call", {"name": "listProducts", "arguments": 5}))
    if era == "2025-11-25":
        assert set(asking.media) == {"text/event-stream"}  # the reference came from the SDK
    assert set(plain.media) == {"application/json"}
    for mine, reference in zip(answers["plain"], answers["asking"], strict=True):
        mine.pop("id"), reference.pop("id")
        assert _steady(mine) == _steady(reference)
    for kept in answers.values():  # the whole structured answer where declared, else not
        assert [ANSWER_META in (a["result"].get("_meta") or {}) for a in kept[:9]] == [declared] * 9
    premium = answers["plain"][5]["result"]["structuredContent"]
    assert premium["premium"]["gross"] == 1684.88
    assert answers["plain"][-1]["error"]["code"] == -32602
