"""The executor's steps, each alone, with a real executor of a connector in front of an insurer
that answers as told (in process, over ASGI): what a call asks of the insurer, where its
idempotency record is kept, how each failure becomes its problem, and the record that a retry
replays. See docs/architecture.md."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from omds_ld.auth.identity import UpstreamTokenError
from omds_ld.mcp.catalogue import tools
from omds_ld.mcp.condense import answer_of
from omds_ld.mcp.executor import Executor, Instance, Refusal, _Request
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.state import MemoryStateStore, StateUnavailable
from omds_ld.mcp.transport import AsgiTransport, InsurerUnavailable
from omds_ld.mcp.upstream import CALLER, Caller, Upstream
from omds_ld.norm import load_norm

NORM = load_norm()
CASE = {"@context": "https://w3id.org/omds-ld/context.jsonld", "@type": "bc:BusinessCase",
        "@id": "https://x.example/cases/c1", "bc:caseId": "c1", "bc:status": "draft",
        "bc:nextStep": []}  # fmt: skip


def _tool(name: str) -> Any:
    return next(t for t in tools(NORM, draft_at_server=True) if t.name == name)


def _executor(answers: list[tuple[int, Any]]) -> tuple[Executor, list[str]]:
    """An executor whose insurer answers ``answers`` in turn, and the requests it got."""
    asked: list[str] = []

    async def insurer(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        asked.append(f"{scope['method']} {scope['path']}")
        status, body = answers.pop(0)
        media = b"application/problem+json" if status >= 400 else b"application/ld+json"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", media)]})  # fmt: skip
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    state = MemoryStateStore()
    upstream = Upstream(
        name="x", api_url="http://x.example/api", transport=AsgiTransport(insurer, 5), state=state
    )
    executor = Executor(
        norm=NORM, instance=Instance("x", "X Versicherung", "en"), upstream=upstream,
        state=state, request_log=RequestLog(),
    )  # fmt: skip
    return executor, asked


def test_the_request_of_a_call_and_its_fingerprint() -> None:
    spec = _tool("createRiskObject")
    one = _Request.of(spec, {"caseId": "c1", "body": {"p:make": "Skoda"}, "idempotencyKey": "k"})
    assert one.path == {"caseId": "c1"} and one.body == {"p:make": "Skoda"} and one.key == "k"
    same = _Request.of(spec, {"caseId": "c1", "body": {"p:make": "Skoda"}, "idempotencyKey": "k"})
    other = _Request.of(spec, {"caseId": "c1", "body": {"p:make": "Opel"}, "idempotencyKey": "k"})
    assert one.fingerprint == same.fingerprint != other.fingerprint
    assert _Request.of(_tool("calculatePremium"), {"caseId": "c1"}).body is None  # no body


def test_a_record_is_kept_per_broker() -> None:
    executor, _ = _executor([])
    request = _Request.of(_tool("createCalculation"), {"body": {}, "idempotencyKey": "k"})
    assert executor._record_key(_Request.of(_tool("createCalculation"), {"body": {}})) is None
    token = CALLER.set(Caller("alpha"))
    try:
        assert executor._record_key(request) == "idem:x:alpha:k"
    finally:
        CALLER.reset(token)
    assert executor._record_key(request) == "idem:x:-:k"


@pytest.mark.parametrize(
    ("error", "problem", "outcome"),
    [
        (InsurerUnavailable("timeout", "no answer within 10 s", "http://x/api"), "insurer-timeout", "temporary"),
        (InsurerUnavailable("unreachable", "refused", "http://x/api"), "insurer-unavailable", "temporary"),
        (UpstreamTokenError("no token"), "unauthorized", "temporary"),
        (StateUnavailable("Redis: down"), "service-unavailable", "temporary"),
        (KeyError("bug"), "internal-error", "internal-error"),
    ],
)  # fmt: skip
def test_each_failure_becomes_its_problem(error: Exception, problem: str, outcome: str) -> None:
    executor, _ = _executor([])
    provenance: dict[str, Any] = {"url": ""}
    found, said = executor._failure(error, _tool("listProducts"), {}, provenance, {})
    assert found["type"].endswith("/" + problem) and said == outcome
    assert "KeyError" not in found.get("detail", "") or problem == "internal-error"
    refusal = Refusal({"type": "t", "status": 409})
    assert executor._failure(refusal, _tool("listProducts"), {}, provenance, {}) == (
        refusal.problem, "refused",
    )  # fmt: skip


def test_a_state_failure_after_the_insurer_was_asked_says_to_retry_with_the_key() -> None:
    executor, _ = _executor([])
    found, _ = executor._failure(
        StateUnavailable("down"), _tool("createCalculation"), {}, {}, {"insurerAsked": True}
    )
    assert "retry with the same idempotencyKey" in found["detail"]


def test_an_answered_write_is_replayed_and_a_refused_one_lets_its_key_go() -> None:
    executor, asked = _executor([(201, CASE), (404, {"type": "https://w3id.org/omds-ld/problems/not-found", "status": 404, "title": "Not found", "detail": "no"}), (201, CASE)])  # fmt: skip
    spec = _tool("createRiskObject")

    def car(key: str) -> dict[str, Any]:
        return {"caseId": "c1", "body": {"@type": "p:Vehicle", "p:make": "Skoda"},
                "idempotencyKey": key}  # fmt: skip

    async def run() -> list[Any]:
        first = await executor.call(spec, car("k1"), None)
        again = await executor.call(spec, car("k1"), None)
        refused = await executor.call(spec, car("k2"), None)
        retried = await executor.call(spec, car("k2"), None)
        return [first, again, refused, retried]

    first, again, refused, retried = asyncio.run(run())
    assert not first.is_error and not again.is_error
    assert answer_of(again)["provenance"]["replayed"]
    assert refused.is_error and not retried.is_error, "the refused call's key was let go"
    assert len(asked) == 3, "the replay did not ask the insurer"
