"""The insurer's side against an earlier commit: the same flows, the server of both, in one run.

Starts ``omds-ld serve`` twice, once from the sources of an earlier commit (``--before``, by
default the state #20 was filed on, before validation was compiled) and once from this tree, and
drives both with the light generator of ``benchmarks/load.py`` (raw JSON-RPC, 2026-07-28): a
fixed number of flows at once for a fixed time, the interface alone over plain HTTP and the same
flow through the MCP endpoint of ``serve``. Rounds alternate between the two servers, so a
moment of a noisy machine falls on both. Prints per round flows/s and the server's CPU per flow,
then each arm's ratio (now over before, the median of the rounds).

``--calls N`` then compares one call at a time, as a model's host makes them: N calls each of
readCalculation and calculatePremium through the SDK's ``Client`` (a 2025-11-25 session, or with
``--sessionless`` the 2026-07-28 revision the SDK's default ``Client()`` speaks) and the
same requests sent to the interface directly, every arm of both servers taking turns in rounds of
50; prints the server's CPU per call, what the MCP layer adds to the direct call, and that added
CPU now over before. A change of the MCP layer's per-call work shows here at a few percent (two
runs of the same tree differ by ±4 % at 1500 calls), where a warm loop in one process misses
what a server pays when it comes back to a call after the client's own milliseconds.

The earlier sources are taken with ``git archive`` and run with this environment's packages: a
commit that needs other dependencies than the installed ones cannot be measured this way. Run:
``.venv/bin/python benchmarks/against.py [--before REV] [--flows N] [--seconds S] [--rounds N]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

# This folder holds an mcp.py: it must not shadow the mcp package; the repository is needed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402
from mcp import Client  # noqa: E402

from benchmarks.load import cpu_seconds, interface_flow, light_flow  # noqa: E402
from tests.insurer.test_flows import SKODA  # noqa: E402
from tests.mcp.test_errors import PRODUCT  # noqa: E402
from tests.servers import ExampleServer, cpu_per_call  # noqa: E402

FILED = "3dfe4ac^"  # main when #20 was filed: validation by pySHACL on every request


def sources(revision: str, folder: Path) -> Path:
    """The ``src`` folder of ``revision``, unpacked into ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "src"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return folder / "src"


async def flows_for(mode: str, url: str, concurrency: int, seconds: float) -> tuple[int, float]:
    """Flows that reached the premium, ``concurrency`` at once for ``seconds``; the time taken."""
    http = httpx.AsyncClient(
        timeout=60,
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
    )
    flow = light_flow if mode == "mcp" else interface_flow
    calls: list[float] = []
    done = 0
    deadline = time.perf_counter() + seconds

    async def agent() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            if not await flow(http, url, calls):
                return  # it printed why; the rate shows the loss
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(agent() for _ in range(concurrency)))
    taken = time.perf_counter() - started
    await http.aclose()
    return done, taken


ARMS = ("interface alone", "serve, MCP")
# a server that takes every flow of the generator: no cap of connections or sessions reached
LIMITS = ["--max-connections", "4000", "--max-sessions", "5000",
          "--max-sessions-per-client", "5000"]  # fmt: skip


def add_round_options(parser: argparse.ArgumentParser) -> None:
    """How many flows at once, for how long per arm and round, in how many rounds."""
    parser.add_argument("--flows", type=int, default=8, help="flows at once")
    parser.add_argument("--seconds", type=float, default=15.0, help="per arm and round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")


def alternating(
    servers: Mapping[str, ExampleServer], flows: int, seconds: float, rounds: int
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """Both arms (``ARMS``: the interface alone, serve through MCP) at every server, ``rounds``
    times, the servers alternating within each round; each printed as it ends. Flows/s and the
    server's CPU seconds per flow, by (arm, server)."""
    width = 12 + max(len(a) for a in ARMS) + max(len(n) for n in servers)
    print(f"  {'round · server · arm':<{width}} {'flows/s':>8} {'CPU/flow':>9}")
    rates: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    for round_ in range(1, rounds + 1):
        for name, server in servers.items():
            assert server.process is not None
            urls = (
                ("interface", server.api("pfefferminzia")),
                ("mcp", server.mcp("pfefferminzia")),
            )
            for arm, (mode, url) in zip(ARMS, urls, strict=True):
                cpu = cpu_seconds(server.process.pid)
                done, taken = asyncio.run(flows_for(mode, url, flows, seconds))
                cpu = cpu_seconds(server.process.pid) - cpu
                rates.setdefault((arm, name), []).append(done / taken)
                cpus.setdefault((arm, name), []).append(cpu / max(1, done))
                print(
                    f"  {f'{round_} · {name} · {arm}':<{width}} {done / taken:>8.1f}"
                    f" {cpu * 1000 / max(1, done):>7.1f}ms"
                )
    return rates, cpus


CALL_ROUND = 50  # calls of one arm in a row, before the next arm's
CALLED = ("readCalculation", "calculatePremium")
LD = {"Accept": "application/ld+json"}


async def per_call(servers: Mapping[str, ExampleServer], count: int, mode: str) -> None:
    """CPU per call of each server's process, through MCP (the SDK's client) and directly, the
    arms taking turns in rounds; then what MCP adds, now over before (``--calls``)."""
    arms: list[tuple[tuple[str, str, str], int, Callable[[], Awaitable[Any]]]] = []
    async with contextlib.AsyncExitStack() as stack:
        direct = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        for name, server in servers.items():
            assert server.process is not None
            client = await stack.enter_async_context(Client(server.mcp("pfefferminzia"), mode=mode))
            created = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case = created.structured_content["case"]["caseId"]
            await client.call_tool("createRiskObject", {"caseId": case, "body": SKODA})
            cases = f"{server.api('pfefferminzia')}/calculations/{case}"
            requests = {
                "readCalculation": functools.partial(direct.get, cases, headers=LD),
                "calculatePremium": functools.partial(direct.post, f"{cases}/premium", headers=LD),
            }
            for tool in CALLED:
                arms.append(
                    (
                        (name, tool, "MCP"),
                        server.process.pid,
                        functools.partial(client.call_tool, tool, {"caseId": case}),
                    )
                )
                arms.append(((name, tool, "direct"), server.process.pid, requests[tool]))  # fmt: skip
        figures = await cpu_per_call([(call, [pid]) for _, pid, call in arms], count, CALL_ROUND)
    per = {key: ms for (key, _, _), ms in zip(arms, figures, strict=True)}
    rounds = max(1, count // CALL_ROUND)
    spoken = "2026-07-28, no session" if mode != "legacy" else "a 2025-11-25 session"
    print(f"one call at a time through the SDK's client ({spoken}), {rounds * CALL_ROUND} of "
          f"each, rounds of {CALL_ROUND}: the server's CPU per call (ms)")  # fmt: skip
    print(f"  {'operation':<18} {'server':<7} {'MCP':>6} {'direct':>7} {'MCP adds':>9}")
    for tool in CALLED:
        added = {}
        for name in servers:
            mcp, plain = per[(name, tool, "MCP")], per[(name, tool, "direct")]
            added[name] = mcp - plain
            print(f"  {tool:<18} {name:<7} {mcp:>6.2f} {plain:>7.2f} {mcp - plain:>+9.2f}")
        if added.get("before", 0) > 0:
            print(f"  {tool:<18} what MCP adds, now / before: {added['now'] / added['before']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=FILED, help=f"the earlier commit (default {FILED})")
    add_round_options(parser)
    parser.add_argument(
        "--calls", type=int, default=0, help="then one call at a time: N of each (0: not)"
    )
    parser.add_argument(
        "--sessionless",
        action="store_true",
        help="the calls in 2026-07-28, as the SDK's default Client() makes them (default: a "
        "2025-11-25 session)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        earlier = sources(args.before, Path(folder) / "before")
        servers: dict[str, ExampleServer] = {}
        for name, src in (("before", earlier), ("now", ROOT / "src")):
            server = ExampleServer(Path(folder) / f"{name}.sqlite3", extra_args=LIMITS)
            os.environ["PYTHONPATH"] = str(src)  # the server's process imports omds_ld from here
            try:
                server.start()
            finally:
                del os.environ["PYTHONPATH"]
            servers[name] = server
        try:
            print(
                f"{args.flows} flows at once, {args.seconds:g} s per arm and round; before: "
                f"{args.before}, now: this tree"
            )
            rates, _ = alternating(servers, args.flows, args.seconds, args.rounds)
            print("now / before, flows/s (median of the rounds):")
            for arm in ARMS:
                before = statistics.median(rates[(arm, "before")])
                now = statistics.median(rates[(arm, "now")])
                print(f"  {arm:<20} {now / before if before else float('nan'):>5.2f} x")
            if args.calls:
                mode = "2026-07-28" if args.sessionless else "legacy"
                asyncio.run(per_call(servers, args.calls, mode))
        finally:
            for server in servers.values():
                server.stop()


if __name__ == "__main__":
    main()
