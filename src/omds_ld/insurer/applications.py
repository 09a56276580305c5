"""An application's body checked against the norm's shapes, in one pass, and its personal data
as the insurer keeps and shows them.

The body is read into a graph (the policyholder, the payment, the consent: each a node of the
class its shape targets) and checked by the compiled checks of the norm's shapes
(``omds_ld.insurer.constraints``), the same way drafts and risk objects are: a rule the norm adds
to a shape holds here too. What is admissible is the shape's ``sh:message``; a personal field's
value is never in a result. Two rules depend on the moment rather than on a shape: the start
date is not before the insurer's today, and the consent's time has its offset, is not before the
offer was made and not in the future (``omds_ld.norm.consent``: its words name the rule broken).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rdflib import RDF, URIRef

from omds_ld.insurer.constraints import ShapeValidator
from omds_ld.insurer.problems import FieldError
from omds_ld.insurer.shacl import Report
from omds_ld.insurer.triples import Triples
from omds_ld.norm import Norm
from omds_ld.norm import consent as consent_rules
from omds_ld.norm.jsonld import BC, P, expand_curie
from omds_ld.norm.shapes import NodeShape, to_literal

ROOT = "urn:omds-ld:application"
# the application's parts: where each is in the body, and the class its shape targets
PARTS = {
    "bc:policyholder": P + "Person",  # p:Organization where the body says so
    "bc:payment": BC + "Payment",
    "bc:consent": BC + "Consent",
}


@dataclass(frozen=True)
class Checked:
    """What a check of an application's body found: the personal data's errors (policyholder,
    payment, start date) and the consent's, each with what is admissible."""

    personal: tuple[FieldError, ...]
    consent: tuple[FieldError, ...]


class ApplicationCheck:
    """The norm's shapes of an application, compiled once."""

    def __init__(self, norm: Norm) -> None:
        self.norm = norm

    @cached_property
    def validator(self) -> ShapeValidator:
        validator = ShapeValidator(self.norm.shapes_graph)
        if validator.compiled is None:  # the norm's own constraints would go unchecked
            raise ValueError("the norm's shapes use constraints the compiled checks do not know")
        return validator

    @cached_property
    def _shapes(self) -> dict[str, NodeShape]:
        return {s.target_class: s for s in self.norm.shapes.values() if s.target_class}

    def check(
        self,
        body: Mapping[str, Any],
        offered_at: dt.datetime,
        now: dt.datetime,
        language: str,
        today: dt.date,
    ) -> Checked:
        """Every field of the body that is not admissible, in the body's order, one error each.
        ``today`` is the insurer's (in its time zone): the start and the minimum age are
        measured against it, never against the UTC date."""
        graph, pointers = self._graph(body)
        report = self.validator.validate(graph, today)
        errors = _first_per_field(_errors(report, pointers, language))
        start = _date(body.get("bc:startDate"))
        if start is not None and start < today:
            errors.append(self._error(BC + "ApplicationRequest", "/bc:startDate", language))
        consent = body.get("bc:consent")
        if isinstance(consent, Mapping) and "bc:consentedAt" in consent:
            # the rule the time breaks, by name, before the shape's general words for it
            broken = consent_rules.time_error(consent["bc:consentedAt"], offered_at, now, language)
            if broken is not None:
                errors.insert(0, FieldError("/bc:consent/bc:consentedAt", broken))
        errors = _first_per_field(errors)
        order = {p: i for i, p in enumerate(pointers.values())}
        errors.sort(key=lambda e: order.get(e.pointer, len(order)))
        of_consent = tuple(e for e in errors if e.pointer.startswith("/bc:consent"))
        return Checked(tuple(e for e in errors if e not in of_consent), of_consent)

    def _graph(self, body: Mapping[str, Any]) -> tuple[Triples, dict[tuple[str, str], str]]:
        """The body's triples (as the compiled checks read them), and the pointer of each
        (node, property) as the body names it."""
        graph = Triples()
        root = URIRef(ROOT)
        graph.add((root, RDF.type, URIRef(BC + "ApplicationRequest")))
        pointers: dict[tuple[str, str], str] = {}
        self._add(graph, root, BC + "ApplicationRequest", body, "", pointers)
        for key, target in PARTS.items():
            node = body.get(key)
            if not isinstance(node, Mapping):
                continue
            if node.get("@type") == "p:Organization" or node.get("@type") == P + "Organization":
                target = P + "Organization"
            ref = URIRef(f"{ROOT}/{key}")
            graph.add((root, URIRef(expand_curie(key)), ref))
            graph.add((ref, RDF.type, URIRef(target)))
            self._add(graph, ref, target, node, f"/{key}", pointers)
        return graph, pointers

    def _add(
        self, graph: Triples, ref: URIRef, target: str, node: Mapping[str, Any], pointer: str,
        pointers: dict[tuple[str, str], str],
    ) -> None:  # fmt: skip
        """A node's fields as its shape declares them (a value of another type is kept as it
        is, for the shape to refuse); every field is given a pointer, sent or not."""
        shape = self._shapes[target]
        sent = {expand_curie(k): k for k in node if not k.startswith("@")}
        for field in shape.fields:
            key = sent.get(field.path)
            pointers[(str(ref), field.path)] = f"{pointer}/{key or _compact(field.path)}"
            value = node.get(key) if key is not None else None
            if value is None or isinstance(value, Mapping | list):
                continue  # a part (its own node), or nothing sent
            graph.add((ref, URIRef(field.path), to_literal(value, field.datatype)))

    def _error(self, target: str, pointer: str, language: str) -> FieldError:
        name = pointer.rsplit("/", 1)[-1]
        field = self._shapes[target].field_for(expand_curie(name))
        if field is None:
            raise LookupError(f"the norm's shape of {target} has no field {name}")
        return FieldError(pointer, _admissible(field.message, name, language))


def _errors(
    report: Report, pointers: Mapping[tuple[str, str], str], language: str
) -> list[FieldError]:
    found = []
    for result in report.results:
        pointer = pointers.get((result.focus_node, result.path or ""))
        if pointer is not None:
            name = pointer.rsplit("/", 1)[-1]
            found.append(FieldError(pointer, _admissible(result.messages, name, language)))
    order = {p: i for i, p in enumerate(pointers.values())}
    return sorted(found, key=lambda e: order.get(e.pointer, len(order)))


def _admissible(messages: Mapping[str, str], name: str, language: str) -> str:
    return messages.get(language) or messages.get("en") or f"{name}: see its shape"


def _compact(iri: str) -> str:
    for prefix, base in (("p", P), ("bc", BC)):
        if iri.startswith(base):
            return f"{prefix}:{iri[len(base) :]}"
    return iri


def _first_per_field(errors: list[FieldError]) -> list[FieldError]:
    seen: set[str] = set()
    out = []
    for error in errors:
        if error.pointer not in seen:
            seen.add(error.pointer)
            out.append(error)
    return out


def _date(value: Any) -> dt.date | None:
    """A date as the shape's xsd:date reads it (YYYY-MM-DD), else None."""
    if not isinstance(value, str) or len(value) != 10:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def mask_iban(iban: str) -> str:
    """An IBAN as a model may see it: its last four characters."""
    return f"…{iban[-4:]}" if len(iban) > 4 else "…"


def person_label(holder: Mapping[str, Any]) -> str:
    """The policyholder as answers name them: the name, nothing else."""
    if holder.get("@type") == "p:Organization":
        return str(holder.get("p:legalName", ""))
    return f"{holder.get('p:givenName', '')} {holder.get('p:familyName', '')}".strip()
