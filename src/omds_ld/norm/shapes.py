"""SHACL node shapes read into plain values: the fields a body must have, with ranges and labels."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from rdflib import RDF, BNode, Graph, Literal, Namespace, URIRef
from rdflib.collection import Collection
from rdflib.term import Node

from omds_ld.norm.jsonld import BC, P, compact_iri

SH = Namespace("http://www.w3.org/ns/shacl#")
RDFS = Namespace("http://www.w3.org/2000/01/rdf-schema#")
XSD = Namespace("http://www.w3.org/2001/XMLSchema#")

Scalar = str | int | float | bool
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # xsd:date's form (Python reads more as dates)


def _texts(graph: Graph, node: Node, predicate: URIRef) -> dict[str, str]:
    texts: dict[str, str] = {}
    for obj in graph.objects(node, predicate):
        if isinstance(obj, Literal):
            texts[obj.language or "en"] = str(obj)
    return texts


def _json_value(literal: Node) -> Scalar:
    """A SHACL literal as a JSON value: numbers stay numbers, dates become ISO strings."""
    if not isinstance(literal, Literal):
        return str(literal)
    value = literal.toPython()
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        return value
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(literal)


def _one(graph: Graph, node: Node, predicate: URIRef) -> Node | None:
    return next(iter(graph.objects(node, predicate)), None)


@dataclass(frozen=True)
class Field:
    """One property shape: a field of a node, with what is admissible for it."""

    path: str
    name: dict[str, str]
    description: dict[str, str]
    datatype: str | None
    node_kind: str | None
    class_: str | None
    min_count: int
    max_count: int | None
    min_inclusive: Scalar | None
    max_inclusive: Scalar | None
    min_length: int | None
    max_length: int | None
    pattern: str | None
    in_values: tuple[Scalar, ...] | None
    default: Scalar | None
    order: float
    # what each admissible value of an enumeration means, in both languages (p:valueLabel):
    # "St" is Steiermark (Styria), not a guess
    value_labels: tuple[tuple[Scalar, dict[str, str]], ...] = ()
    # what a violation says (sh:message), in both languages: for personal data it names the
    # field and what is admissible, never the value
    message: dict[str, str] = field(default_factory=dict)
    personal: bool = False  # bc:personalData: never cached, never logged, masked for a model
    # bc:contractStart: the contract's start, never before the insurer's today ("today" is one)
    contract_start: bool = False
    # bc:shape: the node shapes one of which a node value conforms to (a form of its own)
    shapes: tuple[str, ...] = ()

    @property
    def local_name(self) -> str:
        return self.path.rsplit("#", 1)[-1].rsplit("/", 1)[-1]

    @property
    def required(self) -> bool:
        return self.min_count > 0

    def to_jsonld(self) -> dict[str, Any]:
        """The field in the JSON-LD form answers carry (``sh:`` terms, language maps)."""
        out: dict[str, Any] = {"sh:path": compact_iri(self.path), "sh:name": self.name}
        if self.description:
            out["sh:description"] = self.description
        if self.datatype:
            out["sh:datatype"] = compact_iri(self.datatype)
        if self.node_kind:
            out["sh:nodeKind"] = compact_iri(self.node_kind)
        if self.class_:
            out["sh:class"] = compact_iri(self.class_)
        out["sh:minCount"] = self.min_count
        if self.max_count is not None:
            out["sh:maxCount"] = self.max_count
        for key, value in (
            ("sh:minInclusive", self.min_inclusive),
            ("sh:maxInclusive", self.max_inclusive),
            ("sh:minLength", self.min_length),
            ("sh:maxLength", self.max_length),
            ("sh:pattern", self.pattern),
            ("sh:defaultValue", self.default),
        ):
            if value is not None:
                out[key] = value
        if self.in_values is not None:
            out["sh:in"] = list(self.in_values)
        if self.shapes:
            out["bc:shape"] = list(self.shapes)
        if self.value_labels:
            out["p:valueLabel"] = [
                {"p:value": v, "rdfs:label": dict(t)} for v, t in self.value_labels
            ]
        return out


@dataclass(frozen=True)
class NodeShape:
    """A node shape: the class it describes and its fields in order."""

    iri: str
    target_class: str | None
    label: dict[str, str]
    fields: tuple[Field, ...] = field(default=())

    @property
    def local_name(self) -> str:
        return self.iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1]

    def field_for(self, path: str) -> Field | None:
        return next((f for f in self.fields if f.path == path), None)

    def to_jsonld(self) -> dict[str, Any]:
        """The shape as answers carry it: IRI, target class, label and fields."""
        out: dict[str, Any] = {"@id": self.iri, "@type": "sh:NodeShape"}
        if self.target_class:
            out["sh:targetClass"] = compact_iri(self.target_class)
        if self.label:
            out["rdfs:label"] = self.label
        out["sh:property"] = [f.to_jsonld() for f in self.fields]
        return out


def _value_labels(
    graph: Graph, node: Node, order: tuple[Scalar, ...]
) -> tuple[tuple[Scalar, dict[str, str]], ...]:
    """The labels of an enumeration's values (``p:valueLabel [ p:value …; rdfs:label … ]``),
    in the order of its ``sh:in``."""
    found = {}
    for labelled in graph.objects(node, URIRef(P + "valueLabel")):
        value = _one(graph, labelled, URIRef(P + "value"))
        if value is not None:
            found[_json_value(value)] = _texts(graph, labelled, RDFS.label)
    ranked = {v: i for i, v in enumerate(order)}
    return tuple(sorted(found.items(), key=lambda item: ranked.get(item[0], len(ranked))))


def _field(graph: Graph, node: Node) -> Field:
    def integer(predicate: URIRef) -> int | None:
        value = _one(graph, node, predicate)
        return int(value) if isinstance(value, Literal) else None

    def scalar(predicate: URIRef) -> Scalar | None:
        value = _one(graph, node, predicate)
        return None if value is None else _json_value(value)

    def iri(predicate: URIRef) -> str | None:
        value = _one(graph, node, predicate)
        return str(value) if value is not None else None

    in_node = _one(graph, node, SH["in"])
    in_values = (
        tuple(_json_value(v) for v in Collection(graph, in_node)) if in_node is not None else None
    )
    order = _one(graph, node, SH.order)
    path = _one(graph, node, SH.path)
    if not isinstance(path, URIRef):
        raise ValueError("only property shapes with a plain IRI path are supported")
    return Field(
        path=str(path),
        name=_texts(graph, node, SH.name),
        description=_texts(graph, node, SH.description),
        datatype=iri(SH.datatype),
        node_kind=iri(SH.nodeKind),
        class_=iri(SH["class"]),
        min_count=integer(SH.minCount) or 0,
        max_count=integer(SH.maxCount),
        min_inclusive=scalar(SH.minInclusive),
        max_inclusive=scalar(SH.maxInclusive),
        min_length=integer(SH.minLength),
        max_length=integer(SH.maxLength),
        pattern=iri(SH.pattern),
        in_values=in_values,
        default=scalar(SH.defaultValue),
        order=float(order) if isinstance(order, Literal) else 1e9,
        value_labels=_value_labels(graph, node, in_values or ()),
        message=_texts(graph, node, SH.message),
        personal=str(_one(graph, node, URIRef(BC + "personalData"))).lower() == "true",
        contract_start=str(_one(graph, node, URIRef(BC + "contractStart"))).lower() == "true",
        shapes=tuple(sorted(str(s) for s in graph.objects(node, URIRef(BC + "shape")))),
    )


def shapes_from_graph(graph: Graph) -> dict[str, NodeShape]:
    """Every named node shape of a graph, by IRI."""
    shapes: dict[str, NodeShape] = {}
    for node in graph.subjects(RDF.type, SH.NodeShape):
        if isinstance(node, BNode):
            continue
        target = _one(graph, node, SH.targetClass)
        fields = sorted(
            (_field(graph, p) for p in graph.objects(node, SH.property)),
            key=lambda f: (f.order, f.path),
        )
        shapes[str(node)] = NodeShape(
            iri=str(node),
            target_class=str(target) if target is not None else None,
            label=_texts(graph, node, RDFS.label),
            fields=tuple(fields),
        )
    return shapes


def parse_shapes(turtle: str) -> dict[str, NodeShape]:
    """Every named node shape in a Turtle text, by IRI."""
    return shapes_from_graph(Graph().parse(data=turtle, format="turtle"))


def to_literal(value: Any, datatype: str | None) -> Literal:
    """A JSON value as the literal its field declares; a value that does not fit keeps its own type.

    A value that does not fit is not coerced: the shape's ``sh:datatype`` then reports it.
    """
    if datatype is None or (isinstance(value, bool) and datatype != str(XSD.boolean)):
        return Literal(value)
    kind = datatype.rsplit("#", 1)[-1]
    try:
        if kind == "integer" and isinstance(value, int | float) and float(value).is_integer():
            return Literal(int(value), datatype=XSD.integer)
        if kind == "decimal" and isinstance(value, int | float):
            return Literal(Decimal(str(value)), datatype=XSD.decimal)
        if kind == "date" and isinstance(value, str) and _ISO_DATE.match(value):
            return Literal(dt.date.fromisoformat(value), datatype=XSD.date)
        if kind == "dateTime" and isinstance(value, str):
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return Literal(moment, datatype=XSD.dateTime)
        if kind == "string" and isinstance(value, str):
            # a plain literal: Turtle's "W" in sh:in is plain too, and rdflib compares them exactly
            return Literal(value)
        if kind == "boolean" and isinstance(value, bool):
            return Literal(value, datatype=XSD.boolean)
    except (ValueError, InvalidOperation):
        pass
    return Literal(value)
