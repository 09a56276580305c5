"""Each criterion on recorded protocols: a passing run, and for each a run that violates exactly it."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.grader import grade
from omds_ld.scenarios.protocol import (
    FINAL,
    PERSON,
    RUN_END,
    TOOL_CALL,
    TOOLS_LIST,
    events_of,
    read_protocol,
)
from omds_ld.scenarios.runner import _scenario_snapshot, person_states, prepare, run_once
from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario, parse_scenario
from tests.servers import ExampleServer

Protocol = list[dict[str, Any]]


@pytest.fixture(scope="module")
def recorded(server: ExampleServer, tmp_path_factory: pytest.TempPathFactory) -> Protocol:
    """A real passing run of the seed's Pfefferminzia example, as its protocol file holds it."""
    path = next(p for p in builtin_scenarios() if p.stem == "pfefferminzia-skoda")
    out = Path(tmp_path_factory.mktemp("protocols"))
    record = asyncio.run(run_once(load_scenario(path), ReferenceAgent(), server.url, out, 1))
    return read_protocol(record.protocol)


def line_of(protocol: Protocol, event: str, tool: str | None = None) -> int:
    for index, entry in enumerate(protocol):
        if entry["event"] == event and (tool is None or entry.get("gen_ai.tool.name") == tool):
            return index + 1
    raise AssertionError(f"no {event} {tool}")


def no_conforming_premium(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "calculatePremium")
    answer_of(p[line - 1]["mcp.tool.result"])["validation"]["conforms"] = False
    return line


def unoffered_edit(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "calculatePremium")
    call = copy.deepcopy(p[line - 1])
    call["gen_ai.tool.name"] = "includeComponent"
    case_id = call["gen_ai.tool.call.arguments"]["caseId"]
    call["gen_ai.tool.call.arguments"] = {"caseId": case_id, "componentId": "made-up"}
    p.insert(line, call)
    return line + 1


def unseen_iri(p: Protocol) -> int:
    line = line_of(p, TOOL_CALL, "createCalculation")
    p[line - 1]["gen_ai.tool.call.arguments"]["body"]["p:hasRootProduct"] = (
        "https://pfefferminzia.example/products/made-up"
    )
    return line


def unnamed_assumption(p: Protocol) -> int:
    line = line_of(p, FINAL)
    text = p[line - 1]["text"]
    p[line - 1]["text"] = text.split("\n")[0]
    return line


def premium_left_out(p: Protocol) -> int:
    line = line_of(p, FINAL)
    p[line - 1]["text"] = (
        p[line - 1]["text"].replace("1684.88", "(see above)").replace("1.684,88", "(s. o.)")
    )
    return line


def over_budget(p: Protocol) -> int:
    line = line_of(p, RUN_END)
    p[line - 1]["seconds"] = 999.0
    return line


def invented_premium(p: Protocol) -> int:
    line = line_of(p, FINAL)
    p[line - 1]["text"] += "\nMit Vollkasko wären es etwa 2.150,00 EUR."
    return line


def application_without_yes(p: Protocol) -> int:
    """An application made (an answer gave one) though the person was never asked."""
    line = line_of(p, TOOL_CALL, "calculatePremium")
    offered = answer_of(p[line - 1]["mcp.tool.result"])["nextSteps"]
    offered.append({"tool": "createApplication", "target": "https://pfefferminzia.example/offers/o1",
                    "arguments": {"offerId": "o1"}})  # fmt: skip
    call = copy.deepcopy(p[line - 1])
    call["gen_ai.tool.name"] = "createApplication"
    call["gen_ai.tool.call.arguments"] = {"offerId": "o1"}
    call["mcp.tool.result"]["_meta"]["omds-ld/answer"] = {
        "application": {"applicationId": "a1", "state": "accepted", "policyNumber": "PFM-1"},
        "nextSteps": [],
    }
    p.insert(line, call)
    return line + 1


def application_not_made(p: Protocol) -> int:
    """The task asks for an accepted application; none was made."""
    p[0]["scenario"]["expected"]["application"] = "accepted"
    return 0


VIOLATIONS: dict[str, Callable[[Protocol], int]] = {
    "premium": no_conforming_premium,
    "offered": unoffered_edit,
    "iris": unseen_iri,
    "assumptions": unnamed_assumption,
    "stated": premium_left_out,
    "budget": over_budget,
    "invented": invented_premium,
    "confirmed": application_without_yes,
    "application": application_not_made,
}


def test_a_passing_run_passes_every_criterion(recorded: Protocol) -> None:
    verdict = grade(recorded)
    assert verdict.passed, [c for c in verdict.criteria if not c.passed]
    assert [c.name for c in verdict.criteria] == list(VIOLATIONS)


@pytest.mark.parametrize("criterion", list(VIOLATIONS))
def test_a_run_violating_one_criterion_fails_exactly_it(criterion: str, recorded: Protocol) -> None:
    protocol = json.loads(json.dumps(recorded))
    evidence = VIOLATIONS[criterion](protocol)
    verdict = grade(protocol)
    failed = [c for c in verdict.criteria if not c.passed]
    assert [c.name for c in failed] == [criterion], [(c.name, c.reason) for c in failed]
    if evidence:
        assert evidence in failed[0].evidence, failed[0]
    assert failed[0].reason


def test_reading_a_product_and_a_shape_before_starting_passes(recorded: Protocol) -> None:
    """Reads and inquiries change nothing: an agent that looks around first is not held to offers."""
    protocol = json.loads(json.dumps(recorded))
    line = line_of(protocol, TOOL_CALL, "createCalculation")
    start = protocol[line - 1]
    reads = [
        ("readProduct", {"productId": "kraftfahrt-2025"}),
        ("readShape", {"shapeId": "VehicleShape"}),
        ("readProcessKnowledge", {}),
    ]
    for offset, (tool, arguments) in enumerate(reads):
        call = copy.deepcopy(start)
        call.update({"gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": arguments})
        call["mcp.tool.result"] = {"_meta": {"omds-ld/answer": {"nextSteps": []}}}
        protocol.insert(line - 1 + offset, call)
    offered = next(c for c in grade(protocol).criteria if c.name == "offered")
    assert offered.passed, offered.reason


def test_an_edit_no_answer_offered_fails_naming_its_line(recorded: Protocol) -> None:
    protocol = json.loads(json.dumps(recorded))
    evidence = unoffered_edit(protocol)
    offered = next(c for c in grade(protocol).criteria if c.name == "offered")
    assert not offered.passed
    assert offered.evidence == (evidence,)
    assert "includeComponent" in offered.reason


def test_the_grader_takes_the_kinds_of_operation_from_the_norm() -> None:
    from omds_ld.norm import load_norm
    from omds_ld.scenarios.grader import is_edit

    norm = load_norm()
    for name, operation in norm.operations.items():
        assert is_edit(name) == (operation.kind in {"create", "edit"}), name
    assert is_edit("someToolOfAnotherServer")


def test_a_task_asking_for_an_offer_fails_without_one(recorded: Protocol) -> None:
    protocol = json.loads(json.dumps(recorded))
    protocol[0]["scenario"]["expected"]["offer"] = True
    premium = next(c for c in grade(protocol).criteria if c.name == "premium")
    assert not premium.passed
    assert premium.reason == "a premium, but no binding offer"


def test_an_edit_offered_by_another_server_is_not_offered(recorded: Protocol) -> None:
    """Each server's offers are its own: the risk object offered by Pfefferminzia, sent to
    another insurer's server with the same arguments, was offered by nobody there."""
    protocol = json.loads(json.dumps(recorded))
    line = line_of(protocol, TOOL_CALL, "createRiskObject")
    protocol[line - 1]["mcp.server"] = "angloamerican"
    offered = next(c for c in grade(protocol).criteria if c.name == "offered")
    assert not offered.passed
    assert offered.evidence == (line,)
    assert "angloamerican" in offered.reason


def test_a_premium_stated_wrong_is_also_one_no_answer_gave(recorded: Protocol) -> None:
    protocol = json.loads(json.dumps(recorded))
    line = line_of(protocol, FINAL)
    protocol[line - 1]["text"] = protocol[line - 1]["text"].replace("1.684,88", "1.684,98")
    protocol[line - 1]["text"] = protocol[line - 1]["text"].replace("1684.88", "1684.98")
    failed = {c.name: c for c in grade(protocol).criteria if not c.passed}
    assert set(failed) == {"stated", "invented"}
    assert "1684.98" in failed["invented"].reason


def _recorded(name: str, server: ExampleServer, out: Path) -> Protocol:
    path = next(p for p in builtin_scenarios() if p.stem == name)
    record = asyncio.run(run_once(load_scenario(path), ReferenceAgent(), server.url, out, 1))
    return read_protocol(record.protocol)


@pytest.mark.parametrize("name", ["disrupto-oldtimer-refused", "disrupto-household-not-offered"])
def test_a_correct_no_passes_and_the_same_no_with_a_price_fails(
    name: str, server: ExampleServer, tmp_path: Path
) -> None:
    """A refusal and a product not offered, each graded as the correct outcome it is; the same
    run with an estimated premium in its final answer fails, naming the amount."""
    protocol = _recorded(name, server, tmp_path)
    verdict = grade(protocol)
    assert verdict.passed, [(c.name, c.reason) for c in verdict.criteria if not c.passed]
    assert verdict.criteria[0].name == "outcome"
    priced = json.loads(json.dumps(protocol))
    line = line_of(priced, FINAL)
    priced[line - 1]["text"] += "\nGeschätzt wären es etwa 1.150,00 € im Jahr."
    failed = {c.name: c.reason for c in grade(priced).criteria if not c.passed}
    assert "1150.00" in failed["invented"], failed
    assert "stated" in failed  # a "no" states no premium


def test_a_refused_value_changed_on_the_agents_own_account_fails(
    server: ExampleServer, tmp_path: Path
) -> None:
    protocol = _recorded("disrupto-oldtimer-refused", server, tmp_path)
    refused = line_of(protocol, TOOL_CALL, "inquireTariff")
    retry = copy.deepcopy(protocol[refused - 1])
    vehicle = retry["gen_ai.tool.call.arguments"]["body"]["p:instance"]["p:hasRiskObject"][0]
    vehicle["p:yearOfConstruction"] = 1970  # the agent made the car younger to get a price
    protocol.insert(refused, retry)
    outcome = grade(protocol).criteria[0]
    assert not outcome.passed and "1970" in outcome.reason
    assert outcome.evidence == (refused, refused + 1)


@pytest.fixture(scope="module")
def applied(server: ExampleServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Protocol]:
    """Real runs of the shipped application scenarios: confirmed, and declined by the person."""
    out = Path(tmp_path_factory.mktemp("applications"))
    runs = {}
    for name in ("pfefferminzia-application", "pfefferminzia-application-declined"):
        path = next(p for p in builtin_scenarios() if p.stem == name)
        record = asyncio.run(run_once(load_scenario(path), ReferenceAgent(), server.url, out, 1))
        runs[name] = read_protocol(record.protocol)
    return runs


def test_an_application_made_without_the_persons_yes_fails_the_grade(
    applied: dict[str, Protocol],
) -> None:
    confirmed = applied["pfefferminzia-application"]
    assert grade(confirmed).passed, [c for c in grade(confirmed).criteria if not c.passed]
    unasked = [e for e in json.loads(json.dumps(confirmed)) if e["event"] != PERSON]
    failed = [c.name for c in grade(unasked).criteria if not c.passed]
    assert failed == ["confirmed"]


def test_a_declined_confirmation_passes_and_an_application_despite_it_fails(
    applied: dict[str, Protocol],
) -> None:
    declined = applied["pfefferminzia-application-declined"]
    assert grade(declined).passed, [c for c in grade(declined).criteria if not c.passed]
    despite = json.loads(json.dumps(declined))
    application_without_yes(despite)
    failed = {c.name for c in grade(despite).criteria if not c.passed}
    assert failed == {"confirmed", "application"}


# How a broker writes amounts, and the binding step's ends (#36): each right run passes, the
# same run made wrong fails, naming why.


def _criterion(protocol: Protocol, name: str) -> Any:
    return next(c for c in grade(protocol).criteria if c.name == name)


def _say(protocol: Protocol, text: str) -> Protocol:
    said = json.loads(json.dumps(protocol))
    said[line_of(said, FINAL) - 1]["text"] += "\n" + text
    return said


def _gross(protocol: Protocol, server: str) -> Decimal:
    for event in protocol:
        if event.get("event") == TOOL_CALL and event.get("mcp.server") == server:
            premium = answer_of(event["mcp.tool.result"]).get("premium") or {}
            if premium.get("gross") is not None:
                return Decimal(str(premium["gross"]))
    raise AssertionError(f"no premium of {server}")


def test_an_instalment_and_a_rounding_of_a_given_premium_pass_a_made_up_one_fails(
    recorded: Protocol,
) -> None:
    right = _say(recorded, "Monatlich (12 Raten) wären das 140,41 EUR, im Jahr rund 1.685 EUR.")
    invented = _criterion(right, "invented")
    assert invented.passed, invented.reason
    assert (
        "140.41: 1684.88 / 12" in invented.reason and "1685.00: 1684.88 rounded" in invented.reason
    )
    wrong = _criterion(_say(recorded, "Monatlich wären das 150,00 EUR."), "invented")
    assert not wrong.passed and "150.00" in wrong.reason


def test_a_difference_of_two_insurers_premiums_passes_one_off_by_five_euros_fails(
    server: ExampleServer, tmp_path: Path
) -> None:
    compared = _recorded("compare-skoda", server, tmp_path)
    cheaper = abs(_gross(compared, "pfefferminzia") - _gross(compared, "disrupto"))
    words = f"{cheaper:.2f}".replace(".", ",")
    right = _criterion(_say(compared, f"Der Unterschied beträgt {words} EUR im Jahr."), "invented")
    assert right.passed, right.reason
    assert f"{cheaper:.2f}: " in right.reason and " − " in right.reason
    off = f"{cheaper + 5:.2f}".replace(".", ",")
    wrong = _criterion(_say(compared, f"Der Unterschied beträgt {off} EUR im Jahr."), "invented")
    assert not wrong.passed and f"{cheaper + 5:.2f}" in wrong.reason


def test_a_deductible_in_a_refusal_is_no_price_a_premium_is(
    server: ExampleServer, tmp_path: Path
) -> None:
    refused = _recorded("disrupto-oldtimer-refused", server, tmp_path)
    deductible = _say(refused, "Möglich wäre Teilkasko mit 500 EUR Selbstbehalt.")
    failed = [c.name for c in grade(deductible).criteria if not c.passed]
    assert failed == [], failed
    priced = _say(refused, "Mit 500 EUR Selbstbehalt kostet sie 730,00 EUR im Jahr.")
    failed = [c.name for c in grade(priced).criteria if not c.passed]
    assert failed == ["stated", "invented"], failed


def _over_budget(protocol: Protocol) -> Protocol:
    """The offer's run as a task whose right end is no application: the premium is above what
    the customer agreed to, and the final answer says so."""
    over = json.loads(json.dumps(protocol))
    scenario = over[0]["scenario"]
    scenario["task"] += " Stelle den Antrag nur, wenn die Prämie höchstens 1.500 Euro beträgt."
    scenario["expected"]["application"] = "none"
    scenario["expected"]["says"] = [
        {"name": "above what was agreed", "wordings": {"de": ["über den vereinbarten"]}}
    ]
    return _say(over, "Die Prämie liegt über den vereinbarten 1.500 EUR: kein Antrag.")


def test_no_application_for_a_premium_above_the_agreed_passes_an_application_fails(
    applied: dict[str, Protocol],
) -> None:
    declined = applied["pfefferminzia-application-declined"]  # offered, nothing applied for
    right = _over_budget(declined)
    verdict = grade(right)
    assert verdict.passed, [(c.name, c.reason) for c in verdict.criteria if not c.passed]
    silent = json.loads(json.dumps(right))
    silent[line_of(silent, FINAL) - 1]["text"] = declined[line_of(declined, FINAL) - 1]["text"]
    why = _criterion(silent, "application")
    assert not why.passed and "above what was agreed" in why.reason
    despite = _over_budget(applied["pfefferminzia-application"])  # applied all the same
    wrong = _criterion(despite, "application")
    assert not wrong.passed and "right end is none" in wrong.reason


def _expecting(protocol: Protocol, **expected: Any) -> Protocol:
    changed = json.loads(json.dumps(protocol))
    changed[0]["scenario"]["expected"].update(expected)
    return changed


def test_an_application_at_the_insurer_the_task_names_passes_at_another_fails(
    applied: dict[str, Protocol],
) -> None:
    confirmed = applied["pfefferminzia-application"]
    right = _criterion(_expecting(confirmed, application_at="pfefferminzia"), "application")
    assert right.passed, right.reason
    elsewhere = _expecting(confirmed, application_at="disrupto")
    elsewhere[0]["scenario"]["servers"] = ["pfefferminzia", "disrupto"]
    wrong = _criterion(elsewhere, "application")
    assert not wrong.passed and "went to pfefferminzia, not disrupto" in wrong.reason


def _referred(protocol: Protocol) -> Protocol:
    """The accepted application's run, the insurer having referred it instead."""
    referred = _expecting(protocol, application="referred")
    for event in referred:
        if event.get("event") == TOOL_CALL:
            application = answer_of(event["mcp.tool.result"]).get("application")
            if application:
                application["state"] = "referred"
                application.pop("policyNumber", None)
    final = referred[line_of(referred, FINAL) - 1]
    final["text"] = "Der Antrag ist eingereicht; Pfefferminzia prüft ihn noch (referred)."
    return referred


def test_a_referral_reported_as_pending_passes_reported_as_insured_fails(
    applied: dict[str, Protocol],
) -> None:
    referred = _referred(applied["pfefferminzia-application"])
    right = _criterion(referred, "application")
    assert right.passed, right.reason
    once = _criterion(
        _say(referred, "Sobald er angenommen ist, ist Frau Berger versichert."), "application"
    )
    assert once.passed, once.reason
    insured = _criterion(_say(referred, "Frau Berger ist jetzt versichert."), "application")
    assert not insured.passed and "ist jetzt versichert" in insured.reason


def test_a_withdrawal_the_task_asks_for_passes_an_application_left_standing_fails(
    applied: dict[str, Protocol],
) -> None:
    confirmed = applied["pfefferminzia-application"]
    standing = _criterion(_expecting(confirmed, application="withdrawn"), "application")
    assert not standing.passed and "is accepted, not withdrawn" in standing.reason
    withdrawn = _expecting(confirmed, application="withdrawn")
    made = next(
        e for e in withdrawn
        if e.get("event") == TOOL_CALL and e["gen_ai.tool.name"] == "createApplication"
        and not e.get("is_error") and answer_of(e["mcp.tool.result"]).get("application")
    )  # fmt: skip
    withdrawal = copy.deepcopy(made)
    withdrawal["gen_ai.tool.name"] = "withdrawApplication"
    answer_of(withdrawal["mcp.tool.result"])["application"]["state"] = "withdrawn"
    withdrawn.insert(line_of(withdrawn, FINAL) - 1, withdrawal)
    right = _criterion(withdrawn, "application")
    assert right.passed, right.reason


def test_one_yes_covers_one_application_not_two(applied: dict[str, Protocol]) -> None:
    """Two applications after one yes: the second was made on the model's word."""
    twice = json.loads(json.dumps(applied["pfefferminzia-application"]))
    made = next(
        i for i, e in enumerate(twice)
        if e.get("event") == TOOL_CALL and e["gen_ai.tool.name"] == "createApplication"
        and not e.get("is_error") and answer_of(e["mcp.tool.result"]).get("application")
    )  # fmt: skip
    second = copy.deepcopy(twice[made])
    answer_of(second["mcp.tool.result"])["application"]["applicationId"] = "another"
    twice.insert(made + 1, second)
    confirmed = _criterion(twice, "confirmed")
    assert not confirmed.passed and "one yes covers one application" in confirmed.reason


def test_at_the_broker_endpoint_each_call_is_graded_at_its_insurer(
    server: ExampleServer, tmp_path: Path
) -> None:
    """A comparison at the broker endpoint (``servers: [insurers]``) runs there, is recorded
    with each call's insurer and graded as at the insurers' own servers: the same run with one
    insurer's premium left out, or an edit made at the insurer that did not offer it, fails."""
    path = next(p for p in builtin_scenarios() if p.stem == "compare-insurers-endpoint")
    scenario = asyncio.run(prepare(load_scenario(path), "reference", server.url, tmp_path))
    record = asyncio.run(run_once(scenario, ReferenceAgent(), server.url, tmp_path, 1))
    compared = read_protocol(record.protocol)
    assert set(compared[0]["scenario"]["expected"]["premiums"]) == {
        "pfefferminzia", "disrupto", "angloamerican"
    }  # fmt: skip
    verdict = grade(compared)
    assert verdict.passed, [(c.name, c.reason) for c in verdict.criteria if not c.passed]
    listed = [e for e in compared if e["event"] == TOOLS_LIST]
    calls = [e for e in compared if e["event"] == TOOL_CALL]
    assert [e["mcp.server"] for e in listed] == ["insurers"], "one server: the broker endpoint"
    assert {e["mcp.server"] for e in calls} == {"insurers"}
    insurers = {e["gen_ai.tool.call.arguments"]["insurer"] for e in calls}
    assert insurers == {"pfefferminzia", "disrupto", "angloamerican"}
    assert sorted(compared[0]["scenario"]["insurers"]) == sorted(insurers)

    left_out = json.loads(json.dumps(compared))
    final = left_out[line_of(left_out, FINAL) - 1]
    final["text"] = "\n".join(
        line for line in final["text"].splitlines() if not line.startswith("disrupto")
    )
    stated = _criterion(left_out, "stated")
    assert not stated.passed and "disrupto" in stated.reason, stated.reason

    elsewhere = json.loads(json.dumps(compared))
    edit = next(
        e for e in elsewhere
        if e["event"] == TOOL_CALL and e["gen_ai.tool.name"] == "createRiskObject"
    )  # fmt: skip
    made_at = edit["gen_ai.tool.call.arguments"]["insurer"]
    other = next(name for name in sorted(insurers) if name != made_at)
    edit["gen_ai.tool.call.arguments"]["insurer"] = other
    offered = _criterion(elsewhere, "offered")
    assert not offered.passed and f"{other} · createRiskObject" in offered.reason


@pytest.mark.parametrize("path", builtin_scenarios(), ids=lambda p: p.stem)
def test_the_protocol_keeps_every_field_of_its_scenario(path: Path) -> None:
    """Grading reads the scenario from the protocol's run.start alone: what the runner writes
    there parses back to the same scenario, with what a task expects of the binding step too
    (an application's insurer was once parsed but never written, so never checked)."""
    scenario = load_scenario(path)
    at = next(iter(scenario.insurers), None)
    # as a run keeps it: premiums found at run time already found (here: none)
    scenario = dataclasses.replace(scenario, application_at=at, path=None, inquire=False)
    kept = parse_scenario(json.loads(json.dumps(_scenario_snapshot(scenario))))
    assert kept == scenario


def test_the_persons_confirmation_is_no_inadmissible_call(applied: dict[str, Protocol]) -> None:
    """The binding call that waits for the person (confirmation-required), and the one the
    person declined, are how binding goes: the protocol never marks them inadmissible, and the
    report counts no inadmissible call in a run that did everything right."""
    from omds_ld.scenarios.report import metrics

    for name in ("pfefferminzia-application", "pfefferminzia-application-declined"):
        protocol = applied[name]
        asked = [
            e for e in protocol
            if e.get("event") == TOOL_CALL and e.get("is_error")
            and "confirmation-" in str(answer_of(e["mcp.tool.result"]).get("problem", {}))
        ]  # fmt: skip
        assert asked, f"{name}: the person was asked"
        assert all("inadmissible" not in e for e in asked)
        assert metrics(protocol).inadmissible == 0


def test_the_consent_recorded_is_the_one_the_person_stated(applied: dict[str, Protocol]) -> None:
    """The reference agent sends only what the task told it of the consent; the person states
    it on the page (recorded in their event), and the application's answer reports it as the
    insurer recorded it: the same. A run whose application records another consent than the
    person stated (a model's time, a model's way) fails, naming the difference."""
    confirmed = applied["pfefferminzia-application"]
    [(_, said)] = [(n, e) for n, e in events_of(confirmed, PERSON) if e.get("answer") == "confirm"]
    stated = said["consent"]
    assert stated["consentedBy"] == "Anna Berger" and stated["consentMethod"] == "in-person"
    applying = [e for e in confirmed if e.get("gen_ai.tool.name") == "createApplication"]
    sent = applying[0]["gen_ai.tool.call.arguments"]["body"]["bc:consent"]
    # what the task told, nothing else: no time the agent was not told, no digest
    assert sent == {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person"}
    assert _criterion(confirmed, "confirmed").passed
    for field, value in (("consentMethod", "phone"), ("consentedAt", "2026-01-01T09:00:00+01:00")):
        changed = json.loads(json.dumps(confirmed))
        for event in changed:
            if event.get("event") == PERSON and event.get("answer") == "confirm":
                event["consent"] = {**event["consent"], field: value}
                if field == "consentedAt":
                    event["consent"].pop("consentedAtLocal", None)
        outcome = _criterion(changed, "confirmed")
        assert not outcome.passed and "did not state" in outcome.reason, outcome.reason
        assert value in outcome.reason


def test_what_the_person_states_is_read_from_the_scenario_and_refused_when_mistyped() -> None:
    """``person: {answer, consent: {by, method, at}}``: read as written, kept in the protocol's
    scenario as written; a time YAML reads as a date, a method the norm does not know, an
    unknown key are refused at load, naming the field."""
    path = next(p for p in builtin_scenarios() if p.stem == "pfefferminzia-application")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    given = {"answer": "confirm", "consent": {"method": "phone", "at": "2026-12-06T17:30:00+01:00"}}
    scenario = parse_scenario({**raw, "person": given})
    assert scenario.person == "confirm" and scenario.person_consent == given["consent"]
    assert person_states(scenario) == {"by": "Anna Berger", **given["consent"]}
    assert parse_scenario(_scenario_snapshot(scenario)).person_consent == given["consent"]
    unquoted = yaml.safe_load("person: {answer: confirm, consent: {at: 2026-12-06}}")
    for person, field in (
        (unquoted["person"], "person.consent.at"),
        ({"answer": "confirm", "consent": {"method": "telepathy"}}, "person.consent.method"),
        ({"answer": "confirm", "consent": {"when": "x"}}, "person.consent"),
        ({"answer": "maybe"}, "person.answer"),
    ):
        try:
            parse_scenario({**raw, "person": person})
        except ValueError as refused:
            assert field in str(refused), refused
        else:
            raise AssertionError(f"{person} was not refused")


def test_a_wording_yaml_reads_as_a_number_is_refused_at_load_naming_it(tmp_path: Path) -> None:
    """``says`` wordings written bare (``31.04``, YAML's number) are refused when the scenario
    is loaded, naming the field, instead of failing later inside the grader."""
    path = next(p for p in builtin_scenarios() if p.stem == "pfefferminzia-offer")
    text = path.read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    raw["expected"]["says"] = [{"name": "the date", "wordings": {"de": ["am 31.04"]}}]
    bare = yaml.safe_dump(raw, allow_unicode=True).replace("- am 31.04", "- 31.04")
    written = tmp_path / "bare.yaml"
    written.write_text(bare, encoding="utf-8")
    with pytest.raises(ValueError, match=r"expected\.says\[0\]\.wordings\.de\[0\] is text"):
        load_scenario(written)
    raw["expected"]["says"] = [{"name": "the date", "wordings": {"de": ["31.04"]}}]
    assert parse_scenario(raw).says[0].wordings["de"] == ("31.04",)  # quoted: text
