"""The compiled shape validator reports exactly what pySHACL's own validate() reports."""

from __future__ import annotations

from pyshacl import validate
from rdflib import Graph

from omds_ld.insurer.data import load_insurers
from omds_ld.insurer.draft import Draft, RiskObject
from omds_ld.insurer.shacl import _report
from omds_ld.insurer.validation import draft_graph, validate_draft
from omds_ld.norm.jsonld import expand_curie

PRODUCT = load_insurers()["pfefferminzia"].products["kraftfahrt-2025"]
BASE = "https://pfefferminzia.example/cases/t/draft"


def reference(data: Graph) -> object:
    conforms, results, _ = validate(data, shacl_graph=PRODUCT.validator.shapes)
    return _report(bool(conforms), results)


def drafts() -> list[Draft]:
    empty = Draft.default(PRODUCT)
    car = RiskObject(
        "1",
        expand_curie("p:Vehicle"),
        {expand_curie("p:make"): "Skoda", expand_curie("p:powerKw"): "110 kW"},
    )
    out_of_range = empty.with_attributes({("", "bonusMalusStufe"): 40})
    return [empty, empty.with_risk_object(car), out_of_range]


def test_compiled_validator_matches_pyshacl_on_every_run() -> None:
    for _ in range(3):  # the first run compiles; later runs reuse the compiled shapes
        for draft in drafts():
            ours = validate_draft(PRODUCT, draft, BASE)
            assert ours == reference(draft_graph(PRODUCT, draft, BASE))
            assert not ours.conforms and ours.results
