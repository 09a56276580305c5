"""The norm as a contract for agents: its tools as an MCP client meets them, and what a change of
the norm does to them.

``contract_of_norm`` reads a norm's OpenAPI file the way the MCP server of the norm makes tools of
it (every tool, as if the insurer's process were not known: what any insurer may list);
``contract_of_server`` lists a running MCP server's tools. ``diff`` compares two contracts tool by
tool: added, removed, renamed (an operationId changed on the same method and path), description
and title (the words), input schema (``contract.schemas``), annotations and the norm's flags, each
change with the version it needs, the tokens a model is shown before and after, and whether the
new version number follows the rules (semantic versioning; in ``0.y.z`` the ``y`` is the major).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omds_ld.contract.schemas import Change, Level, schema_changes
from omds_ld.mcp.catalogue import DEPRECATED_META, NORM_META, OPERATION_META
from omds_ld.norm import Norm

_LEVELS: tuple[Level, ...] = ("patch", "minor", "major")
# flags whose change moves where a tool is listed or what it takes to run it: a change of one is
# breaking; a change of the hints below only where it makes the tool less safe to run unasked
_FLAGS = ("kind", "draft", "inquiry", "binds")
_UNSAFE = {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False}


@dataclass(frozen=True)
class ContractTool:
    """One tool: its operation (``POST /calculations``; empty when a server does not say), what a
    model is shown of it, the schema its arguments must meet, its hints and the norm's flags."""

    name: str
    operation: str
    title: str
    description: str
    input_schema: Mapping[str, Any]  # what the server checks (a server's: what it lists)
    shown_schema: Mapping[str, Any]  # what a model is shown
    shown: str  # name, description and input schema as a model is shown them (compact JSON)
    annotations: Mapping[str, Any]
    flags: Mapping[str, Any]
    deprecated: bool = False


@dataclass(frozen=True)
class Contract:
    """The tools of one version of the norm (or of one MCP server), by name."""

    source: str
    version: str | None
    tools: dict[str, ContractTool]
    # a norm's file: its tools' checked schemas are known; a server: only what it lists
    checked: bool = True


def shown_text(name: str, description: str, input_schema: Mapping[str, Any]) -> str:
    """What a model is shown of a tool, as ``benchmarks/mcp.py`` counts it."""
    shown = {"name": name, "description": description, "input_schema": input_schema}
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))


def contract_of_norm(norm: Norm, source: str) -> Contract:
    """The tools the MCP server of the norm makes of this norm, every one of them."""
    from omds_ld.mcp.catalogue import tools
    from omds_ld.mcp.connector import tool_of

    found: dict[str, ContractTool] = {}
    for spec in tools(norm, None):
        listed = tool_of(spec, spec.shown_schema)
        assert listed.annotations is not None  # every tool of the norm has its hints
        hints = listed.annotations.model_dump(by_alias=True, exclude_none=True)
        hints.pop("title", None)
        operation = spec.operation
        found[spec.name] = ContractTool(
            name=spec.name,
            operation=f"{operation.method} {operation.path}",
            title=spec.title,
            description=listed.description or "",
            input_schema=spec.input_schema,
            shown_schema=listed.input_schema,
            shown=shown_text(spec.name, listed.description or "", listed.input_schema),
            annotations=hints,
            flags={
                "kind": operation.kind,
                "draft": operation.draft,
                "inquiry": operation.inquiry,
                "binds": operation.binds,
                "personal": operation.personal,
            },
            deprecated=operation.deprecated,
        )
    return Contract(source, str(norm.openapi.get("info", {}).get("version") or "") or None, found)


def contract_of_listing(listed: Any, source: str) -> Contract:
    """The contract of a server's tools/list result (the SDK's ``ListToolsResult``)."""
    found: dict[str, ContractTool] = {}
    for tool in listed.tools:
        meta = tool.meta or {}
        hints = (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {}
        )
        hints.pop("title", None)
        found[tool.name] = ContractTool(
            name=tool.name,
            operation=str(meta.get(OPERATION_META, "")),
            title=tool.title or "",
            description=tool.description or "",
            input_schema=tool.input_schema,
            shown_schema=tool.input_schema,
            shown=shown_text(tool.name, tool.description or "", tool.input_schema),
            annotations=hints,
            flags={},
            deprecated=bool(meta.get(DEPRECATED_META, False)),
        )
    version = (listed.meta or {}).get(NORM_META)
    return Contract(source, str(version) if version else None, found, checked=False)


def words_changed(old: str, new: str, context: int = 4) -> str:
    """The words that changed, git's word-diff style: ``[-gone-]{+come+}`` with a few words
    around each; ``…`` where words are left out."""
    before, after = old.split(), new.split()
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        shown: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                shown.extend(before[i1:i2])
                continue
            if i2 > i1:
                shown.append("[-" + " ".join(before[i1:i2]) + "-]")
            if j2 > j1:
                shown.append("{+" + " ".join(after[j1:j2]) + "+}")
        parts.append(" ".join(shown))
    return " … ".join(parts)


@dataclass
class ToolDiff:
    """What happened to one tool: ``status`` added, removed, renamed, changed or unchanged."""

    name: str
    status: str
    changes: list[Change] = field(default_factory=list)
    tokens_before: int | None = None
    tokens_after: int | None = None
    renamed_from: str | None = None

    @property
    def level(self) -> Level | None:
        return max((c.level for c in self.changes), key=_LEVELS.index, default=None)

    @property
    def breaking(self) -> bool:
        return any(c.breaking for c in self.changes)

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.name,
            "status": self.status,
            **({"renamedFrom": self.renamed_from} if self.renamed_from else {}),
            "level": self.level,
            "breaking": self.breaking,
            "tokens": {"before": self.tokens_before, "after": self.tokens_after},
            "changes": [c.as_json() for c in self.changes],
        }


_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")


def bump_of(old: str | None, new: str | None) -> Level | str | None:
    """How ``new`` moves on from ``old`` (semantic versions; in ``0.y.z`` a new ``y`` is a
    major version, a new ``z`` a minor one, as Cargo reads them): ``major``, ``minor``,
    ``patch``, ``same``, ``lower``; None where either is no version."""
    a, b = _VERSION.match(old or ""), _VERSION.match(new or "")
    if a is None or b is None:
        return None
    before = tuple(int(part) for part in a.groups())
    after = tuple(int(part) for part in b.groups())
    if after == before:
        return "same"
    if after < before:
        return "lower"
    position = next(i for i in range(3) if after[i] != before[i])
    if before[0] == 0:  # 0.y.z: y is the major, z the minor (and a patch has no place of its own)
        position = 0 if position <= 1 else 1
    return _LEVELS[2 - position]


@dataclass
class ContractDiff:
    """Every tool's diff between two contracts, the version they need and the tokens shown."""

    old: Contract
    new: Contract
    tools: list[ToolDiff]
    tokens: Callable[[str], int] | None = None

    @property
    def changed(self) -> list[ToolDiff]:
        return [t for t in self.tools if t.status != "unchanged"]

    @property
    def breaking(self) -> bool:
        return any(t.breaking for t in self.tools)

    @property
    def needed(self) -> Level | None:
        """The version the changes need: major where one breaks, minor for something new."""
        return max((t.level for t in self.tools if t.level), key=_LEVELS.index, default=None)

    @property
    def bump(self) -> Level | str | None:
        return bump_of(self.old.version, self.new.version)

    @property
    def version_ok(self) -> bool | None:
        """Whether the new version number is what the changes need (None: a server's contract,
        or a version that is none): at least their level, and never lower."""
        bump = self.bump
        if bump is None:
            return None
        if bump == "lower":
            return False
        if self.needed is None:
            return True
        return bump != "same" and _LEVELS.index(bump) >= _LEVELS.index(self.needed)

    def total(self, side: str) -> int | None:
        values = [getattr(t, f"tokens_{side}") for t in self.tools]
        present = [v for v in values if v is not None]
        return sum(present) if self.tokens else None

    def as_json(self) -> dict[str, Any]:
        return {
            "old": {"source": self.old.source, "version": self.old.version},
            "new": {"source": self.new.source, "version": self.new.version},
            "breaking": self.breaking,
            "needs": self.needed,
            "bump": self.bump,
            "versionOk": self.version_ok,
            "tokens": {"before": self.total("before"), "after": self.total("after")},
            "tools": [t.as_json() for t in self.tools],
        }


def _tool_changes(old: ContractTool, new: ContractTool, checked: bool) -> list[Change]:
    changes: list[Change] = []
    if new.deprecated != old.deprecated:
        if new.deprecated:
            changes.append(
                Change("", "deprecated", "still served; removed only by a major version", "minor")
            )
        else:
            changes.append(Change("", "no longer deprecated", "", "minor"))
    if old.operation and new.operation and old.operation != new.operation:
        changes.append(Change("", "operation moved", f"{old.operation} → {new.operation}", "patch"))
    if old.title != new.title:
        changes.append(Change("", "title changed", words_changed(old.title, new.title), "patch"))
    if old.description != new.description:
        changes.append(
            Change(
                "", "description changed", words_changed(old.description, new.description), "patch"
            )
        )
    for key in sorted({*old.flags, *new.flags}):
        before, after = old.flags.get(key), new.flags.get(key)
        if before != after and old.flags and new.flags:
            level: Level = "major" if key in _FLAGS else "minor"
            changes.append(Change("", "norm flag changed", f"{key} {before} → {after}", level))
    for key in sorted({*old.annotations, *new.annotations}):
        before, after = old.annotations.get(key), new.annotations.get(key)
        if before == after:
            continue
        unsafe = key in _UNSAFE and before == _UNSAFE[key] and after != _UNSAFE[key]
        changes.append(
            Change(
                "",
                "annotation changed",
                f"{key} {before} → {after}",
                "major" if unsafe else "minor",
            )
        )
    if checked:
        changes.extend(schema_changes(old.input_schema, new.input_schema))
    else:  # a server on either side: what both list
        changes.extend(schema_changes(old.shown_schema, new.shown_schema))
    return changes


def as_a_server_lists(norm: Contract, server: Contract) -> Contract:
    """A norm's tools as a server of the norm in front of one insurer lists them: a server that
    lists a tool of the draft (``draft``) keeps the draft at the server and lists no tool of the
    tariff inquiry (``inquiry``); one that lists none, the reverse. A norm against a norm, or a
    server against a server, stays as it is."""
    if not norm.checked or server.checked:
        return norm
    draft = any(norm.tools[name].flags.get("draft") for name in server.tools if name in norm.tools)
    kept = {
        name: tool
        for name, tool in norm.tools.items()
        if not (tool.flags.get("draft") and not draft) and not (tool.flags.get("inquiry") and draft)
    }
    return dataclasses.replace(norm, tools=kept)


def diff(old: Contract, new: Contract, tokens: Callable[[str], int] | None = None) -> ContractDiff:
    """Tool by tool, what the change from ``old`` to ``new`` does (in ``new``'s order, then what
    is gone); ``tokens`` counts what a model is shown (None: not counted). A norm against an
    insurer's server is compared as that server lists the norm's tools."""
    old, new = as_a_server_lists(old, new), as_a_server_lists(new, old)
    count = tokens or (lambda _text: 0)
    gone = [name for name in old.tools if name not in new.tools]
    come = [name for name in new.tools if name not in old.tools]
    by_operation = {old.tools[name].operation: name for name in gone if old.tools[name].operation}
    renamed = {
        by_operation[new.tools[name].operation]: name
        for name in come
        if new.tools[name].operation in by_operation
    }
    result: list[ToolDiff] = []
    for name, tool in new.tools.items():
        after = count(tool.shown) if tokens else None
        previous_name = next((o for o, n in renamed.items() if n == name), None)
        if name in old.tools or previous_name:
            previous = old.tools[previous_name or name]
            changes = _tool_changes(previous, tool, old.checked and new.checked)
            status = "changed" if changes else "unchanged"
            if previous_name:
                changes.insert(
                    0,
                    Change(
                        "",
                        "renamed",
                        f"was {previous_name}: a call by the old name is refused",
                        "major",
                    ),
                )
                status = "renamed"
            before = count(previous.shown) if tokens else None
            result.append(ToolDiff(name, status, changes, before, after, previous_name))
        else:
            result.append(
                ToolDiff(name, "added", [Change("", "tool added", "", "minor")], None, after)
            )
    for name in gone:
        if name in renamed:
            continue
        detail = (
            "it was deprecated"
            if old.tools[name].deprecated
            else "removed without being deprecated first"
        )
        before = count(old.tools[name].shown) if tokens else None
        result.append(
            ToolDiff(name, "removed", [Change("", "tool removed", detail, "major")], before, None)
        )
    return ContractDiff(old, new, result, tokens)


def report_text(result: ContractDiff, allow_breaking: bool = False) -> str:
    """The diff as a person reads it: one block per changed tool, then the verdict."""
    lines = [
        f"tools diff: {result.old.source} ({result.old.version or 'no version'}) → "
        f"{result.new.source} ({result.new.version or 'no version'})"
    ]
    for tool in result.changed:
        tokens = ""
        if result.tokens:
            before = "–" if tool.tokens_before is None else str(tool.tokens_before)
            after = "–" if tool.tokens_after is None else str(tool.tokens_after)
            tokens = f"  tokens {before} → {after}"
        label = "BREAKING" if tool.breaking else tool.level or ""
        lines.append(f"{tool.name}: {tool.status} [{label}]{tokens}")
        for change in tool.changes:
            where = f"{change.where}: " if change.where else ""
            detail = f": {change.detail}" if change.detail else ""
            mark = "!" if change.breaking else "-"
            lines.append(f"  {mark} {where}{change.what}{detail}")
    unchanged = sum(1 for t in result.tools if t.status == "unchanged")
    lines.append(f"{len(result.changed)} tools changed, {unchanged} unchanged")
    if result.tokens:
        lines.append(
            f"tokens a model is shown of all tools: {result.total('before')} → {result.total('after')}"
        )
    lines.append(verdict(result, allow_breaking))
    return "\n".join(lines)


def verdict(result: ContractDiff, allow_breaking: bool = False) -> str:
    needed = result.needed or "no new version"
    parts = [f"the changes need: {needed}"]
    if result.version_ok is not None:
        step = (
            f"version stays {result.new.version}"
            if result.bump == "same"
            else f"version {result.old.version} → {result.new.version} is a {result.bump} step"
        )
        fits = "as the rules say" if result.version_ok else "NOT what the changes need"
        parts.append(f"{step}: {fits}")
    if result.breaking:
        parts.append("breaking changes allowed" if allow_breaking else "BREAKING")
    return "; ".join(parts)


def exit_code(result: ContractDiff, allow_breaking: bool = False) -> int:
    """1 where a change breaks (unless allowed) or the version number breaks the rules."""
    if result.breaking and not allow_breaking:
        return 1
    return 1 if result.version_ok is False else 0
