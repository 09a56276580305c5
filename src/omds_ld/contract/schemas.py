"""What a change of a JSON Schema does to a client that sends what the old one admitted.

``schema_changes(old, new)`` walks both schemas side by side (``$ref`` into ``$defs`` resolved,
``allOf`` merged, cycles visited once) and names each change at its place: a field added, removed
or renamed, now required or no longer, a range narrowed or widened. A change is *breaking* when a
call the old schema admitted may be refused by the new one (or mean something else): a removed or
renamed field, a new required one, anything narrowed. Widening and optional additions are not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["major", "minor", "patch"]

# keywords whose larger value admits more (a lower bound) or less (an upper bound)
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_NUMBERS = {"integer": {"integer"}, "number": {"integer", "number"}}


@dataclass(frozen=True)
class Change:
    """One change at one place: ``where`` (``body.p:vehicle.p:power``; the tool itself: ``""``),
    ``what`` (``field added``, ``narrowed``, …), ``detail`` (``maxLength 255 → 100``) and the
    version it needs: ``major`` (breaking), ``minor`` (something new), ``patch`` (words)."""

    where: str
    what: str
    detail: str
    level: Level

    @property
    def breaking(self) -> bool:
        return self.level == "major"

    def as_json(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "what": self.what,
            "detail": self.detail,
            "level": self.level,
            "breaking": self.breaking,
        }


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    names = {declared} if isinstance(declared, str) else set(declared)
    admitted: set[str] = set()
    for name in names:
        admitted |= _NUMBERS.get(name, {name})
    return admitted


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


class _Walk:
    """Both schemas' roots, to resolve their ``$ref``s, and the pairs already compared."""

    def __init__(self, old_root: Mapping[str, Any], new_root: Mapping[str, Any]) -> None:
        self.roots = (old_root, new_root)
        self.seen: set[tuple[str, str, str]] = set()

    def _resolve(self, schema: Any, side: int) -> tuple[dict[str, Any], str]:
        """The schema with its ``$ref`` followed and ``allOf`` merged in; the ref it came by."""
        if not isinstance(schema, Mapping):
            return ({} if schema is True else {"not": {}}), ""
        ref = ""
        node = dict(schema)
        for _ in range(32):  # a chain of references, never a cycle of them
            target = node.pop("$ref", None)
            if not isinstance(target, str) or not target.startswith("#/"):
                break
            ref = ref or target
            found: Any = self.roots[side]
            for part in target[2:].split("/"):
                found = found.get(part, {}) if isinstance(found, Mapping) else {}
            node = {**dict(found), **node}
        for member in node.pop("allOf", []):
            merged, _ = self._resolve(member, side)
            for key, value in merged.items():
                if key == "properties":
                    node["properties"] = {**value, **node.get("properties", {})}
                elif key == "required":
                    node["required"] = sorted({*node.get("required", []), *value})
                else:
                    node.setdefault(key, value)
        return node, ref

    def changes(self, old: Any, new: Any, where: str) -> Iterator[Change]:
        old_node, old_ref = self._resolve(old, 0)
        new_node, new_ref = self._resolve(new, 1)
        if old_ref or new_ref:
            pair = (old_ref, new_ref, where.rsplit(".", 1)[-1] if where else "")
            if pair in self.seen:
                return  # a recursive schema (the nested Instance): compared once
            self.seen.add(pair)
        yield from self._keywords(old_node, new_node, where)
        yield from self._properties(old_node, new_node, where)
        for key, label in (("items", "[]"), ("additionalProperties", "*"), ("propertyNames", "{}")):
            old_sub, new_sub = old_node.get(key), new_node.get(key)
            if isinstance(old_sub, Mapping) and isinstance(new_sub, Mapping):
                yield from self.changes(old_sub, new_sub, _join(where, label))
        yield from self._alternatives(old_node, new_node, where)

    def _keywords(
        self, old: Mapping[str, Any], new: Mapping[str, Any], where: str
    ) -> Iterator[Change]:
        """What changed in the keywords of one schema (not its parts): type, enumerations,
        bounds, patterns, whether it is closed, deprecated, personal, described."""
        for compare in (_type, _enumerations, _bounds, _patterns, _closed, _marks):
            yield from compare(old, new, where)

    def _properties(
        self, old: Mapping[str, Any], new: Mapping[str, Any], where: str
    ) -> Iterator[Change]:
        before: Mapping[str, Any] = old.get("properties") or {}
        after: Mapping[str, Any] = new.get("properties") or {}
        required_before, required_after = set(old.get("required", [])), set(new.get("required", []))
        removed = [name for name in before if name not in after]
        added = [name for name in after if name not in before]
        renamed: dict[str, str] = {}
        for name in removed:  # a field gone and one come with the same schema: renamed
            same = [
                other
                for other in added
                if other not in renamed.values()
                and self._equal(before[name], after[other])
                and (name in required_before) == (other in required_after)
            ]
            if len(same) == 1:
                renamed[name] = same[0]
        for name in removed:
            place = _join(where, name)
            if name in renamed:
                yield Change(place, "renamed", f"now {renamed[name]}", "major")
            else:
                yield Change(place, "field removed", "a call that sends it is refused", "major")
        for name in added:
            if name in renamed.values():
                continue
            place = _join(where, name)
            if name in required_after:
                yield Change(place, "field added", "required: every call must send it", "major")
            else:
                yield Change(place, "field added", "optional", "minor")
        for name in before:
            if name not in after:
                continue
            place = _join(where, name)
            if name in required_after and name not in required_before:
                yield Change(place, "now required", "a call without it is refused", "major")
            elif name in required_before and name not in required_after:
                yield Change(place, "no longer required", "", "minor")
            yield from self.changes(before[name], after[name], place)

    def _alternatives(
        self, old: Mapping[str, Any], new: Mapping[str, Any], where: str
    ) -> Iterator[Change]:
        for key in ("anyOf", "oneOf"):
            before, after = old.get(key) or [], new.get(key) or []
            if before == after:
                continue
            if len(after) < len(before) and all(
                any(self._equal(b, a) for b in before) for a in after
            ):
                yield Change(
                    where, "narrowed", f"{key}: {len(before)} → {len(after)} alternatives", "major"
                )
            elif len(after) > len(before) and all(
                any(self._equal(b, a) for a in after) for b in before
            ):
                yield Change(
                    where, "widened", f"{key}: {len(before)} → {len(after)} alternatives", "minor"
                )
            elif len(after) == len(before):
                for index, (b, a) in enumerate(zip(before, after, strict=True)):
                    yield from self.changes(b, a, _join(where, f"{key}[{index}]"))
            else:
                yield Change(where, "changed", f"{key} alternatives replaced", "major")

    def _equal(self, old: Any, new: Any) -> bool:
        return next(_Walk(*self.roots).changes(old, new, ""), None) is None


def _type(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    old_types, new_types = _types(old), _types(new)
    if old_types == new_types:
        return
    shown = f"type {_show(old.get('type'))} → {_show(new.get('type'))}"
    if new_types is not None and (old_types is None or not old_types <= new_types):
        yield Change(where, "narrowed", shown, "major")
    else:
        yield Change(where, "widened", shown, "minor")


def _admitted(schema: Mapping[str, Any], key: str) -> list[Any] | None:
    """The values an ``enum`` or ``const`` admits (None: it has none)."""
    if key == "enum":
        return schema.get("enum")
    return [schema["const"]] if "const" in schema else None


def _enumerations(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    for key in ("enum", "const"):
        before, after = _admitted(old, key), _admitted(new, key)
        if before == after:
            continue
        if after is None:
            yield Change(where, "widened", f"{key} {_show(old[key])} dropped", "minor")
        elif before is None:
            yield Change(where, "narrowed", f"{key} {_show(new[key])} added", "major")
        else:
            removed = [v for v in before if v not in after]
            added = [v for v in after if v not in before]
            if removed:
                yield Change(where, "narrowed", f"{key} without {_show(removed)}", "major")
            if added:
                yield Change(where, "widened", f"{key} with {_show(added)}", "minor")


def _bounds(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    for key in (*_LOWER, *_UPPER):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        lower = key in _LOWER
        if after is None:
            yield Change(where, "widened", f"{key} {before} dropped", "minor")
        elif before is None:
            yield Change(where, "narrowed", f"{key} {after} added", "major")
        elif (after > before) == lower:
            yield Change(where, "narrowed", f"{key} {before} → {after}", "major")
        else:
            yield Change(where, "widened", f"{key} {before} → {after}", "minor")


def _patterns(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    for key in ("pattern", "format"):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if after is None:
            yield Change(where, "widened", f"{key} {_show(before)} dropped", "minor")
        else:  # whether one pattern admits all the other does is not decided here
            detail = (
                f"{key} {_show(after)} added"
                if before is None
                else f"{key} {_show(before)} → {_show(after)}"
            )
            yield Change(where, "narrowed", detail, "major")


def _closed(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    closed_before = old.get("additionalProperties") is False
    closed_after = new.get("additionalProperties") is False
    if closed_after and not closed_before:
        yield Change(where, "narrowed", "no further fields admitted", "major")
    elif closed_before and not closed_after:
        yield Change(where, "widened", "further fields admitted", "minor")


def _marks(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> Iterator[Change]:
    """Deprecated, personal data, the description."""
    if bool(new.get("deprecated")) != bool(old.get("deprecated")) and where:
        if new.get("deprecated"):
            yield Change(where, "deprecated", "still admitted; goes with a major version", "minor")
        else:
            yield Change(where, "no longer deprecated", "", "minor")
    personal_key = "x-omds-ld-personal"
    if bool(new.get(personal_key)) != bool(old.get(personal_key)):
        now = "now" if new.get(personal_key) else "no longer"
        yield Change(where, f"{now} personal data", "", "minor")
    if old.get("description") != new.get("description") and where:
        yield Change(
            where,
            "description changed",
            f"{_show(old.get('description'))} → {_show(new.get('description'))}",
            "patch",
        )


def schema_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every change from ``old`` to ``new`` (each schema's ``$defs`` its own), in schema order."""
    return list(_Walk(old, new).changes(old, new, ""))
