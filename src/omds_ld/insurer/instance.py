"""A draft in its JSON-LD form, both ways: the tree answers carry, and the body of an inquiry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omds_ld.insurer.data import Component, Insurer, Product
from omds_ld.insurer.draft import Draft, RiskObject, Scalar
from omds_ld.insurer.problems import FieldError, Problem
from omds_ld.insurer.validation import node_iris, risk_object_iri
from omds_ld.norm.jsonld import compact_iri, expand_curie
from omds_ld.norm.shapes import Field

_RANGE_KEYS = (
    "sh:datatype",
    "sh:minInclusive",
    "sh:maxInclusive",
    "sh:minLength",
    "sh:maxLength",
    "sh:pattern",
    "sh:in",
    "p:valueLabel",
    "sh:defaultValue",
)
_RESERVED = {"@id", "@type", "@context", "bc:riskObjectId"}


def attribute_iri(node_iri: str, attribute: Field) -> str:
    return f"{node_iri}/attributes/{attribute.local_name}"


def attribute_jsonld(
    node_iri: str, attribute: Field, value: Scalar | None, at_default: bool | None = None
) -> dict[str, Any]:
    """An attribute with its value and admissible range; in a draft, whether the value is still
    the insurer's default (``bc:atDefault``: nobody set it)."""
    described = attribute.to_jsonld()
    out: dict[str, Any] = {
        "@id": attribute_iri(node_iri, attribute),
        "p:property": attribute.path,
        "rdfs:label": attribute.name,
        "p:value": value,
    }
    out.update({k: described[k] for k in _RANGE_KEYS if k in described})
    out["p:required"] = attribute.required
    if at_default is not None:
        out["bc:atDefault"] = at_default
    return out


def risk_object_jsonld(iri: str, risk_object: RiskObject) -> dict[str, Any]:
    out: dict[str, Any] = {
        "@id": iri,
        "@type": compact_iri(risk_object.class_iri),
        "bc:riskObjectId": risk_object.id,
    }
    out.update({compact_iri(k): v for k, v in risk_object.values.items()})
    return out


def _node(product: Product, draft: Draft, node: Component, iri: str) -> dict[str, Any]:
    values = draft.attributes.get(node.id, {})
    out: dict[str, Any] = {
        "@id": iri,
        "@type": "p:ProductInstance" if node.id == "" else "p:ComponentInstance",
        "p:instanceOf": node.iri,
        "rdfs:label": dict(node.label),
    }
    if node.id:
        out["bc:componentId"] = node.id
        out["p:included"] = draft.is_included(node.id)
        out["p:includedByDefault"] = node.included_by_default
        out["bc:atDefault"] = not draft.is_chosen(node.id)
        out["p:mandatory"] = node.mandatory
        if node.group:
            out["p:exclusiveGroup"] = node.group
    out["p:attribute"] = [
        attribute_jsonld(
            iri, a, values.get(a.local_name),
            a.default is not None and not draft.is_chosen(node.id, a.local_name),
        )
        for a in node.attributes
    ]  # fmt: skip
    return out


def instance_jsonld(product: Product, draft: Draft, base_iri: str) -> dict[str, Any]:
    """The draft as a tree: the root, its components (p:hasPart) and risk objects."""
    iris = node_iris(product, base_iri)
    root = _node(product, draft, product.root, base_iri)
    root["p:hasPart"] = [_node(product, draft, c, iris[c.id]) for c in product.components]
    root["p:hasRiskObject"] = [
        risk_object_jsonld(risk_object_iri(base_iri, r.id), r) for r in draft.risk_objects
    ]
    return root


def parse_risk_object(
    product: Product, body: Mapping[str, Any], risk_object_id: str, pointer: str = ""
) -> RiskObject:
    """A risk object from its JSON-LD node; unknown classes and fields are named with what exists."""
    spec = product.risk_object
    class_iri = expand_curie(str(body.get("@type", "")))
    if class_iri != spec.class_iri:
        raise Problem(
            "invalid-body",
            f"the risk object of {product.id} is of class {compact_iri(spec.class_iri)}, "
            f"not {body.get('@type')!r}",
            errors=[FieldError(f"{pointer}/@type", f"use {compact_iri(spec.class_iri)}")],
        )
    known = {f.path for f in spec.shape.fields}
    values: dict[str, Scalar] = {}
    errors = []
    for key, value in body.items():
        if key in _RESERVED:
            continue
        prop = expand_curie(key)
        if prop not in known:
            admissible = ", ".join(compact_iri(f.path) for f in spec.shape.fields)
            errors.append(
                FieldError(f"{pointer}/{key}", f"unknown field; admissible: {admissible}")
            )
            continue
        values[prop] = value
    if errors:
        raise Problem(
            "invalid-body",
            f"the risk object has fields its shape {spec.shape.local_name} does not know",
            errors=errors,
        )
    return RiskObject(id=risk_object_id, class_iri=class_iri, values=values)


def _apply_attributes(
    node: Component, raw: Sequence[Any], pointer: str, changes: dict[tuple[str, str], Scalar]
) -> list[FieldError]:
    errors = []
    by_path = {a.path: a for a in node.attributes}
    for index, item in enumerate(raw):
        prop = expand_curie(str(item.get("p:property", "")))
        attribute = by_path.get(prop)
        if attribute is None:
            admissible = ", ".join(sorted(by_path)) or "none"
            errors.append(
                FieldError(
                    f"{pointer}/p:attribute/{index}/p:property",
                    f"{prop} is no attribute of {node.iri}; admissible: {admissible}",
                )
            )
            continue
        value = item.get("p:value")
        if value is not None:
            changes[(node.id, attribute.local_name)] = value
    return errors


def parse_instance(insurer: Insurer, instance: Mapping[str, Any]) -> tuple[Product, Draft]:
    """The product and draft an inquiry's ``p:instance`` describes, starting from the defaults."""
    product_iri = str(instance.get("p:instanceOf", ""))
    product = insurer.product_by_iri(product_iri)
    if product is None:
        known = [p.iri for p in insurer.products.values()]
        raise Problem(
            "unknown-product",
            f"{product_iri!r} is no product of {insurer.display_name}; products: {', '.join(known)}",
            errors=[FieldError("/p:instance/p:instanceOf", "use a product IRI from listProducts")],
            extra={"known": known},
        )
    draft = Draft.default(product)
    changes: dict[tuple[str, str], Scalar] = {}
    pointer = "/p:instance"
    errors = _apply_attributes(product.root, instance.get("p:attribute", []), pointer, changes)
    for index, part in enumerate(instance.get("p:hasPart", [])):
        part_pointer = f"{pointer}/p:hasPart/{index}"
        component = product.component_by_iri(str(part.get("p:instanceOf", "")))
        if component is None or component.id == "":
            admissible = ", ".join(c.iri for c in product.components)
            errors.append(
                FieldError(
                    f"{part_pointer}/p:instanceOf", f"unknown component; admissible: {admissible}"
                )
            )
            continue
        if "p:included" in part:
            draft = draft.with_included(product, component.id, bool(part["p:included"]))
        errors += _apply_attributes(component, part.get("p:attribute", []), part_pointer, changes)
    risk_objects = []
    for index, raw in enumerate(instance.get("p:hasRiskObject", [])):
        try:
            risk_objects.append(
                parse_risk_object(
                    product, raw, str(index + 1), f"{pointer}/p:hasRiskObject/{index}"
                )
            )
        except Problem as problem:
            errors += problem.errors
    if errors:
        raise Problem(
            "invalid-body", "the instance names things its product does not have", errors=errors
        )
    draft = draft.with_attributes(changes)
    for risk_object in risk_objects:
        draft = draft.with_risk_object(risk_object)
    return product, draft
