"""The runner: our own small asyncio loop over the official MCP client, one protocol per run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from mcp import Client

from omds_ld.mcp.condense import answer_extension, answer_of
from omds_ld.scenarios.grader import Grade, grade
from omds_ld.scenarios.protocol import (
    BROKER_ENDPOINT,
    FINAL,
    INSURER_ARGUMENT,
    RUN_END,
    RUN_START,
    TOOL_CALL,
    TOOLS_LIST,
    ProtocolWriter,
    insurer_of,
    read_protocol,
)
from omds_ld.scenarios.scenario import Scenario, premium_key
from omds_ld.scenarios.session import AgentGaveUp, BudgetExceeded, RunSession


class Agent(Protocol):
    """Something that completes a scenario's task with the session's tools."""

    name: str
    model: str | None

    async def run(self, scenario: Scenario, session: RunSession) -> str: ...


@dataclass(frozen=True)
class RunRecord:
    """One finished run: where its protocol is and how it was graded."""

    scenario: str
    agent: str
    index: int
    protocol: Path
    grade: Grade


def mcp_url(base_url: str, server: str) -> str:
    """Where a scenario's server is: an insurer's MCP server, or the broker endpoint."""
    if server == BROKER_ENDPOINT:
        return f"{base_url.rstrip('/')}/omds-ld/insurers/mcp"
    return f"{base_url.rstrip('/')}/omds-ld/insurers/{server}/mcp"


def _scenario_snapshot(scenario: Scenario) -> dict[str, Any]:
    """The scenario as the protocol keeps it (premiums resolved), so grading needs nothing else."""
    return {
        "id": scenario.id,
        "title": scenario.title,
        "task": scenario.task,
        "servers": list(scenario.servers),
        **({"insurers": list(scenario.insurers)} if scenario.at_broker_endpoint else {}),
        "facts": dict(scenario.facts),
        "first_attempt": dict(scenario.first_attempt),
        "set": dict(scenario.settings),
        "include": list(scenario.include),
        "exclude": list(scenario.exclude),
        "per_server": {k: dict(v) for k, v in scenario.per_server.items()},
        "objects": [{"name": n, "facts": dict(f)} for n, f in scenario.objects],
        "expected": {
            "premiums": {k: str(v) for k, v in scenario.premiums.items()},
            "currency": scenario.currency,
            "offer": scenario.offer,
            "outcome": scenario.outcome,
            "says": [
                {"name": a.name, "wordings": {k: list(v) for k, v in a.wordings.items()}}
                for a in scenario.says
            ],
            "refused": scenario.refused_field,
            "application": scenario.application_outcome,
            "application_at": scenario.application_at,
        },
        "application": dict(scenario.application),
        "person": (
            {"answer": scenario.person, "consent": dict(scenario.person_consent)}
            if scenario.person_consent
            else scenario.person
        ),
        "assumptions": [
            {"name": a.name, "wordings": {k: list(v) for k, v in a.wordings.items()}}
            for a in scenario.assumptions
        ],
        "budget": dataclasses.asdict(scenario.budget),
        "runs": scenario.runs,
        "minimum_calls": scenario.minimum_calls,
    }


# the protocol revisions a run may speak, each as the SDK's Client is told it: 2025-11-25 with a
# session (initialize), 2026-07-28 without one (what the SDK's default Client() negotiates)
ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}


def person_states(scenario: Scenario) -> dict[str, str]:
    """The customer's consent as the scenario's person states it on the page: what the task
    says of it (the application's consent: by, method), over which the person's own account."""
    told = scenario.application.get("consent") or {}
    known = {k: str(told[k]) for k in ("by", "method", "at") if told.get(k)}
    return {**known, **scenario.person_consent}


async def prepare(
    scenario: Scenario, agent: str, base_url: str, out_dir: Path, era: str = "2025-11-25"
) -> Scenario:
    """The scenario as its runs need it: the reference agent runs it once first where the
    expected premiums are found at run time (``premium: inquire``) or another agent is measured
    (its calls against the reference agent's, the minimum by next steps). Its protocol is kept
    as ``<id>.baseline.reference.0.jsonl``. At the broker endpoint, a scenario that names no
    insurers is about every insurer the endpoint lists."""
    scenario = await with_insurers(scenario, base_url)
    if not scenario.inquire and agent == "reference":
        return scenario
    from omds_ld.scenarios.agents.reference import ReferenceAgent

    probe = dataclasses.replace(scenario, id=f"{scenario.id}.baseline", premiums={}, inquire=False)
    record = await run_once(probe, ReferenceAgent(), base_url, out_dir, 0, era=era)
    protocol = read_protocol(record.protocol)
    calls = sum(1 for event in protocol if event.get("event") == TOOL_CALL)
    premiums = _inquired(scenario, protocol) if scenario.inquire else scenario.premiums
    return dataclasses.replace(scenario, premiums=premiums, inquire=False, minimum_calls=calls)


async def with_insurers(scenario: Scenario, base_url: str) -> Scenario:
    """The scenario with its insurers named: at the broker endpoint without any, every insurer
    it lists (where a task starts, ``listProducts``, names them)."""
    if not scenario.at_broker_endpoint or scenario.insurers:
        return scenario
    async with Client(mcp_url(base_url, BROKER_ENDPOINT), mode="legacy") as client:
        listed = await client.list_tools()
    start = next((t for t in listed.tools if t.name == "listProducts"), None)
    schema = start.input_schema if start is not None else {}
    names = schema.get("properties", {}).get(INSURER_ARGUMENT, {}).get("enum", [])
    if not names:
        raise RuntimeError(f"{scenario.id}: the broker endpoint lists no insurers")
    return dataclasses.replace(scenario, insurers=tuple(str(name) for name in names))


def _inquired(scenario: Scenario, protocol: Sequence[Mapping[str, Any]]) -> dict[str, Decimal]:
    """The premiums the reference agent's run was given, by server (and risk object)."""
    premiums: dict[str, Decimal] = {}
    names = [name for name, _ in scenario.risk_objects()]
    found: dict[str, int] = {}
    for event in protocol:
        content = answer_of(event.get("mcp.tool.result") or {})
        if event.get("event") == TOOL_CALL and content.get("premium") and not event.get("is_error"):
            server = insurer_of(event)
            if content.get("offer"):
                continue  # an offer repeats the premium it binds
            index = found.get(server, 0)  # the reference agent prices the objects in order
            found[server] = index + 1
            key = premium_key(server, names[min(index, len(names) - 1)])
            premiums[key] = Decimal(str(content["premium"]["gross"]))
    missing = [s for s in scenario.insurers if s not in found]
    if missing:
        raise RuntimeError(f"{scenario.id}: no premium could be inquired at {', '.join(missing)}")
    return premiums


def _leaf(error: BaseException) -> BaseException:
    """The first exception inside task groups' exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _ending(raised: Exception, scenario: Scenario) -> tuple[str, str]:
    """How a run ended that did not end with a final answer."""
    error = _leaf(raised)
    if isinstance(error, BudgetExceeded):
        return "budget", str(error)
    if isinstance(error, TimeoutError):
        return "budget", f"wall time over {scenario.budget.seconds} s"
    if isinstance(error, AgentGaveUp):
        return "agent", str(error)
    return "infrastructure", repr(error)  # a failure outside the agent's task: counted apart


async def run_once(
    scenario: Scenario,
    agent: Agent,
    base_url: str,
    out_dir: Path,
    index: int,
    measure: bool = False,
    era: str = "2025-11-25",
) -> RunRecord:
    """One run of one scenario: connect (speaking the protocol revision ``era``), list tools,
    let the agent work, record how it ended."""
    scenario = await with_insurers(scenario, base_url)
    path = out_dir / f"{scenario.id}.{agent.name.replace(':', '_')}.{index}.jsonl"
    writer = ProtocolWriter(path)
    writer.write(
        RUN_START,
        scenario=_scenario_snapshot(scenario),
        agent=agent.name,
        run=index,
        **{
            "gen_ai.request.model": agent.model,
            "settings": {"base_url": base_url, "era": era, **getattr(agent, "settings", {})},
        },
    )
    started = time.monotonic()
    reason, detail = "done", ""
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            tools: dict[str, list[dict[str, Any]]] = {}
            for server in scenario.servers:
                client = await stack.enter_async_context(
                    Client(
                        mcp_url(base_url, server), mode=ERAS[era], extensions=[answer_extension()]
                    )
                )
                listed = await client.list_tools()
                tools[server] = [
                    t.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for t in listed.tools
                ]
                writer.write(TOOLS_LIST, **{"mcp.server": server, "tools": tools[server]})
                clients[server] = client
            session = RunSession(
                clients, writer, scenario.budget, person=scenario.person, measure=measure,
                consent=person_states(scenario),
            )  # fmt: skip
            session.tools = tools
            final = await asyncio.wait_for(
                agent.run(scenario, session), timeout=scenario.budget.seconds
            )
            writer.write(FINAL, text=final)
    except Exception as raised:
        reason, detail = _ending(raised, scenario)
    writer.write(
        RUN_END, reason=reason, detail=detail, seconds=round(time.monotonic() - started, 3)
    )
    writer.close()
    return RunRecord(scenario.id, agent.name, index, path, grade(writer.events))


async def run_all(
    scenarios: Sequence[Scenario],
    make_agent: Callable[[], Agent],
    runs: int | None,
    base_url: str,
    out_dir: Path,
    progress: Callable[[RunRecord], None] | None = None,
    measure: bool = False,
    era: str = "2025-11-25",
) -> list[RunRecord]:
    """Every scenario, ``runs`` times each (or as often as the scenario says), one after another;
    ``measure``: the protocols also keep each answer's whole JSON-LD (``RunSession``); ``era``:
    the protocol revision the runs speak (``ERAS``)."""
    records = []
    for listed in scenarios:
        scenario = await prepare(listed, make_agent().name, base_url, out_dir, era)
        for index in range(1, (runs or scenario.runs) + 1):
            record = await run_once(scenario, make_agent(), base_url, out_dir, index, measure, era)
            records.append(record)
            if progress is not None:
                progress(record)
    return records
