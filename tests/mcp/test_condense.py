"""Condensation as a pure function, on real answers of the example insurers made in process."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from omds_ld.insurer.data import ANONYMOUS, load_insurers
from omds_ld.insurer.problems import Problem
from omds_ld.insurer.service import InsurerService
from omds_ld.insurer.store import Store
from omds_ld.mcp.condense import (
    MAX_VIOLATIONS,
    OUTPUT_SCHEMA,
    STRUCTURED_SCHEMA,
    Effects,
    Shared,
    condense,
    condense_problem,
)
from omds_ld.norm import load_norm
from omds_ld.norm.jsonld import CONTEXT_URL
from tests.insurer.test_flows import SKODA

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
PROVENANCE = {
    "insurer": "P",
    "operation": "x",
    "url": "http://i/api",
    "time": "t",
    "fromCache": False,
}
# what every tool declares, and every part a result can have, with its type
OUTPUT = Draft202012Validator({"allOf": [OUTPUT_SCHEMA, STRUCTURED_SCHEMA]})


@pytest.fixture
def service(tmp_path: Path) -> InsurerService:
    insurer = load_insurers()["pfefferminzia"]
    return InsurerService(load_norm(), insurer, Store(tmp_path / "s.sqlite3"), "/api")


def condensed(answer: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    return condense(
        answer, operation="op", insurer="Pfefferminzia", language="de", status=200,
        provenance=PROVENANCE, shapes_seen=seen,
    )  # fmt: skip


def test_a_case_is_condensed_to_tree_report_steps_and_shapes(service: InsurerService) -> None:
    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    result = condensed(case)
    text = result.text
    assert OUTPUT.is_valid(result.structured)
    assert len(text.encode()) * 3 < len(json.dumps(case).encode())
    draft = result.structured["draft"]
    for node in case["bc:draft"]["p:hasPart"]:
        assert node["@id"] in {c["iri"] for c in draft["components"]}
        assert node["@id"].replace(case["@id"], "~") in text
    assert 'Zulassungsbezirk = "W" (one of W (Wien), N (Niederösterreich), B (Burgenland),' in text
    assert "[ ] Vollkasko (one of group kasko; including it replaces Teilkasko)" in text
    assert "Genau ein Fahrzeug" in text  # the insurer's language (de) first
    steps = text.split("Next steps", 1)[1]
    for step in case["bc:nextStep"]:
        component = step.get("bc:parameters", {}).get("componentId")
        if component:  # the argument names the target: the target is left out
            assert component in steps and step["bc:target"].replace(case["@id"], "~") not in steps
        elif step["bc:target"] == case["@id"]:  # caseId (each step's) names it: the tool alone
            assert f"\n  {step['bc:operation']}\n" in steps
        else:
            assert f"{step['bc:operation']} · {step['bc:target'].replace(case['@id'], '~')}" in text
    # the steps of one tool that differ in the one argument naming their target: one line
    assert "includeComponent · componentId one of vollkasko, insassenunfall, rechtsschutz" in text
    assert "p:powerKw: integer, 1..600, required — Leistung (kW)" in text
    assert result.structured["nextSteps"][0]["tool"] == "createRiskObject"
    assert len(result.structured["nextSteps"]) == len(case["bc:nextStep"])


def test_an_abbreviation_used_once_is_written_whole(service: InsurerService) -> None:
    products = dict(service.listProducts(ANONYMOUS, {"offset": 0, "limit": 10}, None).body)
    text = condensed(products).text
    assert "~ =" not in text and "~/" not in text
    # the name begins with its line of business; the IRI is written in the body that starts it
    assert "\n  Kraftfahrt 2025\n" in text
    assert f'createCalculation · body {{"p:hasRootProduct": "{PRODUCT}"}}' in text
    assert "readProduct · productId=kraftfahrt-2025" in text


def test_an_abbreviation_left_with_one_use_is_written_whole(service: InsurerService) -> None:
    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    case_id = {"caseId": case["bc:caseId"]}
    added = dict(service.createRiskObject(ANONYMOUS, case_id, SKODA).body)
    first = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen={},
    )  # fmt: skip
    assert first.text.count("~/draft") > 1  # the draft's lines: the abbreviation pays
    priced = dict(service.calculatePremium(ANONYMOUS, case_id, None).body)
    again = condense(
        priced, operation="calculatePremium", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen=first.drafts,
    )  # fmt: skip
    # the draft's lines, each with an abbreviated IRI, gave way to one line naming it: the one
    # use left is written whole, with no line declaring "~"
    assert f"{case['@id']}/draft: unchanged since the last answer" in again.text
    assert "~" not in again.text


def test_an_edits_answer_names_a_draft_shown_the_same_before(service: InsurerService) -> None:
    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    first = condense(
        case, operation="createCalculation", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen={},
    )  # fmt: skip
    assert "[x] Kfz-Haftpflicht" in first.text and first.drafts
    case_id = case["bc:caseId"]
    added = dict(service.createRiskObject(ANONYMOUS, {"caseId": case_id}, SKODA).body)
    again = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen=first.drafts,
    )  # fmt: skip
    assert "~/draft: unchanged since the last answer" in again.text
    assert "[x] Kfz-Haftpflicht" not in again.text
    assert "Still at the insurer's default" not in again.text  # the unchanged draft says it
    assert "~/draft/risk-objects/1: " in again.text  # what changed is shown
    # the risk object as the call sent it: its values are not repeated
    sent = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen=first.drafts, sent=SKODA,
    )  # fmt: skip
    assert "~/draft/risk-objects/1: the 5 fields as sent" in sent.text
    assert 'p:make="Skoda"' in again.text and 'p:make="Skoda"' not in sent.text
    assert sent.structured["riskObjects"][0]["fields"]["p:make"] == "Skoda"
    other = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen=first.drafts, sent={**SKODA, "p:powerKw": 111},
    )  # fmt: skip
    assert "p:powerKw=110" in other.text  # stored otherwise than sent: written out
    # the steps listed the same before are named by their tools; new ones are whole
    assert "  as before: setAttributes, excludeComponent, includeComponent," in again.text
    assert "\n  calculatePremium\n" in again.text  # caseId names its target
    assert again.structured["draft"]["components"]  # a program still reads the whole draft
    assert OUTPUT.is_valid(again.structured)
    # a read (no drafts_seen) shows it whole; so does an edit that changed it
    assert "[x] Kfz-Haftpflicht" in condensed(added).text
    attribute = added["bc:draft"]["p:attribute"][0]["@id"]
    values = {"bc:values": [{"bc:attribute": attribute, "p:value": 5}]}
    changed = dict(service.setAttributes(ANONYMOUS, {"caseId": case_id}, values).body)
    shown = condense(
        changed, operation="setAttributes", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen=again.drafts,
    )  # fmt: skip
    assert "Bonus-Malus-Stufe = 5" in shown.text and "[x] Kfz-Haftpflicht" in shown.text
    assert "Still at the insurer's default: Vertragsbeginn" in shown.text  # it changed


def test_what_the_norm_says_a_call_keeps_is_one_line_without_any_memory(
    service: InsurerService,
) -> None:
    """#50: no session, nothing carried: an answer names what the call kept (the norm's
    x-omds-ld keeps) instead of repeating it; a step on a kept part, and its shape, are named
    as offered before; without the norm's word (a read) everything is whole."""
    norm = load_norm()
    about = {n: op.about for n, op in norm.operations.items() if op.about}

    def effects(name: str) -> Effects:
        operation = norm.operation(name)
        return Effects(name, operation.kind, operation.keeps, about)

    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    case_id = case["bc:caseId"]
    added = dict(service.createRiskObject(ANONYMOUS, {"caseId": case_id}, SKODA).body)
    kept = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen={}, sent=SKODA, effects=effects("createRiskObject"),
    )  # fmt: skip
    assert "~/draft: unchanged by this call" in kept.text
    assert (
        "[x] Kfz-Haftpflicht" not in kept.text and "Still at the insurer's default" not in kept.text
    )
    assert "as before this call: setAttributes, excludeComponent, includeComponent" in kept.text
    assert "Shape VehicleShape for" not in kept.text  # of the body just sent
    assert "Shape AttributeValuesShape for" not in kept.text  # setAttributes: offered before
    assert kept.structured["draft"]["components"]  # a program still reads the whole draft
    assert OUTPUT.is_valid(kept.structured)
    whole = condense(
        added, operation="createRiskObject", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen={}, sent=SKODA,
    )  # fmt: skip
    assert "[x] Kfz-Haftpflicht" in whole.text and "Shape AttributeValuesShape for" in whole.text
    priced = dict(service.calculatePremium(ANONYMOUS, {"caseId": case_id}, None).body)
    kept = condense(
        priced, operation="calculatePremium", insurer="P", language="de", status=200,
        provenance=PROVENANCE, drafts_seen={}, effects=effects("calculatePremium"),
    )  # fmt: skip
    assert "Risk objects: unchanged by this call" in kept.text and "p:make" not in kept.text
    assert "~/draft: unchanged by this call" in kept.text and "Premium: " in kept.text
    assert "Shape VehicleShape for" not in kept.text  # updateRiskObject: offered before
    read = condense(
        priced, operation="readCalculation", insurer="P", language="de", status=200,
        provenance=PROVENANCE, effects=effects("readCalculation"),
    )  # fmt: skip
    assert "unchanged" not in read.text and "Shape VehicleShape for" in read.text


def test_a_broker_session_names_what_it_showed_the_same_for_another_insurer(
    tmp_path: Path,
) -> None:
    """Two insurers with the same product (a copy under another name): the second's draft,
    defaults, shapes and steps are named as the first's, its own values in full."""
    first = load_insurers()["pfefferminzia"]
    copy = dataclasses.replace(first, name="copy", display_name="Copy AG")
    shared = Shared()
    answers = []
    for number, insurer in enumerate((first, copy)):
        service = InsurerService(load_norm(), insurer, Store(tmp_path / f"{number}.db"), "/api")
        case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
        answers.append(
            condense(
                case, operation="createCalculation", insurer=insurer.display_name,
                language="de", status=200, provenance=PROVENANCE, drafts_seen={},
                step_arguments={"insurer": insurer.name}, shared=shared,
            )
        )  # fmt: skip
    whole, named = answers[0].text, answers[1].text
    assert "[x] Kfz-Haftpflicht" in whole and "Next steps, each with insurer=pfefferminzia" in whole
    assert "~/draft: as shown for Pfefferminzia Versicherung AG, below this ~" in named
    assert "Still at the insurer's default: as for Pfefferminzia Versicherung AG" in named
    assert "Shape VehicleShape: as for Pfefferminzia Versicherung AG" in named
    assert "as for Pfefferminzia Versicherung AG: createRiskObject, setAttributes" in named
    assert "Next steps, each with insurer=copy caseId=" in named
    assert all(s["arguments"]["insurer"] == "copy" for s in answers[1].structured["nextSteps"])
    assert answers[1].structured["draft"]["components"]  # a program still reads everything


def test_a_shape_seen_before_is_named_not_repeated(service: InsurerService) -> None:
    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    vehicle = "https://pfefferminzia.example/shapes/VehicleShape"
    again = condensed(case, seen=(vehicle,))
    assert "p:powerKw" not in again.text and "Shape VehicleShape" not in again.text
    assert "createRiskObject · ~/draft · VehicleShape" in again.text  # the step names it
    assert OUTPUT.is_valid(again.structured)


def test_a_premium_is_condensed_with_its_taxes(service: InsurerService) -> None:
    case_id = service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body[
        "bc:caseId"
    ]
    service.createRiskObject(ANONYMOUS, {"caseId": case_id}, SKODA)
    priced = dict(service.calculatePremium(ANONYMOUS, {"caseId": case_id}, None).body)
    result = condensed(priced)
    assert "Premium: 1684.88 EUR gross per year" in result.text
    assert result.structured["premium"]["per"] == {"en": "per year", "de": "pro Jahr"}
    assert "Motorbezogene Versicherungssteuer 712.08" in result.text
    assert result.structured["premium"]["gross"] == 1684.88
    assert result.structured["validation"]["conforms"] is True
    assert OUTPUT.is_valid(result.structured)


def test_a_problem_is_condensed_with_kind_and_admissible_steps(service: InsurerService) -> None:
    case_id = service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body[
        "bc:caseId"
    ]
    with pytest.raises(Problem) as refused:
        service.calculatePremium(ANONYMOUS, {"caseId": case_id}, None)
    problem = {
        "type": "https://w3id.org/omds-ld/problems/draft-not-conforming",
        "title": "The draft does not conform",
        "status": 409,
        "detail": refused.value.detail,
        **refused.value.extra,
        "bc:nextStep": refused.value.next_steps,
    }
    result = condense_problem(
        problem, operation="calculatePremium", insurer="P", language="de", kind="conflict",
        provenance=PROVENANCE,
    )  # fmt: skip
    assert "refused (conflict)" in result.text
    assert "Still admissible" in result.text and "createRiskObject" in result.text
    assert result.structured["problem"]["kind"] == "conflict"
    assert result.structured["validation"]["conforms"] is False
    assert OUTPUT.is_valid(result.structured)


def test_a_long_report_is_bounded_with_a_precision_block() -> None:
    results = [
        {
            "sh:focusNode": f"https://x/n{i}",
            "sh:resultPath": "p:x",
            "sh:resultMessage": {"en": "bad"},
        }
        for i in range(MAX_VIOLATIONS + 7)
    ]
    answer = {
        "@type": "bc:TariffResult",
        "bc:validationReport": {"sh:conforms": False, "sh:result": results},
        "bc:nextStep": [],
    }
    result = condensed(answer)
    scope = result.structured["validation"]["scope"]
    assert (scope["returned"], scope["total"], scope["more_to_find"]) == (MAX_VIOLATIONS, 27, 7)
    assert "full=true" in scope["how_to_get_more"]
    assert result.text.count("https://x/n") == MAX_VIOLATIONS


def _answers(service: InsurerService) -> dict[str, dict[str, Any]]:
    """Real answers of every type, as the example insurer serialises them."""
    product = service.insurer.products["kraftfahrt-2025"]
    case = dict(service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body)
    case_id = case["bc:caseId"]
    params = {"caseId": case_id}
    with_vehicle = dict(service.createRiskObject(ANONYMOUS, params, SKODA).body)
    priced = dict(service.calculatePremium(ANONYMOUS, params, None).body)
    offer = dict(service.createOffer(ANONYMOUS, params, None).body)
    inquiry = service.readDefaultInstance(ANONYMOUS, {"productId": product.id}, None).body
    body = json.loads(json.dumps(inquiry["bc:body"]))
    body["p:instance"]["p:hasRiskObject"] = [SKODA]
    return {
        "process knowledge": dict(service.readProcessKnowledge(ANONYMOUS, {}, None).body),
        "product list": dict(
            service.listProducts(ANONYMOUS, {"offset": 0, "limit": 10}, None).body
        ),
        "product": dict(service.readProduct(ANONYMOUS, {"productId": product.id}, None).body),
        "default instance": dict(inquiry),
        "shape": dict(service.readShape(ANONYMOUS, {"shapeId": "VehicleShape"}, None).body),
        "tariff result": dict(service.inquireTariff(ANONYMOUS, {}, body).body),
        "new case": case,
        "case with a vehicle": with_vehicle,
        "premium": priced,
        "offer": offer,
    }


OTHER_PREFIXES = {  # another context: other prefix names, no containers, no type coercion
    "ins": "https://w3id.org/omds-ld/bc#",
    "prod": "https://w3id.org/omds-ld/p#",
    "proc": "https://w3id.org/omds-ld/pk#",
    "shacl": "http://www.w3.org/ns/shacl#",
    "schema": "http://www.w3.org/2000/01/rdf-schema#",
    "ins:parameters": {"@type": "@json"},
    "ins:body": {"@type": "@json"},
}


def _variants(answer: dict[str, Any]) -> dict[str, Any]:
    """The same answer in other, equivalent JSON-LD forms."""
    from pyld import jsonld

    from omds_ld.norm.jsonld import CONTEXT_URL, document_loader

    options = {"documentLoader": document_loader}
    expanded = jsonld.expand(answer, options)
    return {
        "expanded (full IRIs, @value objects)": expanded,
        "full IRIs, no context": jsonld.compact(expanded, {}, options),
        "other prefixes, single values": jsonld.compact(expanded, OTHER_PREFIXES, options),
        "flattened into @graph": jsonld.flatten(answer, CONTEXT_URL, options),
    }


@pytest.mark.parametrize("form", list(_variants({"@context": {}, "@id": "https://x"})))
def test_equivalent_json_ld_condenses_to_the_same_answer(
    form: str, service: InsurerService
) -> None:
    from omds_ld.mcp.condense import ANSWER_TYPES
    from omds_ld.norm.jsonld import canonical

    for name, answer in _answers(service).items():
        ours = condensed(canonical(answer, ANSWER_TYPES))
        variant = _variants(answer)[form]
        theirs = condensed(canonical(variant, ANSWER_TYPES))
        assert theirs.text == ours.text, f"{name}: {form}"
        assert theirs.structured == ours.structured, f"{name}: {form}"


def test_our_own_answers_take_the_fast_path(service: InsurerService) -> None:
    from omds_ld.mcp.condense import ANSWER_TYPES
    from omds_ld.norm.jsonld import canonical

    for name, answer in _answers(service).items():
        assert canonical(answer, ANSWER_TYPES) is answer, name


def test_the_text_of_our_answers_shows_them_canonical_and_of_no_other_form(
    service: InsurerService,
) -> None:
    """The fast path reads the JSON text where it has it: our own answers pass by their text
    alone (but one with a ready body of its own @context, which the text cannot tell from the
    top's: it is walked); none of the equivalent other forms does (they are walked, then compacted)."""
    from omds_ld import jsonwire
    from omds_ld.mcp.condense import ANSWER_TYPES
    from omds_ld.norm.jsonld import _canonical_text, canonical

    for name, answer in _answers(service).items():
        text = jsonwire.dumps(answer)
        assert _canonical_text(text, answer) == (text.count(b'"@context"') == 1), name
        assert canonical(answer, ANSWER_TYPES, text) is answer, name
        for form, variant in _variants(answer).items():
            assert not _canonical_text(jsonwire.dumps(variant), variant), f"{name}: {form}"


_KEYS = st.sampled_from(
    ["@context", "@graph", "@type", "@id", "bc:body", "p:x", "label",
     "https://w3id.org/omds-ld/p#x", "http://www.w3.org/ns/shacl#path", "https://other.example/x"]
)  # fmt: skip
_LEAVES = (
    st.none() | st.booleans() | st.integers(-5, 5)
    | st.sampled_from(["p:Vehicle", "https://w3id.org/omds-ld/bc#Case", CONTEXT_URL, "@type",
                       '"@type": [', r"h\u0074tps", r"https:\/\/w3id.org/omds-ld/p#x"])
    | st.text(max_size=5)
)  # fmt: skip
_DOCUMENTS = st.dictionaries(
    _KEYS,
    st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=12),
    max_size=5,
)  # fmt: skip


@given(_DOCUMENTS, st.booleans(), st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")]))
def test_the_text_shows_a_document_canonical_only_where_the_walk_finds_it_so(
    document: dict[str, Any], ascii_only: bool, separators: tuple[str, str]
) -> None:
    from omds_ld.norm.jsonld import _canonical_already, _canonical_text

    text = json.dumps(document, ensure_ascii=ascii_only, separators=separators).encode()
    if _canonical_text(text, document):
        assert _canonical_already(document)


def test_an_answer_without_optional_parts_says_what_is_missing(service: InsurerService) -> None:
    """Instance nodes without @id, products without bc:productId: condensed, never a failure."""
    products = _answers(service)["product list"]
    for product in products["p:product"]:
        del product["bc:productId"]
    listed = condensed(products)
    assert "productId=kraftfahrt-2025" in listed.text  # the IRI's last segment
    assert "Not in the insurer's answer: bc:productId of product" in listed.text
    instance = _answers(service)["default instance"]

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "@id"}
        return [strip(v) for v in node] if isinstance(node, list) else node

    instance["bc:body"] = strip(instance["bc:body"])
    result = condensed(instance)
    assert OUTPUT.is_valid(result.structured)
    assert "Bonus-Malus-Stufe = 9" in result.text


def test_an_escape_cannot_hide_a_namespace_or_a_graph_from_the_text_check() -> None:
    from omds_ld import jsonwire
    from omds_ld.norm.jsonld import _canonical_already, _canonical_text

    for text in (
        b'{"@context":"' + CONTEXT_URL.encode() + b'","https:\\/\\/w3id.org\\/omds-ld\\/p#x":1}',
        b'{"@context":"' + CONTEXT_URL.encode() + b'","\\u0068ttps://w3id.org/omds-ld/p#x":1}',
        b'{"@context":"' + CONTEXT_URL.encode() + b'","@gr\\u0061ph":[]}',
    ):
        document = jsonwire.loads(text)
        assert not _canonical_already(document)
        assert not _canonical_text(text, document), text
