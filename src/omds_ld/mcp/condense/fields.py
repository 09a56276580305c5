"""A field of a shape or an attribute of a draft: its admissible range, as the text writes it
and as data, with what each value of an enumeration means."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omds_ld.mcp.condense.writer import Writer, as_json, label, local, many


def value_labels(field: Mapping[str, Any], language: str) -> dict[str, str]:
    """What each admissible value of an enumeration means, in the language wanted."""
    return {
        str(item.get("p:value")): label(item.get("rdfs:label"), language)
        for item in many(field.get("p:valueLabel"))
        if item.__class__ is dict or isinstance(item, Mapping)  # JSON's dicts at once
    }


def range_text(
    field: Mapping[str, Any], language: str = "en", meaning: Mapping[str, str] | None = None
) -> str:
    """The admissible range as the text writes it (``meaning``: the value labels, where the
    caller has them already)."""
    parts = []
    datatype = field.get("sh:datatype")
    if datatype and "sh:in" not in field:
        parts.append(local(str(datatype)).replace("xsd:", ""))
    if "sh:in" in field:
        if meaning is None:
            meaning = value_labels(field, language)
        parts.append(
            "one of "
            + ", ".join(f"{v} ({meaning[str(v)]})" if str(v) in meaning else str(v)
                        for v in field["sh:in"])
        )  # fmt: skip
    low, high = field.get("sh:minInclusive"), field.get("sh:maxInclusive")
    if low is not None or high is not None:
        parts.append(f"{'' if low is None else low}..{'' if high is None else high}")
    if field.get("sh:minLength") is not None or field.get("sh:maxLength") is not None:
        parts.append(f"length {field.get('sh:minLength', 0)}..{field.get('sh:maxLength', '')}")
    if field.get("sh:pattern"):
        parts.append(f"pattern {field['sh:pattern']}")
    if field.get("sh:nodeKind") == "sh:IRI":
        parts.append("IRI")
    if field.get("sh:class"):
        parts.append(f"a {field['sh:class']}")
    return ", ".join(parts)


_RANGE_KEYS = (
    ("sh:datatype", "type"),
    ("sh:in", "in"),
    ("sh:minInclusive", "min"),
    ("sh:maxInclusive", "max"),
    ("sh:minLength", "minLength"),
    ("sh:maxLength", "maxLength"),
    ("sh:pattern", "pattern"),
    ("sh:class", "class"),
    ("sh:defaultValue", "default"),
    ("bc:shape", "shapes"),  # the shapes of a node value: a form of its own
)


def range_data(
    field: Mapping[str, Any], language: str = "en", meaning: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The admissible range as data (``meaning`` as for ``range_text``)."""
    out: dict[str, Any] = {}
    if meaning is None:
        meaning = value_labels(field, language)
    if meaning:
        out["labels"] = meaning
    for key, name in _RANGE_KEYS:
        if key in field:
            out[name] = field[key]
    return out


def write_fields(w: Writer, owner: Mapping[str, Any], indent: int) -> list[dict[str, Any]]:
    out = []
    for field in many(owner.get("sh:property")):
        default = field.get("sh:defaultValue")
        shown = "" if default is None else f" = {as_json(default)}"
        field_label = label(field.get("sh:name"), w.language)
        path = field.get("sh:path", "—")
        meaning = value_labels(field, w.language)
        w.line(f"{field_label}{shown} ({range_text(field, w.language, meaning)}) {path}", indent)
        out.append({"name": path, "label": field_label, **range_data(field, w.language, meaning)})
    return out
