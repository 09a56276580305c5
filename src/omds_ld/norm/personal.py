"""Personal data as the norm marks them (``bc:personalData`` on a field of its shapes), masked
wherever something is kept that does not need them: a field's value, and the same value where
it is repeated in a text of the same record (an answer's condensed text names the policyholder).

A field is personal in the node it is personal for: a person's ``p:postalCode`` is, a dwelling's
(a risk object, ``"@type": "p:Dwelling"``) is not. A node without a type (a payment, a consent as
bodies carry them) is taken as the norm's: its personal fields are masked."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from omds_ld.norm.jsonld import compact_iri

MASK = "•••"
SHORTEST = 3  # a value shorter is not looked for in texts: it would mask common words


Personal = Mapping[str, frozenset[str]]  # a personal field: the classes it is personal for


@cache
def personal_fields() -> Personal:
    """The norm's personal fields as a body writes them (``p:givenName``, ``bc:iban``), each
    with the classes (``p:Person``) whose shapes mark it personal."""
    from omds_ld.norm import load_norm

    fields: dict[str, set[str]] = {}
    for shape in load_norm().shapes.values():
        for f in shape.fields:
            if f.personal:
                classes = fields.setdefault(compact_iri(f.path), set())
                if shape.target_class:
                    classes.add(compact_iri(shape.target_class))
    return {key: frozenset(classes) for key, classes in fields.items()}


def masked(record: Any, fields: Personal | None = None) -> Any:
    """``record`` with every personal field's value masked (an IBAN keeps its last four
    characters, as the norm's answers show it) and those values masked in its texts too."""
    personal = personal_fields() if fields is None else fields
    found: set[str] = set()
    _collect(record, personal, found)
    # in texts, a value as a whole word, never a number's digits (a postal code in a premium)
    values = sorted(
        (v for v in found if len(v) >= SHORTEST and not v.isdigit()), key=len, reverse=True
    )
    words = (
        re.compile("|".join(rf"(?<!\w){re.escape(v)}(?!\w)" for v in values)) if values else None
    )
    return _mask(record, personal, words)


def _personal_here(node: Mapping[str, Any], fields: Personal) -> frozenset[str]:
    """The keys of ``node`` that are personal in it: by its type, or any where it has none."""
    types = node.get("@type")
    if types is None:
        return frozenset(k for k in node if k in fields)
    named = {types} if isinstance(types, str) else set(types if isinstance(types, list) else ())
    return frozenset(k for k in node if k in fields and fields[k] & named)


def _collect(node: Any, fields: Personal, found: set[str]) -> None:
    if isinstance(node, dict):
        personal = _personal_here(node, fields)
        for key, value in node.items():
            if key in personal:
                found.update(_strings(value))
            else:
                _collect(value, fields, found)
    elif isinstance(node, list):
        for item in node:
            _collect(item, fields, found)


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [str(node)] if node is not None else []


def _one(key: str, value: Any) -> Any:
    if isinstance(value, list):
        return [_one(key, item) for item in value]
    if isinstance(value, str) and key == "bc:iban":
        return MASK + value.replace(" ", "")[-4:]
    return MASK


def _mask(node: Any, fields: Personal, words: re.Pattern[str] | None) -> Any:
    if isinstance(node, dict):
        personal = _personal_here(node, fields)
        return {
            k: _one(k, v) if k in personal else _mask(v, fields, words) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_mask(item, fields, words) for item in node]
    if isinstance(node, str) and words is not None:
        return words.sub(MASK, node)
    return node
