"""The structured answer's form and where it travels: every part ``structuredContent`` can
have, the summary a model's host may show, the whole answer in ``_meta`` for programs that ask
for it (``answer_extension``), and how a client reads it back (``answer_of``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from omds_ld.mcp.scope import PRECISION_SCHEMA

if TYPE_CHECKING:
    from mcp.client.extension import ClientExtension

_OBJECT = {"type": "object"}
_ARRAY = {"type": "array"}


# Every part structuredContent can have, with its type: every answer and every tool error matches
# it (tests/mcp/test_condense.py checks it on real answers); docs/broker.md describes the parts.
STRUCTURED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["operation", "insurer", "provenance"],
    "properties": {
        "operation": {"type": "string"},
        "insurer": {"type": "string"},
        "status": {"type": "integer"},
        "process": {"type": "string", "enum": ["draft at the server", "inquiry"]},
        "applying": {"type": "string"},
        "seen": {"type": "string"},  # to a client without a session: send it with the next call
        **{
            name: _OBJECT
            for name in (
                "case",
                "offer",
                "application",
                "processKnowledge",
                "product",
                "draft",
                "validation",
                "premium",
                "body",
                "shape",
                "problem",
                "full",
            )
        },
        **{
            name: _ARRAY
            for name in ("products", "riskObjects", "shapes", "defaults", "applications")
        },
        "window": PRECISION_SCHEMA,
        "nextStepsScope": PRECISION_SCHEMA,
        "nextSteps": {
            "type": "array",
            "items": {"type": "object", "required": ["tool", "target"]},
        },
        "provenance": {
            "type": "object",
            "required": ["insurer", "operation", "url", "time", "fromCache"],
        },
    },
}


# The whole structured answer travels in the result's ``_meta`` under this key: for programs (a
# client's UI, the scenario checker), which a host does not show to a model. Only to a client
# that declares the extension of the same name (``capabilities.extensions``, SEP-2133): every
# other client (a model's host) would read some four times the text's bytes it never uses.
ANSWER_META = "omds-ld/answer"


# What structuredContent carries, where a client may show it to a model: the answer's facts in a
# few keys, never larger than the text (which has the rest; ``_meta`` has everything).
SUMMARY_PARTS: dict[str, tuple[str, ...]] = {
    "case": ("caseId", "status"),
    "offer": ("offerId", "validUntil", "digest", "expired"),
    "application": ("applicationId", "state", "policyNumber"),
    "premium": ("gross", "currency", "period"),
    "validation": ("conforms",),
    "problem": ("type", "kind"),
    "provenance": ("time", "fromCache", "reusableForSeconds", "replayed"),
}


# Declared on every tool of every server: what every result's structuredContent has, and its
# other parts with their types.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["operation", "insurer", "provenance"],
    "properties": {
        "operation": {"type": "string"},
        "insurer": {"type": "string"},
        "status": {"type": "integer"},
        "process": STRUCTURED_SCHEMA["properties"]["process"],
        "seen": {"type": "string"},
        **{name: _OBJECT for name in SUMMARY_PARTS},
    },
}


def summary_of(structured: Mapping[str, Any]) -> dict[str, Any]:
    """The structuredContent of an answer: a summary of its whole structured form."""
    out = {
        k: structured[k]
        for k in ("operation", "insurer", "status", "process", "seen")
        if k in structured
    }
    for part, keys in SUMMARY_PARTS.items():
        whole = structured.get(part)
        if isinstance(whole, Mapping):
            out[part] = {k: whole[k] for k in keys if whole.get(k) is not None}
    if "provenance" not in out:
        out["provenance"] = {}
    return out


def answer_extension() -> ClientExtension:
    """For the SDK's ``Client(extensions=[...])``: the client declares the extension of the whole
    structured answer, and its tool results carry it in ``_meta`` (``answer_of`` reads it).
    The SDK's client side is imported here: a server never loads it."""
    from mcp.client.extension import advertise

    return advertise(ANSWER_META)


def answer_of(result: Any) -> dict[str, Any]:
    """The whole structured answer of a tool result of the norm's MCP server, from the SDK's
    result or its JSON (``_meta``; a result without one: its structuredContent)."""
    if isinstance(result, Mapping):
        meta, structured = result.get("_meta"), result.get("structuredContent")
    else:
        meta, structured = (
            getattr(result, "meta", None),
            getattr(result, "structured_content", None),
        )
    found = meta.get(ANSWER_META) if isinstance(meta, Mapping) else None
    if isinstance(found, Mapping):
        return dict(found)
    return dict(structured) if isinstance(structured, Mapping) else {}
