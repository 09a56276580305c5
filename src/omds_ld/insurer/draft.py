"""The draft of a calculation: which components are included, attribute values, risk objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from omds_ld.insurer.data import Product
from omds_ld.insurer.tariff import TariffInput

Scalar = str | int | float | bool


@dataclass(frozen=True)
class RiskObject:
    """An insured object: its id within the draft, its class and its fields by property IRI."""

    id: str
    class_iri: str
    values: Mapping[str, Scalar]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "class": self.class_iri, "values": dict(self.values)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RiskObject:
        return cls(id=raw["id"], class_iri=raw["class"], values=dict(raw["values"]))


@dataclass(frozen=True)
class Draft:
    """A product instance: included components, attribute values by node, risk objects."""

    product_id: str
    included: tuple[str, ...]
    attributes: Mapping[str, Mapping[str, Scalar]]
    risk_objects: tuple[RiskObject, ...] = field(default=())
    # what the caller set or chose (attributes as "node/name", components by id): everything
    # else is still as the insurer's default left it, even where a value equals the default
    chosen: frozenset[str] = frozenset()

    @classmethod
    def default(cls, product: Product) -> Draft:
        """The product's default instance: default components, every attribute at its default."""
        attributes: dict[str, dict[str, Scalar]] = {}
        for node in product.nodes:
            values = {a.local_name: a.default for a in node.attributes if a.default is not None}
            attributes[node.id] = values
        included = tuple(c.id for c in product.components if c.included_by_default)
        return cls(product_id=product.id, included=included, attributes=attributes)

    def is_included(self, component_id: str) -> bool:
        return component_id == "" or component_id in self.included

    def with_included(self, product: Product, component_id: str, included: bool) -> Draft:
        wanted = set(self.included)
        if included:
            wanted.add(component_id)
        else:
            wanted.discard(component_id)
        order = tuple(c.id for c in product.components if c.id in wanted)
        return replace(self, included=order, chosen=self.chosen | {component_id})

    def with_attributes(self, changes: Mapping[tuple[str, str], Scalar]) -> Draft:
        attributes = {node: dict(values) for node, values in self.attributes.items()}
        for (node, name), value in changes.items():
            attributes.setdefault(node, {})[name] = value
        chosen = {f"{node}/{name}" for node, name in changes}
        return replace(self, attributes=attributes, chosen=self.chosen | chosen)

    def is_chosen(self, node: str, name: str = "") -> bool:
        """Whether the caller set this attribute (or chose whether this component is in)."""
        return (f"{node}/{name}" if name else node) in self.chosen

    def with_risk_object(self, risk_object: RiskObject) -> Draft:
        others = tuple(r for r in self.risk_objects if r.id != risk_object.id)
        ordered = sorted((*others, risk_object), key=lambda r: int(r.id) if r.id.isdigit() else 0)
        return replace(self, risk_objects=tuple(ordered))

    def without_risk_object(self, risk_object_id: str) -> Draft:
        return replace(
            self, risk_objects=tuple(r for r in self.risk_objects if r.id != risk_object_id)
        )

    def risk_object(self, risk_object_id: str) -> RiskObject | None:
        return next((r for r in self.risk_objects if r.id == risk_object_id), None)

    def next_risk_object_id(self) -> str:
        numbers = [int(r.id) for r in self.risk_objects if r.id.isdigit()]
        return str(max(numbers, default=0) + 1)

    def tariff_input(self) -> TariffInput:
        first = self.risk_objects[0].values if self.risk_objects else {}
        by_name = {iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1]: v for iri, v in first.items()}
        return TariffInput(included=self.included, attributes=self.attributes, risk_object=by_name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "product": self.product_id,
            "included": list(self.included),
            "attributes": {node: dict(values) for node, values in self.attributes.items()},
            "riskObjects": [r.to_dict() for r in self.risk_objects],
            "chosen": sorted(self.chosen),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Draft:
        return cls(
            product_id=raw["product"],
            included=tuple(raw["included"]),
            attributes={node: dict(values) for node, values in raw["attributes"].items()},
            risk_objects=tuple(RiskObject.from_dict(r) for r in raw["riskObjects"]),
            chosen=frozenset(raw.get("chosen", ())),  # a draft from before: nothing known
        )
