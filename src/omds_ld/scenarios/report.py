"""The report: pass rate with its Wilson interval, pass^k, criteria, calls, tokens and cost."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omds_ld.scenarios.grader import Grade
from omds_ld.scenarios.protocol import MODEL_CALL, RUN_START, TOOL_CALL


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
    inadmissible: int = 0  # calls refused, or edits no answer offered (the protocol marks them)
    # the reference agent's calls for the same task (the minimum by next steps), if measured
    minimum_calls: int | None = None


def metrics(protocol: Sequence[Mapping[str, Any]]) -> RunMetrics:
    calls = sum(1 for e in protocol if e.get("event") == TOOL_CALL)
    models = [e for e in protocol if e.get("event") == MODEL_CALL]
    tokens = sum(
        int(e.get("gen_ai.usage.input_tokens", 0)) + int(e.get("gen_ai.usage.output_tokens", 0))
        for e in models
    )
    refused = sum(1 for e in protocol if e.get("event") == TOOL_CALL and e.get("inadmissible"))
    start = next((e for e in protocol if e.get("event") == RUN_START), {})
    minimum = (start.get("scenario") or {}).get("minimum_calls")
    if minimum is None and start.get("agent") == "reference":
        minimum = calls  # the reference agent's calls are the minimum by definition
    cost = sum(float(e.get("cost_usd", 0.0)) for e in models)
    return RunMetrics(calls, tokens, cost, refused, None if minimum is None else int(minimum))


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
    inadmissible: float
    # mean calls over the reference agent's minimum for the task (None: no minimum measured)
    calls_per_minimum: float | None
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
        ratios = [m.tool_calls / m.minimum_calls for _, m in counted if m.minimum_calls]
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
                inadmissible=sum(m.inadmissible for _, m in counted) / n if n else 0.0,
                calls_per_minimum=sum(ratios) / len(ratios) if ratios else None,
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
                   "pass^4", "criteria", "calls", "× minimum", "inadmissible", "tokens", "cost/run", "cost/pass",
                   "infra"):  # fmt: skip
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
            f"{row.tool_calls:.1f}", k(row.calls_per_minimum), f"{row.inadmissible:.1f}",
            f"{row.tokens:.0f}", f"{row.cost_per_run:.4f}",
            "—" if row.cost_per_pass is None else f"{row.cost_per_pass:.4f}", str(row.infrastructure),
        )  # fmt: skip
    return table


def _bar(rate: float, interval: tuple[float, float] | None = None, width: int = 220) -> str:
    """An inline SVG bar of a rate in [0, 1], with the interval as a whisker."""
    fill = "#2e7d32" if rate >= 0.999 else "#f9a825" if rate >= 0.5 else "#c62828"
    parts = [
        f'<svg width="{width + 50}" height="18" role="img" aria-label="{rate:.2f}">',
        f'<rect x="0" y="3" width="{width}" height="12" fill="#eee"/>',
        f'<rect x="0" y="3" width="{rate * width:.1f}" height="12" fill="{fill}"/>',
    ]
    if interval is not None:
        low, high = interval[0] * width, interval[1] * width
        parts.append(
            f'<line x1="{low:.1f}" y1="9" x2="{high:.1f}" y2="9" stroke="#000" stroke-width="1.5"/>'
        )
        parts.append(f'<line x1="{low:.1f}" y1="5" x2="{low:.1f}" y2="13" stroke="#000"/>')
        parts.append(f'<line x1="{high:.1f}" y1="5" x2="{high:.1f}" y2="13" stroke="#000"/>')
    parts.append(f'<text x="{width + 6}" y="14" font-size="12">{rate:.2f}</text></svg>')
    return "".join(parts)


def render_html(rows: Sequence[Row], title: str = "OMDS LD scenario report") -> str:
    """The report as one self-contained HTML page: tables and inline SVG charts, nothing fetched."""
    from html import escape

    def k(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    body = [
        f"<h1>{escape(title)}</h1>",
        "<p>Pass rate with its 95 % Wilson interval; pass^k is the chance that k runs drawn from "
        "these all pass. Infrastructure failures are counted apart.</p>",
        "<table><tr><th>scenario</th><th>agent</th><th>runs</th><th>pass rate (95 % interval)</th>"
        "<th>pass^1</th><th>pass^2</th><th>pass^4</th><th>calls</th><th>× minimum</th>"
        "<th>inadmissible</th>"
        "<th>tokens</th>"
        "<th>cost/run</th><th>cost/pass</th><th>infra</th></tr>",
    ]
    for row in rows:
        body.append(
            f"<tr><td>{escape(row.scenario)}</td><td>{escape(row.agent)}</td><td>{row.runs}</td>"
            f"<td>{_bar(row.pass_rate, row.interval)}"
            f"<br><small>{row.interval[0]:.2f}–{row.interval[1]:.2f}</small></td>"
            f"<td>{k(row.pass_k[1])}</td><td>{k(row.pass_k[2])}</td><td>{k(row.pass_k[4])}</td>"
            f"<td>{row.tool_calls:.1f}</td><td>{k(row.calls_per_minimum)}</td>"
            f"<td>{row.inadmissible:.1f}</td><td>{row.tokens:.0f}</td>"
            f"<td>{row.cost_per_run:.4f}</td>"
            f"<td>{'—' if row.cost_per_pass is None else f'{row.cost_per_pass:.4f}'}</td>"
            f"<td>{row.infrastructure}</td></tr>"
        )
    body.append("</table><h2>Criteria</h2>")
    for row in rows:
        body.append(f"<h3>{escape(row.scenario)} · {escape(row.agent)}</h3><table>")
        for name, rate in row.criteria.items():
            body.append(f"<tr><td>{escape(name)}</td><td>{_bar(rate)}</td></tr>")
        body.append("</table>")
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse;margin-bottom:1em}"
        "td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
    )
