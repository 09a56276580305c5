"""The norm's files: operations an agent can use, schemas that validate, a context loaded locally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pyld import jsonld

from omds_ld.norm import Norm, load_norm
from omds_ld.norm.jsonld import CONTEXT_URL, RemoteContextRefused, document_loader, expand

NORM = load_norm()
REQUIRED = {
    "readProcessKnowledge", "listProducts", "readProduct", "readShape", "readDefaultInstance",
    "inquireTariff", "createCalculation", "readCalculation", "createRiskObject",
    "updateRiskObject", "deleteRiskObject", "includeComponent", "excludeComponent",
    "setAttributes", "validateCalculation", "calculatePremium", "createOffer",
}  # fmt: skip


def test_every_required_operation_is_in_the_norm() -> None:
    assert set(NORM.operations) >= REQUIRED


@pytest.mark.parametrize("operation_id", sorted(NORM.operations))
def test_operation_is_described_for_an_agent(operation_id: str) -> None:
    operation = NORM.operation(operation_id)
    assert len(operation.description) > 40
    assert operation.kind in {"read", "create", "edit", "inquiry"}
    if operation.kind in {"create", "edit"}:
        assert operation.takes_idempotency_key
    raw = NORM.openapi["paths"][operation.path][operation.method.lower()]
    for status, response in raw["responses"].items():
        if int(status) >= 400:
            ref = response["$ref"].rsplit("/", 1)[-1]
            assert (
                "application/problem+json"
                in NORM.openapi["components"]["responses"][ref]["content"]
            )


def test_draft_operations_are_marked() -> None:
    draft = {o.operation_id for o in NORM.operations.values() if o.draft}
    assert {"createCalculation", "createRiskObject", "calculatePremium", "createOffer"} <= draft
    assert not {"listProducts", "readDefaultInstance", "inquireTariff"} & draft


def test_an_edit_of_a_case_says_what_it_acts_on_and_what_it_keeps() -> None:
    """x-omds-ld about and keeps: the norm's promise of what a call leaves as it was, which an
    MCP server's answer relies on ("unchanged by this call"); a part the norm does not know is
    refused at load."""
    ops = NORM.operations
    for name in ("createRiskObject", "updateRiskObject", "deleteRiskObject"):
        assert (ops[name].about, ops[name].keeps) == ("riskObjects", {"components"})
    for name in ("includeComponent", "excludeComponent", "setAttributes"):
        assert (ops[name].about, ops[name].keeps) == ("components", {"riskObjects"})
    assert ops["calculatePremium"].keeps == {"components", "riskObjects"}
    assert not ops["readCalculation"].keeps and not ops["createCalculation"].keeps
    document = json.loads(json.dumps(NORM.openapi))
    document["paths"]["/calculations/{caseId}/risk-objects"]["post"]["x-omds-ld"]["keeps"] = [
        "tree"
    ]
    with pytest.raises(ValueError, match="createRiskObject: about and keeps name parts"):
        Norm(document)


def test_the_part_the_person_states_names_the_shape_that_targets_its_type() -> None:
    """x-omds-ld-mcp personStatesShape (what an MCP server names as the person's, without
    loading the shapes) is the norm's shape of the part's @type, as shapes.ttl has it."""
    from omds_ld.norm.jsonld import expand_curie

    stated = [op for op in NORM.operations.values() if op.person_states]
    assert [op.operation_id for op in stated] == ["createApplication"]
    for operation in stated:
        schema = operation.request_schema
        assert schema is not None
        defs = schema["$defs"]
        root = defs[str(schema["$ref"]).rsplit("/", 1)[-1]]
        part = defs[str(root["properties"][operation.person_states]["$ref"]).rsplit("/", 1)[-1]]
        target = expand_curie(part["properties"]["@type"]["const"])
        targeting = [s.iri for s in NORM.shapes.values() if s.target_class == target]
        assert targeting == [operation.person_states_shape], (targeting, operation)


def test_every_request_schema_of_the_norm_compiles_and_a_broken_one_given_is_refused_at_load(
    tmp_path: Path,
) -> None:
    """The package's norm compiles its schemas at their first use (a start needs none of them):
    each one here, now. A norm file given at start (--openapi) is judged at once: a request
    schema that is no Draft 2020-12 schema is refused at load, naming the operation."""
    for operation in NORM.operations.values():
        if operation._validator is not None:
            operation._validator.check()
    document = json.loads(json.dumps(NORM.openapi))
    schema = document["components"]["schemas"]["CalculationRequest"]
    schema["type"] = "no-such-type"
    broken = tmp_path / "openapi.json"
    broken.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="createCalculation: not a Draft 2020-12 schema"):
        load_norm(broken)


def test_request_schemas_are_self_contained_even_with_cycles() -> None:
    schema = NORM.operation("inquireTariff").request_schema
    assert schema is not None
    text = json.dumps(schema)
    assert "#/components/" not in text
    assert "Instance" in schema["$defs"]
    Draft202012Validator.check_schema(schema)
    nested: dict[str, Any] = {"p:instanceOf": "https://x.example/p"}
    nested = {"p:instanceOf": "https://x.example/p", "p:hasPart": [nested, {"p:hasPart": []}]}
    violations = NORM.operation("inquireTariff").body_violations({"p:instance": nested})
    assert [v.pointer for v in violations] == ["/p:instance/p:hasPart/1"]


def test_every_problem_type_has_a_status_and_titles() -> None:
    for kind in NORM.problem_types.values():
        assert kind.uri.startswith("https://w3id.org/omds-ld/problems/")
        assert 400 <= kind.status < 600
        assert kind.title_de and kind.title_en


def test_context_is_loaded_locally_and_nothing_else_is_fetched() -> None:
    expanded = expand(
        {"@context": CONTEXT_URL, "@id": "https://x.example/c", "bc:target": "https://x.example/t"}
    )
    assert expanded[0]["https://w3id.org/omds-ld/bc#target"] == [{"@id": "https://x.example/t"}]
    with pytest.raises(RemoteContextRefused):
        document_loader("https://example.org/other-context.jsonld")
    with pytest.raises(jsonld.JsonLdError):
        expand({"@context": "https://example.org/other.jsonld", "x": 1})


def test_norm_terms_resolve_to_labels_in_german_and_english() -> None:
    iri, labels = NORM.term("pk:draftAtServer")
    assert iri == "https://w3id.org/omds-ld/pk#draftAtServer"
    assert labels == {"de": "Entwurf am Server", "en": "draft at the server"}
    for labels in NORM.vocabulary.values():
        assert set(labels) == {"de", "en"}
