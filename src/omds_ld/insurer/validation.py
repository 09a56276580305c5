"""SHACL validation of drafts and risk objects with pySHACL, against only the shapes they need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyshacl import validate
from rdflib import RDF, Graph, Literal, URIRef

from omds_ld.insurer.data import Product
from omds_ld.insurer.draft import Draft, RiskObject
from omds_ld.norm.jsonld import P, compact_iri
from omds_ld.norm.shapes import SH, NodeShape, to_literal

HAS_PART = URIRef(P + "hasPart")
HAS_RISK_OBJECT = URIRef(P + "hasRiskObject")


@dataclass(frozen=True)
class Result:
    """One violation: where (focus node, path), what (messages in German and English)."""

    focus_node: str
    path: str | None
    messages: Mapping[str, str]
    constraint: str
    value: Any = None


@dataclass(frozen=True)
class Report:
    """A SHACL validation report."""

    conforms: bool
    results: tuple[Result, ...]

    def to_jsonld(self) -> dict[str, Any]:
        results = []
        for r in self.results:
            out: dict[str, Any] = {
                "@type": "sh:ValidationResult",
                "sh:focusNode": r.focus_node,
                "sh:resultSeverity": "sh:Violation",
                "sh:sourceConstraintComponent": compact_iri(r.constraint),
                "sh:resultMessage": dict(r.messages),
            }
            if r.path:
                out["sh:resultPath"] = compact_iri(r.path)
            if r.value is not None:
                out["sh:value"] = r.value
            results.append(out)
        return {"@type": "sh:ValidationReport", "sh:conforms": self.conforms, "sh:result": results}


def node_iris(product: Product, base_iri: str) -> dict[str, str]:
    """The IRI of every node of a draft below ``base_iri``: "" is the root, others by component id."""
    iris = {"": base_iri}
    for component in product.components:
        iris[component.id] = f"{base_iri}/components/{component.id}"
    return iris


def risk_object_iri(base_iri: str, risk_object_id: str) -> str:
    return f"{base_iri}/risk-objects/{risk_object_id}"


def _add_risk_object(graph: Graph, shape: NodeShape, iri: str, risk_object: RiskObject) -> URIRef:
    ref = URIRef(iri)
    graph.add((ref, RDF.type, URIRef(risk_object.class_iri)))
    for prop, value in risk_object.values.items():
        field = shape.field_for(prop)
        graph.add((ref, URIRef(prop), to_literal(value, field.datatype if field else None)))
    return ref


def draft_graph(product: Product, draft: Draft, base_iri: str) -> Graph:
    """The draft as RDF, with the same IRIs its JSON-LD form uses."""
    graph = Graph()
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
        ref = _add_risk_object(graph, product.risk_object.shape, iri, risk_object)
        graph.add((root, HAS_RISK_OBJECT, ref))
    return graph


def _report(conforms: bool, results_graph: Graph) -> Report:
    results = []
    for node in results_graph.subjects(RDF.type, SH.ValidationResult):
        messages: dict[str, str] = {}
        for message in results_graph.objects(node, SH.resultMessage):
            if isinstance(message, Literal):
                messages.setdefault(message.language or "en", str(message))
        messages.setdefault("en", "constraint violated")
        messages.setdefault("de", messages["en"])
        path = results_graph.value(node, SH.resultPath)
        value = results_graph.value(node, SH.value)
        results.append(
            Result(
                focus_node=str(results_graph.value(node, SH.focusNode)),
                path=str(path) if isinstance(path, URIRef) else None,
                messages=messages,
                constraint=str(results_graph.value(node, SH.sourceConstraintComponent)),
                value=value.toPython() if isinstance(value, Literal) else None,
            )
        )
    results.sort(key=lambda r: (r.focus_node, r.path or "", r.constraint))
    clean: list[Result] = []
    seen: set[tuple[str, str | None, tuple[tuple[str, str], ...]]] = set()
    for r in results:
        # one value may break several constraints of a field that share one message: say it once
        key = (r.focus_node, r.path, tuple(sorted(r.messages.items())))
        if key not in seen:
            seen.add(key)
            clean.append(Result(r.focus_node, r.path, r.messages, r.constraint, _jsonable(r.value)))
    return Report(conforms=conforms, results=tuple(clean))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _run(data: Graph, shapes: Graph) -> Report:
    conforms, results_graph, _ = validate(
        data, shacl_graph=shapes, advanced=False, inference="none"
    )
    return _report(bool(conforms), results_graph)


def validate_draft(product: Product, draft: Draft, base_iri: str) -> Report:
    """Validate a whole draft against its product's shapes."""
    return _run(draft_graph(product, draft, base_iri), product.shapes_graph)


def validate_risk_object(product: Product, risk_object: RiskObject, iri: str) -> Report:
    """Validate one risk object against the product's risk object shape only."""
    graph = Graph()
    _add_risk_object(graph, product.risk_object.shape, iri, risk_object)
    return _run(graph, product.risk_shapes_graph)
