"""The report: pass rate with its Wilson interval, pass^k, criteria, calls, tokens and cost."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omds_ld.scenarios.grader import Grade
from omds_ld.scenarios.protocol import MODEL_CALL, TOOL_CALL


def wilson(passes: int, runs: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 %) of a pass rate."""
    if runs == 0:
        return (0.0, 1.0)
    p = passes / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_hat_k(passes: int, runs: int, k: int) -> float | None:
    """pass^k: the chance that k runs drawn from these all pass (None if there are fewer than k)."""
    if runs < k:
        return None
    return math.comb(passes, k) / math.comb(runs, k)


@dataclass(frozen=True)
class RunMetrics:
    tool_calls: int
    tokens: int
    cost: float


def metrics(protocol: Sequence[Mapping[str, Any]]) -> RunMetrics:
    calls = sum(1 for e in protocol if e.get("event") == TOOL_CALL)
    models = [e for e in protocol if e.get("event") == MODEL_CALL]
    tokens = sum(
        int(e.get("gen_ai.usage.input_tokens", 0)) + int(e.get("gen_ai.usage.output_tokens", 0))
        for e in models
    )
    return RunMetrics(calls, tokens, sum(float(e.get("cost_usd", 0.0)) for e in models))


@dataclass(frozen=True)
class Row:
    """One scenario and agent over all its runs."""

    scenario: str
    agent: str
    runs: int
    passes: int
    infrastructure: int
    interval: tuple[float, float]
    pass_k: Mapping[int, float | None]
    criteria: Mapping[str, float]
    tool_calls: float
    tokens: float
    cost_per_run: float
    cost_per_pass: float | None

    @property
    def pass_rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0


def summarize(graded: Sequence[tuple[Grade, RunMetrics]]) -> list[Row]:
    """Rows per scenario and agent; infrastructure failures are counted apart, not as failed runs."""
    groups: dict[tuple[str, str], list[tuple[Grade, RunMetrics]]] = {}
    for grade, measured in graded:
        groups.setdefault((grade.scenario, grade.agent), []).append((grade, measured))
    rows = []
    for (scenario, agent), items in groups.items():
        counted = [(g, m) for g, m in items if not g.infrastructure_failure]
        n = len(counted)
        passes = sum(1 for g, _ in counted if g.passed)
        names = [c.name for c in counted[0][0].criteria] if counted else []
        criteria = {
            name: sum(1 for g, _ in counted if next(c for c in g.criteria if c.name == name).passed)
            / n
            for name in names
        }
        cost = sum(m.cost for _, m in counted)
        rows.append(
            Row(
                scenario=scenario,
                agent=agent,
                runs=n,
                passes=passes,
                infrastructure=len(items) - n,
                interval=wilson(passes, n),
                pass_k={k: pass_hat_k(passes, n, k) for k in (1, 2, 4)},
                criteria=criteria,
                tool_calls=sum(m.tool_calls for _, m in counted) / n if n else 0.0,
                tokens=sum(m.tokens for _, m in counted) / n if n else 0.0,
                cost_per_run=cost / n if n else 0.0,
                cost_per_pass=cost / passes if passes else None,
            )
        )
    return rows


def render(rows: Sequence[Row]) -> Any:
    """A rich table of the rows."""
    from rich.table import Table

    table = Table(title="Scenario runs (criteria: pass rate of each that is below 1)")
    for column in ("scenario", "agent", "runs", "pass rate", "95 % interval", "pass^1", "pass^2",
                   "pass^4", "criteria", "calls", "tokens", "cost/run", "cost/pass", "infra"):  # fmt: skip
        table.add_column(column, overflow="fold")

    def k(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    for row in rows:
        table.add_row(
            row.scenario, row.agent, str(row.runs), f"{row.pass_rate:.2f}",
            f"{row.interval[0]:.2f}–{row.interval[1]:.2f}",
            k(row.pass_k[1]), k(row.pass_k[2]), k(row.pass_k[4]),
            " ".join(f"{name} {rate:.2f}" for name, rate in row.criteria.items() if rate < 1)
            or "all 1.00",
            f"{row.tool_calls:.1f}", f"{row.tokens:.0f}", f"{row.cost_per_run:.4f}",
            "—" if row.cost_per_pass is None else f"{row.cost_per_pass:.4f}", str(row.infrastructure),
        )  # fmt: skip
    return table
