"""Load: many agents at once doing whole flows, against ``serve`` and the standalone MCP server.

Each agent is one official MCP client doing the seed's calculation at Pfefferminzia by next steps
(listProducts → createCalculation → createRiskObject → calculatePremium), all agents at once, in
both protocol eras (2025-11-25 with a session; 2026-07-28 sessionless). Beside the SDK client, a
light generator sends the same flow as raw JSON-RPC over one httpx client (2026-07-28, the
envelope the SDK sends), so that the figure is the server's and not its client's: the SDK client
costs more CPU per flow than the server on the same two cores. Prints per arm: success rate,
flows/s, p50/p99 per flow and per call, the server's CPU per flow, and its resident memory before
and after; then the memory an abandoned session costs (sessions opened with initialize and never
used again).

The load generator runs on the same machine as the servers (2 cores here): the figures compare
arms of one run, not machines. Run: ``.venv/bin/python benchmarks/load.py [--agents N]
[--abandoned N]``. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This folder holds an mcp.py: it must not shadow the mcp package; the repository is needed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402
from mcp import Client  # noqa: E402

from omds_ld.mcp.condense import ANSWER_META, answer_extension, answer_of  # noqa: E402
from tests.insurer.test_flows import SKODA  # noqa: E402
from tests.mcp.test_http import HEADERS, INITIALIZE  # noqa: E402
from tests.servers import ExampleServer, McpServer, cpu_seconds, free_port  # noqa: E402

ERAS = {"session": "legacy", "sessionless": "2026-07-28", "light generator": "light"}


def rss_kib(pid: int) -> int:
    """The process's resident memory (KiB), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _step(result: Any, tool: str) -> dict[str, Any]:
    return next(s for s in answer_of(result)["nextSteps"] if s["tool"] == tool)


async def flow(url: str, mode: str, calls: list[float]) -> bool:
    """One agent's whole calculation; whether it reached the premium."""

    async def call(client: Client, step: dict[str, Any], body: Any = None) -> Any:
        arguments = dict(step.get("arguments", {}))
        if body is not None or step.get("body") is not None:
            arguments["body"] = body if body is not None else step["body"]
        started = time.perf_counter()
        result = await client.call_tool(step["tool"], arguments)
        calls.append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(result.content[0].text[:200])
        return result

    try:
        async with Client(url, mode=mode, extensions=[answer_extension()]) as client:
            started = time.perf_counter()
            products = await client.call_tool("listProducts", {})
            calls.append(time.perf_counter() - started)
            case = await call(client, _step(products, "createCalculation"))
            case = await call(client, _step(case, "createRiskObject"), SKODA)
            priced = await call(client, _step(case, "calculatePremium"))
            return bool(answer_of(priced)["premium"]["gross"] == 1684.88)
    except Exception as error:
        print(f"    a flow failed: {type(error).__name__}: {str(error)[:160]}")
        return False


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "1"},
    # a program following next steps: it declares the extension of the whole structured answer
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {ANSWER_META: {}}},
}


async def light_flow(http: httpx.AsyncClient, url: str, calls: list[float]) -> bool:
    """The same flow as raw JSON-RPC (2026-07-28, sessionless), each call one POST."""

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments, "_meta": ENVELOPE}}  # fmt: skip
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version":
                   "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}  # fmt: skip
        started = time.perf_counter()
        answer = await http.post(url, json=message, headers=headers)
        calls.append(time.perf_counter() - started)
        result = answer.json()["result"]
        if result.get("isError"):
            raise RuntimeError(str(result["content"][0]["text"])[:200])
        return dict(answer_of(result))

    def step(content: dict[str, Any], tool: str, body: Any = None) -> tuple[str, dict[str, Any]]:
        found = next(s for s in content["nextSteps"] if s["tool"] == tool)
        arguments = dict(found.get("arguments", {}))
        if body is not None or found.get("body") is not None:
            arguments["body"] = body if body is not None else found["body"]
        return tool, arguments

    try:
        products = await call("listProducts", {})
        case = await call(*step(products, "createCalculation"))
        case = await call(*step(case, "createRiskObject", SKODA))
        priced = await call(*step(case, "calculatePremium"))
        return bool(priced["premium"]["gross"] == 1684.88)
    except Exception as error:
        print(f"    a flow failed: {type(error).__name__}: {str(error)[:160]}")
        return False


async def interface_flow(http: httpx.AsyncClient, api: str, calls: list[float]) -> bool:
    """The same flow at the interface alone, over plain HTTP: the baseline of the MCP arms."""

    async def call(method: str, url: str, body: Any = None) -> dict[str, Any]:
        started = time.perf_counter()
        answer = await http.request(method, url, json=body)
        calls.append(time.perf_counter() - started)
        answer.raise_for_status()
        return dict(answer.json())

    try:
        products = await call("GET", f"{api}/products")
        first = next(s for s in products["bc:nextStep"] if s["bc:operation"] == "createCalculation")
        case = await call("POST", f"{api}/calculations", first["bc:body"])
        cases = f"{api}/calculations/{case['bc:caseId']}"
        await call("POST", f"{cases}/risk-objects", SKODA)
        priced = await call("POST", f"{cases}/premium")
        return bool(priced["bc:premium"]["bc:gross"] == 1684.88)
    except Exception as error:
        print(f"    a flow failed: {type(error).__name__}: {str(error)[:160]}")
        return False


async def arm(url: str, mode: str, agents: int) -> dict[str, Any]:
    """``agents`` flows at once: by the SDK client (``mode`` its era), or ``light``."""
    calls: list[float] = []
    durations: list[float] = []
    http = httpx.AsyncClient(
        timeout=60, limits=httpx.Limits(max_connections=agents, max_keepalive_connections=agents)
    )

    async def timed() -> bool:
        started = time.perf_counter()
        if mode == "light":
            ok = await light_flow(http, url, calls)
        elif mode == "interface":
            ok = await interface_flow(http, url, calls)
        else:
            ok = await flow(url, mode, calls)
        durations.append(time.perf_counter() - started)
        return ok

    started = time.perf_counter()
    results = await asyncio.gather(*(timed() for _ in range(agents)))
    seconds = time.perf_counter() - started
    await http.aclose()
    return {
        "ok": sum(results),
        "seconds": seconds,
        "flows": durations,
        "calls": calls,
    }


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def abandoned_sessions(
    url: str, pid: int, count: int, settle_seconds: float = 5.0
) -> tuple[float, int]:
    """KiB of resident memory each abandoned 2025-11-25 session keeps, and how many were opened.

    Two rounds of ``count`` sessions, each measured ``settle_seconds`` after its last (so that
    idle ones may have hibernated); the second round's growth is the figure: what the first round
    let go is in the process's allocator by then, and only what an idle session keeps adds up."""
    with httpx.Client(timeout=10) as client:
        for _ in range(20):  # warm up what the first sessions allocate once
            client.post(url, json=INITIALIZE, headers=HEADERS)
        opened = 0
        for _ in range(2):
            time.sleep(settle_seconds)
            before = rss_kib(pid)
            opened = sum(
                client.post(url, json=INITIALIZE, headers=HEADERS).status_code == 200
                for _ in range(count)
            )
            time.sleep(settle_seconds)
            after = rss_kib(pid)
    return (after - before) / max(1, opened), opened


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200, help="concurrent flows per arm")
    parser.add_argument("--abandoned", type=int, default=500, help="sessions opened and left")
    parser.add_argument(
        "--settle-seconds", type=float, default=5.0,
        help="wait this long before and after each round of abandoned sessions (hibernation "
        "after 1 s)",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        limits = ["--max-connections", "4000", "--max-sessions", "5000",
                  "--max-sessions-per-client", "5000", "--hibernate-seconds", "1"]  # fmt: skip
        server = ExampleServer(
            Path(folder) / "load.sqlite3",
            extra_args=["--request-log", str(Path(folder) / "r.jsonl"), *limits],
        )
        server.start()
        # the baseline: the same server keeping every session's SDK state (no hibernation)
        keeping = ExampleServer(
            Path(folder) / "keeping.sqlite3", extra_args=[*limits, "--hibernate-seconds", "0"]
        )
        keeping.start()
        config = Path(folder) / "mcp.toml"
        config.write_text(
            f'request_log = "{Path(folder) / "standalone.jsonl"}"\n'
            f'[[instance]]\nname = "pfefferminzia"\napi = "{server.api("pfefferminzia")}"\n'
        )
        standalone = McpServer(config, free_port(), limits)
        standalone.start()
        try:
            targets = {
                "serve": (server.mcp("pfefferminzia"), server.process),
                "standalone": (standalone.mcp("pfefferminzia"), standalone.process),
            }
            # first, on fresh processes: memory the flows freed would be reused and hide it
            print(
                f"abandoned sessions (2025-11-25: initialize, then nothing), two rounds of "
                f"{args.abandoned}; resident memory the second adds, {args.settle_seconds:g} s after its last:"
            )
            abandoned = {
                "serve, never hibernating": (keeping.mcp("pfefferminzia"), keeping.process),
                "serve, hibernating after 1 s": targets["serve"],
                "standalone, after 1 s": targets["standalone"],
            }
            for target, (url, process) in abandoned.items():
                assert process is not None
                per_session, opened = abandoned_sessions(
                    url, process.pid, args.abandoned, args.settle_seconds
                )
                print(f"  {target:<30} {per_session:>6.1f} KiB each ({opened} opened)")
            print(f"{args.agents} concurrent agents, each a whole flow of 4 tool calls")
            print(
                f"  {'server · era':<34} {'ok':>9} {'flows/s':>8} {'flow p50':>9} {'flow p99':>9}"
                f" {'call p50':>9} {'call p99':>9} {'CPU/flow':>9} {'RSS before':>11} {'after':>8}"
            )
            arms = [
                (target, era, url, process, mode)
                for target, (url, process) in targets.items()
                for era, mode in ERAS.items()
            ]
            # the baseline: the same flow at the interface, over plain HTTP, in the serve process
            arms.append(
                ("interface alone", "plain HTTP", server.api("pfefferminzia"), server.process,
                 "interface")
            )  # fmt: skip
            for target, era, url, process, mode in arms:
                assert process is not None
                before, cpu = rss_kib(process.pid), cpu_seconds(process.pid)
                figures = asyncio.run(arm(url, mode, args.agents))
                after, cpu = rss_kib(process.pid), cpu_seconds(process.pid) - cpu
                flows, calls = figures["flows"], figures["calls"]
                print(
                    f"  {target + ' · ' + era:<34} {figures['ok']:>4}/{args.agents:<4}"
                    f" {figures['ok'] / figures['seconds']:>8.1f}"
                    f" {statistics.median(flows):>8.2f}s {quantile(flows, 0.99):>8.2f}s"
                    f" {statistics.median(calls) * 1000:>7.0f}ms"
                    f" {quantile(calls, 0.99) * 1000:>7.0f}ms"
                    f" {cpu * 1000 / max(1, figures['ok']):>7.1f}ms"
                    f" {before / 1024:>9.0f}MiB {after / 1024:>6.0f}MiB"
                )
            print(
                "  (CPU/flow: the server process's CPU time during the arm over the flows that "
                "reached the premium; the standalone arm's figure leaves out the interface, which "
                "runs in the serve process; interface alone: the same four steps over plain HTTP)"
            )
        finally:
            standalone.stop()
            keeping.stop()
            server.stop()


if __name__ == "__main__":
    main()
