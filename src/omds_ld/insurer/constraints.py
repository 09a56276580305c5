"""The simple constraints of a shapes graph, compiled once and checked directly on a data graph:
the one way the insurer checks data against a shape (drafts, risk objects, personal data).

A shape says little: for each property of a class, how many values, which datatype, node kind,
range, length, pattern, enumeration or class. pySHACL checks that through its whole machinery on
every run (targets, value nodes and results as triples in graphs), which made SHACL most of a
request's time. ``CompiledShapes`` reads the shapes once into plain checks and gives the same
report pySHACL gives (``tests/insurer/test_constraints.py`` compares both on every shipped
product, the norm's own shapes and generated bad input, at the bounds too). A shapes graph that
uses anything else (another target, a path that is not one property, logical or shape-based
constraints, a severity, a property without ``sh:message``) is not compiled: ``compile_shapes``
answers None, and the caller keeps pySHACL for it.

Beside SHACL Core, the norm names three constraints of its own (``bc:``, vocab.ttl), which the
compiler knows and pySHACL ignores: ``bc:minimumAge`` (a date at least so many years before the
insurer's today), ``bc:validIban`` (an IBAN of its country's length with valid check digits,
by schwifty) and ``bc:requiredWhen`` (required where another property of the node has a value:
the IBAN for a SEPA direct debit). A property marked ``bc:personalData`` never has its value in
a result: a report says which field and what is admissible, never what was sent.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rdflib import RDF, RDFS, XSD, BNode, Graph, Literal, URIRef
from rdflib.collection import Collection
from rdflib.term import Node

from omds_ld.insurer.shacl import PyShaclValidator, Report, Result, clean_report
from omds_ld.insurer.triples import Data, Triples
from omds_ld.norm.jsonld import BC
from omds_ld.norm.shapes import SH

# what of SHACL a node shape or property shape may say for it to be compiled (terms of other
# vocabularies mean nothing to SHACL); anything else: pySHACL
_ANNOTATION_KEYS = frozenset(
    {SH.name, SH.description, SH.order, SH.defaultValue, SH.message, SH.group}
)
_NODE_KEYS = _ANNOTATION_KEYS | {SH.targetClass, SH.property}
_PROPERTY_KEYS = _ANNOTATION_KEYS | {
    SH.path, SH.minCount, SH.maxCount, SH.datatype, SH.minInclusive, SH.maxInclusive, SH["in"],
    SH.minLength, SH.maxLength, SH.pattern, SH["class"], SH.nodeKind,
}  # fmt: skip
# the norm's own constraints (vocab.ttl) and what a result of each names as its component
MINIMUM_AGE = URIRef(BC + "minimumAge")
VALID_IBAN = URIRef(BC + "validIban")
REQUIRED_WHEN = URIRef(BC + "requiredWhen")
PERSONAL = URIRef(BC + "personalData")
NAMED_COMPONENTS = {
    MINIMUM_AGE: URIRef(BC + "MinimumAgeConstraintComponent"),
    VALID_IBAN: URIRef(BC + "ValidIbanConstraintComponent"),
    REQUIRED_WHEN: URIRef(BC + "RequiredWhenConstraintComponent"),
}


def _shacl_keys(shapes: Graph, node: Node) -> set[Node]:
    return {k for k in shapes.predicates(node, None) if str(k).startswith(str(SH))}


# checks whose values are datatype-aware: what Python type an RDF datatype's value must have
_VALUE_TYPES: dict[URIRef, tuple[type, ...]] = {
    XSD.string: (str,),
    XSD.integer: (int,),
    XSD.decimal: (Decimal,),
    XSD.boolean: (bool,),
    XSD.date: (dt.date,),
    XSD.dateTime: (dt.datetime,),
}


@dataclass(frozen=True)
class Focus:
    """What a check is given: the data graph, the focus node, its values of the property, and
    the insurer's today (for ``bc:minimumAge``)."""

    data: Data
    node: Node
    values: list[Node]
    today: dt.date


# a check: a focus node's values in, the constraint components they break out (each with the
# value node it is about, None for a count)
Check = Callable[[Focus], Iterator[tuple[URIRef, Node | None]]]


@dataclass(frozen=True)
class _Property:
    path: URIRef
    messages: dict[str, str]
    checks: tuple[Check, ...]
    personal: bool = False  # bc:personalData: its value is never in a result


@dataclass(frozen=True)
class _Shape:
    target: URIRef
    properties: tuple[_Property, ...]


class ShapeValidator:
    """Validates data graphs against one shapes graph: its simple constraints compiled once and
    checked directly; pySHACL where the shapes say more than those. Either way a personal
    field's value is never in the report."""

    def __init__(self, shapes: Graph) -> None:
        self.shapes = shapes
        self.compiled = compile_shapes(shapes)
        self.pyshacl = PyShaclValidator(shapes)
        self.personal = frozenset(
            str(path)
            for node in shapes.subjects(PERSONAL, Literal(True))
            if (path := shapes.value(node, SH.path)) is not None
        )

    def validate(self, data: Data, today: dt.date | None = None) -> Report:
        if self.compiled is not None:
            return self.compiled.validate(data, today)
        graph = data.graph() if isinstance(data, Triples) else data
        return self.pyshacl.validate(graph).without_values(self.personal)


class CompiledShapes:
    """Validates data graphs against shapes compiled by ``compile_shapes``."""

    def __init__(self, shapes: tuple[_Shape, ...]) -> None:
        self._shapes = shapes

    def validate(self, data: Data, today: dt.date | None = None) -> Report:
        """The report on ``data``; ``today``: the insurer's day a minimum age is measured on
        (the system's, where not given)."""
        day = today or dt.date.today()
        results: list[Result] = []
        for shape in self._shapes:
            for node in _focus_nodes(data, shape.target):
                for prop in shape.properties:
                    focus = Focus(data, node, list(data.objects(node, prop.path)), day)
                    for check in prop.checks:
                        for component, value in check(focus):
                            shown = None if prop.personal else value
                            results.append(
                                Result(
                                    focus_node=str(node),
                                    path=str(prop.path),
                                    messages=prop.messages,
                                    constraint=str(component),
                                    value=shown.toPython() if isinstance(shown, Literal) else None,
                                )
                            )
        return clean_report(not results, results)


def compile_shapes(shapes: Graph) -> CompiledShapes | None:
    """The shapes graph's node shapes as direct checks, or None where one says more than the
    simple constraints (then pySHACL validates with it)."""
    compiled = []
    for node in set(shapes.subjects(RDF.type, SH.NodeShape)):
        shape = _node_shape(shapes, node)
        if shape is None:
            return None
        compiled.append(shape)
    return CompiledShapes(tuple(sorted(compiled, key=lambda s: str(s.target))))


def _node_shape(shapes: Graph, node: Node) -> _Shape | None:
    keys = _shacl_keys(shapes, node)
    targets = list(shapes.objects(node, SH.targetClass))
    if not keys <= _NODE_KEYS or len(targets) != 1 or not isinstance(targets[0], URIRef):
        return None
    properties = []
    for raw in shapes.objects(node, SH.property):
        prop = _property_shape(shapes, raw)
        if prop is None:
            return None
        properties.append(prop)
    return _Shape(targets[0], tuple(properties))


def _property_shape(shapes: Graph, node: Node) -> _Property | None:
    keys = _shacl_keys(shapes, node)
    path = shapes.value(node, SH.path)
    if not keys <= _PROPERTY_KEYS or not isinstance(path, URIRef):
        return None
    messages: dict[str, str] = {}
    for message in shapes.objects(node, SH.message):
        if isinstance(message, Literal):
            messages.setdefault(message.language or "en", str(message))
    if not messages:  # pySHACL's own wording for a violation is not reproduced here
        return None
    messages.setdefault("en", "constraint violated")
    messages.setdefault("de", messages["en"])
    checks = _core_checks(shapes, node)
    named = _named_checks(shapes, node)
    if checks is None or named is None:
        return None
    personal = shapes.value(node, PERSONAL)
    return _Property(
        path, messages, (*checks, *named), isinstance(personal, Literal) and personal.value is True
    )


def _core_checks(shapes: Graph, node: Node) -> list[Check] | None:
    """The SHACL Core constraints of a property shape as checks (None: one is not compiled)."""
    checks: list[Check] = []
    for key in (SH.minCount, SH.maxCount):
        bound = shapes.value(node, key)
        if bound is not None:
            checks.append(_count(key, int(bound.toPython()) if isinstance(bound, Literal) else 0))
    datatype = shapes.value(node, SH.datatype)
    if isinstance(datatype, URIRef):
        if datatype not in _VALUE_TYPES:
            return None
        checks.append(_datatype(datatype))
    kind = shapes.value(node, SH.nodeKind)
    if kind is not None:
        if kind not in _NODE_KINDS:
            return None
        checks.append(_node_kind(_NODE_KINDS[kind]))
    for key in (SH.minInclusive, SH.maxInclusive):
        bound = shapes.value(node, key)
        if isinstance(bound, Literal):
            checks.append(_inclusive(key, bound))
    enumeration = shapes.value(node, SH["in"])
    if enumeration is not None:
        checks.append(_one_of(tuple(Collection(shapes, enumeration))))
    for key in (SH.minLength, SH.maxLength):
        bound = shapes.value(node, key)
        if isinstance(bound, Literal):
            checks.append(_length(key, int(bound.toPython())))
    pattern = shapes.value(node, SH.pattern)
    if isinstance(pattern, Literal):
        checks.append(_pattern(re.compile(str(pattern))))
    class_ = shapes.value(node, SH["class"])
    if isinstance(class_, URIRef):
        checks.append(_class(class_))
    return checks


def _named_checks(shapes: Graph, node: Node) -> list[Check] | None:
    """The norm's own constraints of a property shape as checks (None: one is malformed)."""
    checks: list[Check] = []
    age = shapes.value(node, MINIMUM_AGE)
    if age is not None:
        if not (isinstance(age, Literal) and isinstance(age.value, int)):
            return None
        checks.append(_minimum_age(age.value))
    iban = shapes.value(node, VALID_IBAN)
    if isinstance(iban, Literal) and iban.value is True:
        checks.append(_valid_iban)
    when = shapes.value(node, REQUIRED_WHEN)
    if when is not None:
        other, value = shapes.value(when, SH.path), shapes.value(when, SH.hasValue)
        if not isinstance(other, URIRef) or value is None:
            return None
        checks.append(_required_when(other, value))
    return checks


def _focus_nodes(data: Data, target: URIRef) -> list[Node]:
    """Instances of the class and of its subclasses, as the data graph states them."""
    classes = {c for c in data.transitive_subjects(RDFS.subClassOf, target) if c is not None}
    return sorted({s for c in classes for s in data.subjects(RDF.type, c)}, key=str)


def _count(key: URIRef, bound: int) -> Check:
    component = (
        SH.MinCountConstraintComponent if key == SH.minCount else SH.MaxCountConstraintComponent
    )

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        size = len(focus.values)
        if (size < bound) if key == SH.minCount else (size > bound):
            yield component, None

    return check


def _datatype(datatype: URIRef) -> Check:
    """A literal of this datatype whose value is well formed; a plain literal is an xsd:string."""
    kinds = _VALUE_TYPES[datatype]

    def fits(value: Node) -> bool:
        if not isinstance(value, Literal) or value.ill_typed:
            return False
        if value.datatype != datatype and not (
            datatype == XSD.string and value.datatype is None and value.language is None
        ):
            return False
        return isinstance(value.value, kinds)

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if not fits(value):
                yield SH.DatatypeConstraintComponent, value

    return check


def _comparable(a: Any, b: Any) -> bool:
    numbers = (int, float, Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return True
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return isinstance(a, dt.datetime) and isinstance(b, dt.datetime)
    return type(a) is type(b) and isinstance(a, dt.date | str)


def _inclusive(key: URIRef, bound: Literal) -> Check:
    """A value at or above (at or below) the bound; a value not comparable with it breaks it."""
    lowest = key == SH.minInclusive
    component = SH.MinInclusiveConstraintComponent if lowest else SH.MaxInclusiveConstraintComponent
    limit = bound.value

    def holds(value: Node) -> bool:
        if not isinstance(value, Literal) or value.ill_typed:
            return False
        python = value.value
        if not _comparable(python, limit):
            return False
        return bool(python >= limit) if lowest else bool(python <= limit)

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if not holds(value):
                yield component, value

    return check


def _one_of(members: tuple[Node, ...]) -> Check:
    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if value not in members:
                yield SH.InConstraintComponent, value

    return check


def _length(key: URIRef, bound: int) -> Check:
    shortest = key == SH.minLength
    component = SH.MinLengthConstraintComponent if shortest else SH.MaxLengthConstraintComponent

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if isinstance(value, BNode):
                yield component, value
                continue
            size = len(str(value))
            if (size < bound) if shortest else (size > bound):
                yield component, value

    return check


def _pattern(pattern: re.Pattern[str]) -> Check:
    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if isinstance(value, BNode) or pattern.search(str(value)) is None:
                yield SH.PatternConstraintComponent, value

    return check


def _class(class_: URIRef) -> Check:
    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        data = focus.data
        for value in focus.values:
            if isinstance(value, Literal) or not any(
                kind == class_ or class_ in set(data.transitive_objects(kind, RDFS.subClassOf))
                for kind in data.objects(value, RDF.type)
            ):
                yield SH.ClassConstraintComponent, value

    return check


_NODE_KINDS: dict[Node, Callable[[Node], bool]] = {
    SH.IRI: lambda value: isinstance(value, URIRef),
    SH.Literal: lambda value: isinstance(value, Literal),
    SH.BlankNode: lambda value: isinstance(value, BNode),
    SH.BlankNodeOrIRI: lambda value: isinstance(value, BNode | URIRef),
    SH.IRIOrLiteral: lambda value: isinstance(value, URIRef | Literal),
    SH.BlankNodeOrLiteral: lambda value: isinstance(value, BNode | Literal),
}


def _node_kind(fits: Callable[[Node], bool]) -> Check:
    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        for value in focus.values:
            if not fits(value):
                yield SH.NodeKindConstraintComponent, value

    return check


def _minimum_age(years: int) -> Check:
    """A date at least ``years`` years before the insurer's today (born on 29 February: of age
    on 28 February); a value that is no date is the datatype's to report."""

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        today = focus.today
        for value in focus.values:
            born = value.value if isinstance(value, Literal) else None
            if not isinstance(born, dt.date) or isinstance(born, dt.datetime):
                continue
            if birthday(born, born.year + years) > today:
                yield NAMED_COMPONENTS[MINIMUM_AGE], value

    return check


def birthday(born: dt.date, year: int) -> dt.date:
    """The day in ``year`` someone born on ``born`` has their birthday: the same day of the
    same month; born on 29 February, 28 February where the year has no 29th."""
    try:
        return born.replace(year=year)
    except ValueError:  # 29 February in a year that has none
        return dt.date(year, 2, 28)


def _valid_iban(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
    """An IBAN of its country's length and structure with valid check digits (schwifty)."""
    from schwifty import IBAN
    from schwifty.exceptions import SchwiftyException

    for value in focus.values:
        try:
            IBAN(str(value), allow_invalid=False)
        except (SchwiftyException, ValueError):
            yield NAMED_COMPONENTS[VALID_IBAN], value


def _required_when(other: URIRef, value: Node) -> Check:
    """At least one value where the focus node has ``value`` for ``other``."""

    def check(focus: Focus) -> Iterator[tuple[URIRef, Node | None]]:
        if not focus.values and (focus.node, other, value) in focus.data:
            yield NAMED_COMPONENTS[REQUIRED_WHEN], None

    return check
