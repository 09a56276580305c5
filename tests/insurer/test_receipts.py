"""The example insurers take an application only with the receipt of the person's yes, signed by
a key they trust and bound to exactly this offer, broker, consent and confirmation: checked at
the interface itself, without any MCP server."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import httpx

from omds_ld.norm.receipt import VALID_SECONDS, new_key, sign
from tests.insurer.test_flows import SKODA
from tests.mcp.applications import PAYMENT, PERSON, with_receipt
from tests.servers import ExampleServer

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


def _offer(client: httpx.Client, api: str, vehicle: dict[str, Any] = SKODA) -> dict[str, Any]:
    case_id = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()[
        "bc:caseId"
    ]
    client.post(f"{api}/calculations/{case_id}/risk-objects", json=vehicle)
    client.post(f"{api}/calculations/{case_id}/premium")
    offer: dict[str, Any] = client.post(f"{api}/calculations/{case_id}/offers").json()
    return offer


def _body(offer: dict[str, Any]) -> dict[str, Any]:
    return {
        "bc:policyholder": PERSON, "bc:payment": PAYMENT,
        "bc:startDate": offer["bc:insurerToday"],
        "bc:consent": {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person",
                       "bc:consentedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "bc:offerDigest": offer["bc:offerDigest"]},
    }  # fmt: skip


def _resigned(body: dict[str, Any], **how: Any) -> dict[str, Any]:
    """The body with its receipt signed anew: by another key, or at another time."""
    consent = dict(body["bc:consent"])
    confirmation = dict(consent["bc:confirmation"])
    confirmation["bc:receipt"] = sign(
        how.get("key") or new_key(), issuer="elsewhere", broker="anonymous",
        confirmation=confirmation, consent=consent, application=body, now=how.get("now"),
    )  # fmt: skip
    return {**body, "bc:consent": {**consent, "bc:confirmation": confirmation}}


def test_an_application_binds_only_with_a_receipt_the_insurer_can_verify(
    client: httpx.Client, server: ExampleServer
) -> None:
    api = server.api("pfefferminzia")
    offer = _offer(client, api)
    good = with_receipt(server, _body(offer))
    other = _offer(client, api)
    missing = {**good, "bc:consent": {
        **good["bc:consent"],
        "bc:confirmation": {k: v for k, v in good["bc:consent"]["bc:confirmation"].items()
                            if k != "bc:receipt"}}}  # fmt: skip
    from omds_ld.auth.store import AuthStore

    store = AuthStore(server.database.with_name(server.database.stem + "-auth.sqlite3"))
    own_key = store.signing_key()
    store.close()
    refused = {
        "missing": missing,
        "forged (another key)": _resigned(good),
        "stale (two days old)": _resigned(good, key=own_key, now=time.time() - 2 * VALID_SECONDS),
        "for another broker": with_receipt(server, _body(offer), broker="alpha"),
        "for another consent": {**good, "bc:consent": {**good["bc:consent"],
                                                       "bc:consentMethod": "phone"}},
        "for another offer": with_receipt(server, _body(other)),
    }  # fmt: skip
    url = f"{api}/offers/{offer['bc:offerId']}/applications"
    for why, body in refused.items():
        answer = client.post(url, json=body)
        assert answer.status_code == 422, (why, answer.text)
        problem = answer.json()
        expected = "consent-mismatch" if why == "for another offer" else "receipt-invalid"
        assert problem["type"].endswith("/" + expected), (why, problem)
    assert client.get(url).json()["bc:application"] == []  # nothing was applied for
    made = client.post(url, json=good)
    assert made.status_code == 201, made.text
    assert made.json()["bc:state"] == "accepted"


def _signed_for(
    server: ExampleServer,
    body: dict[str, Any],
    *,
    consent: Any = None,
    confirmation: Any = None,
    application: Any = None,
) -> dict[str, Any]:
    """``body`` with a receipt of the insurer's trusted key that is right in every claim but
    the ones given: signed for that consent, confirmation or application data instead."""
    from omds_ld.auth.store import AuthStore

    store = AuthStore(server.database.with_name(server.database.stem + "-auth.sqlite3"))
    try:
        key = store.signing_key()
    finally:
        store.close()
    good = with_receipt(server, body)
    shown = dict(good["bc:consent"]["bc:confirmation"])
    shown.pop("bc:receipt")
    receipt = sign(
        key, issuer="tests", broker="anonymous", confirmation=confirmation or shown,
        consent=consent or good["bc:consent"], application=application or body,
    )  # fmt: skip
    return {**good, "bc:consent": {**good["bc:consent"],
                                   "bc:confirmation": {**shown, "bc:receipt": receipt}}}  # fmt: skip


def test_a_receipt_wrong_in_one_claim_alone_is_refused(
    client: httpx.Client, server: ExampleServer
) -> None:
    """Each claim is checked against the request, not taken from the receipt: a receipt right
    in all else but the offer, the text shown, the confirming person, or the application's data
    (another IBAN, holder, e-mail, birth date, start) is refused, and nothing is applied for."""
    api = server.api("pfefferminzia")
    offer = _offer(client, api)
    body = _body(offer)
    consent = body["bc:consent"]
    shown = {"bc:confirmedBy": "anonymous", "bc:confirmedAt": consent["bc:consentedAt"],
             "bc:confirmedVia": "test", "bc:shownDigest": "sha256:" + "0" * 64}  # fmt: skip
    later = (dt.date.fromisoformat(body["bc:startDate"]) + dt.timedelta(days=1)).isoformat()
    other_person = {**PERSON, "p:email": "someone.else@example.at"}
    wrong = {
        "offer": ({"consent": {**consent, "bc:offerDigest": "sha256:" + "1" * 64}}, "offer"),
        "text shown": ({"confirmation": {**shown, "bc:shownDigest": "sha256:" + "2" * 64}},
                       "text shown"),
        "confirming person": ({"confirmation": {**shown, "bc:confirmedBy": "alpha"}},
                              "confirming person"),
        "IBAN": ({"application": {**body, "bc:payment": {**PAYMENT, "bc:iban": "DE89370400440532013000"}}},
                 "application"),
        "holder": ({"application": {**body, "bc:payment": {**PAYMENT, "bc:accountHolder": "Max Muster"}}},
                   "application"),
        "e-mail": ({"application": {**body, "bc:policyholder": other_person}}, "application"),
        "birth date": ({"application": {**body, "bc:policyholder": {**PERSON, "p:birthDate": "1970-01-01"}}},
                       "application"),
        "start": ({"application": {**body, "bc:startDate": later}}, "application"),
    }  # fmt: skip
    url = f"{api}/offers/{offer['bc:offerId']}/applications"
    for why, (signed, named) in wrong.items():
        answer = client.post(url, json=_signed_for(server, body, **signed))
        assert answer.status_code == 422, (why, answer.text)
        problem = answer.json()
        assert problem["type"].endswith("/receipt-invalid"), (why, problem)
        assert f"for another {named}" in problem["detail"], (why, problem["detail"])
    assert client.get(url).json()["bc:application"] == []
    # and right in every claim, it is taken
    assert client.post(url, json=_signed_for(server, body)).status_code == 201


def test_a_receipt_makes_one_application_and_a_retry_with_its_key_replays(
    client: httpx.Client, server: ExampleServer
) -> None:
    """After the confirmed application was withdrawn, its receipt makes none again: not with
    the same body, not with another IBAN, holder and e-mail. The same call retried with its
    idempotency key is the first answer again, not a second use."""
    from tests.mcp.test_applications import EXPENSIVE  # referred: open, so it can be withdrawn

    api = server.api("pfefferminzia")
    offer = _offer(client, api, EXPENSIVE)
    body = with_receipt(server, _body(offer))
    url = f"{api}/offers/{offer['bc:offerId']}/applications"
    key = {"Idempotency-Key": f"receipt-{time.time()}"}
    made = client.post(url, json=body, headers=key)
    assert made.status_code == 201, made.text
    again = client.post(url, json=body, headers=key)  # the answer was lost: replayed
    assert (
        again.status_code == 201
        and again.json()["bc:applicationId"] == made.json()["bc:applicationId"]
    )
    application_id = made.json()["bc:applicationId"]
    assert made.json()["bc:state"] == "referred"
    withdrawn = client.delete(f"{api}/applications/{application_id}")
    assert withdrawn.status_code == 200, withdrawn.text
    other = {**body, "bc:payment": {**PAYMENT, "bc:iban": "DE89370400440532013000",
                                    "bc:accountHolder": "Max Muster"},
             "bc:policyholder": {**PERSON, "p:email": "max@example.at"}}  # fmt: skip
    for reused in (body, other):
        answer = client.post(url, json=reused)
        assert answer.status_code == 422, answer.text
        assert answer.json()["type"].endswith("/receipt-invalid"), answer.text
    states = [a["bc:state"] for a in client.get(url).json()["bc:application"]]
    assert states == ["withdrawn"], states
