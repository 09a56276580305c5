"""A validation report condensed: whether it conforms, its violations (bounded, in the
insurer's language) and its warnings, which never block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omds_ld.mcp.condense.writer import Writer, count, label, many
from omds_ld.mcp.scope import bound

MAX_VIOLATIONS = 20


def severity(result: Mapping[str, Any]) -> str:
    severity = str(result.get("sh:resultSeverity") or "sh:Violation")
    return "sh:" + severity.rsplit("#", 1)[-1].removeprefix("sh:")


def write_validation(w: Writer, report: Mapping[str, Any] | None) -> None:
    if not report:
        return
    everything = many(report.get("sh:result"))
    warnings = [r for r in everything if severity(r) == "sh:Warning"]
    results = [r for r in everything if severity(r) != "sh:Warning"]
    kept, precision = bound(
        results, MAX_VIOLATIONS, "call validateCalculation with full=true for the whole report"
    )
    conforms = bool(report.get("sh:conforms"))
    if conforms:
        w.line("Validation: conforms")
    elif precision.more_to_find:
        w.line(f"Validation: does not conform ({precision.line()} violations)")
    else:
        w.line(f"Validation: does not conform, {count(len(kept), 'violation')}")
    violations = []
    for result in kept:
        # the insurer's language first: a German insurer's refusal reads in German
        message = label(result.get("sh:resultMessage"), w.language)
        path = result.get("sh:resultPath", "")
        w.line(f"- {w.iri(result.get('sh:focusNode'))} {path}: {message}", 1)
        violations.append(
            {
                "focusNode": result.get("sh:focusNode"),
                "path": path,
                "message": message,
                "messages": result.get("sh:resultMessage"),
                "value": result.get("sh:value"),
            }
        )
    said = []
    for warning in warnings[:MAX_VIOLATIONS]:  # they do not block: said, for the broker
        message = label(warning.get("sh:resultMessage"), w.language)
        w.line(f"Warning (does not block): {message}", 1)
        said.append({"path": warning.get("sh:resultPath", ""), "message": message,
                     "messages": warning.get("sh:resultMessage")})  # fmt: skip
    w.data["validation"] = {
        "conforms": conforms,
        "violations": violations,
        "scope": precision.to_dict(),
        **({"warnings": said} if said else {}),
    }
