"""Warnings of a product: data that contradict each other without being wrong each on its own
(a plate of Salzburg, a registration district of Vienna). They are results of the validation
report with ``sh:resultSeverity sh:Warning``: said in every answer, never blocking (the report
still conforms), as pySHACL's ``allow_warnings`` has it.

A rule is data of the product (``warnings:`` in its file, ``omds_ld.insurer.rules``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omds_ld.insurer.draft import Draft
from omds_ld.insurer.rules import WarningRule
from omds_ld.insurer.shacl import Result
from omds_ld.norm.shapes import SH

WARNING = str(SH.Warning)


def warnings_of(
    rules: Sequence[WarningRule],
    draft: Draft,
    risk_iris: Mapping[str, str],
    path_of: Mapping[str, str],
) -> tuple[Result, ...]:
    """The warnings the draft's data raise: one per risk object and broken rule.
    ``risk_iris``: risk object id → its IRI; ``path_of``: a field's local name → its property."""
    found = []
    for rule in rules:
        setting = draft.attributes.get("", {}).get(rule.attribute)
        for risk_object in draft.risk_objects:
            value = next(
                (v for k, v in risk_object.values.items()
                 if k.rsplit("#", 1)[-1].rsplit("/", 1)[-1] == rule.risk_field),
                None,
            )  # fmt: skip
            if value is None or setting is None:
                continue
            expected = rule.expected(value)
            if expected is None or expected == str(setting):
                continue
            found.append(
                Result(
                    focus_node=risk_iris[risk_object.id],
                    path=path_of.get(rule.risk_field),
                    messages={
                        language: text.format(value=value, attribute=setting, expected=expected)
                        for language, text in rule.messages.items()
                    },
                    constraint=f"urn:omds-ld:warning:{rule.id}",
                    value=str(value),
                    severity=WARNING,
                )
            )
    return tuple(found)
