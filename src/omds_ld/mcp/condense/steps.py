"""Next steps condensed: each an operation, its target and the shapes it expects, the arguments
all of them share said once, plain steps of one tool written on one line, deprecated operations
marked."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omds_ld.mcp.condense.memory import step_digest
from omds_ld.mcp.condense.writer import Writer, as_json, label, local, many
from omds_ld.mcp.scope import bound

MAX_NEXT_STEPS = 30


def write_next_steps(
    w: Writer,
    steps: Sequence[Mapping[str, Any]],
    shapes: Mapping[str, str],
    heading: str = "Next steps",
    given: Mapping[str, Any] | None = None,
) -> None:
    usable = [s for s in steps if s.get("bc:operation") and s.get("bc:target")]
    if len(usable) < len(steps):
        w.missing(f"bc:operation or bc:target of {len(steps) - len(usable)} next step(s)")
    kept, precision = bound(usable, MAX_NEXT_STEPS, "call the tool again with full=true")
    all_arguments = [
        {**given, **step_arguments_of(step)} if given else step_arguments_of(step) for step in kept
    ]
    common = (
        {k: v for k, v in all_arguments[0].items() if all(a.get(k) == v for a in all_arguments)}
        if len(kept) > 1
        else dict(given or {})
        if kept
        else {}
    )
    shared = " ".join(f"{k}={v}" for k, v in common.items())
    w.line(f"{heading}{f', each with {shared}' if shared else ''}:")
    out = []
    lines: list[str | Plain] = []
    for step, arguments in zip(kept, all_arguments, strict=True):
        own = {k: v for k, v in arguments.items() if k not in common}
        text = _step_text(w, step, arguments, own, shapes)
        if text is None:  # a tool and the arguments naming its target
            add_plain(lines, str(step["bc:operation"]), own)
        else:
            lines.append(text)
        out.append(_step_entry(w, step, arguments))
    step_lines(w, [x if isinstance(x, str) else x.text() for x in lines])
    old = dict.fromkeys(str(s["bc:operation"]) for s in kept if s["bc:operation"] in w.deprecated)
    if old:
        w.line(f"Deprecated, still served: {instead(old, w.deprecated)}", 1)
        for entry in out:
            if entry["tool"] in old:
                entry["deprecated"] = True
    if precision.more_to_find:
        w.line(f"({precision.line()})", 1)
    w.data["nextSteps"] = out
    w.data["nextStepsScope"] = precision.to_dict()


def _step_text(
    w: Writer,
    step: Mapping[str, Any],
    arguments: Mapping[str, Any],
    own: Mapping[str, Any],
    shapes: Mapping[str, str],
) -> str | None:
    """A step's line: tool · target · expected shapes · its own arguments · ready body (None:
    it is only a tool and the arguments that name its target, for a line of such steps)."""
    expects = many(step.get("bc:expects"))
    # the target is left out where an argument names it (as its last segment) or the ready
    # body does
    target = str(step["bc:target"])
    body = step.get("bc:body")
    last = local(target)
    named = (
        last in map(str, arguments.values())
        or (isinstance(body, Mapping) and target in body.values())
        or step.get("bc:href") == target  # the call's own URL: the tool names it
    )
    if named and not expects and not body:
        return None
    text = str(step["bc:operation"])
    if not named:
        text += f" · {w.iri(step['bc:target'])}"
    if expects and not body:  # a ready body fills the shapes it is sent against
        stated = w.stated.get(str(step["bc:operation"]))
        text += " · " + ", ".join(
            f"{shapes.get(e, local(e))} (the person confirming states it; send only what you "
            "were told of it)"
            if e == stated
            else shapes.get(e, local(e))
            for e in expects
        )
    if own:
        text += " · " + " ".join(f"{k}={v}" for k, v in own.items())
    if body:
        text += " · body " + as_json(body)
    return text


def _step_entry(w: Writer, step: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A step as ``structuredContent`` has it."""
    entry: dict[str, Any] = {"tool": step["bc:operation"], "target": step["bc:target"]}
    if arguments:
        entry["arguments"] = dict(arguments)
    expects = many(step.get("bc:expects"))
    if expects:
        entry["expects"] = expects
        stated = w.stated.get(str(step["bc:operation"]))
        if stated in expects:
            entry["statedByPerson"] = stated
    if step.get("bc:body"):
        entry["body"] = dict(step["bc:body"])
    if step.get("rdfs:label"):
        entry["label"] = label(step["rdfs:label"], w.language)
    return entry


def step_lines(w: Writer, texts: list[str]) -> None:
    """The next steps' lines; in an edit's answer, those the session's last answer of the
    case listed the same are named by their tools only ("as before: …")."""
    case = (w.data.get("case") or {}).get("iri") or w.inquired
    key = f"{case} next steps"
    digests = [step_digest(t) for t in texts]
    before = set(w.drafts_before.get(key, "").split(",")) if w.name_unchanged else set()
    if case:
        w.drafts[key] = ",".join(digests)
    again = [t for t, d in zip(texts, digests, strict=True) if d in before]
    if len(again) < 2:
        again = []
    # without a memory: the steps on a part of the case the call kept were offered before it
    keeps = w.effects.keeps_part_of
    kept = [t for t in texts if t not in again and all(map(keeps, _tools_of(t)))]
    if len(kept) < 2:
        kept = []
    # in a broker session: lines shown the same (below its ~) for another insurer
    elsewhere: list[str] = []
    where = None
    if w.shared is not None and w.name_unchanged:
        for text, digest in zip(texts, digests, strict=True):
            shown = w.shared.drafts.setdefault(f"step {digest}", w.insurer)
            if text not in again and shown != w.insurer and where in (None, shown):
                where = shown
                elsewhere.append(text)
        if len(elsewhere) < 2:
            elsewhere = []
    for text in texts:
        if text not in again and text not in elsewhere and text not in kept:
            w.line(text, 1)
    for named, heading in (
        (again, "as before"),
        (kept, "as before this call"),
        (elsewhere, f"as for {where}"),
    ):
        if named:
            tools = dict.fromkeys(tool for t in named for tool in _tools_of(t))
            w.line(f"{heading}: {', '.join(tools)}", 1)


def _tools_of(text: str) -> list[str]:
    """The tools a step's line names (a line of plain steps may name several)."""
    return text.split(" · ", 1)[0].split(", ")


@dataclass
class Plain:
    """Next steps that are a tool and the arguments naming its target, written as one line:
    several tools with the same arguments ("readOffer, listApplications · offerId=…"), or one
    tool with the values of one argument ("includeComponent · componentId one of a, b")."""

    tools: list[str]
    arguments: dict[str, list[Any]]

    def text(w) -> str:
        given = " ".join(
            f"{k}={v[0]}" if len(v) == 1 else f"{k} one of {', '.join(str(x) for x in v)}"
            for k, v in w.arguments.items()
        )
        return f"{', '.join(w.tools)} · {given}" if given else ", ".join(w.tools)


def add_plain(lines: list[str | Plain], tool: str, arguments: Mapping[str, Any]) -> None:
    last = lines[-1] if lines and isinstance(lines[-1], Plain) else None
    if last is not None and last.tools == [tool] and len(arguments) == 1 == len(last.arguments):
        (key, value), (last_key, values) = (
            next(iter(arguments.items())),
            next(iter(last.arguments.items())),
        )
        if key == last_key:
            values.append(value)
            return
    singles = {k: [v] for k, v in arguments.items()}
    if last is not None and last.arguments == singles:
        last.tools.append(tool)
        return
    lines.append(Plain([tool], singles))


def step_arguments_of(step: Mapping[str, Any]) -> dict[str, Any]:
    parameters = step.get("bc:parameters")
    if parameters.__class__ is not dict and not isinstance(parameters, Mapping):
        return {}
    arguments = dict(sorted(parameters.items()) if len(parameters) > 1 else parameters)
    for key in ("offset", "limit"):
        if key in arguments and str(arguments[key]).isdigit():
            arguments[key] = int(arguments[key])
    return arguments


def instead(names: Iterable[str], deprecated: Mapping[str, str]) -> str:
    return ", ".join(f"{n} (use {deprecated[n]})" if deprecated.get(n) else n for n in names)


def offered_only(
    steps: Sequence[Mapping[str, Any]], offered: Collection[str] | None
) -> list[Mapping[str, Any]]:
    if offered is None:
        return list(steps)
    return [s for s in steps if s.get("bc:operation") in offered]
