"""The checker on real runs: every protocol in ``../shared/protocols`` (a real model's run on a
task the project never saw, judged right by a person who knows the tariffs) grades pass; the
same run edited into a wrong one of its kind fails, naming why. Nothing here knows a protocol by
name: each wrong run is made by what the run did (an amount, an edit, an application)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omds_ld.scenarios.grader import Protocol, _applications, grade, is_edit
from omds_ld.scenarios.protocol import FINAL, PERSON, TOOL_CALL, read_protocol
from omds_ld.scenarios.scenario import parse_scenario

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "protocols"
RUNS = sorted(SHARED.glob("*.jsonl")) if SHARED.is_dir() else []

if not RUNS and os.environ.get("CI") != "true":  # CI has shared/ beside the clone: never skip
    pytest.skip(f"no real runs at {SHARED}", allow_module_level=True)


def _copy(protocol: Protocol) -> list[dict[str, Any]]:
    return json.loads(json.dumps(protocol))  # type: ignore[no-any-return]


def _failed(protocol: Protocol) -> dict[str, str]:
    return {c.name: c.reason for c in grade(protocol).criteria if not c.passed}


def _final(protocol: list[dict[str, Any]]) -> dict[str, Any]:
    return [e for e in protocol if e.get("event") == FINAL][-1]


@pytest.fixture(params=RUNS, ids=[p.stem for p in RUNS])
def run(request: pytest.FixtureRequest) -> Protocol:
    return read_protocol(request.param)


def test_there_are_real_runs_to_grade() -> None:
    assert len(RUNS) >= 26, f"{len(RUNS)} real runs at {SHARED}"


def test_every_right_run_of_a_real_model_passes(run: Protocol) -> None:
    verdict = grade(run)
    assert verdict.passed, [(c.name, c.reason) for c in verdict.criteria if not c.passed]


def test_an_amount_that_follows_from_nothing_fails(run: Protocol) -> None:
    """The final answer states one more price, which no answer gave and nothing adds up to."""
    wrong = _copy(run)
    language = "de" if "€" in _final(wrong)["text"] or " EUR" in _final(wrong)["text"] else "en"
    _final(wrong)["text"] += (
        "\nGesamt: 8.765.431,97 EUR pro Jahr."
        if language == "de"
        else "\nTotal: 8,765,431.97 EUR a year."
    )
    failed = _failed(wrong)
    assert "invented" in failed and "8765431.97" in failed["invented"], failed


def test_an_edit_nobody_offered_fails(run: Protocol) -> None:
    """An edit at a server of the run, with a case no answer offered it for."""
    wrong = _copy(run)
    calls = [i for i, e in enumerate(wrong) if e.get("event") == TOOL_CALL]
    made_up = json.loads(json.dumps(wrong[calls[-1]]))
    made_up["gen_ai.tool.name"] = "includeComponent"
    made_up["gen_ai.tool.call.arguments"] = {"caseId": "made-up-case", "componentId": "made-up"}
    made_up["is_error"] = False
    wrong.insert(calls[-1] + 1, made_up)
    assert is_edit("includeComponent")
    failed = _failed(wrong)
    assert "offered" in failed and "includeComponent" in failed["offered"], failed


def test_an_application_without_the_persons_yes_fails(run: Protocol) -> None:
    """Where the run made an application: the same run without the person's yes fails; where
    it made none, an application made despite no yes fails too (the person declined, or nobody
    was asked)."""
    made = _applications(run)
    wrong = [
        e for e in _copy(run) if not (e.get("event") == PERSON and e.get("answer") == "confirm")
    ]
    if not made:
        call = next(
            e for e in reversed(wrong) if e.get("event") == TOOL_CALL and not e.get("is_error")
        )
        applied = json.loads(json.dumps(call))
        applied["gen_ai.tool.name"] = "createApplication"
        applied["gen_ai.tool.call.arguments"] = {"offerId": "o1"}
        applied["mcp.tool.result"].setdefault("_meta", {})["omds-ld/answer"] = {
            "application": {"applicationId": "made-up", "state": "accepted", "policyNumber": "X-1"},
            "nextSteps": [],
        }
        wrong.insert(wrong.index(_final(wrong)), applied)
    failed = _failed(wrong)
    assert "confirmed" in failed and "without the person's confirmation" in failed["confirmed"], (
        failed
    )


def test_insured_for_a_referral_or_an_application_elsewhere_fails(run: Protocol) -> None:
    """Where the run made an application: the final answer calling the customer insured while
    the insurer referred it fails; so does the task naming another insurer for it."""
    made = _applications(run)
    if not made:
        pytest.skip("this run made no application")
    referred = _copy(run)
    for event in referred:
        answer = ((event.get("mcp.tool.result") or {}).get("_meta") or {}).get(
            "omds-ld/answer"
        ) or {}
        if isinstance(answer.get("application"), dict):
            answer["application"]["state"] = "referred"
            answer["application"].pop("policyNumber", None)
    referred[0]["scenario"]["expected"]["application"] = "referred"
    _final(referred)["text"] += "\nThe customer is insured from today."
    failed = _failed(referred)
    assert "application" in failed, failed
    scenario = parse_scenario(run[0]["scenario"])
    went = made[0].server
    others = [
        s for s in (*scenario.insurers, "pfefferminzia", "disrupto", "angloamerican") if s != went
    ]
    elsewhere = _copy(run)
    elsewhere[0]["scenario"]["expected"]["application_at"] = others[0]
    if others[0] not in scenario.insurers and "insurers" not in elsewhere[0]["scenario"]:
        elsewhere[0]["scenario"]["servers"] = [*scenario.servers, others[0]]
    failed = _failed(elsewhere)
    assert "application" in failed and f"not {others[0]}" in failed["application"], failed
