"""An answer condensed, whole: the header, the part its type's reader writes, the next steps,
the shapes they expect, what the insurer left out, provenance; a problem of the norm as a tool
error, with what is still admissible."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from omds_ld.mcp.condense.readers import READERS
from omds_ld.mcp.condense.report import write_validation
from omds_ld.mcp.condense.shapes import write_shapes
from omds_ld.mcp.condense.steps import instead, offered_only, write_next_steps
from omds_ld.mcp.condense.writer import Condensed, Effects, Shared, Writer, local, many
from omds_ld.mcp.seen import Carried


def condense(
    answer: Mapping[str, Any],
    *,
    operation: str,
    insurer: str,
    language: str,
    status: int,
    provenance: Mapping[str, Any],
    shapes_seen: Collection[str] = (),
    offered: Collection[str] | None = None,
    drafts_seen: Mapping[str, str] | None = None,
    step_arguments: Mapping[str, Any] | None = None,
    shared: Shared | None = None,
    deprecated: Mapping[str, str] | None = None,
    sent: Any = None,
    carried: Carried | None = None,
    stated: Mapping[str, str] | None = None,
    effects: Effects | None = None,
) -> Condensed:
    """Condense one answer of the insurer, in the norm's canonical JSON-LD form.

    ``shapes_seen``, ``drafts_seen`` (as ``Condensed.drafts`` gave them): what this session
    was shown; a shape is named, an edit's draft shown the same is one line. ``offered``: the
    tools the caller has (steps to others are left out). ``step_arguments``: taken by every
    step (the broker endpoint's ``insurer``); ``shared``: what a broker session was shown at
    any insurer. ``deprecated`` and ``stated`` (per operation, the body part the person
    states): steps say so. ``sent``: the call's body (a risk object stored as sent is not
    repeated). ``carried``: what a client without a session sent back (``seen``), standing for
    the session's memory; the answer's own ``seen`` goes out once, structured. ``effects``:
    what the norm says of the call (x-omds-ld keeps): what it could not have changed is said
    to be unchanged by it, with or without a memory.
    """
    if carried is not None:
        shapes_seen = carried.shapes_seen
        drafts_seen = None if drafts_seen is None else carried.drafts_seen
    w = Writer(language)
    w.shared, w.insurer, w.deprecated, w.stated = shared, insurer, deprecated or {}, stated or {}
    w.sent = _sent_risk_objects(sent)
    w.effects = effects or Effects(operation)
    w.versioned = carried is not None
    if drafts_seen is not None:
        w.drafts_before, w.name_unchanged = drafts_seen, True
    kind = str(answer.get("@type", ""))
    w.data.update({"operation": operation, "insurer": insurer, "status": status})
    w.line(f"{insurer} · {operation}")
    _deprecation(w, operation)
    shapes = [s for s in many(answer.get("bc:shape")) if isinstance(s, Mapping) and s.get("@id")]
    shape_names = {s["@id"]: local(s["@id"]) for s in shapes}
    reader = READERS.get(kind)
    if reader is None:
        w.line(
            f"An answer of type {kind or '(none)'}, which the norm does not define; its next steps:"
        )
        w.missing("a type of the norm (@type)")
        ready_fills: set[str] = set()
    else:
        ready_fills = reader(w, answer)
    steps = offered_only(many(answer.get("bc:nextStep")), offered)
    write_next_steps(w, steps, shape_names, given=step_arguments)
    if shapes:
        _write_expected_shapes(w, steps, shapes, shapes_seen, ready_fills, sent)
    if carried is not None:
        carry(w, carried.after(w.drafts, shape_names))
    w.report_missing()
    w.settle_abbreviation()
    _provenance(w, provenance)
    return Condensed("\n".join(w.lines), w.data, w.drafts)


def _write_expected_shapes(
    w: Writer,
    steps: Sequence[Mapping[str, Any]],
    shapes: Sequence[Mapping[str, Any]],
    seen: Collection[str],
    ready_fills: Collection[str],
    sent: Any,
) -> None:
    """The shapes the steps expect: whole, or named where the session was shown them or the
    caller has them without memory (``_kept_shapes``), or left out where a body fills them."""
    open_steps = {i for s in steps if not s.get("bc:body") for i in many(s.get("bc:expects"))}
    # a shape only steps with a ready body expect needs no field list: the body fills it
    filled = {s["@id"] for s in shapes if s["@id"] not in open_steps} | set(ready_fills)
    kept = {s for s in _kept_shapes(w, steps, shapes, sent) if s not in seen}
    named = {s["@id"] for s in shapes if s["@id"] in seen or s["@id"] in kept}
    write_shapes(w, shapes, named, filled)
    if kept - filled:
        w.line("Shapes the steps name: as before this call (readShape gives one)")


def _kept_shapes(
    w: Writer,
    steps: Sequence[Mapping[str, Any]],
    shapes: Sequence[Mapping[str, Any]],
    sent: Any,
) -> set[str]:
    """The shapes whose fields the caller has without any memory of this session: every step
    that expects one is to the operation just called (the caller built its body by them), or
    to an operation on a part of the case the call keeps (the step was offered before the
    call, with the shape), or the shape is of the body just sent. Reads and creates show every
    shape whole: they are where a client starts or resumes."""
    effects = w.effects
    if effects.kind not in ("edit", "inquiry"):
        return set()
    sent_types = {str(t) for t in many(sent.get("@type"))} if isinstance(sent, Mapping) else set()
    expecting: dict[str, list[str]] = {}
    for step in steps:
        for iri in many(step.get("bc:expects")):
            expecting.setdefault(str(iri), []).append(str(step.get("bc:operation")))
    kept = set()
    for shape in shapes:
        iri = str(shape["@id"])
        if str(shape.get("sh:targetClass", "")) in sent_types or all(
            tool == effects.operation or effects.keeps_part_of(tool)
            for tool in expecting.get(iri, [])
        ):
            kept.add(iri)
    return kept


def _sent_risk_objects(body: Any) -> list[dict[str, Any]]:
    """The fields of each risk object a call's body sent: the body itself (createRiskObject,
    updateRiskObject) or those of an inquiry's instance."""
    if not isinstance(body, Mapping):
        return []
    instance = body.get("p:instance")
    sent = [body, *many(instance.get("p:hasRiskObject") if isinstance(instance, Mapping) else None)]
    return [
        {k: v for k, v in node.items() if k not in ("@id", "@type", "@context", "bc:riskObjectId")}
        for node in sent
        if isinstance(node, Mapping)
    ]


def _deprecation(w: Writer, operation: str) -> None:
    """A call of a deprecated operation says so, right below the header."""
    if operation in w.deprecated:
        w.line(
            f"{instead([operation], w.deprecated)} is deprecated: it works until the norm's "
            "next major version removes it"
        )
        w.data["deprecated"] = True


def condense_problem(
    problem: Mapping[str, Any],
    *,
    operation: str,
    insurer: str,
    language: str,
    kind: str,
    provenance: Mapping[str, Any],
    offered: Collection[str] | None = None,
    step_arguments: Mapping[str, Any] | None = None,
    deprecated: Mapping[str, str] | None = None,
    stated: Mapping[str, str] | None = None,
) -> Condensed:
    """A problem of the norm as a tool error: type, kind, explanation, what is still admissible."""
    w = Writer(language)
    w.deprecated, w.stated = deprecated or {}, stated or {}
    status = int(problem.get("status", 0))
    w.data.update({"operation": operation, "insurer": insurer, "status": status})
    w.line(f"{insurer} · {operation} · refused ({kind})")
    w.line(f"Problem {problem.get('type')}: {problem.get('title')}")
    w.line(str(problem.get("detail", "")))
    errors = list(many(problem.get("errors")))
    for error in errors:
        w.line(f"- {error.get('pointer') or '(body)'}: {error.get('detail')}", 1)
    if problem.get("known"):
        w.line("Known: " + ", ".join(str(k) for k in problem["known"]), 1)
    if kind == "rate-limited":
        w.line(f"Nothing was done: wait {problem.get('retryAfterSeconds', 1)} s, then retry.")
    else:
        w.line("Nothing was changed." if kind != "temporary" else "Temporary: retry later.")
    w.data["problem"] = {
        "type": problem.get("type"),
        "title": problem.get("title"),
        "kind": kind,
        "detail": problem.get("detail"),
        "errors": errors,
        "known": problem.get("known"),
        "retryAfterSeconds": problem.get("retryAfterSeconds"),
    }
    write_validation(w, problem.get("bc:validationReport"))
    shape_names = {
        s["@id"]: local(s["@id"])
        for s in many(problem.get("bc:shape"))
        if isinstance(s, Mapping) and s.get("@id")
    }
    write_next_steps(
        w,
        offered_only(many(problem.get("bc:nextStep")), offered),
        shape_names,
        heading="Still admissible",
        given=step_arguments,
    )
    _provenance(w, provenance)
    return Condensed("\n".join(w.lines), w.data)


def _provenance(w: Writer, provenance: Mapping[str, Any]) -> None:
    """In the text how fresh a read is and whether an answer is a replay; the whole provenance is
    structured."""
    if "ageSeconds" in provenance:
        age, left = provenance["ageSeconds"], provenance.get("reusableForSeconds", 0)
        reuse = f"reusable {left} s" if left > 0 else "not to be reused: ask again"
        origin = f"from the cache, {age} s old, " if provenance.get("fromCache") else ""
        w.lines[0] += f" · {origin}{reuse}"
    replayed = provenance.get("replayed")
    if replayed:
        when = f" ({replayed})" if isinstance(replayed, str) else ""
        w.lines.insert(
            1,
            f"Replayed: the answer of the first call with this idempotencyKey{when}; "
            "nothing was done again.",
        )
    w.data["provenance"] = dict(provenance)


def carry(w: Writer, memory: Carried) -> None:
    """The answer's ``seen``, once, in the structured answer (``structuredContent``): a
    client's memory, for a program to send back with the next call, not for a model to read
    and copy (the text is short without it: what the call kept is said so)."""
    w.data["seen"] = memory.token()
