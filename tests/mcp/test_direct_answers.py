"""A tool call whose client cannot be asked within it is answered beside the SDK's session
machinery (``SessionBinding._answer_directly``): what it is answered is what the SDK answers, in
both protocol eras.

The reference is the same calls at a server in a process with a tracer provider set, where the
SDK answers every call (tests/mcp/test_endpoint_steps.py shows which calls reach the SDK). The
clients make the same calls, in the same order; their results must be the same but for the
moment each was made and the case's id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
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
        # the call's own _meta, if any, over the envelope (a test changes a part of it)
        meta = {**self.envelope, **params.get("_meta", {})}
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                "params": {**params, "_meta": meta}}  # fmt: skip
        headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
                   "Mcp-Name": str(name)}  # fmt: skip
        answer = self.http.post(self.url, headers=headers, json=body)
        assert answer.status_code in (200, 400), answer.text
        self.media.append(answer.headers["content-type"].split(";")[0])
        return dict(answer.json())

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        return self.send("tools/call", {"name": name, "arguments": arguments})


def _steady(value: Any) -> Any:
    """An answer without what differs by the moment it was made (an age, a duration, how long
    it may be reused)."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    if isinstance(value, str):
        # how long a cached read may be reused is of the moment too: one read at the end of its
        # minute has 0 s left ("not to be reused"), the same read a second earlier has 1 s
        value = re.sub(r"\b\d+ s\b", "N s", value)
        return re.sub(r"reusable N s|not to be reused: ask again", "REUSE", value)
    return value


def _case_free(answer: dict[str, Any], case: str, placeholder: str) -> dict[str, Any]:
    """The answer with this session's case id written as a placeholder, and the seen a client
    without a session carries (digests of what it was shown, the case's IRIs among it) too."""
    text = json.dumps(answer).replace(case, placeholder)
    text = re.sub(r'(seen=|"seen": ")[A-Za-z0-9_-]+', r"\1SEEN", text)
    return dict(json.loads(text))


# ``omds-ld serve`` in a process with a tracer provider set: the SDK answers every call there
# (the direct path keeps the SDK's spans whole by leaving traced servers alone)
TRACED = (
    "import sys; from opentelemetry import trace; "
    "trace.set_tracer_provider(trace.NoOpTracerProvider()); "
    "from omds_ld.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    folder = tmp_path_factory.mktemp("traced")
    reference = ExampleServer(folder / "omds-ld.sqlite3", command=("-c", TRACED))
    reference.start()
    try:
        yield reference
    finally:
        reference.stop()


def _calls(session: Session | Sessionless, at: ExampleServer) -> list[dict[str, Any]]:
    """The same calls in the same order: reads, a draft's edits, three refusals, and params
    that are no tools/call at all (the SDK's JSON-RPC error); the server's own address as
    SERVER."""
    kept = [
        session.call("listProducts", {}),
        session.call("readProduct", {"productId": "kraftfahrt-2025"}),
    ]
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
    kept.append(session.send("tools/call", {"name": "listProducts", "arguments": 5}))
    for answer in kept:
        answer.pop("id")
    return [json.loads(json.dumps(a).replace(at.url, "SERVER")) for a in kept]


@pytest.mark.parametrize("declared", [False, True], ids=["plain", "whole answer declared"])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_tool_call_answered_beside_the_sdk_is_answered_as_the_sdk_answers_it(
    era: str, declared: bool, server: ExampleServer, traced: ExampleServer
) -> None:
    """A client that cannot be asked and one that can (elicitation in form mode: only a binding
    call asks, and those the SDK answers) are both answered beside the SDK, as the SDK answers
    the same calls at a server where it answers them all."""
    kind = Session if era == "2025-11-25" else Sessionless
    extension = {"extensions": {ANSWER_META: {}}} if declared else {}
    answers: dict[str, list[dict[str, Any]]] = {}
    media: dict[str, list[str]] = {}
    with httpx.Client(timeout=30) as http:
        for label, at, capabilities in (
            ("plain", server, {}),
            ("asking", server, {"elicitation": {"form": {}}}),
            ("reference", traced, {"elicitation": {"form": {}}}),
        ):
            url = at.mcp("pfefferminzia")
            warm = Session(http, url, {})  # the reads come from the MCP server's cache for all
            (
                warm.call("listProducts", {}),
                warm.call("readProduct", {"productId": "kraftfahrt-2025"}),
            )
            session = kind(http, url, {**capabilities, **extension})
            answers[label], media[label] = _calls(session, at), session.media
    if era == "2025-11-25":  # the reference's session streams its answers: it came from the SDK
        assert set(media["reference"]) == {"text/event-stream"}
    # answered beside the SDK: in JSON, even to a session that streams (only the last call,
    # which is no tools/call, reached the SDK)
    assert set(media["plain"][:-1]) == set(media["asking"][:-1]) == {"application/json"}
    for label in ("plain", "asking"):
        for mine, reference in zip(answers[label], answers["reference"], strict=True):
            assert _steady(mine) == _steady(reference), label
    for kept in answers.values():  # the whole structured answer where declared, else not
        assert [ANSWER_META in (a["result"].get("_meta") or {}) for a in kept[:9]] == [declared] * 9
    premium = answers["plain"][5]["result"]["structuredContent"]
    assert premium["premium"]["gross"] == 1684.88
    assert answers["plain"][-1]["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("accept", "direct"),
    [
        ("*/*", True),
        ("application/*;q=0.9, text/event-stream", True),
        ("Application/JSON ; charset=utf-8, text/event-stream", True),
        ("text/event-stream", False),
        ("text/html, application/xml", False),
    ],
)
def test_a_call_is_answered_beside_the_sdk_only_where_its_accept_admits_json(
    accept: str, direct: bool, server: ExampleServer
) -> None:
    """The Accept header is read as the SDK reads it (wildcards, case, parameters): a call that
    admits JSON is answered in JSON beside the SDK; one that does not is left to the SDK, which
    refuses it as it refuses any such request."""
    with httpx.Client(timeout=30) as http:
        session = Session(http, server.mcp("pfefferminzia"), {})
        message = session.message("tools/call", {"name": "listProducts", "arguments": {}})
        answer = http.post(session.url, headers={**session.headers, "Accept": accept}, json=message)
    if direct:
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].split(";")[0] == "application/json"
        assert answer.json()["result"]["structuredContent"]["operation"] == "listProducts"
    else:
        assert answer.status_code == 406, answer.text


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_calls_meta_is_read_as_the_sdk_reads_it(
    era: str, server: ExampleServer, traced: ExampleServer
) -> None:
    """A call with a ``_meta`` (2026-07-28: its envelope, the client's info and capabilities)
    is answered as the SDK answers it at a server where it answers every call: one the era's
    schema refuses is refused each time it comes, one it admits is answered each time."""
    kind = Session if era == "2025-11-25" else Sessionless
    listed = {"name": "listProducts", "arguments": {}}
    admitted = [{"progressToken": "p-1"}, {"vendor.example/note": "x"}]
    if era == "2025-11-25":
        refused = [{"progressToken": {"not": "a token"}}]
    else:
        refused = [
            {"io.modelcontextprotocol/clientInfo": {"name": 5}},
            {"io.modelcontextprotocol/clientCapabilities": {"elicitation": 5}},
        ]
    metas = [*admitted, *refused, *refused, *admitted]
    answers: dict[str, list[dict[str, Any]]] = {}
    with httpx.Client(timeout=30) as http:
        for label, at in (("plain", server), ("reference", traced)):
            session = kind(http, at.mcp("pfefferminzia"), {})
            session.call("listProducts", {})  # the plain call first: the envelope is known
            sent = [session.send("tools/call", {**listed, "_meta": m}) for m in metas]
            for answer in sent:
                answer.pop("id")
            answers[label] = [json.loads(json.dumps(a).replace(at.url, "SERVER")) for a in sent]
    for mine, reference in zip(answers["plain"], answers["reference"], strict=True):
        assert _steady(mine) == _steady(reference)
    results = ["result" in a and not a["result"]["isError"] for a in answers["plain"]]
    admitted_twice = [True] * len(admitted)
    assert results == [*admitted_twice, *[False] * 2 * len(refused), *admitted_twice]
