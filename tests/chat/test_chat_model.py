"""The chat page with a model, over its HTTP API: a scripted OpenAI-compatible model server (a real
HTTP server) plays the seed's Pfefferminzia example through the page's MCP sessions; the turn is
streamed as server-sent events, recorded, priced, graded and kept over a restart."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.person import PagePerson
from tests.chat.conftest import TASK
from tests.servers import ExampleServer


def _browser_session(server: ExampleServer) -> httpx.Client:
    client = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=60)
    assert client.get("/chat").status_code == 200  # the page sets the session cookie
    return client


def _streamed(
    client: httpx.Client, cid: str, after: int, deltas: list[str] | None = None
) -> list[dict[str, Any]]:
    """The events the page is streamed until the conversation is idle again (and the model's
    words as they came, into ``deltas``)."""
    events, kind = [], "message"
    with client.stream("GET", f"/chat/api/conversations/{cid}/events?after={after}") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind == "message":
                events.append(json.loads(line.split(":", 1)[1]))
            elif line.startswith("data:") and kind == "idle":
                return events
            elif line.startswith("data:") and kind == "delta" and deltas is not None:
                deltas.append(json.loads(line.split(":", 1)[1])["text"])
            elif not line:
                kind = "message"
    raise AssertionError("the stream ended without saying the conversation is idle")


def _ask(
    client: httpx.Client, text: str, deltas: list[str] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    cid = client.post("/chat/api/conversations", json={}).json()["id"]
    said = client.post(f"/chat/api/conversations/{cid}/messages", json={"text": text})
    assert said.status_code == 202, said.text
    return cid, _streamed(client, cid, said.json()["after"], deltas)


def test_a_turn_of_the_model_is_streamed_recorded_and_priced(chatting: ExampleServer) -> None:
    client = _browser_session(chatting)
    deltas: list[str] = []
    cid, events = _ask(client, TASK, deltas)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "gen_ai.user.message" and kinds[-1] == "chat.turn.end", kinds
    assert events[-1]["reason"] == "done", events[-1]
    calls = [e for e in events if e["event"] == "mcp.tool.call"]
    assert [(c["mcp.server"], c["gen_ai.tool.name"]) for c in calls] == [
        ("pfefferminzia", "listProducts"),
        ("pfefferminzia", "createCalculation"),
        ("pfefferminzia", "createRiskObject"),
        ("pfefferminzia", "calculatePremium"),
    ]
    assert not any(c["is_error"] for c in calls)
    final = next(e for e in events if e["event"] == "gen_ai.final_answer")
    assert "1684.88 EUR" in final["text"]
    # the model's words came as it wrote them (the scripted model streams word by word), and
    # they are the words kept
    assert len(deltas) >= 3 and "".join(deltas) == final["text"]
    asked = [e for e in events if e["event"] == "gen_ai.client.inference"]
    assert [c["tool_calls"][0]["name"] for c in asked[:-1]] == [
        "pfefferminzia__" + c["gen_ai.tool.name"] for c in calls
    ]
    # every event was streamed once, in order, as it is kept
    assert [e["index"] for e in events] == list(range(1, len(events) + 1))
    kept = client.get(f"/chat/api/conversations/{cid}").json()
    assert [e["event"] for e in kept["events"][1:]] == kinds
    usage = kept["usage"]
    assert usage["calls"] == len(asked) == 5
    # the scripted model reports 1000 + 100 per result prompt tokens, 200 of them cached; priced
    # as gpt-4.1-mini (0.40 in, 1.60 out, 0.10 cached per million)
    expected = sum(
        ((1000 + 100 * turn - 200) * 0.40 + 50 * 1.60 + 200 * 0.10) / 1e6 for turn in range(5)
    )
    assert usage["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert not kept["busy"]


def _sessions_of(server: ExampleServer, since: int) -> tuple[list[str | None], int]:
    """The MCP sessions (as the request log names them) of the tool calls logged after ``since``."""
    lines = (server.database.parent / "mcp-requests.jsonl").read_text().splitlines()
    return [json.loads(line)["session"] for line in lines[since:]], len(lines)


def test_one_mcp_session_per_conversation_and_server(chatting: ExampleServer) -> None:
    client = _browser_session(chatting)
    _, logged = _sessions_of(chatting, 0)
    cid, _ = _ask(client, TASK)
    by_hand = client.post(
        f"/chat/api/conversations/{cid}/calls",
        json={"server": "pfefferminzia", "tool": "listProducts", "arguments": {}},
    )
    assert by_hand.status_code == 200
    first, logged = _sessions_of(chatting, logged)
    assert len(first) == 5 and len(set(first)) == 1 and first[0] is not None, first
    _ask(client, TASK)  # another conversation: another session
    second, _ = _sessions_of(chatting, logged)
    assert len(set(second)) == 1 and second[0] not in (None, first[0]), second


def test_grading_a_conversation_against_the_premium_the_user_expected(
    chatting: ExampleServer,
) -> None:
    client = _browser_session(chatting)
    cid, _ = _ask(client, TASK)
    graded = client.post(f"/chat/api/conversations/{cid}/grade", json={"premium": 1684.88})
    assert graded.status_code == 200, graded.text
    verdict = graded.json()
    assert verdict["passed"], verdict
    assert [c["name"] for c in verdict["criteria"]] == [
        "premium", "offered", "iris", "assumptions", "stated", "budget", "invented",
        "confirmed", "application",
    ]  # fmt: skip
    wrong = client.post(f"/chat/api/conversations/{cid}/grade", json={"premium": 1500}).json()
    assert not wrong["passed"]
    failed = {c["name"]: c["reason"] for c in wrong["criteria"] if not c["passed"]}
    assert set(failed) == {"stated"} and "1500" in failed["stated"], failed
    missing = client.post(f"/chat/api/conversations/{cid}/grade", json={})
    assert missing.status_code == 422 and "expected" in missing.json()["detail"]


def test_only_the_browser_session_of_a_conversation_can_talk_in_it(
    chatting: ExampleServer,
) -> None:
    first, second = _browser_session(chatting), _browser_session(chatting)
    cid, _ = _ask(first, TASK)
    assert second.get(f"/chat/api/conversations/{cid}/events").status_code == 404
    assert (
        second.post(f"/chat/api/conversations/{cid}/messages", json={"text": "x"}).status_code
        == 404
    )
    assert second.post(f"/chat/api/conversations/{cid}/grade", json={"premium": 1}).status_code == (
        404
    )
    foreign = first.post(
        f"/chat/api/conversations/{cid}/messages",
        json={"text": "x"},
        headers={"Origin": "https://evil.example"},
    )
    assert foreign.status_code == 403


def test_without_a_model_the_page_says_so_and_works_by_hand(server: ExampleServer) -> None:
    client = _browser_session(server)
    assert client.get("/chat/api/servers").json()["model"] is None
    cid = client.post("/chat/api/conversations", json={}).json()["id"]
    refused = client.post(f"/chat/api/conversations/{cid}/messages", json={"text": TASK})
    assert refused.status_code == 409 and "--chat-model" in refused.json()["detail"]


def test_a_restart_keeps_what_the_model_was_told(chatting: ExampleServer) -> None:
    client = _browser_session(chatting)
    cid, _ = _ask(client, TASK)
    chatting.restart()
    said = client.post(
        f"/chat/api/conversations/{cid}/messages", json={"text": "Und noch einmal, bitte."}
    )
    assert said.status_code == 202
    events = _streamed(client, cid, said.json()["after"])
    # the scripted model answers from the tool results it is sent: with the first turn's four
    # results remembered it gives the final answer at once, calling no tool again
    assert [e["event"] for e in events if e["event"] != "mcp.tools.list"] == [
        "gen_ai.user.message", "gen_ai.client.inference", "gen_ai.final_answer", "chat.turn.end",
    ]  # fmt: skip
    assert "1684.88 EUR" in events[-2]["text"]


def test_a_turn_that_would_never_end_is_stopped_by_its_budget(chatting: ExampleServer) -> None:
    from tests.scenarios.model_stubs import NEVER_DONE

    client = _browser_session(chatting)
    _, events = _ask(client, NEVER_DONE)
    calls = [e for e in events if e["event"] == "mcp.tool.call"]
    end = events[-1]
    assert end["event"] == "chat.turn.end" and end["reason"] == "budget", end
    assert "budget" in end["detail"]
    assert 10 <= len(calls) <= 40, len(calls)  # a turn may use 40 tool calls (docs/broker.md)


def test_a_models_binding_call_waits_for_the_persons_yes_on_the_page(
    chatting: ExampleServer,
) -> None:
    """The model applies for the offer: its call waits until the person confirms on the page,
    then goes on; the answer is part of the conversation."""
    from tests.scenarios.model_stubs import APPLY

    client = _browser_session(chatting)
    cid = client.post("/chat/api/conversations", json={}).json()["id"]
    said = client.post(f"/chat/api/conversations/{cid}/messages", json={"text": f"{TASK} {APPLY}"})
    assert said.status_code == 202, said.text
    asked: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while not asked and time.monotonic() < deadline:
        events = client.get(f"/chat/api/conversations/{cid}").json()["events"]
        asked = [e for e in events if e["event"] == "chat.confirmation.asked"]
        time.sleep(0.2)
    at = events.index(asked[0]) if asked else -1
    assert asked, "the model's binding call did not ask the person"
    assert client.get(f"/chat/api/conversations/{cid}").json()["busy"]
    on_the_page = asyncio.run(PagePerson().answer(asked[0]["url"], "confirm"))
    assert on_the_page.status == 200 and "1684.88 EUR" in on_the_page.shown
    answered = client.post(
        f"/chat/api/conversations/{cid}/confirmations",
        json={"url": asked[0]["url"], "answer": "answered"},
    )
    assert answered.status_code == 202, answered.text
    events = _streamed(client, cid, at)
    kinds = [e["event"] for e in events]
    assert "person.confirmation" in kinds and events[-1]["reason"] == "done", kinds
    calls = [e for e in events if e.get("gen_ai.tool.name") == "createApplication"]
    assert not calls[-1]["is_error"], calls[-1]["text"]
    assert answer_of(calls[-1]["mcp.tool.result"])["application"]["state"] == "accepted"
