"""The example insurers take an application only with the receipt of the person's yes, signed by
a key they trust and bound to exactly this offer, broker, consent and confirmation: checked at
the interface itself, without any MCP server."""

from __future__ import annotations

import time
from typing import Any

import httpx

from omds_ld.norm.receipt import VALID_SECONDS, new_key, sign
from tests.insurer.test_flows import SKODA
from tests.mcp.applications import PAYMENT, PERSON, with_receipt
from tests.servers import ExampleServer

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


def _offer(client: httpx.Client, api: str) -> dict[str, Any]:
    case_id = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()[
        "bc:caseId"
    ]
    client.post(f"{api}/calculations/{case_id}/risk-objects", json=SKODA)
    client.post(f"{api}/calculations/{case_id}/premium")
    offer: dict[str, Any] = client.post(f"{api}/calculations/{case_id}/offers").json()
    return offer


def _body(offer: dict[str, Any]) -> dict[str, Any]:
    return {
        "bc:policyholder": PERSON, "bc:payment": PAYMENT,
        "bc:startDate": time.strftime("%Y-%m-%d", time.gmtime()),
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
        confirmation=confirmation, consent=consent, now=how.get("now"),
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
