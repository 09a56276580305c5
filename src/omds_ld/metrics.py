"""Prometheus metrics of the MCP servers, at ``/metrics`` (prometheus-client, its default registry).

Every tool call is counted from its request-log entry (one place, failures too): by insurer,
tool, outcome and problem type; its latency goes into a histogram. The insurer's own latency is
measured around each call to its interface; refused identities are counted where they are refused.
The instruments are made at the first observation; a process without ``/metrics`` (``omds-ld mcp
--stdio``) counts nothing and never loads prometheus-client.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram
    from starlette.requests import Request
    from starlette.responses import Response

# seconds: from a cached read (well under a millisecond) to the insurer's timeout
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PROBLEMS = "https://w3id.org/omds-ld/problems/"


@dataclass(frozen=True)
class _Instruments:
    calls: Counter
    call_seconds: Histogram
    insurer_seconds: Histogram
    cache: Counter
    replays: Counter
    sessions: Gauge
    live: Gauge
    refused: Counter


_made: list[_Instruments] = []  # made at the first observation (prometheus-client loaded then)
_counting = [True]  # a process without /metrics (stdio) counts nothing: ``not_counted``


def not_counted() -> None:
    """This process has no ``/metrics`` (``omds-ld mcp --stdio``): nothing is counted, and
    prometheus-client is never loaded."""
    _counting[0] = False


def _instruments() -> _Instruments:
    if not _made:
        from prometheus_client import Counter, Gauge, Histogram

        _made.append(_Instruments(
            calls=Counter(
                "omds_ld_mcp_tool_calls",
                "Tool calls, by insurer, tool, outcome (ok, replayed, tool-error, refused, "
                "temporary, internal-error) and the problem type of a failed one",
                ["insurer", "tool", "outcome", "problem"],
            ),
            call_seconds=Histogram(
                "omds_ld_mcp_tool_call_seconds",
                "Time of a tool call in the MCP server, insurer included",
                ["insurer", "tool"], buckets=BUCKETS,
            ),
            insurer_seconds=Histogram(
                "omds_ld_insurer_request_seconds",
                "Time the insurer's interface took to answer one request of the MCP server",
                ["insurer", "method", "status"], buckets=BUCKETS,
            ),
            cache=Counter(
                "omds_ld_mcp_reads",
                "Reads of a tool call, by whether the shared read cache answered them (hit) or "
                "the insurer",
                ["insurer", "cache"],
            ),
            replays=Counter(
                "omds_ld_mcp_idempotent_replays",
                "Writes answered as replays: of the MCP server's own record, or by the insurer",
                ["insurer", "by"],
            ),
            sessions=Gauge(
                "omds_ld_mcp_sessions_open",
                "Open MCP sessions (2025-11-25 era) of an endpoint, on this replica",
                ["insurer"],
            ),
            live=Gauge(
                "omds_ld_mcp_sessions_live",
                "Open MCP sessions whose SDK state is held now (the others are hibernated: "
                "idle, made again on their next request), on this replica",
                ["insurer"],
            ),
            refused=Counter(
                "omds_ld_mcp_refused_identities",
                "Requests refused before any tool ran: no or invalid token (missing, expired, "
                "audience, issuer, signature, invalid), lacking scope, another broker's session",
                ["insurer", "reason"],
            ),
        ))  # fmt: skip
    return _made[0]


OUTCOMES = frozenset({"ok", "replayed", "tool-error", "refused", "temporary", "internal-error"})
UNKNOWN = "unknown"  # the one label value of everything outside a label's fixed set


@dataclass(frozen=True)
class Labels:
    """The values a label may take: fixed by configuration and the norm, never by what a caller
    sends (a tool name nobody lists, an insurer's own problem type), so the number of series is
    bounded whatever comes in."""

    insurers: frozenset[str]
    tools: frozenset[str]
    problems: frozenset[str]  # slugs of the norm's problem types

    @classmethod
    def of(
        cls, insurers: Collection[str], tools: Collection[str], problems: Collection[str]
    ) -> Labels:
        return cls(frozenset(insurers), frozenset(tools), frozenset(problems))

    def value(self, allowed: frozenset[str], value: str) -> str:
        return value if value in allowed else UNKNOWN


# each instrument's child by its label values, as ``labels`` makes it (every value is of a fixed
# set, so these are few): looked up here in a dict, where ``labels`` checks and locks each time
_children: dict[tuple[Any, tuple[str, ...]], Any] = {}


def _child(metric: Any, *values: str) -> Any:
    key = (metric, values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def observe_call(entry: Mapping[str, Any], labels: Labels) -> None:
    """Count one tool call from its request-log entry (each label from its fixed set)."""
    if not _counting[0]:
        return
    made = _instruments()
    insurer = labels.value(labels.insurers, str(entry.get("insurer", "")))
    tool = labels.value(labels.tools, str(entry.get("tool", "")))
    outcome = labels.value(OUTCOMES, str(entry.get("outcome", "ok")))
    problem = str(entry.get("problem") or "").removeprefix(PROBLEMS)
    problem = problem and labels.value(labels.problems, problem)
    _child(made.calls, insurer, tool, outcome, problem).inc()
    if isinstance(entry.get("durationMs"), int | float):
        _child(made.call_seconds, insurer, tool).observe(float(entry["durationMs"]) / 1000)
    provenance = entry.get("provenance") or {}
    if outcome == "replayed":
        _child(made.replays, insurer, "mcp").inc()
    elif provenance.get("replayed") is True:
        _child(made.replays, insurer, "insurer").inc()
    if "fromCache" in provenance:
        _child(made.cache, insurer, "hit" if provenance["fromCache"] else "miss").inc()


def observe_insurer(insurer: str, method: str, status: int, seconds: float) -> None:
    if _counting[0]:
        status_class = f"{status // 100}xx" if status else "none"
        _child(_instruments().insurer_seconds, insurer, method, status_class).observe(seconds)


def refused(insurer: str, reason: str) -> None:
    if _counting[0]:
        _instruments().refused.labels(insurer, reason).inc()


def open_sessions(insurer: str, count: Callable[[], int]) -> None:
    if _counting[0]:
        _instruments().sessions.labels(insurer).set_function(count)


def live_sessions(insurer: str, count: Callable[[], int]) -> None:
    if _counting[0]:
        _instruments().live.labels(insurer).set_function(count)


async def endpoint(request: Request) -> Response:
    """``GET /metrics``: the Prometheus text format of this process's metrics."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.responses import Response  # an HTTP server's: a stdio process never loads it

    _instruments()  # every metric is listed, counted or not yet
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
