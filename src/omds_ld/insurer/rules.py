"""An insurer's rules as data, read from its ``insurer.yaml`` and product files: how it decides
an application, and which data of a draft contradict each other (warnings).

Below the data that loads them and the drafts they are applied to: a rule reads a draft only
through ``Facts`` (what is included, the risk objects' values), so nothing here needs to know
how a draft is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from omds_ld.norm.jsonld import expand_curie

Decision = Literal["refer", "decline", "without"]


class Values(Protocol):
    """A risk object as a rule reads it: its fields by property IRI."""

    @property
    def values(self) -> Mapping[str, Any]: ...


class Facts(Protocol):
    """A draft as a rule reads it."""

    @property
    def risk_objects(self) -> Sequence[Values]: ...

    def is_included(self, component_id: str) -> bool: ...


# applications


@dataclass(frozen=True)
class Condition:
    """One test of an offer's data: a risk object field (full IRI) or ``component:<id>``
    (included), compared with ``above``, ``below``, ``equals`` or ``in``."""

    field: str
    above: float | None = None
    below: float | None = None
    equals: Any = None
    one_of: tuple[Any, ...] | None = None

    def holds(self, facts: Facts) -> bool:
        if self.field.startswith("component:"):
            return facts.is_included(self.field.removeprefix("component:"))
        values = [r.values.get(self.field) for r in facts.risk_objects]
        return any(self._holds(v) for v in values if v is not None)

    def _holds(self, value: Any) -> bool:
        number = _number(value)
        if self.above is not None and (number is None or number <= self.above):
            return False
        if self.below is not None and (number is None or number >= self.below):
            return False
        if self.equals is not None and value != self.equals:
            return False
        return self.one_of is None or value in self.one_of


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class ApplicationRule:
    """refer (an underwriter decides), decline, or ``without`` (a counter-offer without these
    components), where every condition holds."""

    decision: Decision
    conditions: tuple[Condition, ...]
    reason: Mapping[str, str]
    components: tuple[str, ...] = ()

    def applies(self, facts: Facts) -> bool:
        return all(c.holds(facts) for c in self.conditions)


@dataclass(frozen=True)
class ApplicationRules:
    """How an insurer takes applications: its rules, how long an underwriter takes, how long an
    offer is valid, how its policy numbers begin."""

    rules: tuple[ApplicationRule, ...] = ()
    offer_validity_days: int = 30
    referral_days: int = 3
    policy_prefix: str = "POL"

    def decide(self, facts: Facts) -> ApplicationRule | None:
        """The first rule whose conditions all hold (None: the application is accepted)."""
        return next((rule for rule in self.rules if rule.applies(facts)), None)


def parse_application_rules(raw: Mapping[str, Any] | None) -> ApplicationRules | None:
    """``applications:`` of insurer.yaml (its format is checked before); None: the insurer takes
    no applications at its interface."""
    if raw is None:
        return None
    rules = []
    for item in raw.get("rules", ()):
        conditions = tuple(
            Condition(
                field=c["field"]
                if c["field"].startswith("component:")
                else expand_curie(c["field"]),
                above=c.get("above"),
                below=c.get("below"),
                equals=c.get("equals"),
                one_of=tuple(c["in"]) if "in" in c else None,
            )
            for c in item["when"]
        )
        rules.append(
            ApplicationRule(
                decision=item["decision"],
                conditions=conditions,
                reason=dict(item["reason"]),
                components=tuple(item.get("components", ())),
            )
        )
    return ApplicationRules(
        rules=tuple(rules),
        offer_validity_days=int(raw.get("offerValidityDays", 30)),
        referral_days=int(raw.get("referralDays", 3)),
        policy_prefix=str(raw.get("policyPrefix", "POL")),
    )


# warnings


@dataclass(frozen=True)
class WarningRule:
    """A field of the risk object and an attribute of the product's root that must agree.

    ``prefix-matches``: the field's letters before its first hyphen are the attribute's value.
    ``district-in-state``: the field's leading letters are a district's code, and ``table``
    (code → the attribute's value: a number plate's district → its Bundesland) says which value
    it goes with; a code the table does not list is never said to contradict."""

    id: str
    risk_field: str  # a field of the risk object, by its local name
    attribute: str  # an attribute of the product's root, by its local name
    # with {value} (the risk object's), {attribute} (its value) and {expected} (what goes with it)
    messages: Mapping[str, str]
    kind: str = "prefix-matches"
    table: Mapping[str, str] = field(default_factory=dict)

    def expected(self, value: object) -> str | None:
        """The attribute's value that goes with the field's ``value`` (None: none can be told)."""
        text = str(value)
        if self.kind == "prefix-matches":
            return text.split("-", 1)[0]
        code = re.match(r"[A-Za-z]+", text)
        return self.table.get(code.group().upper()) if code else None


def parse_warning_rules(
    raw: Sequence[Mapping[str, Any]] | None, tables: Callable[[str], Mapping[str, str]]
) -> tuple[WarningRule, ...]:
    """``warnings:`` of a product file; ``tables`` reads a table a rule names, by its file name."""
    return tuple(
        WarningRule(
            str(r["id"]),
            str(r["riskObject"]),
            str(r["attribute"]),
            dict(r["message"]),
            str(r.get("rule", "prefix-matches")),
            tables(r["table"]) if "table" in r else {},
        )
        for r in raw or ()
    )


def parse_table(raw: Mapping[str, Any]) -> dict[str, str]:
    """A table of codes by the value they go with (``{St: [G, GU, …]}``) as code → value."""
    table: dict[str, str] = {}
    for value, codes in raw.items():
        for code in codes:
            if str(code) in table:
                raise ValueError(f"the code {code} is listed for {table[str(code)]} and {value}")
            table[str(code)] = str(value)
    return table
