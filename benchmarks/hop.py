"""The thread hop of an insurer's interface: each operation on the event loop, or in a thread.

``omds-ld serve`` carries out every operation of an insurer's interface on the event loop
(``OperationEndpoint.respond``); until #39 it handed each to a worker thread. This starts
``serve`` twice, as it is and with the hop put back (``respond`` as it was, the same handler in
anyio's worker thread), and drives both with the light generator of ``benchmarks/load.py``: the
interface alone over plain HTTP, and the same flow through the MCP endpoint of ``serve`` (which
reaches the interface in the process, through the same ``respond``). Rounds alternate between
the two servers, so a moment of a noisy machine falls on both. Prints per round flows/s and the
server's CPU per flow, then each arm's ratio (on the loop over in a thread, the median of the
rounds).

Run: ``.venv/bin/python benchmarks/hop.py [--flows N] [--seconds S] [--rounds N]``. Figures
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

# This folder holds an mcp.py: it must not shadow the mcp package; the repository is needed.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

from benchmarks.against import ARMS, LIMITS, add_round_options, alternating  # noqa: E402
from tests.servers import ExampleServer  # noqa: E402

# serve with the hop: OperationEndpoint.respond as it was before #39, the handler in a thread
IN_A_THREAD = """
import sys
from functools import partial
import anyio.to_thread
from omds_ld.insurer import app

async def respond(self, request):
    try:
        raw = await app._read_body(request, self.config.max_body_bytes)
    except app.Problem as problem:
        return self._problem(problem, request.url.path)
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        broker = self._broker(headers, request.state)
    except app.Problem as problem:
        return self._problem(problem, request.url.path)
    return await anyio.to_thread.run_sync(partial(
        self.handle, broker=broker, path=request.url.path, path_params=dict(request.path_params),
        query=dict(request.query_params), headers=headers, raw=raw))

app.OperationEndpoint.respond = respond
from omds_ld.cli import main
sys.exit(main(sys.argv[1:]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_options(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        servers = {
            "in a thread": ExampleServer(
                Path(folder) / "thread.sqlite3", extra_args=LIMITS, command=("-c", IN_A_THREAD)
            ),
            "on the loop": ExampleServer(Path(folder) / "loop.sqlite3", extra_args=LIMITS),
        }
        try:
            for server in servers.values():
                server.start()
            print(f"{args.flows} flows at once, {args.seconds:g} s per arm and round")
            rates, cpus = alternating(servers, args.flows, args.seconds, args.rounds)
            print("on the loop / in a thread (median of the rounds):")
            for arm in ARMS:
                rate = [statistics.median(rates[(arm, n)]) for n in servers]
                cpu = [statistics.median(cpus[(arm, n)]) for n in servers]
                print(
                    f"  {arm:<20} flows/s {rate[1] / rate[0]:>5.2f} x"
                    f"   CPU per flow {cpu[1] / cpu[0]:>5.2f} x"
                )
        finally:
            for server in servers.values():
                server.stop()


if __name__ == "__main__":
    main()
