"""From offer to application through the real MCP client against the example server: nothing
binds a customer without the person's yes, in either era and over stdio, and every case seed 003
names (expired offer, changed conditions, duplicate submission, another broker, a declined
confirmation, a client that cannot ask) ends as the norm says, with the insurer's decisions."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types

from omds_ld.mcp.condense import answer_of
from omds_ld.mcp.confirm import shown_digest
from omds_ld.scenarios.person import DEMO_BROKER, PagePerson
from tests.mcp.applications import (
    IBAN,
    MISSING,
    OLD_TIMBER_HOUSE,
    PAYMENT,
    PERSON,
    Person,
    application,
    make_offer,
    slow_first_application,
)
from tests.mcp.clients import Client, follow, stdio_parameters, step
from tests.servers import ExampleServer

SKODA_OLD = {"@type": "p:Vehicle", "p:make": "Skoda", "p:yearOfConstruction": 2010,
             "p:powerKw": 77, "p:listPrice": 18000, "p:licensePlate": "W-22222B"}  # fmt: skip
EXPENSIVE = {"@type": "p:Vehicle", "p:make": "Porsche", "p:yearOfConstruction": 2024,
             "p:powerKw": 280, "p:listPrice": 120000, "p:licensePlate": "W-911P"}  # fmt: skip


def run(
    target: Any,
    body: Callable[[Client], Awaitable[None]],
    mode: str,
    person: Person | None,
    elicitation: tuple[str, ...] = ("form",),
) -> None:
    """The body with a client in ``mode`` whose person answers as told; it declares the
    ``elicitation`` modes (form unless said)."""

    async def go() -> None:
        async with Client(
            target, mode=mode, elicitation_callback=person, elicitation_modes=elicitation
        ) as client:
            await body(client)

    asyncio.run(go())


def stored(server: ExampleServer, application_id: str) -> dict[str, Any]:
    with sqlite3.connect(server.database) as db:
        row = db.execute(
            "SELECT state, record FROM applications WHERE application_id=?", (application_id,)
        ).fetchone()
    assert row is not None, application_id
    return {"state": row[0], **json.loads(row[1])}


def applications_of(server: ExampleServer, offer_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(server.database) as db:
        return db.execute(
            "SELECT application_id, state FROM applications WHERE offer_id=?", (offer_id,)
        ).fetchall()


def problem_type(result: Any) -> str:
    return str(answer_of(result)["problem"]["type"]).rsplit("/", 1)[-1]


def test_an_application_binds_only_after_the_person_confirmed_what_they_were_shown(
    server: ExampleServer,
) -> None:
    """2026-07-28: the question is an input_required round trip the client answers."""
    person = Person()
    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        assert "Offer digest" in offer.content[0].text
        made = await follow(
            client, step(offer, "createApplication"), application(offer), idempotencyKey="a-1"
        )
        found.update(answer_of(made)["application"], text=made.content[0].text)

    run(server.mcp("pfefferminzia"), body, "2026-07-28", person)
    [shown] = person.shown
    # the person sees everything the application binds the customer to, in full
    for said in ("Pfefferminzia", "Kraftfahrt 2025", "1684.88 EUR", "Anna Berger", IBAN,
                 "SEPA", "in person", "1985-04-12", "Hauptstraße 1, 1010 Wien",
                 "anna.berger@example.at", "bindet den Kunden", "binds"):  # fmt: skip
        assert said in shown, said
    # the model does not: its answer masks the account
    assert found["state"] == "accepted" and found["policyNumber"].startswith("PFM-")
    assert found["payment"]["iban"] == "…3201" and IBAN not in found["text"]
    record = stored(server, found["applicationId"])
    confirmation = record["consent"]["bc:confirmation"]
    assert confirmation["bc:confirmedVia"] == "elicitation (input_required)"
    # what was shown is kept as its digest only, never as the text that names the customer
    assert confirmation["bc:shownDigest"] == shown_digest(shown)
    assert "Anna" not in json.dumps(confirmation)
    # personal data are never logged by the MCP server
    assert IBAN not in server.request_log.read_text() and "1985-04-12" not in (
        server.request_log.read_text()
    )


def test_over_stdio_a_form_asks_the_person_and_a_no_creates_nothing(
    server: ExampleServer, tmp_path: Path
) -> None:
    """2025-11-25 over stdio: elicitation/create (form mode) on the session."""
    target = stdio_parameters(server, "pfefferminzia", tmp_path / "requests.jsonl")
    for action, confirm in (("decline", False), ("accept", False), ("cancel", False)):
        person = Person(action, confirm)
        seen: dict[str, Any] = {}

        async def refused(client: Client, seen: dict[str, Any] = seen) -> None:
            offer = await make_offer(client)
            result = await client.call_tool(
                "createApplication",
                {"offerId": answer_of(offer)["offer"]["offerId"],
                 "body": application(offer), "idempotencyKey": "no-1"},
            )  # fmt: skip
            seen.update(offer=answer_of(offer)["offer"]["offerId"], result=result)

        run(target, refused, "legacy", person)
        assert len(person.shown) == 1
        assert seen["result"].is_error and problem_type(seen["result"]) == "confirmation-declined"
        assert "declined by the person" in seen["result"].content[0].text
        assert applications_of(server, seen["offer"]) == []  # nothing was created
    yes = Person()
    made: dict[str, Any] = {}

    async def accepted(client: Client) -> None:
        offer = await make_offer(client)
        result = await follow(client, step(offer, "createApplication"), application(offer))
        made.update(answer_of(result)["application"])

    run(target, accepted, "legacy", yes)
    assert made["state"] == "accepted" and len(yes.shown) == 1
    via = stored(server, made["applicationId"])["consent"]["bc:confirmation"]["bc:confirmedVia"]
    assert via == "elicitation (form)"


def test_a_client_that_cannot_ask_gets_a_confirmation_page_then_the_retry_applies(
    server: ExampleServer,
) -> None:
    """2025-11-25 over HTTP without elicitation: the page, the person's login and yes there, the
    retry. The model's text names the page, never what it shows."""
    state: dict[str, Any] = {}

    async def first(client: Client) -> None:
        offer = await make_offer(client)
        body = application(offer)
        arguments = {"offerId": answer_of(offer)["offer"]["offerId"], "body": body,
                     "idempotencyKey": "page-1"}  # fmt: skip
        refused = await client.call_tool("createApplication", arguments)
        assert refused.is_error and problem_type(refused) == "confirmation-required"
        state.update(arguments=arguments, text=refused.content[0].text)
        again = await client.call_tool("createApplication", arguments)  # not confirmed yet
        assert again.is_error and problem_type(again) == "confirmation-required"

    run(server.mcp("pfefferminzia"), first, "legacy", None)
    page = re.search(r"(http://\S+/omds-ld/confirmations/[\w-]+)", state["text"])
    assert page, state["text"]
    assert IBAN not in state["text"] and "Anna" not in state["text"]
    assert applications_of(server, state["arguments"]["offerId"]) == []
    # the demo's anonymous calls are the demo broker's: they log in as it to answer
    answered = asyncio.run(PagePerson().answer(page.group(1), "confirm"))
    assert answered.status == 200 and "Confirmed by" in answered.page, answered.page
    assert "1684.88 EUR" in answered.shown and IBAN in answered.shown
    made: dict[str, Any] = {}

    async def retry(client: Client) -> None:
        # how the answer is shown is no part of what binds: another seen or full is the same call
        arguments = {**state["arguments"], "seen": "IQEjRWeJ", "full": True}
        result = await client.call_tool("createApplication", arguments)
        assert not result.is_error, result.content[0].text
        made.update(answer_of(result)["application"])

    run(server.mcp("pfefferminzia"), retry, "legacy", None)
    confirmation = stored(server, made["applicationId"])["consent"]["bc:confirmation"]
    assert confirmation["bc:confirmedBy"] == DEMO_BROKER
    assert confirmation["bc:confirmedVia"] == "confirmation page"
    assert confirmation["bc:shownDigest"] == shown_digest(answered.shown)
    assert len(applications_of(server, state["arguments"]["offerId"])) == 1


def test_declined_on_the_page_nothing_is_created_and_the_agent_is_told(
    server: ExampleServer,
) -> None:
    state: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        arguments = {"offerId": answer_of(offer)["offer"]["offerId"],
                     "body": application(offer), "idempotencyKey": "page-no"}  # fmt: skip
        refused = await client.call_tool("createApplication", arguments)
        page = re.search(r"(http://\S+/omds-ld/confirmations/[\w-]+)", refused.content[0].text)
        assert page is not None
        declined = await PagePerson().answer(page.group(1), "decline")
        assert declined.status == 200 and "Declined" in declined.page
        told = await client.call_tool("createApplication", arguments)
        assert told.is_error and problem_type(told) == "confirmation-declined"
        state["offer"] = arguments["offerId"]

    run(server.mcp("pfefferminzia"), body, "legacy", None)
    assert applications_of(server, state["offer"]) == []


def test_one_key_is_one_application_and_another_key_is_already_applied(
    server: ExampleServer,
) -> None:
    person = Person()
    state: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        apply = step(offer, "createApplication")
        sent = application(offer)  # one body: a retry sends what the first call sent
        first = await follow(client, apply, sent, idempotencyKey="dup-1")
        again = await follow(client, apply, sent, idempotencyKey="dup-1")
        assert "Replayed" in again.content[0].text
        assert (
            answer_of(again)["application"]["applicationId"]
            == answer_of(first)["application"]["applicationId"]
        )
        other = await client.call_tool(
            "createApplication", {**apply["arguments"], "body": application(offer),
                                  "idempotencyKey": "dup-2"},
        )  # fmt: skip
        assert other.is_error and problem_type(other) == "already-applied"
        step(other, "readApplication")  # the existing one, to read
        state["offer"] = apply["arguments"]["offerId"]

    run(server.mcp("pfefferminzia"), body, "2026-07-28", person)
    assert len(applications_of(server, state["offer"])) == 1
    assert len(person.shown) == 2  # dup-1 once (its retry reuses the yes), dup-2 asked anew


def test_consent_to_other_conditions_is_refused_before_anyone_is_asked(
    server: ExampleServer,
) -> None:
    person = Person()
    state: dict[str, Any] = {}

    async def body(client: Client) -> None:
        first = await make_offer(client)
        second = await make_offer(client, include=["vollkasko"])  # other cover, other premium
        consent = application(first)["bc:consent"]  # consented to the first offer
        result = await client.call_tool(
            "createApplication",
            {"offerId": answer_of(second)["offer"]["offerId"],
             "body": application(second, **{"bc:consent": consent})},
        )  # fmt: skip
        assert result.is_error and problem_type(result) == "consent-mismatch"
        state["offer"] = answer_of(second)["offer"]["offerId"]

    run(server.mcp("pfefferminzia"), body, "2026-07-28", person)
    assert person.shown == []  # nobody was asked to confirm what cannot be applied for
    assert applications_of(server, state["offer"]) == []


def test_personal_data_are_refused_by_field_without_repeating_a_value(
    server: ExampleServer,
) -> None:
    person = Person()

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        wrong = application(
            offer,
            **{"bc:policyholder": {**application(offer)["bc:policyholder"],
                                   "p:birthDate": "2015-06-01", "p:postalCode": "A-1010x"},
               "bc:payment": {"bc:paymentFrequency": "annual",
                              "bc:paymentMethod": "sepa-direct-debit",
                              "bc:iban": "AT611904300234573299", "bc:accountHolder": "A B"}},
        )  # fmt: skip
        result = await client.call_tool(
            "createApplication",
            {"offerId": answer_of(offer)["offer"]["offerId"], "body": wrong},
        )
        assert result.is_error and problem_type(result) == "personal-data-invalid"
        text = result.content[0].text
        for field in ("p:birthDate", "p:postalCode", "bc:iban"):
            assert field in text, field
        for value in ("2015-06-01", "A-1010x", "AT611904300234573299"):
            assert value not in text, value
        assert "vier Ziffern" in text  # what is admissible, in the insurer's language

    run(server.mcp("pfefferminzia"), body, "2026-07-28", person)


def test_the_insurers_decisions_referred_withdrawn_counter_offer_declined(
    server: ExampleServer,
) -> None:
    person = Person()

    async def pfefferminzia(client: Client) -> None:
        offer = await make_offer(client, EXPENSIVE)
        referred = await follow(client, step(offer, "createApplication"), application(offer))
        data = answer_of(referred)["application"]
        assert data["state"] == "referred" and data["decisionBy"] and "60.000" in data["reason"]
        withdrawn = await follow(client, step(referred, "withdrawApplication"))
        assert answer_of(withdrawn)["application"]["state"] == "withdrawn"
        again = await client.call_tool("withdrawApplication", step(withdrawn, "readApplication")
                                       ["arguments"])  # fmt: skip
        assert not again.is_error  # withdrawing again changes nothing
        old = await make_offer(client, SKODA_OLD, include=["vollkasko"])
        partial = await follow(client, step(old, "createApplication"), application(old))
        counter = answer_of(partial)["application"]
        assert counter["state"] == "counter-offer" and "Vollkasko" in counter["reason"]
        counter_offer = await follow(client, step(partial, "readOffer"))
        assert answer_of(counter_offer)["premium"]["gross"] < (answer_of(old)["premium"]["gross"])
        # the counter-offer needs the customer's consent of its own
        applied = await follow(
            client, step(partial, "createApplication"), application(counter_offer)
        )
        assert answer_of(applied)["application"]["state"] == "accepted"

    run(server.mcp("pfefferminzia"), pfefferminzia, "2026-07-28", person)

    async def angloamerican(client: Client) -> None:
        offer = await make_offer(client, OLD_TIMBER_HOUSE, product="home-2024")
        declined = await follow(client, step(offer, "createApplication"), application(offer))
        data = answer_of(declined)["application"]
        assert data["state"] == "declined" and "timber" in data["reason"]
        step(declined, "createCalculation")  # what is still admissible: calculate anew

    run(server.mcp("angloamerican"), angloamerican, "2026-07-28", Person())


def test_another_brokers_offer_is_not_found(server: ExampleServer, tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    async def alpha(client: Client) -> None:
        offer = await make_offer(client)
        state.update(offer=answer_of(offer)["offer"]["offerId"], body=application(offer))

    run(server.mcp("pfefferminzia"), alpha, "2026-07-28", Person())
    beta = stdio_parameters(
        server, "pfefferminzia", tmp_path / "requests.jsonl", ["--token", "pf-demo-beta-92d0aa"]
    )
    person = Person()

    async def other(client: Client) -> None:
        result = await client.call_tool(
            "createApplication", {"offerId": state["offer"], "body": state["body"]}
        )
        assert result.is_error and problem_type(result) == "not-found"

    run(beta, other, "legacy", person)
    assert person.shown == []  # an offer that is not theirs is never put to the person


def test_the_insurer_that_keeps_no_draft_says_how_to_apply_there(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "createApplication" not in names and "createOffer" not in names
        knowledge = await client.call_tool("readProcessKnowledge", {})
        assert "Maklerportal" in knowledge.content[0].text

    run(server.mcp("disrupto"), body, "2026-07-28", None)


def test_binding_tools_are_destructive_and_every_tool_has_a_title(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["createApplication"].annotations.destructive_hint is True
        assert all(t.annotations and t.annotations.title for t in tools.values())
        assert tools["listApplications"].annotations.read_only_hint is True

    run(server.mcp("pfefferminzia"), body, "2026-07-28", None)


def test_an_expired_offer_leads_to_a_new_calculation_from_the_same_case_data(
    tmp_path: Path,
) -> None:
    """The insurers' clock moved past the offer's validity (a restart on the same store)."""
    from tests.servers import running

    example = ExampleServer(tmp_path / "omds-ld.sqlite3")
    state: dict[str, Any] = {}
    with running(example):

        async def offered(client: Client) -> None:
            offer = await make_offer(client)
            state.update(offer=answer_of(offer)["offer"], body=application(offer))

        run(example.mcp("pfefferminzia"), offered, "2026-07-28", Person())
    example.extra_args = ["--clock-offset-days", "31"]
    person = Person()
    with running(example):

        async def later(client: Client) -> None:
            read = await client.call_tool("readOffer", {"offerId": state["offer"]["offerId"]})
            assert answer_of(read)["offer"]["expired"] is True
            assert "createApplication" not in {s["tool"] for s in answer_of(read)["nextSteps"]}
            result = await client.call_tool(
                "createApplication", {"offerId": state["offer"]["offerId"], "body": state["body"]}
            )
            assert result.is_error and problem_type(result) == "offer-expired"
            again = await follow(client, step(result, "createCalculation"))  # same case data
            [vehicle] = answer_of(again)["riskObjects"]
            assert vehicle["fields"]["p:make"] == "Skoda"
            priced = await follow(client, step(again, "calculatePremium"))
            assert answer_of(priced)["premium"]["gross"] == 1684.88

        run(example.mcp("pfefferminzia"), later, "2026-07-28", person)
    assert person.shown == []
    assert applications_of(example, state["offer"]["offerId"]) == []


def test_a_timeout_after_the_insurer_accepted_is_reconciled_never_applied_twice(
    server: ExampleServer, tmp_path: Path
) -> None:
    """The insurer accepts, its answer is held past the MCP server's timeout: the call fails
    as temporary, listApplications already finds the application, the retry with the same key
    is the insurer's replay, and there is exactly one application."""
    person = Person()
    state: dict[str, Any] = {}
    with slow_first_application(server.url, delay=3.0) as proxy:
        target = stdio_parameters(
            server, "pfefferminzia", tmp_path / "requests.jsonl", ["--timeout-seconds", "1"]
        )
        target.args[target.args.index("--api") + 1] = proxy + "/omds-ld/insurers/pfefferminzia/api"

        async def body(client: Client) -> None:
            offer = await make_offer(client)
            arguments = {"offerId": answer_of(offer)["offer"]["offerId"],
                         "body": application(offer), "idempotencyKey": "lost-1"}  # fmt: skip
            lost = await client.call_tool("createApplication", arguments)
            assert lost.is_error and problem_type(lost) == "insurer-timeout", lost.content[0].text
            listed = await client.call_tool("listApplications", {"offerId": arguments["offerId"]})
            assert [a["state"] for a in answer_of(listed)["applications"]] == ["accepted"]
            retried = await client.call_tool("createApplication", arguments)
            assert not retried.is_error, retried.content[0].text
            assert answer_of(retried)["provenance"].get("replayed")
            state.update(offer=arguments["offerId"], retried=answer_of(retried))

        run(target, body, "legacy", person)
    assert len(applications_of(server, state["offer"])) == 1
    assert len(person.shown) == 1  # the retry carries the same yes: the person is not asked again
    [(application_id, _)] = applications_of(server, state["offer"])
    assert state["retried"]["application"]["applicationId"] == application_id


def test_an_offer_the_tariff_would_price_anew_is_not_applied_for(tmp_path: Path) -> None:
    """Repricing: the insurer's tariff changed after the offer (a new version of its data, the
    same store); the consent covers the old premium, so the application is refused and leads to
    a new calculation from the same case data."""
    import shutil

    from omds_ld.insurer.data import builtin_insurers_folder
    from tests.servers import running

    insurers = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), insurers)
    example = ExampleServer(tmp_path / "omds-ld.sqlite3", extra_args=["--insurers", str(insurers)])
    state: dict[str, Any] = {}
    with running(example):

        async def offered(client: Client) -> None:
            offer = await make_offer(client)
            state.update(offer=answer_of(offer)["offer"], body=application(offer))

        run(example.mcp("pfefferminzia"), offered, "2026-07-28", Person())
    tariff = insurers / "pfefferminzia" / "kraftfahrt-2025.yaml"
    text = tariff.read_text("utf-8")
    assert "base: 380.00" in text
    tariff.write_text(text.replace("base: 380.00", "base: 395.00"), "utf-8")  # liability dearer
    person = Person()
    with running(example):

        async def repriced(client: Client) -> None:
            result = await client.call_tool(
                "createApplication", {"offerId": state["offer"]["offerId"], "body": state["body"]}
            )
            assert result.is_error and problem_type(result) == "conditions-changed"
            again = await follow(client, step(result, "createCalculation"))
            priced = await follow(client, step(again, "calculatePremium"))
            assert answer_of(priced)["premium"]["gross"] > 1684.88

        run(example.mcp("pfefferminzia"), repriced, "2026-07-28", person)
    assert len(person.shown) == 1  # asked (the offer itself is unchanged), then refused
    assert applications_of(example, state["offer"]["offerId"]) == []


def test_over_http_a_2025_client_with_elicitation_is_asked_by_a_form(
    server: ExampleServer,
) -> None:
    """2025-11-25 over HTTP: a client that declared elicitation is answered as a stream (SSE),
    so the form reaches it within the call; a client without elicitation keeps plain JSON."""
    person = Person()
    made: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        result = await follow(client, step(offer, "createApplication"), application(offer))
        made.update(answer_of(result)["application"])

    run(server.mcp("pfefferminzia"), body, "legacy", person)
    assert len(person.shown) == 1 and made["state"] == "accepted"
    via = stored(server, made["applicationId"])["consent"]["bc:confirmation"]["bc:confirmedVia"]
    assert via == "elicitation (form)"


def test_only_the_boolean_yes_binds_in_either_era(server: ExampleServer) -> None:
    """A form sent with "false", "no", [""] or no box at all is a no: nothing is created, and
    the agent is told the person did not confirm."""
    for mode in ("2026-07-28", "legacy"):
        for answer in ("false", "no", [""], MISSING):
            person = Person("accept", answer)
            seen: dict[str, Any] = {}

            async def body(client: Client, seen: dict[str, Any] = seen) -> None:
                offer = await make_offer(client)
                result = await client.call_tool(
                    "createApplication",
                    {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
                )
                seen.update(offer=answer_of(offer)["offer"]["offerId"], result=result)

            run(server.mcp("pfefferminzia"), body, mode, person)
            assert len(person.shown) == 1, (mode, answer)
            assert seen["result"].is_error, (mode, answer)
            assert problem_type(seen["result"]) == "confirmation-declined", (mode, answer)
            assert applications_of(server, seen["offer"]) == [], (mode, answer)


def test_a_yes_confirms_one_call_and_is_asked_again_after_a_withdrawal(
    server: ExampleServer,
) -> None:
    """The same call without an idempotencyKey, after the application it made was withdrawn,
    is a new act: the person is asked again (here they say no, and nothing is made)."""
    yes = Person()
    state: dict[str, Any] = {}

    async def first(client: Client) -> None:
        offer = await make_offer(client, EXPENSIVE)  # referred: it may be withdrawn
        arguments = {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)}
        made = await client.call_tool("createApplication", arguments)
        assert not made.is_error, made.content[0].text
        withdrawn = await follow(client, step(made, "withdrawApplication"))
        assert answer_of(withdrawn)["application"]["state"] == "withdrawn"
        state.update(arguments=arguments)

    run(server.mcp("pfefferminzia"), first, "2026-07-28", yes)
    assert len(yes.shown) == 1
    no = Person("decline")

    async def again(client: Client) -> None:
        result = await client.call_tool("createApplication", state["arguments"])
        assert result.is_error and problem_type(result) == "confirmation-declined"

    run(server.mcp("pfefferminzia"), again, "2026-07-28", no)
    assert len(no.shown) == 1  # asked again: the first yes was spent by the first call
    states = [s for _, s in applications_of(server, state["arguments"]["offerId"])]
    assert states == ["withdrawn"]


def test_every_change_of_what_binds_changes_what_the_person_is_shown(
    server: ExampleServer,
) -> None:
    """The same IBAN's last four digits with another account, another holder, birth date,
    address or e-mail: each is put to the person as what it is."""
    other_iban = "AT723200000012343201"  # another bank's account, ending in 3201 too
    changes = {
        "iban": {"bc:payment": {**PAYMENT, "bc:iban": other_iban}},
        "holder": {"bc:payment": {**PAYMENT, "bc:accountHolder": "Bernd Berger"}},
        "birth": {"bc:policyholder": {**PERSON, "p:birthDate": "1986-04-12"}},
        "address": {"bc:policyholder": {**PERSON, "p:streetAddress": "Hauptstraße 11"}},
        "email": {"bc:policyholder": {**PERSON, "p:email": "a.berger@example.at"}},
    }
    person = Person("decline")

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        offer_id = answer_of(offer)["offer"]["offerId"]
        for change in (None, *changes.values()):
            sent = application(offer, **(change or {}))
            result = await client.call_tool(
                "createApplication", {"offerId": offer_id, "body": sent}
            )
            assert problem_type(result) == "confirmation-declined"

    run(server.mcp("pfefferminzia"), body, "2026-07-28", person)
    _, *changed = person.shown
    assert len(set(person.shown)) == len(person.shown)  # no two the same
    assert other_iban in changed[0] and IBAN not in changed[0]
    assert "Bernd Berger" in changed[1] and "1986-04-12" in changed[2]
    assert "Hauptstraße 11" in changed[3] and "a.berger@example.at" in changed[4]


def test_a_client_with_url_mode_gets_the_page_in_its_ui_never_in_the_models_text(
    server: ExampleServer,
) -> None:
    """A client declaring URL-mode elicitation (with form too, as the SDK does, or alone) gets
    the confirmation page as a URL elicitation in both eras: the person logs in there and
    answers, the call goes on (2025: within the call; 2026: the client's retry), and no text the
    model reads carries the page's address."""
    for mode, modes in (
        ("legacy", ("form", "url")),
        ("legacy", ("url",)),
        ("2026-07-28", ("url",)),
    ):
        person = Person()
        seen: dict[str, Any] = {}

        key = f"{mode}-{'-'.join(modes)}"

        async def body(client: Client, seen: dict[str, Any] = seen, key: str = key) -> None:
            offer = await make_offer(client)
            made = await follow(
                client, step(offer, "createApplication"), application(offer), idempotencyKey=key
            )
            seen.update(answer_of(made)["application"], text=made.content[0].text)

        run(server.mcp("pfefferminzia"), body, mode, person, modes)
        [url] = person.urls
        assert "/omds-ld/confirmations/" in url and url not in seen["text"], mode
        assert "/omds-ld/confirmations/" not in seen["text"]
        assert seen["state"] == "accepted", mode
        [shown] = person.shown
        assert IBAN in shown and "1684.88 EUR" in shown
        confirmation = stored(server, seen["applicationId"])["consent"]["bc:confirmation"]
        assert confirmation["bc:confirmedVia"] == "confirmation page", mode
        assert confirmation["bc:confirmedBy"] == DEMO_BROKER
        assert confirmation["bc:shownDigest"] == shown_digest(shown)


def test_a_url_elicitation_declined_or_unanswered_binds_nothing(server: ExampleServer) -> None:
    """Declined on the page, or the page not opened: nothing is applied for, in both eras; the
    model is told the person's no (or to call again once they answered), never the address."""
    for mode, modes in (("legacy", ("url", "form")), ("2026-07-28", ("url",))):
        for person, expected in (
            (Person("accept", confirm=False), "confirmation-declined"),
            (Person("decline"), "confirmation-declined"),
        ):
            seen: dict[str, Any] = {}

            async def body(client: Client, seen: dict[str, Any] = seen) -> None:
                offer = await make_offer(client)
                result = await client.call_tool(
                    "createApplication",
                    {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
                )
                seen.update(offer=answer_of(offer)["offer"]["offerId"], result=result)

            run(server.mcp("pfefferminzia"), body, mode, person, modes)
            result = seen["result"]
            assert result.is_error and problem_type(result) == expected, (mode, person.action)
            assert "/omds-ld/confirmations/" not in result.content[0].text
            assert applications_of(server, seen["offer"]) == []


def test_the_consent_is_the_persons_not_the_models(server: ExampleServer) -> None:
    """An application without bc:consent is put to the person, not refused: they state who
    consented, how and when (nothing is filled in that nobody said), and the application
    carries what they stated, bound to this offer. A consent stated incompletely binds
    nothing."""
    stated = {"consentedBy": "Anna Berger", "consentMethod": "phone",
              "consentedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}  # fmt: skip
    person = Person(content=stated)
    asked: list[Any] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return await person(context, params)

    made: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        without = application(offer)
        del without["bc:consent"]
        result = await follow(client, step(offer, "createApplication"), without)
        made.update(answer_of(result)["application"], digest=answer_of(offer)["offer"]["digest"])

    run(server.mcp("pfefferminzia"), body, "legacy", callback)  # type: ignore[arg-type]
    [form] = asked
    fields = form.requested_schema["properties"]
    # nobody said who, how or when: nothing is filled in for the person to click through
    assert not any("default" in fields[k] for k in ("consentedBy", "consentMethod", "consentedAt"))
    assert fields["consentMethod"]["enum"] and fields["consentedAt"]["format"] == "date-time"
    consent = stored(server, made["applicationId"])["consent"]
    assert consent["bc:consentMethod"] == "phone"
    assert consent["bc:consentedAt"] == stated["consentedAt"]
    assert consent["bc:offerDigest"] == made["digest"]
    assert consent["bc:confirmation"]["bc:confirmedVia"] == "elicitation (form)"
    wrong = Person(content={**stated, "consentMethod": "telepathy"})
    seen: dict[str, Any] = {}

    async def incomplete(client: Client) -> None:
        offer = await make_offer(client)
        result = await client.call_tool(
            "createApplication",
            {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
        )
        seen.update(offer=answer_of(offer)["offer"]["offerId"], result=result)

    run(server.mcp("pfefferminzia"), incomplete, "2026-07-28", wrong)
    assert problem_type(seen["result"]) == "consent-missing"
    assert applications_of(server, seen["offer"]) == []


def test_over_stdio_a_client_that_cannot_ask_is_told_to_use_one_that_can(
    server: ExampleServer, tmp_path: Path
) -> None:
    """No page over stdio (nobody could tell who answered it): a client without elicitation is
    refused, told what would work, and nothing is applied for."""
    target = stdio_parameters(server, "pfefferminzia", tmp_path / "requests.jsonl")
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        offer = await make_offer(client)
        result = await client.call_tool(
            "createApplication",
            {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
        )
        seen.update(offer=answer_of(offer)["offer"]["offerId"], result=result)

    run(target, body, "legacy", None)
    result = seen["result"]
    assert result.is_error and problem_type(result) == "confirmation-required"
    text = result.content[0].text
    assert "Use a client with elicitation" in text and "/omds-ld/confirmations/" not in text
    assert applications_of(server, seen["offer"]) == []


def test_a_client_with_a_very_long_name_applies_all_the_same(server: ExampleServer) -> None:
    """The server bounds what it writes of the client's name (``bc:confirmedBy``, at most 200
    characters, as the norm has it): a clientInfo name of 5 000 characters breaks no
    application."""
    person = Person()
    made: dict[str, Any] = {}

    async def go() -> None:
        async with Client(
            server.mcp("pfefferminzia"), mode="legacy", elicitation_callback=person,
            elicitation_modes=("form",), client_info=types.Implementation(name="x" * 5000, version="1"),
        ) as client:  # fmt: skip
            offer = await make_offer(client)
            result = await follow(client, step(offer, "createApplication"), application(offer))
            assert not result.is_error, answer_of(result)
            made.update(answer_of(result)["application"])

    asyncio.run(go())
    assert made["state"] == "accepted"
    confirmation = stored(server, made["applicationId"])["consent"]["bc:confirmation"]
    # the client's name is how the person is called (bc:confirmedByName): bounded, not dropped
    named = confirmation["bc:confirmedByName"]
    assert named.startswith("the person using xxx") and len(named) == 200 and named.endswith("x")
    assert confirmation["bc:confirmedBy"] == "anonymous"
