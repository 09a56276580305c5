"""Condensed answers: the insurer's JSON-LD answer cut down to what a model needs for its next move.

A pure function of the answer. The model gets the business case; the draft as a tree with the IRIs of
its nodes and what can be included; attributes with value and admissible range; risk objects and the
validation report; the premium; the next steps as "tool · target · expected shapes"; and the fields of
every shape a next step expects. As compact text, and as ``structuredContent`` matching
``OUTPUT_SCHEMA``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.client.extension import ClientExtension, advertise

from omds_ld.mcp.scope import PRECISION_SCHEMA, Precision, bound, window

MAX_VIOLATIONS = 20
MAX_NEXT_STEPS = 30
MAX_PRODUCTS = 50

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
        **{name: _OBJECT for name in SUMMARY_PARTS},
    },
}


def summary_of(structured: Mapping[str, Any]) -> dict[str, Any]:
    """The structuredContent of an answer: a summary of its whole structured form."""
    out = {
        k: structured[k] for k in ("operation", "insurer", "status", "process") if k in structured
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
    structured answer, and its tool results carry it in ``_meta`` (``answer_of`` reads it)."""
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


DEFAULTS_AS_BEFORE = "Still at the insurer's default: as before"


@dataclass
class Shared:
    """What one session of the broker endpoint was shown at any of its insurers, by content: a
    draft (its lines, IRIs below the answer's ~) or a shape's fields shown the same before, at
    another insurer, is named, not repeated."""

    drafts: dict[str, str] = dataclasses.field(default_factory=dict)  # digest → where shown
    shapes: dict[str, str] = dataclasses.field(default_factory=dict)  # digest → where shown


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "s")


# a value as the text shows it (JSON): json.dumps with these options makes an encoder per call
_as_json = json.JSONEncoder(ensure_ascii=False).encode
_as_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _digest(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Condensed:
    """What the model sees (text) and what a program reads (structured)."""

    text: str
    structured: dict[str, Any]
    # each draft the text showed whole: its IRI and a digest of what was shown
    drafts: dict[str, str] = dataclasses.field(default_factory=dict)


def label(value: Any, language: str) -> str:
    """A label in the wanted language, else English, else any."""
    if isinstance(value, dict) or (not isinstance(value, str) and isinstance(value, Mapping)):
        for key in (language, "en", "de"):
            if key in value:
                return str(value[key])
        return str(next(iter(value.values()), ""))
    return "" if value is None else str(value)


def many(value: Any) -> list[Any]:
    """A value that JSON-LD may write single or as an array, always as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


# how a premium's period (ISO 8601) reads: "per year", not "per P1Y"
PERIODS = {
    "P1Y": ("per year", "pro Jahr"),
    "P6M": ("per half-year", "pro Halbjahr"),
    "P3M": ("per quarter", "pro Quartal"),
    "P1M": ("per month", "pro Monat"),
}


def per_period(period: Any) -> dict[str, str]:
    """A period as words in both languages (an unknown one as it came: "per P2Y")."""
    en, de = PERIODS.get(str(period), (f"per {period}", f"pro {period}"))
    return {"en": en, "de": de}


def _days_between(start: str, end: str) -> int | None:
    try:
        return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days
    except ValueError:
        return None


def _severity(result: Mapping[str, Any]) -> str:
    severity = str(result.get("sh:resultSeverity") or "sh:Violation")
    return "sh:" + severity.rsplit("#", 1)[-1].removeprefix("sh:")


def local(iri: str) -> str:
    return iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1]


def value_labels(field: Mapping[str, Any], language: str) -> dict[str, str]:
    """What each admissible value of an enumeration means, in the language wanted."""
    return {
        str(item.get("p:value")): label(item.get("rdfs:label"), language)
        for item in many(field.get("p:valueLabel"))
        if isinstance(item, Mapping)
    }


def _range(field: Mapping[str, Any], language: str = "en") -> str:
    parts = []
    datatype = field.get("sh:datatype")
    if datatype and "sh:in" not in field:
        parts.append(local(str(datatype)).replace("xsd:", ""))
    if "sh:in" in field:
        meaning = value_labels(field, language)
        parts.append(
            "one of "
            + ", ".join(f"{v} ({meaning[str(v)]})" if str(v) in meaning else str(v)
                        for v in field["sh:in"])
        )  # fmt: skip
    low, high = field.get("sh:minInclusive"), field.get("sh:maxInclusive")
    if low is not None or high is not None:
        parts.append(f"{'' if low is None else low}..{'' if high is None else high}")
    if field.get("sh:minLength") is not None or field.get("sh:maxLength") is not None:
        parts.append(f"length {field.get('sh:minLength', 0)}..{field.get('sh:maxLength', '')}")
    if field.get("sh:pattern"):
        parts.append(f"pattern {field['sh:pattern']}")
    if field.get("sh:nodeKind") == "sh:IRI":
        parts.append("IRI")
    if field.get("sh:class"):
        parts.append(f"a {field['sh:class']}")
    return ", ".join(parts)


def _range_struct(field: Mapping[str, Any], language: str = "en") -> dict[str, Any]:
    out: dict[str, Any] = {}
    meaning = value_labels(field, language)
    if meaning:
        out["labels"] = meaning
    for key, name in (
        ("sh:datatype", "type"),
        ("sh:in", "in"),
        ("sh:minInclusive", "min"),
        ("sh:maxInclusive", "max"),
        ("sh:minLength", "minLength"),
        ("sh:maxLength", "maxLength"),
        ("sh:pattern", "pattern"),
        ("sh:class", "class"),
        ("sh:defaultValue", "default"),
    ):
        if key in field:
            out[name] = field[key]
    return out


class _Writer:
    """Collects the text and the structured form side by side."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.lines: list[str] = []
        self.data: dict[str, Any] = {}
        self.base: str | None = None
        self._declared_at = 0
        self._abbreviated: list[str] = []
        # in an inquiry's instance, attributes are named by property and nodes by what they are
        self.by_property = False
        self.inquired: str | None = None  # the product an inquiry's instance is of
        self.shown_properties: set[str] = set()
        self.absent: list[str] = []
        # the drafts this session was shown (IRI → digest) and whether an unchanged one is only
        # named (in the answer of an edit; a read shows it whole)
        self.drafts_before: Mapping[str, str] = {}
        self.name_unchanged = False
        self.drafts: dict[str, str] = {}
        self.shared: Shared | None = None  # a broker session's memory across its insurers
        # the risk objects the call sent (its body, or an inquiry's instance's): one stored
        # with the same fields is not written out again
        self.sent: list[dict[str, Any]] = []
        self.insurer = ""
        # the norm's deprecated operations, each with the one to use instead ("" if none)
        self.deprecated: Mapping[str, str] = {}

    def abbreviate_below(self, base: str) -> None:
        """Write IRIs below ``base`` as ``~/...`` in the text (the structured form keeps them whole)."""
        self.base = base.rstrip("/")
        self._declared_at = len(self.lines)
        self._abbreviated = []
        self.line(f"~ = {self.base}")

    def iri(self, iri: Any) -> str:
        text = str(iri)
        if self.base and (text == self.base or text.startswith(self.base + "/")):
            self._abbreviated.append("~" + text[len(self.base) :])
            return self._abbreviated[-1]
        return text

    def settle_abbreviation(self) -> None:
        """An abbreviation used once costs more than it saves: the IRI is written whole."""
        if self.base is None or len(self._abbreviated) > 1:
            return
        del self.lines[self._declared_at]
        for short in self._abbreviated:
            for index in range(self._declared_at, len(self.lines)):
                if short in self.lines[index]:
                    whole = self.base + short[1:]
                    self.lines[index] = self.lines[index].replace(short, whole, 1)
                    break
        self.base = None

    def line(self, text: str = "", indent: int = 0) -> None:
        self.lines.append("  " * indent + text)

    def missing(self, what: str) -> None:
        """Something the norm's answer profile asks for is not in the insurer's answer."""
        if what not in self.absent:
            self.absent.append(what)

    def report_missing(self) -> None:
        if self.absent:
            self.line("Not in the insurer's answer: " + "; ".join(self.absent))
            self.data["missing"] = list(self.absent)

    # parts of answers

    def _attribute_data(self, attribute: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "iri": attribute.get("@id"),
            "property": attribute.get("p:property"),
            "label": label(attribute.get("rdfs:label"), self.language),
            "value": attribute.get("p:value"),
            "required": attribute.get("p:required", False),
            "range": _range_struct(attribute, self.language),
        }

    def attribute(self, attribute: Mapping[str, Any], indent: int) -> dict[str, Any]:
        name = label(attribute.get("rdfs:label"), self.language)
        value = attribute.get("p:value")
        shown = "—" if value is None else _as_json(value)
        prop = str(attribute.get("p:property", ""))
        self.shown_properties.add(prop)
        named = prop if self.by_property else self.iri(attribute.get("@id", prop))
        self.line(f"{name} = {shown} ({_range(attribute, self.language)}) {named}", indent)
        return self._attribute_data(attribute)

    def node(
        self, node: Mapping[str, Any], indent: int, replaces: Sequence[str] = ()
    ) -> dict[str, Any]:
        name = label(node.get("rdfs:label"), self.language)
        included = node.get("p:included", True)
        flags = []
        if node.get("p:mandatory"):
            flags.append("mandatory")
        if node.get("p:exclusiveGroup"):
            flags.append(f"one of group {node['p:exclusiveGroup']}")
        if replaces:
            flags.append("including it replaces " + ", ".join(replaces))
        mark = "[x]" if included else "[ ]"
        suffix = f" ({'; '.join(flags)})" if flags else ""
        named = self.iri(node.get("p:instanceOf") if self.by_property else node.get("@id", ""))
        self.line(f"{mark} {name}{suffix} {named}", indent)
        # in a draft at the server, a component left out is one line: its attributes come with
        # the answer that includes it; in an inquiry body they are set in the same request as
        # the inclusion, so they are shown for every component
        shown = included or self.by_property
        attributes = [
            self.attribute(a, indent + 1) if shown else self._attribute_data(a)
            for a in many(node.get("p:attribute"))
        ]
        out = {
            "iri": node.get("@id"),
            "instanceOf": node.get("p:instanceOf"),
            "componentId": node.get("bc:componentId"),
            "label": name,
            "included": included,
            "mandatory": node.get("p:mandatory", False),
            "group": node.get("p:exclusiveGroup"),
            "attributes": attributes,
        }
        if replaces:
            out["replaces"] = list(replaces)
        return out

    def draft(self, draft: Mapping[str, Any], includable: Sequence[str] | None) -> None:
        name = label(draft.get("rdfs:label"), self.language)
        if self.by_property:  # the ready body below names the product
            self.line(f"Default instance of {name}:")
        else:
            self.line(f"Draft of {name} {self.iri(draft.get('@id', '—'))}")
        start = len(self.lines)
        root_attributes = [self.attribute(a, 1) for a in many(draft.get("p:attribute"))]
        raw_parts = list(many(draft.get("p:hasPart")))
        included_in_group: dict[str, list[str]] = {}
        for part in raw_parts:
            if part.get("p:exclusiveGroup") and part.get("p:included", True):
                included_in_group.setdefault(str(part["p:exclusiveGroup"]), []).append(
                    label(part.get("rdfs:label"), self.language)
                )
        parts = [
            self.node(
                part,
                1,
                ()
                if part.get("p:included", True)
                else included_in_group.get(str(part.get("p:exclusiveGroup")), []),
            )
            for part in raw_parts
        ]
        structured: dict[str, Any] = {
            "iri": draft.get("@id"),
            "product": draft.get("p:instanceOf"),
            "attributes": root_attributes,
            "components": parts,
        }
        if includable is not None:  # the text marks them [ ], the next steps include them
            structured["includable"] = list(includable)
        self.data["draft"] = structured
        if self.by_property or not draft.get("@id"):
            start = len(self.lines)
            self.defaults(draft)
            if self.inquired:  # what an inquiry of the same product says "as before" to
                self.drafts[f"{self.inquired} defaults"] = _digest(self.lines[start:])
            self.risk_objects(many(draft.get("p:hasRiskObject")))
            return
        iri = str(draft["@id"])
        unchanged = self._unless_unchanged(iri, start, name)
        start = len(self.lines)
        self.defaults(draft)
        if self._same_as_last(f"{iri} defaults", start, DEFAULTS_AS_BEFORE):
            if unchanged:  # the line of the unchanged draft says it of its defaults too
                del self.lines[start:]
        else:
            self._as_elsewhere("defaults", start, "Still at the insurer's default: as for {where}")
        start = len(self.lines)
        whole = self.risk_objects(many(draft.get("p:hasRiskObject")))
        self._same_as_last(f"{iri} risk objects", start, "Risk objects: as before", whole)

    def _same_as_last(
        self, key: str, start: int, instead: str, whole: Sequence[str] | None = None
    ) -> bool:
        """The lines from ``start`` stay unless this session's last answer of the case showed
        them the same (``whole``: what they stand for) and this is an edit's answer: then
        ``instead`` stands for them."""
        digest = _digest(self.lines[start:] if whole is None else whole)
        self.drafts[key] = digest
        if self.name_unchanged and self.drafts_before.get(key) == digest:
            del self.lines[start:]
            self.line(instead)
            return True
        return False

    def _as_elsewhere(self, kind: str, start: int, instead: str) -> None:
        """In a broker session, lines from ``start`` shown the same for another insurer before
        stand as ``instead`` (its ``{where}`` naming that insurer)."""
        if self.shared is None or not self.name_unchanged:
            return
        shown = self.shared.drafts
        digest = f"{kind} " + _digest(self.lines[start:])
        where = shown.get(digest)
        if where is None:
            shown[digest] = self.insurer
        elif where != self.insurer:
            del self.lines[start:]
            self.line(instead.format(where=where))

    def _unless_unchanged(self, iri: str, start: int, name: str) -> bool:
        """The draft's tree from ``start`` stays unless this session was shown the same tree
        before (of this case, or in a broker session of another insurer's) and this is an edit's
        answer: then one line says so. True where the case's last answer showed it the same."""
        head = self.lines[start - 1]
        unchanged = f"{head}: unchanged since the last answer"
        if self._same_as_last(iri, start, unchanged):
            del self.lines[start - 1]
            return True
        digest = self.drafts[iri]
        if self.name_unchanged and self.shared is not None:
            where = self.shared.drafts.get(digest)
            if where is not None:
                del self.lines[start - 1 :]
                self.line(f"Draft of {name} {self.iri(iri)}: as shown for {where}, below this ~")
            else:
                self.shared.drafts[digest] = self.insurer
        return False

    def defaults(self, instance: Mapping[str, Any]) -> None:
        """What is still as the insurer's default left it, in one block: the values nobody set
        (of the root and the included components; an excluded component's are not its price),
        and the components nobody chose in or out. What an agent names as its assumptions;
        "none" when the caller gave everything. An insurer that does not say ``bc:atDefault``:
        a value equal to its default counts as one."""
        nodes = [instance] + [
            part for part in many(instance.get("p:hasPart")) if part.get("p:included", True)
        ]
        found = []
        for node in nodes:
            for attribute in many(node.get("p:attribute")):
                at_default = attribute.get("bc:atDefault")
                if at_default is None:
                    at_default = "sh:defaultValue" in attribute and attribute.get(
                        "p:value"
                    ) == attribute.get("sh:defaultValue")
                if at_default:
                    found.append(
                        {"iri": attribute.get("@id"), "property": attribute.get("p:property"),
                         "label": label(attribute.get("rdfs:label"), self.language),
                         "value": attribute.get("p:value")}
                    )  # fmt: skip
        components = [
            {"label": label(part.get("rdfs:label"), self.language),
             "included": bool(part.get("p:included", True))}
            for part in many(instance.get("p:hasPart"))
            if part.get("bc:atDefault") and not part.get("p:mandatory")
        ]  # fmt: skip
        shown = [f"{d['label']} = {_as_json(d['value'])}" for d in found]
        shown += [
            f"{c['label']} {'included' if c['included'] else 'not included'}" for c in components
        ]
        self.line(
            f"Still at the insurer's default: {'; '.join(shown) or 'none (every value was given)'}"
        )
        self.data["defaults"] = found
        self.data["defaultComponents"] = components

    def risk_objects(self, risk_objects: Sequence[Mapping[str, Any]]) -> list[str]:
        """Each risk object's line; returned: the lines with every value written out."""
        out = []
        whole = []
        if not risk_objects and not self.by_property:  # an inquiry's body shows it has none
            self.line("Risk objects: none")
            whole.append(self.lines[-1])
        for risk_object in risk_objects:
            # in the order of their names: equivalent JSON-LD may order keys any way
            fields = {
                k: risk_object[k]
                for k in sorted(risk_object)
                if k not in ("@id", "@type", "bc:riskObjectId")
            }
            shown = ", ".join(f"{k}={_as_json(v)}" for k, v in fields.items())
            where = self.iri(risk_object.get("@id", ""))
            whole.append(f"Risk object {risk_object.get('@type')} {where}: {shown}")
            if fields and fields in self.sent:  # the model has them: its own call's body
                shown = f"the {_count(len(fields), 'field')} as sent"
            self.line(f"Risk object {risk_object.get('@type')} {where}: {shown}")
            out.append(
                {
                    "iri": risk_object.get("@id"),
                    "type": risk_object.get("@type"),
                    "riskObjectId": risk_object.get("bc:riskObjectId"),
                    "fields": fields,
                }
            )
        self.data["riskObjects"] = out
        return whole

    def validation(self, report: Mapping[str, Any] | None) -> None:
        if not report:
            return
        everything = many(report.get("sh:result"))
        warnings = [r for r in everything if _severity(r) == "sh:Warning"]
        results = [r for r in everything if _severity(r) != "sh:Warning"]
        kept, precision = bound(
            results, MAX_VIOLATIONS, "call validateCalculation with full=true for the whole report"
        )
        conforms = bool(report.get("sh:conforms"))
        if conforms:
            self.line("Validation: conforms")
        elif precision.more_to_find:
            self.line(f"Validation: does not conform ({precision.line()} violations)")
        else:
            self.line(f"Validation: does not conform, {_count(len(kept), 'violation')}")
        violations = []
        for result in kept:
            # the insurer's language first: a German insurer's refusal reads in German
            message = label(result.get("sh:resultMessage"), self.language)
            path = result.get("sh:resultPath", "")
            self.line(f"- {self.iri(result.get('sh:focusNode'))} {path}: {message}", 1)
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
            message = label(warning.get("sh:resultMessage"), self.language)
            self.line(f"Warning (does not block): {message}", 1)
            said.append({"path": warning.get("sh:resultPath", ""), "message": message,
                         "messages": warning.get("sh:resultMessage")})  # fmt: skip
        self.data["validation"] = {
            "conforms": conforms,
            "violations": violations,
            "scope": precision.to_dict(),
            **({"warnings": said} if said else {}),
        }

    def premium(self, premium: Mapping[str, Any] | None) -> None:
        if not premium:
            return
        currency = premium.get("bc:currency", "")
        taxes = [
            {"type": t.get("bc:taxType"), "label": label(t.get("rdfs:label"), self.language),
             "amount": t.get("bc:amount")}
            for t in many(premium.get("bc:tax"))
        ]  # fmt: skip
        components = [
            {"component": c.get("bc:component"), "label": label(c.get("rdfs:label"), self.language),
             "net": c.get("bc:net"), "insuranceTax": c.get("bc:insuranceTax")}
            for c in many(premium.get("bc:component"))
        ]  # fmt: skip
        tax_text = "; ".join(f"{t['label']} {t['amount']}" for t in taxes)
        per = per_period(premium.get("bc:period"))
        self.line(
            f"Premium: {premium.get('bc:gross')} {currency} gross {per['en']} "
            f"(net {premium.get('bc:net')}; {tax_text})"
        )
        for component in components:
            self.line(
                f"{component['label']}: net {component['net']}, "
                f"insurance tax {component['insuranceTax']}",
                1,
            )
        self.data["premium"] = {
            "gross": premium.get("bc:gross"),
            "net": premium.get("bc:net"),
            "currency": currency,
            "period": premium.get("bc:period"),
            "per": per,
            "taxes": taxes,
            "components": components,
        }

    def next_steps(
        self,
        steps: Sequence[Mapping[str, Any]],
        shapes: Mapping[str, str],
        heading: str = "Next steps",
        given: Mapping[str, Any] | None = None,
    ) -> None:
        usable = [s for s in steps if s.get("bc:operation") and s.get("bc:target")]
        if len(usable) < len(steps):
            self.missing(f"bc:operation or bc:target of {len(steps) - len(usable)} next step(s)")
        kept, precision = bound(usable, MAX_NEXT_STEPS, "call the tool again with full=true")
        all_arguments = [{**(given or {}), **_arguments(step)} for step in kept]
        common = (
            {k: v for k, v in all_arguments[0].items() if all(a.get(k) == v for a in all_arguments)}
            if len(kept) > 1
            else dict(given or {})
            if kept
            else {}
        )
        shared = " ".join(f"{k}={v}" for k, v in common.items())
        self.line(f"{heading}{f', each with {shared}' if shared else ''}:")
        out = []
        lines: list[str | _Plain] = []
        for step, arguments in zip(kept, all_arguments, strict=True):
            expects = list(many(step.get("bc:expects")))
            own = {k: v for k, v in arguments.items() if k not in common}
            # the target is left out where an argument names it (as its last segment) or the
            # ready body does
            target = str(step["bc:target"])
            body = step.get("bc:body")
            named = (
                any(str(v) == local(target) for v in arguments.values())
                or (isinstance(body, Mapping) and target in body.values())
                or step.get("bc:href") == target  # the call's own URL: the tool names it
            )
            if named and not expects and not step.get("bc:body"):
                _add_plain(lines, str(step["bc:operation"]), own)
            else:
                text = str(step["bc:operation"])
                if not named:
                    text += f" · {self.iri(step['bc:target'])}"
                if expects and not body:  # a ready body fills the shapes it is sent against
                    text += " · " + ", ".join(shapes.get(e, local(e)) for e in expects)
                if own:
                    text += " · " + " ".join(f"{k}={v}" for k, v in own.items())
                if step.get("bc:body"):
                    text += " · body " + _as_json(step["bc:body"])
                lines.append(text)
            entry: dict[str, Any] = {"tool": step["bc:operation"], "target": step["bc:target"]}
            if arguments:
                entry["arguments"] = arguments
            if expects:
                entry["expects"] = expects
            if step.get("bc:body"):
                entry["body"] = dict(step["bc:body"])
            if step.get("rdfs:label"):
                entry["label"] = label(step["rdfs:label"], self.language)
            out.append(entry)
        self._step_lines([x if isinstance(x, str) else x.text() for x in lines])
        old = dict.fromkeys(
            str(s["bc:operation"]) for s in kept if s["bc:operation"] in self.deprecated
        )
        if old:
            self.line(f"Deprecated, still served: {_instead(old, self.deprecated)}", 1)
            for entry in out:
                if entry["tool"] in old:
                    entry["deprecated"] = True
        if precision.more_to_find:
            self.line(f"({precision.line()})", 1)
        self.data["nextSteps"] = out
        self.data["nextStepsScope"] = precision.to_dict()

    def _step_lines(self, texts: list[str]) -> None:
        """The next steps' lines; in an edit's answer, those the session's last answer of the
        case listed the same are named by their tools only ("as before: …")."""
        case = (self.data.get("case") or {}).get("iri") or self.inquired
        key = f"{case} next steps"
        digests = [_digest([t]) for t in texts]
        before = set(self.drafts_before.get(key, "").split(",")) if self.name_unchanged else set()
        if case:
            self.drafts[key] = ",".join(digests)
        again = [t for t, d in zip(texts, digests, strict=True) if d in before]
        if len(again) < 2:
            again = []
        # in a broker session: lines shown the same (below its ~) for another insurer
        elsewhere: list[str] = []
        where = None
        if self.shared is not None and self.name_unchanged:
            for text, digest in zip(texts, digests, strict=True):
                shown = self.shared.drafts.setdefault(f"step {digest}", self.insurer)
                if text not in again and shown != self.insurer and where in (None, shown):
                    where = shown
                    elsewhere.append(text)
            if len(elsewhere) < 2:
                elsewhere = []
        for text in texts:
            if text not in again and text not in elsewhere:
                self.line(text, 1)
        for named, heading in ((again, "as before"), (elsewhere, f"as for {where}")):
            if named:
                tools = dict.fromkeys(t.split(" · ", 1)[0] for t in named)
                self.line(f"{heading}: {', '.join(tools)}", 1)

    def shapes(
        self,
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
            shown_above = bool(attributes) and attributes <= self.shown_properties
            start = len(self.lines)
            self.line(
                f"Shape {name}: attributes as above"
                if shown_above
                else f"Shape {name} for {target}:"
            )
            fields = []
            for field in many(shape.get("sh:property")):
                required = field.get("sh:minCount", 0) > 0
                field_label = label(field.get("sh:name"), self.language)
                description = label(field.get("sh:description"), self.language)
                explained = f"{field_label}: {description}" if description else field_label
                fields.append(
                    {
                        "name": field.get("sh:path"),
                        "label": field_label,
                        "required": required,
                        **_range_struct(field, self.language),
                    }
                )
                if shown_above and field.get("sh:path") in self.shown_properties:
                    continue
                self.line(
                    f"{field.get('sh:path', '—')}: {_range(field, self.language) or 'see description'}"
                    f"{', required' if required else ''} — {explained}",
                    1,
                )
            out.append({"iri": shape["@id"], "targetClass": target, "fields": fields})
            if self.shared is not None and not shown_above:
                digest = _digest(self.lines[start:])
                where = self.shared.shapes.get(digest)
                if where is None:
                    self.shared.shapes[digest] = self.insurer
                else:
                    del self.lines[start:]
                    self.line(f"Shape {name}: as for {where}")
        # one shown before is not even named: the next steps name the shapes they expect
        self.data["shapes"] = out


@dataclass
class _Plain:
    """Next steps that are a tool and the arguments naming its target, written as one line:
    several tools with the same arguments ("readOffer, listApplications · offerId=…"), or one
    tool with the values of one argument ("includeComponent · componentId one of a, b")."""

    tools: list[str]
    arguments: dict[str, list[Any]]

    def text(self) -> str:
        given = " ".join(
            f"{k}={v[0]}" if len(v) == 1 else f"{k} one of {', '.join(str(x) for x in v)}"
            for k, v in self.arguments.items()
        )
        return f"{', '.join(self.tools)} · {given}" if given else ", ".join(self.tools)


def _add_plain(lines: list[str | _Plain], tool: str, arguments: Mapping[str, Any]) -> None:
    last = lines[-1] if lines and isinstance(lines[-1], _Plain) else None
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
    lines.append(_Plain([tool], singles))


def _arguments(step: Mapping[str, Any]) -> dict[str, Any]:
    parameters = step.get("bc:parameters")
    arguments = dict(sorted(parameters.items())) if isinstance(parameters, Mapping) else {}
    for key in ("offset", "limit"):
        if key in arguments and str(arguments[key]).isdigit():
            arguments[key] = int(arguments[key])
    return arguments


# Readers: one small pure function per answer type of the norm, over the answer in its canonical
# form (``omds_ld.norm.jsonld.canonical``). Each writes its part through the writer and returns the
# shapes a ready body of it fills (their fields need not be listed). What the norm's answer profile
# leaves optional may be missing: a reader says so (``w.missing``) and goes on.
Reader = Callable[["_Writer", Mapping[str, Any]], set[str]]


def _process_knowledge(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    draft = bool(answer.get("pk:draftAtServer"))
    comment = answer.get("rdfs:comment")
    description = label(comment, w.language)
    w.line(f"Draft at the server: {'yes' if draft else 'no'}")
    w.line(description)
    other = label(comment, "en" if w.language != "en" else "de")
    if other and other != description:  # the other language too, where the norm has both
        w.line(other)
    w.data["processKnowledge"] = {
        "draftAtServer": draft, "description": description,
        **({"descriptions": dict(comment)} if isinstance(comment, Mapping) else {}),
    }  # fmt: skip
    applying = label(answer.get("pk:applications"), w.language)
    if applying:
        w.line(f"Applications: {applying}")
        w.data["processKnowledge"]["applications"] = applying
    return set()


def _product_list(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    window_ = answer.get("bc:window") or {}
    products = many(answer.get("p:product"))[:MAX_PRODUCTS]
    next_offset = window_.get("bc:nextOffset")
    precision: Precision = window(
        int(window_.get("bc:returned", len(products))),
        int(window_.get("bc:total", len(products))),
        int(window_.get("bc:moreToFind", 0)),
        f"call listProducts with offset={next_offset}" if next_offset is not None else None,
    )
    if answer.get("@id"):
        w.abbreviate_below(str(answer["@id"]))
    # a window that holds every product says nothing of its size
    w.line(f"Products ({precision.line()}):" if precision.more_to_find else "Products:")
    # a product a next step's ready body names (createCalculation's) is written there only
    in_bodies = {
        str(value)
        for step in many(answer.get("bc:nextStep"))
        if isinstance(step, Mapping) and isinstance(step.get("bc:body"), Mapping)
        for value in step["bc:body"].values()
    }
    out = []
    for product in products:
        name = label(product.get("rdfs:label"), w.language)
        line_of_business = label(product.get("p:lineOfBusiness"), w.language)
        product_id = product.get("bc:productId") or _id_of(product.get("@id"))
        if not product.get("bc:productId"):
            w.missing(f"bc:productId of product {name or product.get('@id')}")
        iri = str(product.get("@id", "—"))
        # the id is written only where the IRI does not end with it (the next steps give it)
        named = "" if local(iri) == product_id else f" productId={product_id}"
        # its line of business, unless the name already begins with it
        kind = "" if name.startswith(line_of_business) else f" ({line_of_business})"
        where = "" if iri in in_bodies else f" {w.iri(iri)}"
        w.line(f"{name}{kind}{where}{named}", 1)
        out.append(
            {
                "iri": product.get("@id"),
                "productId": product_id,
                "label": name,
                "lineOfBusiness": line_of_business,
                "riskObjectClass": product.get("p:riskObjectClass"),
            }
        )
    w.data["products"] = out
    w.data["window"] = precision.to_dict()
    _how_it_works(w, answer)
    return set()


def _how_it_works(w: _Writer, answer: Mapping[str, Any]) -> None:
    """The insurer's process in one line, from the steps that start a calculation: so that
    an agent needs no readProcessKnowledge before its first step."""
    starts = {
        str(step.get("bc:operation"))
        for step in many(answer.get("bc:nextStep"))
        if isinstance(step, Mapping)
    }
    if "createCalculation" in starts:
        process = "draft at the server"
        line = (
            "How it works: a draft at the server; createCalculation starts it, each answer "
            "offers the edits, calculatePremium prices it."
        )
    elif "readDefaultInstance" in starts:
        process = "inquiry"
        line = (
            "How it works: no draft; readDefaultInstance gives a ready body, add the risk "
            "object, inquireTariff prices it."
        )
    else:
        return
    w.data["process"] = process
    if w.shared is not None:  # a broker session: said once for each way insurers work
        where = w.shared.drafts.setdefault(f"process {process}", w.insurer)
        if where != w.insurer:
            line = f"How it works: as at {where} ({process})"
    w.line(line)


def _fields(w: _Writer, owner: Mapping[str, Any], indent: int) -> list[dict[str, Any]]:
    out = []
    for field in many(owner.get("sh:property")):
        default = field.get("sh:defaultValue")
        shown = "" if default is None else f" = {_as_json(default)}"
        field_label = label(field.get("sh:name"), w.language)
        path = field.get("sh:path", "—")
        w.line(f"{field_label}{shown} ({_range(field, w.language)}) {path}", indent)
        out.append({"name": path, "label": field_label, **_range_struct(field, w.language)})
    return out


def _product(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    name = label(answer.get("rdfs:label"), w.language)
    iri = answer.get("@id")
    w.line(f"Product {name} <{iri}>, risk object {answer.get('p:riskObjectClass')}")
    root = _fields(w, answer, 1)
    components = []
    for component in many(answer.get("p:component")):
        component_label = label(component.get("rdfs:label"), w.language)
        flags = [
            text
            for key, text in (
                ("p:mandatory", "mandatory"),
                ("p:includedByDefault", "included by default"),
            )
            if component.get(key)
        ]
        if component.get("p:exclusiveGroup"):
            flags.append(f"one of group {component['p:exclusiveGroup']}")
        suffix = f" ({'; '.join(flags)})" if flags else ""
        w.line(f"{component_label}{suffix} <{component.get('@id')}>", 1)
        components.append(
            {
                "iri": component.get("@id"),
                "componentId": component.get("bc:componentId"),
                "label": component_label,
                "mandatory": component.get("p:mandatory", False),
                "group": component.get("p:exclusiveGroup"),
                "attributes": _fields(w, component, 2),
            }
        )
    w.data["product"] = {"iri": iri, "label": name, "attributes": root, "components": components}
    return set()


def _default_instance(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    body = answer.get("bc:body") or {}
    instance = body.get("p:instance") or {}
    w.by_property = True
    # only the steps' targets are abbreviated: the IRIs a body needs are written out
    if instance.get("p:instanceOf"):
        w.inquired = str(instance["p:instanceOf"])
        w.abbreviate_below(w.inquired)
    else:
        w.missing("p:instanceOf of the default instance")
    w.draft(instance, None)
    # the smallest body that keeps every value above: the interface fills in the defaults
    ready: dict[str, Any] = {
        "p:instance": {"p:instanceOf": instance.get("p:instanceOf"), "p:hasRiskObject": []}
    }
    # what the body leaves out keeps the values above (inquireTariff's description says so)
    w.line("Ready body for inquireTariff; add the risk object to p:instance/p:hasRiskObject:")
    w.line(_as_compact_json(ready), 1)
    w.data["body"] = ready
    # the ready body fills the inquiry's own shape: its fields need not be repeated
    return {
        s.get("@id", "")
        for s in many(answer.get("bc:shape"))
        if s.get("sh:targetClass") == body.get("@type")
    }


def _shape(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    w.shapes([answer])
    w.data["shape"] = w.data.pop("shapes")[0]
    return set()


def _tariff_result(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    w.by_property = True
    instance = answer.get("p:instance")
    product = (instance or {}).get("p:instanceOf")
    if product:  # the product's default instance was shown with the same ~ and steps
        w.inquired = str(product)
        w.abbreviate_below(w.inquired)
    w.validation(answer.get("bc:validationReport"))
    w.premium(answer.get("bc:premium"))
    _insurer_today(w, answer)
    applying = label(answer.get("pk:applications"), w.language)
    if applying:  # where this premium leads: how (or whether) an application is made
        w.line(f"Applying: {applying}")
        w.data["applying"] = applying
    if instance:
        start = len(w.lines)
        w.defaults(instance)
        if product:
            w._same_as_last(f"{product} defaults", start, DEFAULTS_AS_BEFORE)
        w.risk_objects(many(instance.get("p:hasRiskObject")))
    return set()


def _insurer_today(w: _Writer, answer: Mapping[str, Any]) -> None:
    """The insurer's today, where the answer says it: an agent knows no date of its own."""
    today = answer.get("bc:insurerToday")
    if isinstance(today, str) and today:
        zone = answer.get("bc:timeZone")
        w.line(f"Today at the insurer: {today}" + (f" ({zone})" if zone else ""))
        w.data["insurerToday"] = today


def _business_case(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    name = label(answer.get("rdfs:label"), w.language)
    w.line(f"Business case {answer.get('bc:caseId')} · status {answer.get('bc:status')} · {name}")
    _insurer_today(w, answer)
    if answer.get("@id"):
        w.abbreviate_below(str(answer["@id"]))
    w.data["case"] = {
        "iri": answer.get("@id"),
        "caseId": answer.get("bc:caseId"),
        "status": answer.get("bc:status"),
        "product": answer.get("p:hasRootProduct"),
        "offer": answer.get("bc:offer"),
    }
    draft = answer.get("bc:draft") or {}
    replaced = many(answer.get("bc:replaced"))
    if replaced:
        names = {
            part.get("@id"): label(part.get("rdfs:label"), w.language)
            for part in many(draft.get("p:hasPart"))
        }
        w.line("Replaced in its group: " + ", ".join(names.get(r, local(r)) for r in replaced))
        w.data["case"]["replaced"] = replaced
    w.draft(draft, many(answer.get("p:includable")))
    w.validation(answer.get("bc:validationReport"))
    w.premium(answer.get("bc:premium"))
    if not answer.get("bc:premium"):
        w.line("Premium: not calculated yet")
    return set()


def _offer(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    issued = str(answer.get("bc:createdAt") or "")[:10]
    until = str(answer.get("bc:validUntil") or "")
    days = _days_between(issued, until)
    validity = f"issued {issued}, " if issued else ""
    validity += f"valid until {until}" + (f" ({days} days from issue)" if days is not None else "")
    w.line(
        f"Offer {answer.get('bc:offerId')} <{answer.get('@id')}> for "
        f"<{answer.get('bc:offerFor')}>, {validity}"
    )
    _insurer_today(w, answer)
    digest = answer.get("bc:offerDigest")
    if answer.get("bc:expired"):
        w.line("Expired: the offer binds the insurer no longer; calculate again (next steps)")
    elif digest:
        w.line(f"Offer digest (the customer's consent names it): {digest}")
    w.data["offer"] = {
        "iri": answer.get("@id"),
        "offerId": answer.get("bc:offerId"),
        "case": answer.get("bc:offerFor"),
        "issued": issued or None,
        "validUntil": answer.get("bc:validUntil"),
        "validDays": days,
        **({"digest": digest} if digest else {}),
        **({"expired": True} if answer.get("bc:expired") else {}),
    }
    w.premium(answer.get("bc:premium"))
    return set()


STATES = {
    "submitted": "submitted, the insurer has not decided yet",
    "accepted": "accepted: the policy is issued",
    "referred": "referred to underwriting: the insurer decides later",
    "declined": "declined",
    "counter-offer": "not accepted as applied for: the insurer makes a counter-offer",
    "withdrawn": "withdrawn",
}


def _application(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    """An application: its state and the decision; the policyholder by name only, the IBAN by
    its last four characters (personal data only as far as the task needs)."""
    state = str(answer.get("bc:state", ""))
    if answer.get("@id"):  # its documents and the steps' targets lie below it
        w.abbreviate_below(str(answer["@id"]))
    w.line(
        f"Application {answer.get('bc:applicationId')} {w.iri(answer.get('@id'))} for offer "
        f"{answer.get('bc:applicationFor')}: {STATES.get(state, state)}"
    )
    data: dict[str, Any] = {
        "iri": answer.get("@id"), "applicationId": answer.get("bc:applicationId"),
        "offer": answer.get("bc:applicationFor"), "state": state,
    }  # fmt: skip
    for key, text in (("bc:policyNumber", "Policy number"), ("bc:decisionBy", "Decision by"),
                      ("bc:startDate", "Start"), ("bc:counterOffer", "Counter-offer")):  # fmt: skip
        if answer.get(key):
            w.line(f"{text}: {answer[key]}")
            data[key.removeprefix("bc:")] = answer[key]
    reason = label(answer.get("bc:reason"), w.language)
    if reason:
        w.line(f"Reason: {reason}")
        data["reason"] = reason
    holder = label((answer.get("bc:policyholder") or {}).get("rdfs:label"), w.language)
    payment = answer.get("bc:payment") or {}
    iban = str(payment.get("bc:iban") or "")
    masked = f" from …{iban[-4:]}" if iban else ""
    if holder:
        w.line(f"Policyholder: {holder}")
    if payment:
        w.line(
            f"Payment: {payment.get('bc:paymentFrequency')}, {payment.get('bc:paymentMethod')}"
            + masked
        )
        data["payment"] = {
            "frequency": payment.get("bc:paymentFrequency"),
            "method": payment.get("bc:paymentMethod"),
            **({"iban": f"…{iban[-4:]}"} if iban else {}),
        }
    documents = [d for d in many(answer.get("bc:document")) if isinstance(d, Mapping)]
    for document in documents:
        w.line(
            f"Document: {label(document.get('rdfs:label'), w.language)} {w.iri(document.get('@id'))}"
        )
    if documents:
        data["documents"] = [
            {"iri": d.get("@id"), "label": label(d.get("rdfs:label"), w.language)}
            for d in documents
        ]
    w.data["application"] = data
    w.premium(answer.get("bc:premium"))
    return set()


def _application_list(w: _Writer, answer: Mapping[str, Any]) -> set[str]:
    found = [a for a in many(answer.get("bc:application")) if isinstance(a, Mapping)]
    w.line(f"Applications for <{answer.get('bc:applicationFor')}>: {len(found) or 'none'}")
    for item in found:
        w.line(
            f"{item.get('bc:applicationId')}: {item.get('bc:state')}, submitted "
            f"{item.get('bc:submittedAt')}",
            1,
        )
    w.data["applications"] = [
        {"applicationId": a.get("bc:applicationId"), "state": a.get("bc:state"),
         "submittedAt": a.get("bc:submittedAt"), "iri": a.get("@id")}
        for a in found
    ]  # fmt: skip
    return set()


READERS: dict[str, Reader] = {
    "pk:ProcessKnowledge": _process_knowledge,
    "bc:ProductList": _product_list,
    "p:Product": _product,
    "bc:DefaultInstance": _default_instance,
    "sh:NodeShape": _shape,
    "bc:TariffResult": _tariff_result,
    "bc:BusinessCase": _business_case,
    "bc:Offer": _offer,
    "bc:Application": _application,
    "bc:ApplicationList": _application_list,
}
# the answer types of the norm: what every answer's @type is one of
ANSWER_TYPES = frozenset(READERS)


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
) -> Condensed:
    """Condense one answer of the insurer, in the norm's canonical JSON-LD form.

    ``shapes_seen`` names the shapes this session was shown already: they are named, not repeated.
    ``offered`` names the tools the caller has: next steps to other operations are left out.
    ``drafts_seen`` (the drafts this session was shown, as ``Condensed.drafts`` gave them): given
    to an edit's answer, a draft shown the same before is one line.
    ``step_arguments`` are taken by every next step besides its own (the broker endpoint's
    ``insurer``); ``shared`` is what the broker endpoint's session was shown at any insurer.
    ``deprecated`` names the norm's deprecated operations (with what to use instead): a call of
    one and a next step to one say so. ``sent`` is the body of the call answered: a risk object
    stored with the fields it sent is said to be so, its values not repeated.
    """
    w = _Writer(language)
    w.shared, w.insurer, w.deprecated = shared, insurer, deprecated or {}
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
    steps = _offered(many(answer.get("bc:nextStep")), offered)
    w.next_steps(steps, shape_names, given=step_arguments)
    if shapes:
        open_steps = {i for s in steps if not s.get("bc:body") for i in many(s.get("bc:expects"))}
        # a shape only steps with a ready body expect needs no field list: the body fills it
        filled = {s["@id"] for s in shapes if s["@id"] not in open_steps}
        w.shapes(shapes, shapes_seen, filled | ready_fills)
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


def _instead(names: Iterable[str], deprecated: Mapping[str, str]) -> str:
    return ", ".join(f"{n} (use {deprecated[n]})" if deprecated.get(n) else n for n in names)


def _deprecation(w: _Writer, operation: str) -> None:
    """A call of a deprecated operation says so, right below the header."""
    if operation in w.deprecated:
        w.line(
            f"{_instead([operation], w.deprecated)} is deprecated: it works until the norm's "
            "next major version removes it"
        )
        w.data["deprecated"] = True


def _id_of(iri: Any) -> str | None:
    """The last segment of an IRI: what the interface takes as its id where the answer has none."""
    return local(str(iri)) if iri else None


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
) -> Condensed:
    """A problem of the norm as a tool error: type, kind, explanation, what is still admissible."""
    w = _Writer(language)
    w.deprecated = deprecated or {}
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
    w.validation(problem.get("bc:validationReport"))
    shape_names = {
        s["@id"]: local(s["@id"])
        for s in many(problem.get("bc:shape"))
        if isinstance(s, Mapping) and s.get("@id")
    }
    w.next_steps(
        _offered(many(problem.get("bc:nextStep")), offered),
        shape_names,
        heading="Still admissible",
        given=step_arguments,
    )
    _provenance(w, provenance)
    return Condensed("\n".join(w.lines), w.data)


def _offered(
    steps: Sequence[Mapping[str, Any]], offered: Collection[str] | None
) -> list[Mapping[str, Any]]:
    if offered is None:
        return list(steps)
    return [s for s in steps if s.get("bc:operation") in offered]


def _provenance(w: _Writer, provenance: Mapping[str, Any]) -> None:
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
