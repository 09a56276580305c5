"""The customer's consent is the person's to state, not the model's: the model sends what it was
told (any of who, how, when, or nothing), the person states the consent to this offer, the
insurer receives exactly that, and its answer reports it as recorded. Every refusal of a
consent's time names the rule it breaks, with the same words at the interface, the MCP server
and the confirmation page."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from typing import Any

import httpx
import mcp_types as types

from omds_ld.mcp.condense import answer_of
from omds_ld.norm import consent as consent_rules
from omds_ld.scenarios.person import PagePerson
from tests.insurer.test_receipts import _body, _offer
from tests.mcp.applications import Person, application, make_offer, with_receipt
from tests.mcp.clients import Client, step
from tests.mcp.test_applications import applications_of, problem_type, run, stored
from tests.servers import ExampleServer

FIELDS = ("consentedBy", "consentMethod", "consentedAt")
PAGE = re.compile(r"(http://\S+/omds-ld/confirmations/[\w-]+)")


def _at(seconds_ago: float) -> str:
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    return moment.astimezone(dt.timezone(dt.timedelta(hours=1))).isoformat(timespec="seconds")


class Asking(Person):
    """The person, keeping each form they were asked with."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.forms: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestFormParams):
            self.forms.append(dict(params.requested_schema["properties"]))
        return await super().__call__(context, params)


def _apply(
    server: ExampleServer, mode: str, person: Person, told: dict[str, str] | None
) -> dict[str, Any]:
    """An offer, then createApplication by its next step with ``told`` as bc:consent (None: no
    consent at all): the answer's application (or its problem) and text."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        made = application(offer)
        del made["bc:consent"]
        if told is not None:
            made["bc:consent"] = told
        seen["offer"] = answer_of(offer)["offer"]
        seen["offer_text"] = offer.content[0].text
        arguments = {**step(offer, "createApplication").get("arguments", {}), "body": made}
        arguments["idempotencyKey"] = f"k-{id(person)}"
        result = await client.call_tool("createApplication", arguments)
        seen.update(result=result, text=result.content[0].text, answer=answer_of(result))

    run(server.mcp("pfefferminzia"), body, mode, person)
    return seen


def test_without_a_consent_the_person_states_it_and_the_insurer_records_theirs(
    server: ExampleServer,
) -> None:
    """No bc:consent at all (2026-07-28 round trip): nothing is filled in for the person, who
    states who, how and when; the insurer receives that, receipt and all, and the answer reports
    the consent as recorded."""
    stated = {"consentedBy": "Anna Berger", "consentMethod": "phone", "consentedAt": _at(60)}
    person = Asking(content=stated)
    seen = _apply(server, "2026-07-28", person, None)
    assert not seen["result"].is_error, seen["text"]
    # the offer, as the model reads it, no longer asks it to write the consent
    assert "consent names it" not in seen["offer_text"]
    assert "the person confirming an application states the consent" in seen["offer_text"]
    assert "ConsentShape (the person confirming states it" in seen["offer_text"]
    [form] = person.forms
    assert not any("default" in form[k] for k in FIELDS)  # nobody said: nothing filled in
    [shown] = person.shown
    assert "the assistant was told nothing of it" in shown
    # the offer was priced from its contract start; the application starts today: both shown
    priced = seen["offer"]["contractStart"]
    assert f"the premium was priced from {priced}: another start than the offer's" in shown
    application_ = seen["answer"]["application"]
    assert application_["state"] == "accepted"
    consent = stored(server, application_["applicationId"])["consent"]
    assert (consent["bc:consentedBy"], consent["bc:consentMethod"], consent["bc:consentedAt"]) == (
        "Anna Berger", "phone", stated["consentedAt"]
    )  # fmt: skip
    assert consent["bc:offerDigest"] == seen["offer"]["digest"]
    assert consent["bc:confirmation"]["bc:receipt"]  # the insurer verified it, or refused
    # the model reports what the insurer holds, not what it sent
    recorded = application_["consent"]
    assert (recorded["method"], recorded["consentedAt"]) == ("phone", stated["consentedAt"])
    assert recorded["confirmedVia"] == "elicitation (input_required)"
    assert (
        f"Consent as the insurer recorded it: Anna Berger, phone, {stated['consentedAt']}"
        in seen["text"]
    )


def test_what_the_model_was_told_is_shown_as_that_and_the_rest_is_the_persons(
    server: ExampleServer,
) -> None:
    """Only the method told (2025-11-25 form): the form fills in the method alone, named as
    what the assistant was told; the person states who and when."""
    person = Asking(content={"consentedBy": "Anna Berger", "consentedAt": _at(30)})
    seen = _apply(server, "legacy", person, {"bc:consentMethod": "phone"})
    assert not seen["result"].is_error, seen["text"]
    [form] = person.forms
    assert form["consentMethod"]["default"] == "phone"
    assert "as the assistant was told: phone" in form["consentMethod"]["description"]
    assert "default" not in form["consentedBy"] and "default" not in form["consentedAt"]
    [shown] = person.shown
    assert "as the assistant was told: by phone" in shown
    consent = stored(server, seen["answer"]["application"]["applicationId"])["consent"]
    assert consent["bc:consentMethod"] == "phone" and consent["bc:consentedBy"] == "Anna Berger"


def test_a_time_before_the_offer_is_flagged_to_the_person_never_filled_in(
    server: ExampleServer,
) -> None:
    """The model was told a time from before the offer existed: the person is shown it as
    that, it is not filled in, and a yes that keeps it binds nothing (the rule, named)."""
    earlier = _at(3 * 86400)
    keeps = Asking()  # confirms without stating a time: the model's stands, and is refused
    seen = _apply(server, "legacy", keeps, {"bc:consentMethod": "phone", "bc:consentedAt": earlier})
    [form] = keeps.forms
    assert "default" not in form["consentedAt"]
    assert "before this offer was made" in form["consentedAt"]["description"]
    [shown] = keeps.shown
    assert f"{earlier}; that was before this offer was made at" in shown
    assert seen["result"].is_error and problem_type(seen["result"]) == "consent-missing"
    assert "is before this offer was made" in seen["text"]
    assert applications_of(server, seen["offer"]["offerId"]) == []
    # the person asks the customer and states when they agreed to this offer: it binds
    states = Asking(content={"consentedBy": "Anna Berger", "consentedAt": _at(10)})
    seen = _apply(
        server, "legacy", states, {"bc:consentMethod": "phone", "bc:consentedAt": earlier}
    )
    assert seen["answer"]["application"]["state"] == "accepted", seen["text"]


def test_a_time_no_person_could_state_is_refused_before_anyone_is_asked(
    server: ExampleServer,
) -> None:
    """A told time without its offset, in the future, or no date at all: refused by the MCP
    server with the rule's name, the person never asked, nothing applied for."""
    for told, rule in (
        ("2026-12-06T17:30:00", "has no offset"),
        (_at(-86400), "is in the future"),
        ("yesterday evening", "is no date and time"),
    ):
        person = Asking()
        seen = _apply(server, "legacy", person, {"bc:consentedAt": told})
        assert seen["result"].is_error and problem_type(seen["result"]) == "invalid-body", told
        assert rule in seen["text"], (told, seen["text"])
        assert person.forms == [] and person.shown == []
        assert applications_of(server, seen["offer"]["offerId"]) == []


def test_the_interface_names_the_rule_a_consent_time_breaks(
    client: httpx.Client, server: ExampleServer
) -> None:
    """At the insurer's interface itself (a valid receipt, so only the time is wrong): before
    the offer, in the future, without an offset: 422, the detail naming which, nothing applied."""
    api = server.api("pfefferminzia")
    offer = _offer(client, api)
    made = dt.datetime.fromisoformat(offer["bc:createdAt"])
    now = dt.datetime.now(dt.UTC)
    # the insurer answers in its language (Pfefferminzia's is German): each rule by its words
    for at, rule in (
        ((made - dt.timedelta(hours=2)).isoformat(timespec="seconds"), "liegt vor der Erstellung"),
        ((now + dt.timedelta(days=1)).isoformat(timespec="seconds"), "liegt in der Zukunft"),
        (now.replace(tzinfo=None).isoformat(timespec="seconds"), "hat keine Zeitzone"),
    ):
        body = _body(offer)
        body["bc:consent"]["bc:consentedAt"] = at
        answer = client.post(
            f"{api}/offers/{offer['bc:offerId']}/applications", json=with_receipt(server, body)
        )
        assert answer.status_code == 422, answer.text
        problem = answer.json()
        assert problem["type"].endswith("/personal-data-invalid")
        assert rule in problem["detail"], (at, problem["detail"])
        expected = consent_rules.time_error(at, made, dt.datetime.now(dt.UTC), "de")
        assert expected is not None and rule in expected
        assert (
            client.get(f"{api}/offers/{offer['bc:offerId']}/applications").json()["bc:application"]
            == []
        )


def test_the_page_states_the_consent_and_refuses_what_the_insurer_refuses(
    server: ExampleServer,
) -> None:
    """A client that cannot ask: on the confirmation page, the model's account is shown as that,
    nothing else is filled in; a time before the offer, in the future or with no date is refused
    with the insurer's words and changes nothing; the consent stated there is the one applied."""
    earlier = _at(3 * 86400)
    state: dict[str, Any] = {}

    async def first(client: Client) -> None:
        offer = await make_offer(client)
        body = application(offer)
        body["bc:consent"] = {"bc:consentMethod": "phone", "bc:consentedAt": earlier}
        arguments = {
            "offerId": answer_of(offer)["offer"]["offerId"],
            "body": body,
            "idempotencyKey": "pg-1",
        }
        refused = await client.call_tool("createApplication", arguments)
        assert refused.is_error and problem_type(refused) == "confirmation-required"
        state.update(
            arguments=arguments, text=refused.content[0].text, made=answer_of(offer)["offer"]
        )

    run(server.mcp("pfefferminzia"), first, "legacy", None)
    found = PAGE.search(state["text"])
    assert found, state["text"]
    page = found.group(1)
    person = PagePerson()
    reading = asyncio.run(person.read(page))
    assert "As the assistant was told: by phone, " + earlier in reading.page
    assert "before this offer was made" in reading.page
    assert 'name="consentedBy" required maxlength="200" value=""' in reading.page  # nobody said
    assert 'name="consentedAtLocal" required value=""' in reading.page  # flagged: not filled in
    for at, rule in (
        (earlier, "is before this offer was made"),
        (_at(-86400), "is in the future"),
        ("0001-01-01T00:00:00+00:00", "is before this offer was made"),
        ("2026-12-06T17:30:00", "has no offset"),
    ):
        answered = asyncio.run(person.answer(page, "confirm", {"by": "Anna Berger", "at": at}))
        assert answered.status == 422 and rule in answered.page, (at, answered.page[-600:])
    nul = asyncio.run(person.answer(page, "confirm", {"by": "Anna\x00Berger", "at": _at(5)}))
    assert nul.status == 422 and "no control characters" in nul.page
    stated_at = _at(20)
    answered = asyncio.run(person.answer(page, "confirm", {"by": "Anna Berger", "at": stated_at}))
    assert answered.status == 200, answered.page
    made: dict[str, Any] = {}

    async def retry(client: Client) -> None:
        result = await client.call_tool("createApplication", state["arguments"])
        assert not result.is_error, result.content[0].text
        made.update(answer_of(result)["application"])

    run(server.mcp("pfefferminzia"), retry, "legacy", None)
    consent = stored(server, made["applicationId"])["consent"]
    assert (consent["bc:consentedBy"], consent["bc:consentMethod"], consent["bc:consentedAt"]) == (
        "Anna Berger", "phone", stated_at
    )  # fmt: skip
    assert made["consent"]["confirmedVia"] == "confirmation page"


def test_every_endpoint_and_schema_variant_tells_the_model_the_person_states_it(
    server: ExampleServer,
) -> None:
    """tools/list as a model reads it, at an insurer's server and the broker endpoint, in both
    eras and in every schema variant: createApplication says the person states the consent and
    the model sends only what it was told; the body's line says so too."""
    endpoints = (server.mcp("pfefferminzia"), server.url + "/omds-ld/insurers/mcp")
    seen: list[tuple[str, str]] = []

    async def listed(url: str, mode: str) -> None:
        async with Client(url, mode=mode) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            tool = tools["createApplication"]
            body = tool.input_schema["properties"]["body"]
            seen.append((url, mode))
            assert "states who consented, how" in (tool.description or ""), url
            assert "never a time you were not" in (tool.description or ""), url
            assert "bc:consent only as you were told it" in body["description"], (url, body)
            assert "naming the offer" not in body["description"]

    for endpoint in endpoints:
        for variant in ("", "?schemas=strict", "?schemas=gemini"):
            for mode in ("legacy", "2026-07-28"):
                asyncio.run(listed(endpoint + variant, mode))
    assert len(seen) == 12
