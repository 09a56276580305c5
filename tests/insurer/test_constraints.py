"""The compiled constraints give exactly the report pySHACL gives, on every shipped product and
on the norm's own shapes (personal data among them), with bad input generated at every bound."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omds_ld.insurer.applications import ApplicationCheck
from omds_ld.insurer.constraints import NAMED_COMPONENTS, ShapeValidator, compile_shapes
from omds_ld.insurer.data import Product, load_insurers
from omds_ld.insurer.draft import Draft, RiskObject
from omds_ld.insurer.shacl import PyShaclValidator, Report
from omds_ld.insurer.validation import (
    draft_graph,
    draft_triples,
    risk_object_graph,
    risk_object_iri,
)
from omds_ld.norm import load_norm
from omds_ld.norm.jsonld import expand_curie
from omds_ld.norm.shapes import Field, NodeShape
from tests.insurer.test_flows import FLAT, SKODA
from tests.mcp.applications import PAYMENT, PERSON

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


def at_the_bounds(fields: list[Field]) -> st.SearchStrategy[Any]:
    """Values right at each bound the fields declare, one step inside and one outside: a check
    off by one is caught only there."""
    values: list[Any] = []
    for field in fields:
        for bound in (field.min_length, field.max_length):
            if bound is not None:
                values += ["x" * n for n in (bound - 1, bound, bound + 1) if n >= 0]
        for bound in (field.min_inclusive, field.max_inclusive):
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                step = 1 if isinstance(bound, int) else 0.01
                values += [bound - step, bound, bound + step]
            elif isinstance(bound, str):  # a date
                day = dt.date.fromisoformat(bound)
                values += [str(day + dt.timedelta(days=d)) for d in (-1, 0, 1)]
    return st.sampled_from(values) if values else st.nothing()


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
        # the triples as the server validates them: the same report without rdflib's store
        triples = draft_triples(product, draft, BASE)
        assert set(triples) == set(graph) and len(triples) == len(graph)
        assert compiled.validate(triples) == compiled.validate(graph)
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
    declared = [
        *product.risk_object.shape.fields,
        *(a for n in product.nodes for a in n.attributes),
    ]
    values = st.one_of(scalars, at_the_bounds(declared))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        changes=st.dictionaries(st.sampled_from(attributes), values, max_size=4)
        if attributes
        else st.just({}),
        risk=st.lists(
            st.dictionaries(st.sampled_from(fields), values, max_size=len(fields)), max_size=2
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
        assert compiled.validate(draft_triples(product, draft, BASE)) == compiled.validate(graph)
        for item in draft.risk_objects:
            one = risk_object_graph(product, item, risk_object_iri(BASE, item.id))
            assert risk_compiled.validate(one) == risk_pyshacl.validate(one)

    check()


# the norm's own shapes: an application's personal data and consent


def core(report: Report) -> tuple[bool, tuple[Any, ...]]:
    """A report as pySHACL can give it: without the norm's own constraints, which it does not
    know (bc:minimumAge, bc:validIban, bc:requiredWhen)."""
    named = {str(c) for c in NAMED_COMPONENTS.values()}
    results = tuple(r for r in report.results if r.constraint not in named)
    return not results, results


PARTS = {
    "bc:policyholder": ("PersonShape", PERSON),
    "bc:payment": ("PaymentShape", PAYMENT),
    "bc:consent": (
        "ConsentShape",
        {"bc:consentedBy": "Anna Berger", "bc:consentedAt": "2026-12-01T10:00:00+00:00",
         "bc:consentMethod": "in-person", "bc:offerDigest": "sha256:" + "a" * 64},
    ),
}  # fmt: skip


def test_the_norms_shapes_compile_and_give_pyshacls_report_on_applications() -> None:
    """Every node the insurer checks of an application (the policyholder, the payment, the
    consent, the request itself) by the compiled checks, with pySHACL's report for SHACL Core,
    also for bad input at every bound; a personal field's value is in neither report."""
    norm = load_norm()
    check = ApplicationCheck(norm)
    compiled = check.validator
    reference = PyShaclValidator(norm.shapes_graph)
    personal = ShapeValidator(norm.shapes_graph).personal
    assert compiled.compiled is not None and personal
    shapes: dict[str, NodeShape] = {s.local_name: s for s in norm.shapes.values()}
    today = dt.date(2026, 12, 6)

    def compare(body: dict[str, Any]) -> Report:
        graph, _ = check._graph(body)
        ours = compiled.validate(graph, today)
        theirs = reference.validate(graph.graph()).without_values(personal)
        assert core(ours) == (theirs.conforms, theirs.results)
        assert all(r.value is None for r in ours.results if r.path in personal)
        return ours

    right = {key: dict(node) for key, (_, node) in PARTS.items()} | {"bc:startDate": "2026-12-07"}
    assert compare(right).conforms
    for key, (name, _) in PARTS.items():
        _generated(key, list(shapes[name].fields), right, compare)()


def _generated(key: str, fields: list[Any], right: dict[str, Any], compare: Any) -> Any:
    """A hypothesis test of one part of an application: fields changed (at their bounds too)
    and dropped."""
    paths = [f.path for f in fields]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        changes=st.dictionaries(
            st.sampled_from(paths), st.one_of(scalars, at_the_bounds(fields)), max_size=4
        ),
        dropped=st.lists(st.sampled_from(paths), max_size=3),
    )
    def check_part(changes: dict[str, Any], dropped: list[str]) -> None:
        node = {expand_curie(k): v for k, v in right[key].items() if k != "@type"}
        node = {k: v for k, v in node.items() if k not in dropped} | changes
        compare(right | {key: node})

    return check_part


def test_a_constraint_added_to_a_shipped_shape_is_enforced_for_personal_data_too() -> None:
    """Personal data are checked by the same compiled checks as drafts: a rule the norm adds to
    the policyholder's shape (a town starting with a capital letter) refuses an application,
    with the shape's message and never the value."""
    from rdflib import Literal, URIRef

    from omds_ld.norm.jsonld import P
    from omds_ld.norm.shapes import SH

    norm = load_norm()
    graph = norm.shapes_graph
    person = URIRef("https://w3id.org/omds-ld/shapes#PersonShape")
    town = next(
        p for p in graph.objects(person, SH.property)
        if graph.value(p, SH.path) == URIRef(P + "addressLocality")
    )  # fmt: skip
    graph.add((town, SH.pattern, Literal("^[A-ZÄÖÜ]")))
    check = ApplicationCheck(norm)
    now = dt.datetime(2026, 12, 6, 12, tzinfo=dt.UTC)
    body = {key: dict(node) for key, (_, node) in PARTS.items()} | {"bc:startDate": "2026-12-07"}

    def errors(locality: str) -> list[tuple[str, str]]:
        sent = body | {"bc:policyholder": {**PERSON, "p:addressLocality": locality}}
        checked = check.check(sent, now - dt.timedelta(days=1), now, "de", now.date())
        return [(e.pointer, e.detail) for e in checked.personal]

    assert errors("Wien") == []
    assert errors("wien") == [
        ("/bc:policyholder/p:addressLocality", "Ort: erforderlich, höchstens 100 Zeichen")
    ]
    assert ApplicationCheck(load_norm()).check(
        body | {"bc:policyholder": {**PERSON, "p:addressLocality": "wien"}},
        now - dt.timedelta(days=1), now, "de", now.date(),
    ).personal == ()  # fmt: skip


def test_of_age_on_the_18th_birthday_by_the_calendar() -> None:
    """The norm's minimum age (18 for a policyholder) by the calendar: of age on the 18th
    birthday, not the day before; born on the 29th, 30th or 31st of a month, not days early;
    born on 29 February, on 28 February of a year without a 29th."""
    check = ApplicationCheck(load_norm())
    body = {key: dict(node) for key, (_, node) in PARTS.items()} | {"bc:startDate": "2030-12-31"}

    def of_age(born: str, today: dt.date) -> bool:
        now = dt.datetime.combine(today, dt.time(12), dt.UTC)
        sent = body | {"bc:policyholder": {**PERSON, "p:birthDate": born}}
        checked = check.check(sent, now - dt.timedelta(days=1), now, "en", today)
        return not any(e.pointer.endswith("p:birthDate") for e in checked.personal)

    for born, birthday, before in (
        ("2008-12-07", dt.date(2026, 12, 7), dt.date(2026, 12, 6)),
        ("2008-05-31", dt.date(2026, 5, 31), dt.date(2026, 5, 30)),
        ("2008-03-30", dt.date(2026, 3, 30), dt.date(2026, 3, 28)),
        ("2008-01-29", dt.date(2026, 1, 29), dt.date(2026, 1, 28)),
        ("2008-02-29", dt.date(2026, 2, 28), dt.date(2026, 2, 27)),  # 2026 has no 29 February
        ("2012-02-29", dt.date(2030, 2, 28), dt.date(2030, 2, 27)),
    ):
        assert of_age(born, birthday), (born, birthday)
        assert not of_age(born, before), (born, before)
