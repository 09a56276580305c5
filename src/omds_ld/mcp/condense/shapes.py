"""The shapes next steps expect, condensed: each with its fields, or named where the session
saw it before, or left out where a ready body fills it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from omds_ld.mcp.condense.fields import range_data, range_text, value_labels
from omds_ld.mcp.condense.memory import digest_of
from omds_ld.mcp.condense.writer import Writer, label, local, many


def write_shapes(
    w: Writer,
    shapes: Sequence[Mapping[str, Any]],
    seen: Collection[str] = (),
    filled: Collection[str] = (),
) -> None:
    """Each shape with its fields; one seen before is only named, one a ready body fills is
    left out of the text (the step names it; ``structuredContent`` and readShape have it)."""
    out = []
    for shape in shapes:
        name = local(shape["@id"])
        target = shape.get("sh:targetClass", "")
        if shape["@id"] in filled:
            out.append({"iri": shape["@id"], "targetClass": target, "filledByBody": True})
            continue
        if shape["@id"] in seen:
            out.append({"iri": shape["@id"], "targetClass": target, "shownBefore": True})
            continue
        paths = {str(f.get("sh:path")) for f in many(shape.get("sh:property"))}
        attributes = {p for p in paths if not p.startswith("p:")}
        shown_above = bool(attributes) and attributes <= w.shown_properties
        start = len(w.lines)
        w.line(
            f"Shape {name}: attributes as above" if shown_above else f"Shape {name} for {target}:"
        )
        fields = []
        for field in many(shape.get("sh:property")):
            required = field.get("sh:minCount", 0) > 0
            field_label = label(field.get("sh:name"), w.language)
            description = label(field.get("sh:description"), w.language)
            explained = f"{field_label}: {description}" if description else field_label
            names = field.get("sh:name")
            meaning = value_labels(field, w.language)  # once, for the data and the text
            fields.append(
                {
                    "name": field.get("sh:path"),
                    "label": field_label,
                    # the label in every language the shape has it (a page in the person's)
                    **({"names": dict(names)} if isinstance(names, Mapping) else {}),
                    "required": required,
                    **range_data(field, w.language, meaning),
                }
            )
            if shown_above and field.get("sh:path") in w.shown_properties:
                continue
            w.line(
                f"{field.get('sh:path', '—')}: {range_text(field, w.language, meaning) or 'see description'}"
                f"{', required' if required else ''} — {explained}",
                1,
            )
        out.append({"iri": shape["@id"], "targetClass": target, "fields": fields})
        if w.shared is not None and not shown_above:
            digest = digest_of(w.lines[start:])
            where = w.shared.shapes.get(digest)
            if where is None:
                w.shared.shapes[digest] = w.insurer
            else:
                del w.lines[start:]
                w.line(f"Shape {name}: as for {where}")
    # one shown before is not even named: the next steps name the shapes they expect
    w.data["shapes"] = out
