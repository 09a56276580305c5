"""A draft condensed: its tree of components with what can still be included, its attributes
with value and admissible range, what is still at the insurer's default, its risk objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omds_ld.mcp.condense.fields import range_data, range_text, value_labels
from omds_ld.mcp.condense.memory import (
    DEFAULTS_AS_BEFORE,
    UNCHANGED_BY_THIS_CALL,
    as_elsewhere,
    digest_of,
    same_as_last,
    unless_unchanged,
)
from omds_ld.mcp.condense.writer import Writer, as_json, count, label, many


def attribute_data(
    w: Writer,
    attribute: Mapping[str, Any],
    name: str | None = None,
    meaning: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An attribute as ``structuredContent`` has it (``name``, ``meaning``: its label and
    value labels, where the caller has them already)."""
    return {
        "iri": attribute.get("@id"),
        "property": attribute.get("p:property"),
        "label": label(attribute.get("rdfs:label"), w.language) if name is None else name,
        "value": attribute.get("p:value"),
        "required": attribute.get("p:required", False),
        "range": range_data(attribute, w.language, meaning),
    }


def write_attribute(w: Writer, attribute: Mapping[str, Any], indent: int) -> dict[str, Any]:
    name = label(attribute.get("rdfs:label"), w.language)
    value = attribute.get("p:value")
    shown = "—" if value is None else as_json(value)
    prop = str(attribute.get("p:property", ""))
    w.shown_properties.add(prop)
    named = prop if w.by_property else w.iri(attribute.get("@id", prop))
    meaning = value_labels(attribute, w.language)
    w.line(f"{name} = {shown} ({range_text(attribute, w.language, meaning)}) {named}", indent)
    return attribute_data(w, attribute, name, meaning)


def write_node(
    w: Writer, node: Mapping[str, Any], indent: int, replaces: Sequence[str] = ()
) -> dict[str, Any]:
    name = label(node.get("rdfs:label"), w.language)
    included = node.get("p:included", True)
    flags = []
    if node.get("p:mandatory"):
        flags.append("mandatory")
    if node.get("p:exclusiveGroup"):
        flags.append(f"one of group {node['p:exclusiveGroup']}")
    if replaces:
        flags.append("including it replaces " + ", ".join(replaces))
    mark = "[x]" if included else "[ ]"
    suffix = f" ({'; '.join(flags)})" if flags else ""
    named = w.iri(node.get("p:instanceOf") if w.by_property else node.get("@id", ""))
    w.line(f"{mark} {name}{suffix} {named}", indent)
    # in a draft at the server, a component left out is one line: its attributes come with
    # the answer that includes it; in an inquiry body they are set in the same request as
    # the inclusion, so they are shown for every component
    shown = included or w.by_property
    attributes = [
        write_attribute(w, a, indent + 1) if shown else attribute_data(w, a)
        for a in many(node.get("p:attribute"))
    ]
    out = {
        "iri": node.get("@id"),
        "instanceOf": node.get("p:instanceOf"),
        "componentId": node.get("bc:componentId"),
        "label": name,
        "included": included,
        "mandatory": node.get("p:mandatory", False),
        "group": node.get("p:exclusiveGroup"),
        "attributes": attributes,
    }
    if replaces:
        out["replaces"] = list(replaces)
    return out


def write_draft(w: Writer, draft: Mapping[str, Any], includable: Sequence[str] | None) -> None:
    name = label(draft.get("rdfs:label"), w.language)
    if w.by_property:  # the ready body below names the product
        w.line(f"Default instance of {name}:")
    else:
        w.line(f"Draft of {name} {w.iri(draft.get('@id', '—'))}")
    start = len(w.lines)
    root_attributes = [write_attribute(w, a, 1) for a in many(draft.get("p:attribute"))]
    raw_parts = list(many(draft.get("p:hasPart")))
    included_in_group: dict[str, list[str]] = {}
    for part in raw_parts:
        if part.get("p:exclusiveGroup") and part.get("p:included", True):
            included_in_group.setdefault(str(part["p:exclusiveGroup"]), []).append(
                label(part.get("rdfs:label"), w.language)
            )
    parts = [
        write_node(
            w,
            part,
            1,
            ()
            if part.get("p:included", True)
            else included_in_group.get(str(part.get("p:exclusiveGroup")), []),
        )
        for part in raw_parts
    ]
    structured: dict[str, Any] = {
        "iri": draft.get("@id"),
        "product": draft.get("p:instanceOf"),
        "attributes": root_attributes,
        "components": parts,
    }
    if includable is not None:  # the text marks them [ ], the next steps include them
        structured["includable"] = list(includable)
    w.data["draft"] = structured
    if w.by_property or not draft.get("@id"):
        start = len(w.lines)
        write_defaults(w, draft)
        if w.inquired:  # what an inquiry of the same product says "as before" to
            w.drafts[f"{w.inquired} defaults"] = digest_of(w.lines[start:])
        write_risk_objects(w, many(draft.get("p:hasRiskObject")))
        return
    iri = str(draft["@id"])
    unchanged = unless_unchanged(w, iri, start, name)
    start = len(w.lines)
    write_defaults(w, draft)
    if same_as_last(w, f"{iri} defaults", start, DEFAULTS_AS_BEFORE) or unchanged:
        if unchanged:  # the line of the unchanged draft says it of its defaults too
            del w.lines[start:]
    else:
        as_elsewhere(w, "defaults", start, "Still at the insurer's default: as for {where}")
    start = len(w.lines)
    whole = write_risk_objects(w, many(draft.get("p:hasRiskObject")))
    if not same_as_last(w, f"{iri} risk objects", start, "Risk objects: as before", whole) and (
        "riskObjects" in w.effects.keeps
    ):
        del w.lines[start:]
        w.line(f"Risk objects: {UNCHANGED_BY_THIS_CALL}")


def write_defaults(w: Writer, instance: Mapping[str, Any]) -> None:
    """What is still as the insurer's default left it, in one block: the values nobody set
    (of the root and the included components; an excluded component's are not its price),
    and the components nobody chose in or out. What an agent names as its assumptions;
    "none" when the caller gave everything. An insurer that does not say ``bc:atDefault``:
    a value equal to its default counts as one."""
    nodes = [instance] + [
        part for part in many(instance.get("p:hasPart")) if part.get("p:included", True)
    ]
    found = []
    for node in nodes:
        for attribute in many(node.get("p:attribute")):
            at_default = attribute.get("bc:atDefault")
            if at_default is None:
                at_default = "sh:defaultValue" in attribute and attribute.get(
                    "p:value"
                ) == attribute.get("sh:defaultValue")
            if at_default:
                found.append(
                    {"iri": attribute.get("@id"), "property": attribute.get("p:property"),
                     "label": label(attribute.get("rdfs:label"), w.language),
                     "value": attribute.get("p:value")}
                )  # fmt: skip
    components = [
        {"label": label(part.get("rdfs:label"), w.language),
         "included": bool(part.get("p:included", True))}
        for part in many(instance.get("p:hasPart"))
        if part.get("bc:atDefault") and not part.get("p:mandatory")
    ]  # fmt: skip
    shown = [f"{d['label']} = {as_json(d['value'])}" for d in found]
    shown += [f"{c['label']} {'included' if c['included'] else 'not included'}" for c in components]
    w.line(f"Still at the insurer's default: {'; '.join(shown) or 'none (every value was given)'}")
    w.data["defaults"] = found
    w.data["defaultComponents"] = components


def write_risk_objects(w: Writer, risk_objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each risk object's line; returned: the lines with every value written out."""
    out = []
    whole = []
    if not risk_objects and not w.by_property:  # an inquiry's body shows it has none
        w.line("Risk objects: none")
        whole.append(w.lines[-1])
    for risk_object in risk_objects:
        # in the order of their names: equivalent JSON-LD may order keys any way
        fields = {
            k: risk_object[k]
            for k in sorted(risk_object)
            if k not in ("@id", "@type", "bc:riskObjectId")
        }
        shown = ", ".join(f"{k}={as_json(v)}" for k, v in fields.items())
        where = w.iri(risk_object.get("@id", ""))
        whole.append(f"Risk object {risk_object.get('@type')} {where}: {shown}")
        if fields and fields in w.sent:  # the model has them: its own call's body
            shown = f"the {count(len(fields), 'field')} as sent"
        w.line(f"Risk object {risk_object.get('@type')} {where}: {shown}")
        out.append(
            {
                "iri": risk_object.get("@id"),
                "type": risk_object.get("@type"),
                "riskObjectId": risk_object.get("bc:riskObjectId"),
                "fields": fields,
            }
        )
    w.data["riskObjects"] = out
    return whole
