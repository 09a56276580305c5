"""Drafts and risk objects as RDF, validated against only the shapes they need (by the compiled
checks of ``omds_ld.insurer.constraints``, on their triples as ``omds_ld.insurer.triples``
indexes them), and the product's warnings on the draft."""

from __future__ import annotations

import datetime as dt

from rdflib import RDF, Graph, URIRef

from omds_ld.insurer.data import Product
from omds_ld.insurer.draft import Draft, RiskObject
from omds_ld.insurer.shacl import Report, Result
from omds_ld.insurer.triples import Triples
from omds_ld.insurer.warnings import warnings_of
from omds_ld.norm.jsonld import P
from omds_ld.norm.shapes import NodeShape, to_literal

__all__ = [
    "Report", "Result", "draft_graph", "draft_triples", "validate_draft", "validate_risk_object",
]  # fmt: skip

HAS_PART = URIRef(P + "hasPart")
HAS_RISK_OBJECT = URIRef(P + "hasRiskObject")


def node_iris(product: Product, base_iri: str) -> dict[str, str]:
    """The IRI of every node of a draft below ``base_iri``: "" is the root, others by component id."""
    iris = {"": base_iri}
    for component in product.components:
        iris[component.id] = f"{base_iri}/components/{component.id}"
    return iris


def risk_object_iri(base_iri: str, risk_object_id: str) -> str:
    return f"{base_iri}/risk-objects/{risk_object_id}"


def add_risk_object(graph: Triples, shape: NodeShape, iri: str, risk_object: RiskObject) -> URIRef:
    ref = URIRef(iri)
    graph.add((ref, RDF.type, URIRef(risk_object.class_iri)))
    for prop, value in risk_object.values.items():
        field = shape.field_for(prop)
        graph.add((ref, URIRef(prop), to_literal(value, field.datatype if field else None)))
    return ref


def draft_graph(product: Product, draft: Draft, base_iri: str) -> Graph:
    """The draft as an rdflib graph (for pySHACL), with the same IRIs its JSON-LD form uses."""
    return draft_triples(product, draft, base_iri).graph()


def draft_triples(product: Product, draft: Draft, base_iri: str) -> Triples:
    """The draft's triples as the compiled checks read them (no rdflib store), with the same
    IRIs its JSON-LD form uses."""
    graph = Triples()
    iris = node_iris(product, base_iri)
    root = URIRef(base_iri)
    for node in product.nodes:
        if not draft.is_included(node.id):
            continue
        ref = URIRef(iris[node.id])
        graph.add((ref, RDF.type, URIRef(node.class_iri)))
        if node.id:
            graph.add((root, HAS_PART, ref))
        values = draft.attributes.get(node.id, {})
        for attribute in node.attributes:
            value = values.get(attribute.local_name)
            if value is not None:
                graph.add((ref, URIRef(attribute.path), to_literal(value, attribute.datatype)))
    for risk_object in draft.risk_objects:
        iri = risk_object_iri(base_iri, risk_object.id)
        ref = add_risk_object(graph, product.risk_object.shape, iri, risk_object)
        graph.add((root, HAS_RISK_OBJECT, ref))
    return graph


def validate_draft(
    product: Product, draft: Draft, base_iri: str, today: dt.date | None = None
) -> Report:
    """Validate a whole draft against its product's shapes; then its warnings (data that
    contradict each other), which never make it not conform. ``today``: the insurer's day a
    minimum age (``bc:minimumAge``) is measured on."""
    report = product.validator.validate(draft_triples(product, draft, base_iri), today)
    if not product.warnings:
        return report
    risk_iris = {r.id: risk_object_iri(base_iri, r.id) for r in draft.risk_objects}
    paths = {f.path.rsplit("#", 1)[-1].rsplit("/", 1)[-1]: f.path
             for f in product.risk_object.shape.fields}  # fmt: skip
    return report.warned(warnings_of(product.warnings, draft, risk_iris, paths))


def validate_risk_object(
    product: Product, risk_object: RiskObject, iri: str, today: dt.date | None = None
) -> Report:
    """Validate one risk object against the product's risk object shape only."""
    return product.risk_validator.validate(risk_object_triples(product, risk_object, iri), today)


def risk_object_triples(product: Product, risk_object: RiskObject, iri: str) -> Triples:
    """One risk object's triples, alone."""
    triples = Triples()
    add_risk_object(triples, product.risk_object.shape, iri, risk_object)
    return triples


def risk_object_graph(product: Product, risk_object: RiskObject, iri: str) -> Graph:
    """One risk object as an rdflib graph, alone (for pySHACL)."""
    return risk_object_triples(product, risk_object, iri).graph()
