"""The agent-contract gate: what a change of the norm does to agents, checked before it ships.

One command (``omds-ld norm gate``), one report, a non-zero exit when something regresses:

1. **tools diff** against the last released norm (``contract.tools``): every change with the
   version it needs; the gate fails where the new version number is not what they need (a
   breaking change without a major version, say).
2. **scenarios**: the shipped scenarios with the reference agent (no model), once against MCP
   servers pinned to the released norm and once to the new one, in front of the same example
   insurers. Every scenario must pass with the new norm.
3. **token budgets**, measured on those runs as ``benchmarks/mcp.py`` measures them (cl100k):
   the tools a model is shown per MCP server, the condensed answers against the insurer's whole
   JSON-LD (over all answers, and the worst one), the tokens a model reads per scenario. The new
   norm's figures must stay within its budgets (``budgets.yaml`` beside the norm's files); the
   released norm's figures stand beside them.
4. **conformance**: the official MCP suite, what each protocol revision requires, against the new
   norm's servers (an insurer's and the broker endpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from omds_ld import yamlfile
from omds_ld.contract import conformance
from omds_ld.contract.sources import CURRENT, contract_of_file, last_release, norm_file
from omds_ld.contract.tools import ContractDiff, diff, report_text, shown_text
from omds_ld.settings import ConfigError

STEPS = ("diff", "scenarios", "budgets", "conformance")


@dataclass
class Step:
    """One step's verdict (None: skipped) and its lines in the report."""

    name: str
    passed: bool | None
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Figures:
    """What agents met with one version of the norm, from the scenario runs' protocols."""

    scenarios: dict[str, bool] = field(default_factory=dict)  # id → passed
    failures: dict[str, str] = field(default_factory=dict)  # id → what failed
    tools: dict[str, int] = field(default_factory=dict)  # server → tokens shown
    read: dict[str, int] = field(default_factory=dict)  # scenario → tokens a model reads
    condensed: int = 0
    full: int = 0
    worst: tuple[float, str] = (0.0, "")

    @property
    def ratio(self) -> float:
        return self.condensed / self.full if self.full else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "scenarios": self.scenarios,
            "failures": self.failures,
            "toolsShown": self.tools,
            "tokensRead": self.read,
            "condensedRatio": round(self.ratio, 4),
            "worst": {"ratio": round(self.worst[0], 4), "answer": self.worst[1]},
        }


@dataclass(frozen=True)
class GateOptions:
    against: str | None = None  # a kept version or an OpenAPI file; None: the last release
    norm: str = CURRENT  # the norm to check: current, or an OpenAPI file
    budgets: Path | None = None  # None: the budgets beside the norm's files
    skip: frozenset[str] = frozenset()
    node_tools: Path = Path("tools/node")
    keep: Path | None = None  # where the protocols go (None: a temporary folder)
    scenarios: tuple[str, ...] = ()  # scenario ids to run (empty: every shipped one)


def _path_of(source: str) -> Path | None:
    """The OpenAPI file of a source (None: the package's own norm)."""
    if source == CURRENT:
        return None
    path = Path(source)
    return path if path.is_file() else norm_file(source)


def load_budgets(path: Path | None) -> dict[str, Any]:
    if path is None:
        text = resources.files("omds_ld.norm").joinpath("data", "budgets.yaml").read_text("utf-8")
    else:
        try:
            text = path.read_text("utf-8")
        except OSError as error:
            raise ConfigError(f"--budgets {path}: {error.strerror}") from None
    budgets = yamlfile.load(text)
    if not isinstance(budgets, dict):
        raise ConfigError("the budgets file must be a mapping (tools, answers)")
    return budgets


def figures_of(protocols: Sequence[Path], count: Callable[[str], int]) -> Figures:
    """The figures of one norm's scenario runs (each protocol a run, measured with ``full``)."""
    from omds_ld.scenarios.grader import grade
    from omds_ld.scenarios.protocol import TOOL_CALL, TOOLS_LIST, read_protocol
    from omds_ld.scenarios.session import FULL_ANSWER

    found = Figures()
    for path in protocols:
        events = read_protocol(path)
        start = events[0]
        scenario = str(start.get("scenario", {}).get("id", path.stem))
        verdict = grade(events)
        found.scenarios[scenario] = verdict.passed
        if not verdict.passed:
            failed = [c.name for c in verdict.criteria if not c.passed]
            found.failures[scenario] = f"{verdict.end_reason}: {', '.join(failed)}"
        read = 0
        for event in events:
            if event.get("event") == TOOLS_LIST:
                shown = [
                    shown_text(t["name"], t.get("description", ""), t.get("inputSchema", {}))
                    for t in event.get("tools", [])
                ]
                tokens = count("[" + ",".join(shown) + "]")
                found.tools.setdefault(str(event.get("mcp.server")), tokens)
                read += tokens
            elif event.get("event") == TOOL_CALL:
                text_tokens = count(str(event.get("text", "")))
                read += text_tokens
                whole = event.get(FULL_ANSWER)
                if whole:
                    full_tokens = count(str(whole))
                    found.condensed += text_tokens
                    found.full += full_tokens
                    ratio = text_tokens / full_tokens if full_tokens else 0.0
                    if ratio > found.worst[0]:
                        tool = event.get("gen_ai.tool.name")
                        found.worst = (ratio, f"{scenario} · {event.get('mcp.server')} · {tool}")
        found.read[scenario] = read
    return found


@contextlib.contextmanager
def _served(openapi: Path | None) -> Iterator[str]:
    from omds_ld.scenarios.embedded import example_server

    extra = ["--openapi", str(openapi)] if openapi is not None else []
    with example_server(extra_args=extra) as url:
        yield url


def _scenarios(only: Sequence[str]) -> list[Any]:
    from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario

    scenarios = [load_scenario(p) for p in builtin_scenarios()]
    if not only:
        return scenarios
    unknown = set(only) - {s.id for s in scenarios}
    if unknown:
        known = ", ".join(s.id for s in scenarios)
        raise ConfigError(f"no shipped scenario {', '.join(sorted(unknown))}; known: {known}")
    return [s for s in scenarios if s.id in only]


async def _run_scenarios(url: str, out: Path, scenarios: Sequence[Any]) -> list[Path]:
    from omds_ld.scenarios.agents.reference import ReferenceAgent
    from omds_ld.scenarios.runner import run_all

    records = await run_all(scenarios, ReferenceAgent, 1, url, out, measure=True)
    return [r.protocol for r in records]


def _diff_step(result: ContractDiff) -> Step:
    lines = report_text(result, allow_breaking=True).splitlines()
    passed = result.version_ok is not False
    if not passed:
        lines.append(f"FAILED: version {result.new.version} is not what the changes need")
    return Step("diff", passed, lines, result.as_json())


def _scenario_step(old: Figures | None, new: Figures, old_label: str) -> Step:
    lines = []
    for scenario, passed in new.scenarios.items():
        before = (
            "—"
            if old is None
            else {True: "pass", False: "fail", None: "—"}[old.scenarios.get(scenario)]
        )
        now = "pass" if passed else f"FAIL ({new.failures.get(scenario, '')})"
        regressed = " REGRESSED" if not passed and before == "pass" else ""
        lines.append(f"{scenario}: {old_label} {before} → {now}{regressed}")
    passed = all(new.scenarios.values()) and bool(new.scenarios)
    failed = [s for s, p in new.scenarios.items() if not p]
    lines.append(
        f"{len(new.scenarios) - len(failed)} of {len(new.scenarios)} scenarios pass"
        + (f"; failing: {', '.join(failed)}" if failed else "")
    )
    return Step("scenarios", passed, lines, {"old": old and old.scenarios, "new": new.scenarios})


def _within(value: float, budget: Any) -> bool:
    return budget is None or value <= float(budget)


def _budget_step(old: Figures | None, new: Figures, budgets: Mapping[str, Any]) -> Step:
    lines: list[str] = []
    over: list[str] = []
    tools_budget: Mapping[str, Any] = budgets.get("tools") or {}
    for server, tokens in sorted(new.tools.items()):
        before = "—" if old is None else str(old.tools.get(server, "—"))
        budget = tools_budget.get(server)
        fits = _within(tokens, budget)
        if not fits:
            over.append(f"tools of {server}")
        shown = "no budget" if budget is None else f"budget {budget}"
        lines.append(
            f"tools shown, {server}: {before} → {tokens} tokens ({shown}){'' if fits else ' OVER'}"
        )
    answers: Mapping[str, Any] = budgets.get("answers") or {}
    ratio_before = "—" if old is None else f"{old.ratio:.3f}"
    fits = _within(new.ratio, answers.get("condensed"))
    if not fits:
        over.append("condensed ratio")
    lines.append(
        f"condensed / whole JSON-LD over all answers: {ratio_before} → {new.ratio:.3f} "
        f"(budget {answers.get('condensed', 'none')}){'' if fits else ' OVER'}"
    )
    worst_before = "—" if old is None else f"{old.worst[0]:.3f}"
    fits = _within(new.worst[0], answers.get("worst"))
    if not fits:
        over.append("worst answer")
    lines.append(
        f"worst answer: {worst_before} → {new.worst[0]:.3f} ({new.worst[1]}; budget "
        f"{answers.get('worst', 'none')}){'' if fits else ' OVER'}"
    )
    growth = budgets.get("scenario_growth")
    for scenario, tokens in new.read.items():
        before_tokens = None if old is None else old.read.get(scenario)
        if before_tokens is None or not (old and old.scenarios.get(scenario)):
            lines.append(f"tokens read, {scenario}: {tokens}")
            continue
        grown = tokens / before_tokens if before_tokens else 1.0
        fits = growth is None or grown <= float(growth)
        if not fits:
            over.append(f"tokens read in {scenario}")
        lines.append(
            f"tokens read, {scenario}: {before_tokens} → {tokens} (× {grown:.2f}"
            f"{'' if growth is None else f'; at most × {growth}'}){'' if fits else ' OVER'}"
        )
    if over:
        lines.append("OVER BUDGET: " + ", ".join(over))
    data = {"old": old and old.as_json(), "new": new.as_json(), "budgets": dict(budgets)}
    return Step("budgets", not over, lines, data)


def _conformance_step(urls: Mapping[str, str], tools: Path) -> Step:
    """What each revision requires, at each endpoint (an insurer's MCP server, the broker's)."""
    lines, passed = [], True
    for era in conformance.ERAS:
        for name, url in urls.items():
            outcome = conformance.run_suite(url, era, tools)
            passed = passed and outcome.passed
            lines.append(
                f"{era}: {'pass' if outcome.passed else 'FAIL'} ({name}): {outcome.detail}"
            )
    return Step("conformance", passed, lines)


@dataclass
class GateReport:
    old: str
    new: str
    steps: list[Step]

    @property
    def passed(self) -> bool:
        return all(s.passed is not False for s in self.steps)

    @property
    def complete(self) -> bool:
        return all(s.passed is not None for s in self.steps)

    def text(self) -> str:
        lines = [f"# Agent-contract gate: {self.old} → {self.new}", ""]
        for step in self.steps:
            verdict = {True: "pass", False: "FAIL", None: "skipped"}[step.passed]
            lines.append(f"## {step.name}: {verdict}")
            lines.extend(step.lines)
            lines.append("")
        if not self.passed:
            failed = [s.name for s in self.steps if s.passed is False]
            lines.append(f"Gate: FAILED ({', '.join(failed)})")
        else:
            skipped = [s.name for s in self.steps if s.passed is None]
            lines.append(
                "Gate: passed" + (f" (not checked: {', '.join(skipped)})" if skipped else "")
            )
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "passed": self.passed,
            "complete": self.complete,
            "steps": [
                {"name": s.name, "passed": s.passed, "lines": s.lines, "data": s.data}
                for s in self.steps
            ],
        }


def run_gate(
    options: GateOptions,
    count: Callable[[str], int],
    progress: Callable[[str], None] = lambda _line: None,
) -> GateReport:
    """Every step of the gate, in order; a step left out by ``options.skip`` is reported so."""
    unknown = options.skip - set(STEPS)
    if unknown:
        raise ConfigError(f"--skip {', '.join(sorted(unknown))}: the steps are {', '.join(STEPS)}")
    against = options.against or last_release()
    old_path, new_path = _path_of(against), _path_of(options.norm)
    budgets = load_budgets(options.budgets)
    scenarios = _scenarios(options.scenarios)
    old_contract, new_contract = contract_of_file(against), contract_of_file(options.norm)
    steps = [_diff_step(diff(old_contract, new_contract, count))]
    progress(f"tools diff: {steps[0].lines[-1]}")
    measure = not {"scenarios", "budgets"} <= options.skip
    with contextlib.ExitStack() as stack:
        out = options.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        figures: dict[str, Figures] = {}
        if measure:
            for label, path in (("old", old_path), ("new", new_path)):
                progress(f"scenarios with the {label} norm ({path or 'the package’s'})")
                with _served(path) as url:
                    protocols = asyncio.run(_run_scenarios(url, out / label, scenarios))
                figures[label] = figures_of(protocols, count)
        if "scenarios" in options.skip:
            steps.append(Step("scenarios", None, ["skipped (--skip scenarios)"]))
        else:
            steps.append(_scenario_step(figures.get("old"), figures["new"], against))
        if "budgets" in options.skip:
            steps.append(Step("budgets", None, ["skipped (--skip budgets)"]))
        else:
            steps.append(_budget_step(figures.get("old"), figures["new"], budgets))
        if "conformance" in options.skip:
            steps.append(Step("conformance", None, ["skipped (--skip conformance)"]))
        else:
            progress("conformance suite, both eras")
            with _served(new_path) as url:
                endpoints = {
                    "an insurer's": f"{url}/omds-ld/insurers/pfefferminzia/mcp",
                    "the broker endpoint": f"{url}/omds-ld/insurers/mcp",
                }
                steps.append(_conformance_step(endpoints, options.node_tools))
    return GateReport(old_contract.source, new_contract.source, steps)


def write_report(report: GateReport, text_path: Path | None, json_path: Path | None) -> None:
    if text_path is not None:
        text_path.write_text(report.text() + "\n", encoding="utf-8")
    if json_path is not None:
        json_path.write_text(json.dumps(report.as_json(), ensure_ascii=False, indent=2) + "\n")
