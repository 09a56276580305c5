"""Tools from the norm: one per operation, inputs in canonical form, annotations from the kind."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from omds_ld.mcp.catalogue import by_name, tools
from omds_ld.norm import load_norm

NORM = load_norm()


def test_one_tool_per_operation_named_and_described_by_the_norm() -> None:
    specs = by_name(tools(NORM, draft_at_server=True))
    assert set(specs) == set(NORM.operations)
    for name, spec in specs.items():
        assert spec.description == NORM.operation(name).description
        Draft202012Validator.check_schema(spec.input_schema)


def test_draft_tools_only_where_the_insurer_keeps_the_draft() -> None:
    without = set(by_name(tools(NORM, draft_at_server=False)))
    assert "createCalculation" not in without and "inquireTariff" in without
    assert without == {o.operation_id for o in NORM.operations.values() if not o.draft}


def test_inputs_are_parameters_body_key_and_full() -> None:
    spec = by_name(tools(NORM, True))["createRiskObject"]
    schema = spec.input_schema
    assert set(schema["properties"]) == {"caseId", "body", "idempotencyKey", "full"}
    assert schema["required"] == ["caseId", "body"]
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"caseId": "abc", "body": {"@type": "p:Vehicle", "p:make": "Skoda"}})
    assert not validator.is_valid({"caseId": "abc", "body": {"p:make": "Skoda"}})
    assert not validator.is_valid({"caseId": "abc", "body": {"@type": "p:Vehicle"}, "extra": 1})


def test_recursive_bodies_resolve_in_the_input_schema() -> None:
    schema = by_name(tools(NORM, False))["inquireTariff"].input_schema
    nested = {"p:instanceOf": "https://x/c", "p:hasPart": [{"p:instanceOf": "https://x/d"}]}
    body = {"p:instance": {"p:instanceOf": "https://x/p", "p:hasPart": [nested]}}
    assert Draft202012Validator(schema).is_valid({"body": body})
    broken = {"p:instance": {"p:instanceOf": "https://x/p", "p:hasPart": [{"p:included": True}]}}
    assert not Draft202012Validator(schema).is_valid({"body": broken})


def test_annotations_follow_the_kind() -> None:
    specs = by_name(tools(NORM, True))
    assert specs["listProducts"].annotations.read_only
    assert specs["inquireTariff"].annotations.read_only
    assert not specs["createCalculation"].annotations.read_only
    assert not specs["createCalculation"].annotations.idempotent
    assert specs["deleteRiskObject"].annotations.destructive
    assert specs["calculatePremium"].annotations.idempotent
    assert not specs["calculatePremium"].annotations.destructive
