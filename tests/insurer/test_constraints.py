"""The compiled constraints give exactly the report pySHACL gives, on every shipped product."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omds_ld.insurer.constraints import compile_shapes
from omds_ld.insurer.data import Product, load_insurers
from omds_ld.insurer.draft import Draft, RiskObject
from omds_ld.insurer.shacl import PyShaclValidator
from omds_ld.insurer.validation import draft_graph, risk_object_graph, risk_object_iri
from omds_ld.norm.jsonld import expand_curie
from tests.insurer.test_flows import FLAT, SKODA

PRODUCTS = [
    pytest.param(product, id=f"{insurer.name}/{product.id}")
    for insurer in load_insurers().values()
    for product in insurer.products.values()
]
BASE = "https://insurer.example/cases/x/draft"

# values of every kind a client may send: in range and out, of the right type and not
scalars = st.one_of(
    st.integers(min_value=-5, max_value=700_000),
    st.floats(min_value=-10, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=60),
    st.sampled_from(["W", "St", "teil", "voll", "W-12345A", "2027-01-01", "2031-02-30", "", "x"]),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2100, 1, 1)).map(str),
)


def both(product: Product) -> tuple[Any, Any]:
    shapes = product.validator.shapes
    compiled = compile_shapes(shapes)
    assert compiled is not None, "every shipped product compiles"
    return compiled, PyShaclValidator(shapes)


def risk_object(product: Product, values: dict[str, Any], number: int = 1) -> RiskObject:
    return RiskObject(str(number), product.risk_object.class_iri, values)


def good_risk(product: Product) -> dict[str, Any]:
    example = SKODA if product.risk_object.class_iri.endswith("Vehicle") else FLAT
    return {expand_curie(k): v for k, v in example.items() if k != "@type"}


@pytest.mark.parametrize("product", PRODUCTS)
def test_default_and_filled_drafts_get_the_same_report(product: Product) -> None:
    compiled, pyshacl = both(product)
    default = Draft.default(product)
    drafts = [
        default,
        default.with_risk_object(risk_object(product, good_risk(product))),
        default.with_risk_object(risk_object(product, {})),
        default.with_risk_object(risk_object(product, good_risk(product))).with_risk_object(
            risk_object(product, good_risk(product), 2)
        ),
    ]
    for draft in drafts:
        graph = draft_graph(product, draft, BASE)
        assert compiled.validate(graph) == pyshacl.validate(graph)
    assert not compiled.validate(draft_graph(product, drafts[0], BASE)).conforms


@pytest.mark.parametrize("product", PRODUCTS)
def test_generated_bad_input_gets_the_same_report(product: Product) -> None:
    compiled, pyshacl = both(product)
    risk_compiled = compile_shapes(product.risk_validator.shapes)
    assert risk_compiled is not None
    risk_pyshacl = PyShaclValidator(product.risk_validator.shapes)
    attributes = [
        (node.id, attribute.local_name) for node in product.nodes for attribute in node.attributes
    ]
    fields = [f.path for f in product.risk_object.shape.fields]
    components = [c.id for c in product.components if not c.mandatory]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        changes=st.dictionaries(st.sampled_from(attributes), scalars, max_size=4)
        if attributes
        else st.just({}),
        risk=st.lists(
            st.dictionaries(st.sampled_from(fields), scalars, max_size=len(fields)), max_size=2
        ),
        keep=st.lists(st.sampled_from(fields), max_size=len(fields)),
        flips=st.lists(st.sampled_from(components), max_size=3) if components else st.just([]),
    )
    def check(
        changes: dict[tuple[str, str], Any],
        risk: list[dict[str, Any]],
        keep: list[str],
        flips: list[str],
    ) -> None:
        draft = Draft.default(product).with_attributes(changes)
        for component in flips:
            draft = draft.with_included(product, component, not draft.is_included(component))
        base = good_risk(product)
        for number, values in enumerate(risk, start=1):
            merged = {k: v for k, v in base.items() if k in keep} | values
            draft = draft.with_risk_object(risk_object(product, merged, number))
        graph = draft_graph(product, draft, BASE)
        assert compiled.validate(graph) == pyshacl.validate(graph)
        for item in draft.risk_objects:
            one = risk_object_graph(product, item, risk_object_iri(BASE, item.id))
            assert risk_compiled.validate(one) == risk_pyshacl.validate(one)

    check()
