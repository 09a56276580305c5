"""What the checker puts into a shape's fields: built-in facts for the norm's risk objects, a
facts file for any other class, or values derived from the fields' admissible ranges."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from omds_ld.norm.jsonld import expand_curie

# the seed's car and a flat: they conform to the example insurers' shapes
BUILTIN: dict[str, dict[str, Any]] = {
    expand_curie("p:Vehicle"): {
        "p:make": "Skoda", "p:model": "Octavia", "p:yearOfConstruction": 2021, "p:powerKw": 110,
        "p:listPrice": 32000, "p:licensePlate": "W-12345A",
    },
    expand_curie("p:Dwelling"): {
        "p:livingArea": 85, "p:constructionType": "solid", "p:yearOfConstruction": 1998,
        "p:postalCode": "1010",
    },
}  # fmt: skip


def derived(field: Mapping[str, Any]) -> Any:
    """A value the field admits, from its range (the condensed shape's field)."""
    if field.get("in"):
        return field["in"][0]
    kind = str(field.get("type", "")).rsplit("#", 1)[-1].rsplit(":", 1)[-1]
    low, high = field.get("min"), field.get("max")
    if kind in ("integer", "int", "long", "decimal", "double", "float", "nonNegativeInteger"):
        number = low if low is not None else (high if high is not None else 1)
        if low is not None and high is not None:
            number = (low + high) // 2 if kind in ("integer", "int", "long") else (low + high) / 2
        return number
    if kind == "boolean":
        return True
    if kind == "date":
        return str(low or "2027-01-01")
    pattern = field.get("pattern")
    if pattern:
        return _matching(str(pattern))
    length = max(int(field.get("minLength") or 1), 4)
    return "x" * min(length, int(field.get("maxLength") or length))


def _matching(pattern: str) -> str:
    """A short string for simple patterns (classes, counts, literals); 'A' where in doubt."""
    out = []
    for piece in re.findall(r"\[[^\]]+\]\{\d+(?:,\d+)?\}|\[[^\]]+\][+*]?|\\.|[^\^$]", pattern):
        if piece.startswith("["):
            chars = piece[1 : piece.index("]")]
            sample = chars[0] if chars[0] not in "^\\" else "A"
            count = re.search(r"\{(\d+)", piece)
            out.append(sample * (int(count.group(1)) if count else 1))
        elif piece.startswith("\\"):
            out.append(piece[1])
        else:
            out.append(piece)
    return "".join(out) or "A"


def risk_object(
    class_iri: str, fields: Sequence[Mapping[str, Any]], facts: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """A risk object of the class for a shape: from the facts where they have the class, the
    shape's required fields filled in from their ranges where they do not."""
    known = {**BUILTIN, **{expand_curie(k): dict(v) for k, v in facts.items()}}.get(
        expand_curie(class_iri)
    )
    if known is not None:
        return {"@type": class_iri, **known}
    body: dict[str, Any] = {"@type": class_iri}
    for field in fields:
        if field.get("required"):
            body[str(field["name"])] = derived(field)
    return body
