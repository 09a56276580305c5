"""Tools from the norm: one per operation, inputs in canonical form, annotations from the kind."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from omds_ld.mcp.catalogue import by_name, tools
from omds_ld.norm import load_norm
from tests.mcp.applications import PAYMENT, PERSON

NORM = load_norm()


def test_one_tool_per_operation_named_and_described_by_the_norm() -> None:
    specs = by_name(tools(NORM, draft_at_server=None))  # the process is not known yet: all
    assert set(specs) == set(NORM.operations)
    for name, spec in specs.items():
        operation = NORM.operation(name)
        # the norm's words at an MCP server, where they differ (a consent the person states)
        assert spec.description == (operation.mcp_description or operation.description)
        Draft202012Validator.check_schema(spec.input_schema)
        Draft202012Validator.check_schema(spec.shown_schema)


def test_the_tools_of_the_insurers_process_only() -> None:
    without = set(by_name(tools(NORM, draft_at_server=False)))
    assert "createCalculation" not in without and "inquireTariff" in without
    assert without == {o.operation_id for o in NORM.operations.values() if not o.draft}
    draft = set(by_name(tools(NORM, draft_at_server=True)))
    assert {"inquireTariff", "readDefaultInstance"}.isdisjoint(draft)
    assert {"createCalculation", "listProducts", "readShape", "createApplication"} <= draft
    assert draft == {o.operation_id for o in NORM.operations.values() if not o.inquiry}


# arguments a model sends, taken from the example flows: both schemas admit each of them
ADMITTED = {
    "listProducts": {"offset": 10, "limit": 5},
    "readProduct": {"productId": "kraftfahrt-2025", "full": True},
    "createCalculation": {
        "body": {"p:hasRootProduct": "https://pfefferminzia.example/products/kraftfahrt-2025"},
        "idempotencyKey": "k-1",
    },
    "createRiskObject": {"caseId": "abc", "body": {"@type": "p:Vehicle", "p:make": "Skoda"}},
    "setAttributes": {
        "caseId": "abc",
        "body": {"bc:values": [{"bc:attribute": "https://x.example/a", "p:value": 3}]},
    },
    "createOffer": {"caseId": "abc"},
    "inquireTariff": {"body": {"p:instance": {"p:instanceOf": "https://x.example/p"}}},
}


def test_a_model_is_shown_a_lean_schema_that_admits_all_the_full_one_admits() -> None:
    specs = by_name(tools(NORM, draft_at_server=None))
    for name, spec in specs.items():
        shown, full = spec.shown_schema, spec.input_schema
        assert set(shown["properties"]) == set(full["properties"]), name
        assert shown["required"] == full["required"], name
        text = json.dumps(shown)
        for keyword in ("$ref", "$defs", "pattern", "anyOf", "const", "maxLength"):
            assert keyword not in text, f"{name} shows {keyword}"
        for key, value in shown["properties"].items():
            assert value.get("type") == full["properties"][key].get("type", "object"), key
    for name, arguments in ADMITTED.items():
        spec = specs[name]
        assert Draft202012Validator(spec.input_schema).is_valid(arguments), name
        assert Draft202012Validator(spec.shown_schema).is_valid(arguments), name
    # what only the full schema refuses is refused by the server before the insurer is asked
    bad = {"caseId": "a b", "body": {"@type": "p:Vehicle"}}
    assert Draft202012Validator(specs["createRiskObject"].shown_schema).is_valid(bad)
    assert not Draft202012Validator(specs["createRiskObject"].input_schema).is_valid(bad)
    body = specs["createApplication"].shown_schema["properties"]["body"]
    assert "bc:consent only as you were told it" in body["description"]


def test_the_binding_tool_says_the_person_states_the_consent_and_admits_what_the_model_was_told() -> (
    None
):
    """At the MCP server, createApplication tells the model that the person using the client
    states the customer's consent, and its schema admits a body with no consent, or with any
    part of one (what the model was told); the insurer's own schema still requires it whole."""
    spec = by_name(tools(NORM, True))["createApplication"]
    assert "states who consented, how" in spec.description
    assert "never a time you were not" in spec.description
    base = {"bc:policyholder": PERSON, "bc:payment": PAYMENT, "bc:startDate": "2027-01-01"}
    full = Draft202012Validator(spec.input_schema)
    for consent in (None, {}, {"bc:consentMethod": "phone"}, {"bc:consentedBy": "Anna Berger"},
                    {"bc:consentedAt": "2026-12-06T17:30:00+01:00", "bc:consentMethod": "video"}):  # fmt: skip
        body = dict(base) if consent is None else {**base, "bc:consent": consent}
        assert full.is_valid({"offerId": "o", "body": body}), consent
    # still refused: what is no part of a consent, a way of consenting the norm does not know
    assert not full.is_valid({"offerId": "o", "body": {**base, "bc:consent": {"bc:mood": "yes"}}})
    assert not full.is_valid(
        {"offerId": "o", "body": {**base, "bc:consent": {"bc:consentMethod": "telepathy"}}}
    )
    # the interface's request schema is the norm's: the whole consent, every field
    interface = NORM.operation("createApplication").request_schema
    assert interface is not None
    assert interface["$defs"]["Consent"]["required"] == [
        "bc:consentedBy", "bc:consentedAt", "bc:consentMethod", "bc:offerDigest"
    ]  # fmt: skip


def test_inputs_are_parameters_body_key_full_and_seen() -> None:
    spec = by_name(tools(NORM, True))["createRiskObject"]
    schema = spec.input_schema
    assert set(schema["properties"]) == {"caseId", "body", "idempotencyKey", "full", "seen"}
    assert schema["required"] == ["caseId", "body"]
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"caseId": "abc", "body": {"@type": "p:Vehicle", "p:make": "Skoda"}})
    assert not validator.is_valid({"caseId": "abc", "body": {"p:make": "Skoda"}})
    assert not validator.is_valid({"caseId": "abc", "body": {"@type": "p:Vehicle"}, "extra": 1})
    sent = {"caseId": "abc", "body": {"@type": "p:Vehicle"}}
    assert validator.is_valid({**sent, "seen": "IaaHw1K6-_"})
    assert not validator.is_valid({**sent, "seen": "not a token"})


def test_recursive_bodies_resolve_in_the_input_schema() -> None:
    schema = by_name(tools(NORM, False))["inquireTariff"].input_schema
    nested = {"p:instanceOf": "https://x/c", "p:hasPart": [{"p:instanceOf": "https://x/d"}]}
    body = {"p:instance": {"p:instanceOf": "https://x/p", "p:hasPart": [nested]}}
    assert Draft202012Validator(schema).is_valid({"body": body})
    broken = {"p:instance": {"p:instanceOf": "https://x/p", "p:hasPart": [{"p:included": True}]}}
    assert not Draft202012Validator(schema).is_valid({"body": broken})


def test_annotations_follow_the_kind() -> None:
    specs = by_name(tools(NORM, None))
    assert specs["listProducts"].annotations.read_only
    assert specs["inquireTariff"].annotations.read_only
    assert not specs["createCalculation"].annotations.read_only
    assert not specs["createCalculation"].annotations.idempotent
    assert specs["deleteRiskObject"].annotations.destructive
    assert specs["calculatePremium"].annotations.idempotent
    assert not specs["calculatePremium"].annotations.destructive
