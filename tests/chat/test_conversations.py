"""The chat page's conversations over its HTTP API: owned by their browser session, kept over a
restart, downloadable as a protocol, and saved as a scenario the reference agent passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer


def _browser_session(server: ExampleServer) -> httpx.Client:
    client = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=30)
    assert client.get("/chat").status_code == 200  # the page sets the session cookie
    return client


def test_a_conversation_is_only_its_browser_sessions(server: ExampleServer) -> None:
    first, second = _browser_session(server), _browser_session(server)
    started = first.post("/chat/api/conversations", json={})
    assert started.status_code == 201
    cid = started.json()["id"]
    called = first.post(
        f"/chat/api/conversations/{cid}/calls",
        json={"server": "disrupto", "tool": "listProducts", "arguments": {}},
    )
    assert called.status_code == 200 and not called.json()["is_error"]
    assert called.json()["event"] == "mcp.tool.call"
    assert second.get(f"/chat/api/conversations/{cid}").status_code == 404
    assert (
        second.post(
            f"/chat/api/conversations/{cid}/calls",
            json={"server": "disrupto", "tool": "listProducts", "arguments": {}},
        ).status_code
        == 404
    )
    events = first.get(f"/chat/api/conversations/{cid}").json()["events"]
    assert [e["event"] for e in events] == ["run.start", "mcp.tool.call"]
    assert first.delete(f"/chat/api/conversations/{cid}").status_code == 204
    assert first.get(f"/chat/api/conversations/{cid}").status_code == 404


def test_state_changing_requests_come_from_the_page_only(server: ExampleServer) -> None:
    client = _browser_session(server)
    foreign = client.post(
        "/chat/api/conversations", json={}, headers={"Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    del client.headers["Origin"]
    assert client.post("/chat/api/conversations", json={}).status_code == 403


def test_a_restart_keeps_the_conversations(tmp_path: Path) -> None:
    insurer = ExampleServer(tmp_path / "s.sqlite3")
    insurer.start()
    try:
        client = _browser_session(insurer)
        cid = client.post("/chat/api/conversations", json={}).json()["id"]
        client.post(
            f"/chat/api/conversations/{cid}/calls",
            json={"server": "pfefferminzia", "tool": "listProducts", "arguments": {}},
        )
        insurer.restart()
        events = client.get(f"/chat/api/conversations/{cid}").json()["events"]
        assert [e["gen_ai.tool.name"] for e in events[1:]] == ["listProducts"]
    finally:
        insurer.stop()


def test_a_conversation_by_hand_becomes_a_scenario_the_reference_agent_passes(
    server: ExampleServer, tmp_path: Path
) -> None:
    import asyncio

    import yaml

    from omds_ld.scenarios.agents.reference import ReferenceAgent
    from omds_ld.scenarios.runner import run_all
    from omds_ld.scenarios.scenario import parse_scenario

    client = _browser_session(server)
    cid = client.post("/chat/api/conversations", json={}).json()["id"]

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        event = client.post(
            f"/chat/api/conversations/{cid}/calls",
            json={"server": "disrupto", "tool": tool, "arguments": arguments},
        ).json()
        assert not event["is_error"], event["text"]
        structured: dict[str, Any] = answer_of(event["mcp.tool.result"])
        return structured

    call("listProducts", {})
    instance = call("readDefaultInstance", {"productId": "kraftfahrt-2022"})
    body = instance["body"]
    body["p:instance"]["p:hasRiskObject"] = [SKODA]
    priced = call("inquireTariff", {"body": body})
    protocol = client.get(f"/chat/api/conversations/{cid}/protocol.jsonl")
    lines = [json.loads(line) for line in protocol.text.splitlines()]
    assert [e["event"] for e in lines] == ["run.start", *["mcp.tool.call"] * 3, "run.end"]
    assert lines[0]["scenario"]["expected"]["premiums"] == {"disrupto": 1327.06}
    # the download grades with the scenario checker, which says what a by-hand run lacks
    downloaded = tmp_path / "conversation.jsonl"
    downloaded.write_text(protocol.text)
    graded = _cli("scenario", "grade", str(downloaded))
    assert graded.returncode == 1 and "Traceback" not in graded.stderr, graded.stderr
    assert "FAIL stated       not stated: disrupto: 1327.06" in graded.stdout, graded.stdout
    assert "ok   offered" in graded.stdout and "ok   premium" in graded.stdout
    raw = tmp_path / "raw.jsonl"  # the events alone (as downloads were before) are refused clearly
    raw.write_text("".join(json.dumps(e) + "\n" for e in lines[1:-1]))
    refused = _cli("scenario", "grade", str(raw))
    assert refused.returncode == 2 and "names no scenario" in refused.stdout, refused
    task = ("Berechne die Kfz-Versicherung bei Disrupto für einen Skoda, Baujahr 2021, 110 kW, "
            "Listenpreis 32.000 Euro, Kennzeichen W-12345A.")  # fmt: skip
    saved = client.post(
        f"/chat/api/conversations/{cid}/scenario",
        json={"task": task, "premium": priced["premium"]["gross"]},
    )  # fmt: skip
    assert saved.status_code == 200, saved.text
    scenario = parse_scenario(yaml.safe_load(saved.text))
    # a long task's title is cut after a whole word, never mid-number
    assert scenario.title.endswith("…") and len(scenario.title) <= 80
    assert task.startswith(scenario.title[:-1]) and task[len(scenario.title) - 1] == " "
    assert scenario.servers == ("disrupto",) and scenario.facts["p:make"] == "Skoda"
    assert {a.name for a in scenario.assumptions} == {"Bonus-Malus-Stufe", "Zulassungsbezirk"}
    records = asyncio.run(run_all([scenario], ReferenceAgent, 1, server.url, tmp_path))
    assert records[0].grade.passed, [(c.name, c.reason) for c in records[0].grade.criteria]


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", *arguments],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
