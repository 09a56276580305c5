"""Grading without a model: one pure function per criterion, each reading only the protocol."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

from omds_ld.norm import load_norm
from omds_ld.scenarios.protocol import (
    FINAL,
    MODEL_CALL,
    RUN_END,
    RUN_START,
    TOOL_CALL,
    TOOLS_LIST,
    events_of,
)
from omds_ld.scenarios.scenario import Scenario, parse_scenario

Protocol = Sequence[Mapping[str, Any]]
# The kinds of operation that change a business case (``x-omds-ld`` kind in the norm's file)
CHANGING_KINDS = frozenset({"create", "edit"})
IRI = re.compile(r"https?://[^\s\"'<>,)]+")


@dataclass(frozen=True)
class Criterion:
    """One criterion's verdict: passed or not, why, and the protocol lines that show it."""

    name: str
    passed: bool
    reason: str
    evidence: tuple[int, ...] = ()


@dataclass(frozen=True)
class Grade:
    """A run's grade: it passes if every criterion holds."""

    scenario: str
    agent: str
    criteria: tuple[Criterion, ...]
    end_reason: str

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.criteria)

    @property
    def infrastructure_failure(self) -> bool:
        return self.end_reason == "infrastructure"


def _results(protocol: Protocol) -> list[tuple[int, Mapping[str, Any]]]:
    return list(events_of(protocol, TOOL_CALL))


def _structured(event: Mapping[str, Any]) -> Mapping[str, Any]:
    result = event.get("mcp.tool.result", {})
    structured: Mapping[str, Any] = result.get("structuredContent") or {}
    return structured


def _final(protocol: Protocol) -> tuple[int, str]:
    found = list(events_of(protocol, FINAL))
    return (found[-1][0], str(found[-1][1].get("text", ""))) if found else (0, "")


def premium_with_conforming_report(protocol: Protocol, scenario: Scenario) -> Criterion:
    """1. An answer contains a premium with a conforming validation report (and, where the task
    asks for a binding offer, an answer is that offer)."""
    unconfirmed = []
    found: int | None = None
    for line, event in _results(protocol):
        content = _structured(event)
        if event.get("is_error") or not content.get("premium"):
            continue
        if content.get("validation", {}).get("conforms"):
            found = found or line
            if not scenario.offer:
                return Criterion("premium", True, "a premium with a conforming report", (line,))
        elif not content.get("offer"):
            unconfirmed.append(line)
        if scenario.offer and found and content.get("offer"):
            return Criterion(
                "premium", True, "a premium with a conforming report, and its offer", (found, line)
            )
    if found:
        return Criterion("premium", False, "a premium, but no binding offer", (found,))
    if unconfirmed:
        return Criterion(
            "premium", False, "a premium without a conforming report", tuple(unconfirmed)
        )
    return Criterion("premium", False, "no answer states a premium")


def _offers(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(_structured(event).get("nextSteps", []))


@cache
def _edits() -> frozenset[str]:
    """The operations that change a business case, by the kind the norm's file gives them."""
    norm = load_norm()
    return frozenset(n for n, op in norm.operations.items() if op.kind in CHANGING_KINDS)


def is_edit(tool: str) -> bool:
    """Whether a call changes a business case; a tool the norm does not know counts as one."""
    return tool in _edits() or tool not in load_norm().operations


def only_offered_steps(protocol: Protocol, scenario: Scenario) -> Criterion:
    """2. Every edit the agent made (an operation of kind create or edit) was offered by a
    previous answer of the same server, with the same arguments the offer named. Reads and
    inquiries change nothing and are never held against the agent."""
    offered: dict[str, list[Mapping[str, Any]]] = {}
    for line, event in _results(protocol):
        server, tool = event.get("mcp.server", ""), event.get("gen_ai.tool.name", "")
        arguments = event.get("gen_ai.tool.call.arguments", {})
        if is_edit(tool):
            matches = [
                step for step in offered.get(server, [])
                if step.get("tool") == tool
                and all(arguments.get(k) == v for k, v in step.get("arguments", {}).items())
            ]  # fmt: skip
            if not matches:
                return Criterion(
                    "offered",
                    False,
                    f"{server} · {tool} (an edit) was called without a previous answer "
                    "offering it with these arguments",
                    (line,),
                )
        offered.setdefault(server, []).extend(_offers(event))
    return Criterion("offered", True, "every edit was a step an answer offered before")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def iris_seen_before(protocol: Protocol, scenario: Scenario) -> Criterion:
    """3. Every IRI in the agent's inputs appeared before: in the task, a tool description or an answer."""
    seen = " ".join(_strings(scenario.task))
    for line, event in enumerate(protocol, start=1):
        kind = event.get("event")
        if kind == TOOLS_LIST:
            seen += " " + " ".join(_strings(event.get("tools", [])))
        elif kind == TOOL_CALL:
            for text in _strings(event.get("gen_ai.tool.call.arguments", {})):
                for iri in IRI.findall(text):
                    if iri not in seen:
                        return Criterion(
                            "iris", False, f"{iri} was used before any answer showed it", (line,)
                        )
            seen += " " + " ".join(_strings(event.get("mcp.tool.result", {})))
    return Criterion("iris", True, "every IRI the agent sent had appeared before")


def assumptions_named(protocol: Protocol, scenario: Scenario) -> Criterion:
    """4. The final answer names every assumption the task left open."""
    line, text = _final(protocol)
    lowered = text.lower()
    missing = [
        a.name
        for a in scenario.assumptions
        if not any(w.lower() in lowered for w in a.all_wordings)
    ]
    if missing:
        return Criterion(
            "assumptions",
            False,
            f"the final answer does not name: {', '.join(missing)}",
            (line,) if line else (),
        )
    return Criterion(
        "assumptions", True, "the final answer names every open assumption", (line,) if line else ()
    )


def _spellings(amount: Decimal) -> list[str]:
    plain = f"{amount:.2f}"
    english = f"{amount:,.2f}"
    german = english.replace(",", "X").replace(".", ",").replace("X", ".")
    return [plain, english, german, german.replace(".", " "), plain.replace(".", ",")]


def premium_stated(protocol: Protocol, scenario: Scenario) -> Criterion:
    """5. The final answer states the premium correctly (German or English number format, currency)."""
    line, text = _final(protocol)
    currency_words = {scenario.currency, "€", "Euro", "euro", "EUR"}
    has_currency = any(c in text for c in currency_words)
    missing = [
        f"{server}: {amount}" for server, amount in scenario.premiums.items()
        if not any(s in text for s in _spellings(amount))
    ]  # fmt: skip
    if missing or not has_currency:
        reason = f"not stated: {', '.join(missing)}" if missing else "no currency named"
        return Criterion("stated", False, reason, (line,) if line else ())
    return Criterion("stated", True, "the final answer states every expected premium", (line,))


def within_budget(protocol: Protocol, scenario: Scenario) -> Criterion:
    """6. The run stayed within the budget: tool calls, tokens, cost, time; and was not stopped."""
    calls = len(_results(protocol))
    models = list(events_of(protocol, MODEL_CALL))
    tokens = sum(
        int(e.get("gen_ai.usage.input_tokens", 0)) + int(e.get("gen_ai.usage.output_tokens", 0))
        for _, e in models
    )
    cost = sum(float(e.get("cost_usd", 0.0)) for _, e in models)
    ends = list(events_of(protocol, RUN_END))
    seconds = float(ends[-1][1].get("seconds", 0.0)) if ends else 0.0
    budget = scenario.budget
    over = []
    if calls > budget.tool_calls:
        over.append(f"{calls} tool calls > {budget.tool_calls}")
    if tokens > budget.tokens:
        over.append(f"{tokens} tokens > {budget.tokens}")
    if cost > budget.cost:
        over.append(f"cost {cost:.4f} > {budget.cost}")
    if seconds > budget.seconds:
        over.append(f"{seconds:.1f} s > {budget.seconds}")
    if ends and ends[-1][1].get("reason") == "budget":
        over.append(f"stopped: {ends[-1][1].get('detail', 'over budget')}")
    evidence = (ends[-1][0],) if ends else ()
    if over:
        return Criterion("budget", False, "; ".join(over), evidence)
    return Criterion(
        "budget",
        True,
        f"{calls} calls, {tokens} tokens, cost {cost:.4f}, {seconds:.1f} s",
        evidence,
    )


CRITERIA: tuple[Callable[[Protocol, Scenario], Criterion], ...] = (
    premium_with_conforming_report,
    only_offered_steps,
    iris_seen_before,
    assumptions_named,
    premium_stated,
    within_budget,
)


def grade(protocol: Protocol) -> Grade:
    """Grade one run's protocol; the scenario comes from its run.start event."""
    start = next(e for e in protocol if e.get("event") == RUN_START)
    scenario = parse_scenario(start["scenario"])
    ends = [e for e in protocol if e.get("event") == RUN_END]
    end_reason = str(ends[-1].get("reason", "")) if ends else "unfinished"
    return Grade(
        scenario=scenario.id,
        agent=str(start.get("agent", "")),
        criteria=tuple(check(protocol, scenario) for check in CRITERIA),
        end_reason=end_reason,
    )
