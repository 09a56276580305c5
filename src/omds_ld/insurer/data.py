"""The example insurers as data: each a folder with products, shapes, tariffs and brokers."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from rdflib import RDFS, Graph, URIRef

from omds_ld import yamlfile
from omds_ld.insurer.checks import Finding, InsurerDataError, check_product, product_facts
from omds_ld.insurer.constraints import ShapeValidator
from omds_ld.insurer.rules import (
    ApplicationRules,
    WarningRule,
    parse_application_rules,
    parse_table,
    parse_warning_rules,
)
from omds_ld.insurer.tariff import Tariff
from omds_ld.norm.jsonld import P
from omds_ld.norm.schemas import SchemaValidator
from omds_ld.norm.shapes import SH, Field, NodeShape, shapes_from_graph

HAS_RISK_OBJECT = P + "hasRiskObject"


@dataclass(frozen=True)
class Broker:
    """A broker known to an insurer: named by its static bearer token, or by ``subject``, who it is
    at the authorization server (the ``sub`` of its access tokens). ``service`` marks a client
    acting for no broker (the MCP server reading the catalogue): it reads no case."""

    id: str
    name: str
    subject: str | None = None
    service: bool = False


ANONYMOUS = Broker(id="demo-broker", name="Demo broker (anonymous)")


@dataclass(frozen=True)
class Component:
    """A component (Baustein) of a product, or the product's root node (id "")."""

    id: str
    iri: str
    class_iri: str
    label: Mapping[str, str]
    mandatory: bool
    group: str | None
    included_by_default: bool
    shape: NodeShape | None

    @property
    def attributes(self) -> tuple[Field, ...]:
        if self.shape is None:
            return ()
        return tuple(f for f in self.shape.fields if f.path != HAS_RISK_OBJECT)

    def attribute(self, name: str) -> Field | None:
        return next((f for f in self.attributes if f.local_name == name), None)


@dataclass(frozen=True)
class RiskObjectSpec:
    """The risk object a product insures: its class, shape and how many there must be."""

    class_iri: str
    shape: NodeShape
    min_count: int
    max_count: int | None


@dataclass(frozen=True)
class Product:
    """A product: its root node, components, risk object, tariff and the shapes it needs."""

    id: str
    iri: str
    label: Mapping[str, str]
    line_of_business: Mapping[str, str]
    root: Component
    components: tuple[Component, ...]
    risk_object: RiskObjectSpec
    tariff: Tariff
    validator: ShapeValidator
    risk_validator: ShapeValidator
    warnings: tuple[WarningRule, ...] = ()  # data that contradict each other: said, never blocking

    def component(self, component_id: str) -> Component | None:
        if component_id == "":
            return self.root
        return next((c for c in self.components if c.id == component_id), None)

    def component_by_iri(self, iri: str) -> Component | None:
        if iri == self.iri:
            return self.root
        return next((c for c in self.components if c.iri == iri), None)

    @property
    def nodes(self) -> tuple[Component, ...]:
        """The root and every component, in order."""
        return (self.root, *self.components)

    @property
    def shapes(self) -> tuple[NodeShape, ...]:
        found = [n.shape for n in self.nodes if n.shape is not None]
        return (*found, self.risk_object.shape)


@dataclass(frozen=True)
class Insurer:
    """One insurer: name, process knowledge, brokers, products and shapes."""

    name: str
    display_name: str
    base: str
    language: str
    draft_at_server: bool
    process_description: Mapping[str, str]
    brokers: Mapping[str, Broker]
    products: Mapping[str, Product]
    shapes: Mapping[str, NodeShape]
    # how it takes applications at its interface (None: it takes none there)
    applications: ApplicationRules | None = None
    # how an application is made at this insurer, in its words (process knowledge)
    application_process: Mapping[str, str] = field(default_factory=dict)
    # where its day is measured: its today, a contract's earliest start, an offer's validity
    time_zone: str = "Europe/Vienna"
    # how a client shows the insurer: its website, its icon (the file's name and content)
    website: str | None = None
    icon: tuple[str, bytes] | None = None

    def product_by_iri(self, iri: str) -> Product | None:
        return next((p for p in self.products.values() if p.iri == iri), None)

    @property
    def offer_validity(self) -> dt.timedelta:
        """How long its offers bind it (30 days where it takes no applications here)."""
        days = self.applications.offer_validity_days if self.applications else 30
        return dt.timedelta(days=days)

    def shape_by_name(self, name: str) -> NodeShape | None:
        return next((s for s in self.shapes.values() if s.local_name == name), None)


# Annotations that describe a field to people but constrain nothing. pySHACL scans every
# predicate of every shape on every validation, so the graph it validates with leaves them out.
_ANNOTATIONS = {SH.name, SH.description, SH.order, SH.defaultValue, RDFS.label, RDFS.comment}


def _subgraph(graph: Graph, shape_iris: list[str]) -> Graph:
    """The triples that validate with the given shapes (blank nodes and lists included)."""
    out = Graph()
    for prefix, namespace in graph.namespaces():
        out.bind(prefix, namespace)
    todo: list[Any] = [URIRef(i) for i in shape_iris]
    seen: set[Any] = set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for s, p, o in graph.triples((node, None, None)):
            if p in _ANNOTATIONS:
                continue
            out.add((s, p, o))
            if not isinstance(o, URIRef) or p in (SH.property,):
                todo.append(o)
    return out


def _product(
    base: str,
    raw: Mapping[str, Any],
    shapes: Mapping[str, NodeShape],
    graph: Graph,
    tables: Callable[[str], Mapping[str, str]],
) -> Product:
    by_class = {s.target_class: s for s in shapes.values() if s.target_class}
    iri = f"{base}products/{raw['id']}"
    root = Component(
        id="",
        iri=iri,
        class_iri=raw["class"],
        label=raw["label"],
        mandatory=True,
        group=None,
        included_by_default=True,
        shape=by_class.get(raw["class"]),
    )
    if root.shape is None:
        raise _Mistake("class", f"no shape targets {raw['class']}")
    components = tuple(
        Component(
            id=c["id"],
            iri=f"{iri}/components/{c['id']}",
            class_iri=c["class"],
            label=c["label"],
            mandatory=bool(c.get("mandatory", False)),
            group=c.get("group"),
            included_by_default=bool(c.get("included", False) or c.get("mandatory", False)),
            shape=by_class.get(c["class"]),
        )
        for c in raw.get("components", ())
    )
    risk_field = root.shape.field_for(HAS_RISK_OBJECT)
    if risk_field is None or risk_field.class_ is None:
        raise _Mistake("class", f"the shape of {raw['class']} must give p:hasRiskObject a sh:class")
    risk_shape = by_class.get(risk_field.class_)
    if risk_shape is None:
        raise _Mistake("class", f"no shape targets the risk object class {risk_field.class_}")
    needed = [n.shape.iri for n in (root, *components) if n.shape is not None]
    return Product(
        id=raw["id"],
        iri=iri,
        label=raw["label"],
        line_of_business=raw["lineOfBusiness"],
        root=root,
        components=components,
        risk_object=RiskObjectSpec(
            class_iri=risk_field.class_,
            shape=risk_shape,
            min_count=risk_field.min_count,
            max_count=risk_field.max_count,
        ),
        tariff=Tariff.parse(raw["tariff"]),
        validator=ShapeValidator(_subgraph(graph, [*needed, risk_shape.iri])),
        risk_validator=ShapeValidator(_subgraph(graph, [risk_shape.iri])),
        warnings=parse_warning_rules(raw.get("warnings"), tables),
    )


def _icon(folder: Path, name: str | None) -> tuple[str, bytes] | None:
    """The insurer's icon: its file's name and content (served beside its interface)."""
    if name is None:
        return None
    try:
        return name, (folder / name).read_bytes()
    except OSError as error:
        raise InsurerDataError(
            [Finding(str(folder / "insurer.yaml"), "/icon", f"{name}: {error.strerror}")]
        ) from None


def _table(folder: Path, name: str) -> dict[str, str]:
    """A table a product's rule names: a file of the insurer's folder, else one of the tables
    shipped with the package (``omds_ld/insurer/tables``: Austria's district codes), so that an
    insurer's folder copied anywhere keeps its rules."""
    path = folder / name
    if not path.is_file():
        path = Path(str(resources.files("omds_ld.insurer").joinpath("tables", name)))
    try:
        raw = yamlfile.load(path.read_text("utf-8"))
        if not isinstance(raw, Mapping):
            raise ValueError("it is no mapping of values to lists of codes")
        return parse_table(raw)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise _Mistake("warnings", f"the table {name}: {error}") from None


class _Mistake(ValueError):
    """A mistake found while a product is built: its key in the product file, and what."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(detail)
        self.key = key
        self.detail = detail


@cache
def _format(name: str) -> SchemaValidator:
    """The JSON Schema of an insurer's files (``insurer`` or ``product``), shipped with us."""
    text = resources.files("omds_ld.insurer").joinpath("schemas", f"{name}.schema.json")
    return SchemaValidator(json.loads(text.read_text("utf-8")))


def _read(path: Path, schema: str, findings: list[Finding]) -> Any:
    """A YAML file of an insurer, checked against its format; None (and findings) if it fails."""
    try:
        raw = yamlfile.load(path.read_text("utf-8"))
    except OSError as error:
        findings.append(Finding(str(path), "/", f"cannot be read: {error.strerror}"))
        return None
    except yaml.YAMLError as error:
        findings.append(Finding(str(path), "/", f"is no YAML: {error}"))
        return None
    violations = _format(schema).violations(raw)
    findings += [Finding(str(path), v.pointer or "/", v.detail) for v in violations]
    return None if violations else raw


def load_insurer(folder: Path) -> Insurer:
    """Read one insurer's folder, checked: InsurerDataError lists every mistake found."""
    findings: list[Finding] = []
    raw = _read(folder / "insurer.yaml", "insurer", findings)
    if raw is None:
        raise InsurerDataError(findings)
    graph = Graph()
    for name in raw.get("shapes", ()):
        try:
            graph.parse(folder / name, format="turtle")
        except Exception as error:  # rdflib's parsers raise what they raise
            findings.append(Finding(str(folder / name), "/", f"is no Turtle: {error}"))
    shapes = shapes_from_graph(graph)
    base: str = raw["base"]
    products = {}
    for name in raw["products"]:
        path = folder / name
        product_raw = _read(path, "product", findings)
        if product_raw is None:
            continue
        try:
            product = _product(base, product_raw, shapes, graph, partial(_table, folder))
        except _Mistake as mistake:
            findings.append(Finding(str(path), mistake.key, mistake.detail))
            continue
        findings += check_product(product_facts(str(path), product_raw, product))
        products[product.id] = product
    rules = parse_application_rules(raw.get("applications"))
    findings += _unknown_components(folder / "insurer.yaml", rules, products)
    if findings:
        raise InsurerDataError(findings)
    return Insurer(
        name=raw["name"],
        display_name=raw["displayName"],
        base=base,
        language=raw.get("language", "en"),
        draft_at_server=bool(raw["processKnowledge"]["draftAtServer"]),
        process_description=raw["processKnowledge"].get("description", {}),
        brokers={
            b["token"]: Broker(id=b["id"], name=b["name"], subject=b.get("subject"))
            for b in raw.get("brokers", ())
        },
        products=products,
        shapes=shapes,
        applications=rules,
        application_process=raw["processKnowledge"].get("applications", {}),
        time_zone=_time_zone(folder / "insurer.yaml", raw.get("timeZone", "Europe/Vienna")),
        website=raw.get("website"),
        icon=_icon(folder, raw.get("icon")),
    )


def _unknown_components(
    path: Path, rules: ApplicationRules | None, products: Mapping[str, Product]
) -> list[Finding]:
    """Application rules may name only components some product of the insurer has."""
    known = {c.id for product in products.values() for c in product.components}
    findings = []
    for index, rule in enumerate(rules.rules if rules else ()):
        named = [*rule.components]
        named += [c.field.removeprefix("component:") for c in rule.conditions
                  if c.field.startswith("component:")]  # fmt: skip
        for component in named:
            if component not in known:
                findings.append(
                    Finding(
                        str(path), f"/applications/rules/{index}", f"no component {component!r}"
                    )
                )
    return findings


def builtin_insurers_folder() -> Path:
    """The folder of the example insurers shipped with the package."""
    return Path(str(resources.files("omds_ld.insurer").joinpath("insurers")))


def load_insurers(folder: Path | None = None) -> dict[str, Insurer]:
    """Every insurer below a folder (one subfolder each), by name."""
    root = folder or builtin_insurers_folder()
    insurers = {}
    findings: list[Finding] = []
    for sub in sorted(root.iterdir()):
        if (sub / "insurer.yaml").is_file():
            try:
                insurer = load_insurer(sub)
            except InsurerDataError as error:
                findings += error.findings  # every insurer's mistakes at once
                continue
            insurers[insurer.name] = insurer
    if findings:
        raise InsurerDataError(findings)
    if not insurers:
        raise InsurerDataError(
            [Finding(str(root), "/", "no insurer folders (with insurer.yaml) below it")]
        )
    return insurers


def _time_zone(where: Path, name: Any) -> str:
    """An IANA time zone the insurer's day is measured in (refused at load if unknown)."""
    try:
        ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise InsurerDataError(
            [Finding(str(where), "/timeZone", f"{name!r} is no IANA time zone (Europe/Vienna)")]
        ) from None
    return str(name)
