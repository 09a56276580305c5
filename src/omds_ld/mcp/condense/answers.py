"""An answer condensed, whole: the header, the part its type's reader writes, the next steps,
the shapes they expect, what the insurer left out, provenance; a problem of the norm as a tool
error, with what is still admissible."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from omds_ld.mcp.condense.readers import READERS
from omds_ld.mcp.condense.report import write_validation
from omds_ld.mcp.condense.shapes import write_shapes
from omds_ld.mcp.condense.steps import instead, offered_only, write_next_steps
from omds_ld.mcp.condense.writer import Condensed, Shared, Writer, local, many
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
) -> Condensed:
    """Condense one answer of the insurer, in the norm's canonical JSON-LD form.

    ``shapes_seen`` names the shapes this session was shown already: they are named, not repeated.
    ``offered`` names the tools the caller has: next steps to other operations are left out.
    ``drafts_seen`` (the drafts this session was shown, as ``Condensed.drafts`` gave them): given
    to an edit's answer, a draft shown the same before is one line.
    ``step_arguments`` are taken by every next step besides its own (the broker endpoint's
    ``insurer``); ``shared`` is what the broker endpoint's session was shown at any insurer.
    ``deprecated`` names the norm's deprecated operations (with what to use instead): a call of
    one and a next step to one say so. ``stated`` names, per operation, the shape of the body
    part the person confirming states: a next step says so. ``sent`` is the body of the call answered: a risk object
    stored with the fields it sent is said to be so, its values not repeated. ``carried`` is
    the memory a client without a session sent (its last answer's ``seen``): it stands for
    ``shapes_seen`` and ``drafts_seen``, and the answer's own ``seen`` goes out with its next
    steps.
    """
    if carried is not None:
        shapes_seen = carried.shapes_seen
        drafts_seen = None if drafts_seen is None else carried.drafts_seen
    w = Writer(language)
    w.shared, w.insurer, w.deprecated, w.stated = shared, insurer, deprecated or {}, stated or {}
    w.sent = _sent_risk_objects(sent)
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
        open_steps = {i for s in steps if not s.get("bc:body") for i in many(s.get("bc:expects"))}
        # a shape only steps with a ready body expect needs no field list: the body fills it
        filled = {s["@id"] for s in shapes if s["@id"] not in open_steps}
        write_shapes(w, shapes, shapes_seen, filled | ready_fills)
    if carried is not None:
        carry(w, carried.after(w.drafts, shape_names))
    w.report_missing()
    w.settle_abbreviation()
    _provenance(w, provenance)
    return Condensed("\n".join(w.lines), w.data, w.drafts)


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
    """The answer's ``seen``: among the arguments every next step takes (text and structured),
    and in the structured answer."""
    token = memory.token()
    w.data["seen"] = token
    steps = w.data.get("nextSteps")
    if w.steps_heading is None or not steps:
        return
    heading = w.lines[w.steps_heading]
    given = " " if ", each with " in heading else ", each with "
    w.lines[w.steps_heading] = f"{heading[:-1]}{given}seen={token}:"
    for step in steps:
        step["arguments"] = {**step.get("arguments", {}), "seen": token}
