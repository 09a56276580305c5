"""On the chat page a binding call waits for the person: by hand, the answer names the
confirmation page, where the person logs in as the broker and confirms or declines; they say
so on the chat page, the call is made again and their answer, as the retried call shows it, is
part of the conversation (and its protocol). Over HTTP against the example server."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import httpx

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.grader import confirmed_by_the_person
from omds_ld.scenarios.person import PagePerson
from tests.chat.test_chat_bounds import _browser, _call
from tests.insurer.test_flows import SKODA
from tests.mcp.applications import IBAN, PAYMENT, PERSON
from tests.servers import ExampleServer

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


def _offer(browser: httpx.Client, cid: str) -> dict[str, Any]:
    """The seed's example by hand, up to a binding offer: its structured part."""
    case = _call(browser, cid, "createCalculation", body={"p:hasRootProduct": PRODUCT}).json()
    case_id = answer_of(case["mcp.tool.result"])["case"]["caseId"]
    _call(browser, cid, "createRiskObject", caseId=case_id, body=SKODA)
    _call(browser, cid, "calculatePremium", caseId=case_id)
    answer = answer_of(_call(browser, cid, "createOffer", caseId=case_id).json()["mcp.tool.result"])
    return {**answer["offer"], "insurerToday": answer["insurerToday"]}


def _application(offer: dict[str, Any]) -> dict[str, Any]:
    return {
        "bc:policyholder": PERSON, "bc:payment": PAYMENT,
        "bc:startDate": offer["insurerToday"],  # the insurer's, not this machine's
        "bc:consent": {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person",
                       "bc:consentedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       "bc:offerDigest": offer["digest"]},
    }  # fmt: skip


def _apply(browser: httpx.Client, cid: str) -> dict[str, Any]:
    offer = _offer(browser, cid)
    asked = _call(
        browser, cid, "createApplication", offerId=offer["offerId"], body=_application(offer),
        idempotencyKey=f"chat-{cid}",
    ).json()  # fmt: skip
    assert asked["is_error"] and "confirmation" in asked, asked["text"]
    return asked


def test_by_hand_the_person_confirms_on_the_page_and_the_call_applies(
    server: ExampleServer,
) -> None:
    with _browser(server) as browser:
        cid = browser.post("/chat/api/conversations", json={}).json()["id"]
        asked = _apply(browser, cid)
        url = asked["confirmation"]["url"]
        assert "shown" not in asked["confirmation"]  # the chat page reads nothing of it
        path = f"/chat/api/conversations/{cid}/confirmations"
        elsewhere = url.rsplit("/", 1)[0] + "/not-asked-here"
        assert browser.post(path, json={"url": elsewhere, "answer": "answered"}).status_code == 404
        # said before answering: the call is made again and still waits for the person
        early = browser.post(path, json={"url": url, "answer": "answered"})
        assert early.status_code == 200 and early.json()["is_error"], early.text
        again_asked = early.json()["confirmation"]["url"]
        answered = asyncio.run(PagePerson().answer(again_asked, "confirm"))
        assert answered.status == 200 and IBAN in answered.shown  # the page shows it in full
        applied = browser.post(path, json={"url": again_asked, "answer": "answered"})
        assert applied.status_code == 200, applied.text
        made = applied.json()
        assert not made["is_error"], made["text"]
        assert answer_of(made["mcp.tool.result"])["application"]["state"] == "accepted"
        again = browser.post(path, json={"url": again_asked, "answer": "answered"})
        assert again.status_code == 409  # one answer per question
        events = browser.get(f"/chat/api/conversations/{cid}").json()["events"]
        [person] = [e for e in events if e["event"] == "person.confirmation"]
        assert person["answer"] == "confirm" and person["via"] == "confirmation page"
        protocol = browser.get(f"/chat/api/conversations/{cid}/protocol.jsonl").text
    lines = [json.loads(line) for line in protocol.splitlines() if line]
    verdict = confirmed_by_the_person(lines, None)  # type: ignore[arg-type]  # needs no scenario
    assert verdict.passed and "1 application(s)" in verdict.reason, verdict.reason
    unasked = [e for e in lines if e["event"] != "person.confirmation"]
    assert not confirmed_by_the_person(unasked, None).passed  # type: ignore[arg-type]


def test_by_hand_a_declined_confirmation_creates_nothing_and_shows_in_the_protocol(
    server: ExampleServer,
) -> None:
    with _browser(server) as browser:
        cid = browser.post("/chat/api/conversations", json={}).json()["id"]
        asked = _apply(browser, cid)
        url = asked["confirmation"]["url"]
        assert asyncio.run(PagePerson().answer(url, "decline")).status == 200
        told = browser.post(
            f"/chat/api/conversations/{cid}/confirmations", json={"url": url, "answer": "answered"}
        ).json()
        problem = answer_of(told["mcp.tool.result"])["problem"]["type"]
        assert told["is_error"] and problem.endswith("/confirmation-declined")
        protocol = browser.get(f"/chat/api/conversations/{cid}/protocol.jsonl").text
    assert '"person.confirmation"' in protocol and '"answer": "decline"' in protocol
    offer_id = asked["gen_ai.tool.call.arguments"]["offerId"]
    with httpx.Client() as http:
        listed = http.get(server.api("pfefferminzia") + f"/offers/{offer_id}/applications")
    assert listed.json()["bc:application"] == []


def test_a_conversation_with_an_application_is_saved_as_a_scenario_with_it(
    server: ExampleServer,
) -> None:
    """ "Save as a scenario" keeps what the conversation did beyond the risk object: the offer, the
    application with the customer's data, what the person answered, the state it came to, and
    the insurer's defaults it was left with as the assumptions; the scenario parses."""
    import yaml

    from omds_ld.scenarios.scenario import parse_scenario

    with _browser(server) as browser:
        cid = browser.post("/chat/api/conversations", json={}).json()["id"]
        browser.post(f"/chat/api/conversations/{cid}/personal", json={"keep": True})
        asked = _apply(browser, cid)
        url = asked["confirmation"]["url"]
        assert asyncio.run(PagePerson().answer(url, "confirm")).status == 200
        path = f"/chat/api/conversations/{cid}/confirmations"
        applied = browser.post(path, json={"url": url, "answer": "answered"}).json()
        assert not applied["is_error"], applied["text"]
        saved = browser.post(
            f"/chat/api/conversations/{cid}/scenario",
            json={"task": "Apply for the Skoda at Pfefferminzia", "premium": None},
        )
    assert saved.status_code == 200, saved.text
    raw = yaml.safe_load(saved.text)
    assert raw["expected"]["offer"] is True and raw["expected"]["application"] == "accepted"
    assert raw["person"] == "confirm"
    assert raw["application"]["policyholder"]["p:familyName"] == "Berger"
    assert raw["application"]["payment"]["bc:iban"] == IBAN
    assert raw["application"]["consent"] == {"by": "Anna Berger", "method": "in-person"}
    assert {"Bonus-Malus-Stufe", "Zulassungsbezirk"} <= {a["name"] for a in raw["assumptions"]}
    scenario = parse_scenario(raw)
    assert scenario.offer and scenario.application_outcome == "accepted"


def test_a_saved_scenario_keeps_the_values_set_and_the_components_chosen(
    server: ExampleServer,
) -> None:
    """A value set and a component included by hand are the scenario's ``set`` and ``include``,
    by the labels the answers show."""
    import yaml

    with _browser(server) as browser:
        cid = browser.post("/chat/api/conversations", json={}).json()["id"]
        case = _call(browser, cid, "createCalculation", body={"p:hasRootProduct": PRODUCT}).json()
        case_id = answer_of(case["mcp.tool.result"])["case"]["caseId"]
        _call(browser, cid, "createRiskObject", caseId=case_id, body=SKODA)
        included = _call(browser, cid, "includeComponent", caseId=case_id, componentId="vollkasko")
        draft = answer_of(included.json()["mcp.tool.result"])["draft"]
        district = next(a for a in draft["attributes"] if a["label"] == "Zulassungsbezirk")
        values = {"bc:values": [{"bc:attribute": district["iri"], "p:value": "T"}]}
        _call(browser, cid, "setAttributes", caseId=case_id, body=values)
        _call(browser, cid, "calculatePremium", caseId=case_id)
        saved = browser.post(
            f"/chat/api/conversations/{cid}/scenario", json={"task": "Vollkasko in Tirol"}
        )
    assert saved.status_code == 200, saved.text
    raw = yaml.safe_load(saved.text)
    assert raw["set"] == {"Zulassungsbezirk": "T"} and raw["include"] == ["Vollkasko"], raw
    assert "application" not in raw and "offer" not in raw["expected"]
