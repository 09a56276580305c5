"""What a client that can ask its user costs ``serve`` per call, against one that cannot, in one run.

A client that declares elicitation (form mode) is the one that binds properly: a binding call
asks its person within the call. Every other call of it should cost what any client's costs.
Starts ``omds-ld serve`` on a free loopback port and, for each protocol era, opens a client that
declares elicitation and one that does not (raw JSON-RPC over HTTP, as in
tests/mcp/test_direct_answers.py), makes a case, then reads it ``--calls`` times each, in rounds
that alternate the clients; prints the server process's own CPU per call (from /proc) and the
ratio to the client that cannot ask (the baseline). Figures are printed, never asserted.

Run: ``.venv/bin/python benchmarks/asking.py [--calls N] [--rounds N]`` (Linux: reads /proc).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the repository first, this folder not at all: its mcp.py would stand for the MCP SDK
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402

from tests.insurer.test_flows import SKODA  # noqa: E402
from tests.mcp.test_direct_answers import Session, Sessionless  # noqa: E402
from tests.servers import ExampleServer, cpu_seconds  # noqa: E402

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
ASKING = {"elicitation": {"form": {}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="reads per client and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(Path(folder) / "asking.sqlite3")
        server.start()
        assert server.process is not None
        try:
            url = server.mcp("pfefferminzia")
            figures: dict[str, list[float]] = {}
            with httpx.Client(timeout=30) as http:
                for _ in range(args.rounds):
                    for era, kind in (("2025-11-25", Session), ("2026-07-28", Sessionless)):
                        for who, capabilities in (("cannot ask", {}), ("can ask", ASKING)):
                            client = kind(http, url, capabilities)
                            created = client.call(
                                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
                            )
                            case = created["result"]["structuredContent"]["case"]["caseId"]
                            client.call("createRiskObject", {"caseId": case, "body": SKODA})
                            for _ in range(20):
                                client.call("readCalculation", {"caseId": case})
                            before = cpu_seconds(server.process.pid)
                            for _ in range(args.calls):
                                client.call("readCalculation", {"caseId": case})
                            spent = cpu_seconds(server.process.pid) - before
                            figures.setdefault(f"{era} · {who}", []).append(
                                spent / args.calls * 1000
                            )
        finally:
            server.stop()
    print(f"serve's CPU per readCalculation (ms, median of {args.rounds} rounds of {args.calls})")
    for era in ("2025-11-25", "2026-07-28"):
        base = statistics.median(figures[f"{era} · cannot ask"])
        for who in ("cannot ask", "can ask"):
            median = statistics.median(figures[f"{era} · {who}"])
            label = f"{era} · a client that {who}"
            print(f"  {label:<36} {median:6.2f}   x {median / base:4.2f}")


if __name__ == "__main__":
    main()
