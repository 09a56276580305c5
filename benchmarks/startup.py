"""How long a start takes, as the one who starts it waits: whole processes, timed from the spawn
to the answer they wait for, against a bare interpreter's start in the same run.

Arms (each a fresh process, the median of ``--runs``; wall time and the process's own CPU;
with ``--source``, the two trees' starts take turns, and the last column is now ÷ before, of
the wall time and of the multiple of the bare interpreter):

- ``python -c pass``: the baseline, the interpreter and its site packages;
- ``omds-ld --version`` and a configuration error (``mcp --stdio`` without ``--name``);
- ``mcp --stdio`` until it answers ``initialize``, and until it answers ``tools/list`` after it
  (what a desktop client waits for at every launch), in front of a running example server;
- ``serve`` until its first 200 (``/healthz``, on a fresh port and database).

``--source DIR`` runs the same arms with another checkout's ``src`` first on the path (an
earlier commit, for before and after in one run). Figures are printed, never asserted.

Run: ``.venv/bin/python benchmarks/startup.py [--runs N] [--source /tmp/before/src]``
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the repository first, this folder not at all: its mcp.py would stand for the MCP SDK
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

from tests.mcp.test_http import INITIALIZE  # noqa: E402
from tests.mcp.test_http import LIST_TOOLS as TOOLS  # noqa: E402
from tests.servers import ExampleServer, free_port  # noqa: E402

CLI = [sys.executable, "-m", "omds_ld.cli"]
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

Start = Callable[[dict[str, str]], tuple[float, float]]  # environment -> (wall s, CPU s)


def _cpu(process: subprocess.Popen[bytes]) -> float:
    """The process's own CPU (user + system), read when it is reaped."""
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped here: Popen must not wait for it again
    return usage.ru_utime + usage.ru_stime


def until_exit(argv: Sequence[str]) -> Start:
    def start(env: dict[str, str]) -> tuple[float, float]:
        began = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        cpu = _cpu(process)
        return time.perf_counter() - began, cpu

    return start


def _answer(process: subprocess.Popen[bytes], want: int, deadline: float) -> None:
    """Read stdout until the JSON-RPC answer with id ``want`` came."""
    assert process.stdout is not None
    buffered = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if not ready:
            continue
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            raise RuntimeError("the server ended before it answered")
        buffered += chunk
        for line in buffered.split(b"\n")[:-1]:
            if json.loads(line).get("id") == want:
                return
    raise RuntimeError(f"no answer to request {want}")


def stdio(api: str, until_tools: bool) -> Start:
    argv = [*CLI, "mcp", "--stdio", "--api", api, "--name", "pfefferminzia"]

    def start(env: dict[str, str]) -> tuple[float, float]:
        began = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            process.stdin.flush()
            _answer(process, 1, time.monotonic() + 300)
            if until_tools:
                process.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
                process.stdin.write(json.dumps(TOOLS).encode() + b"\n")
                process.stdin.flush()
                _answer(process, 2, time.monotonic() + 300)
            wall = time.perf_counter() - began
        finally:
            process.kill()
        return wall, _cpu(process)

    return start


def _healthy(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
        return bool(answer.status == 200)
    return False


def serve(folder: Path) -> Start:
    def start(env: dict[str, str]) -> tuple[float, float]:
        port = free_port()
        database = tempfile.mktemp(suffix=".sqlite3", dir=folder)
        began = time.perf_counter()
        process = subprocess.Popen(
            [*CLI, "serve", "--port", str(port), "--database", database],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while True:
                if _healthy(f"http://127.0.0.1:{port}/healthz"):
                    break
                if process.poll() is not None:
                    raise RuntimeError("serve ended before its first 200")
                time.sleep(0.01)
            wall = time.perf_counter() - began
        finally:
            process.kill()
        return wall, _cpu(process)

    return start


def medians_of(start: Start, envs: list[dict[str, str]], runs: int) -> list[tuple[float, float]]:
    """Each environment's median (wall, CPU) of ``runs`` starts, the environments taking turns
    (one start of each, then again), so that the machine's drift falls on all alike."""
    for env in envs:
        start(env)  # the first start reads the files from disk: not counted
    samples: list[list[tuple[float, float]]] = [[] for _ in envs]
    for _ in range(runs):
        for env, taken in zip(envs, samples, strict=True):
            taken.append(start(env))
    return [
        (statistics.median(w for w, _ in taken), statistics.median(c for _, c in taken))
        for taken in samples
    ]


def environment(source: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMDS_LD_")}
    env["PYTHONPATH"] = source or str(ROOT / "src")
    return env


def compiled(source: Path) -> None:
    """Each tree's modules compiled to bytecode first, as an installation has them (pip compiles
    what it installs): a start that compiled sources (a checkout never imported, or run with
    PYTHONDONTWRITEBYTECODE) would time the compiler, and favour the tree that has its bytecode."""
    if not compileall.compile_dir(source, quiet=1):
        raise SystemExit(f"{source}: not every module compiles")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--source", help="another checkout's src folder, measured beside this one")
    args = parser.parse_args()
    sources: dict[str, str | None] = {
        "now": None,
        **({"before": args.source} if args.source else {}),
    }
    for source in sources.values():
        compiled(Path(source) if source else ROOT / "src")
    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(Path(folder) / "omds-ld.sqlite3")
        server.start()
        try:
            measure(server.api("pfefferminzia"), Path(folder), sources, args.runs)
        finally:
            server.stop()


def measure(api: str, folder: Path, sources: dict[str, str | None], runs: int) -> None:
    arms: list[tuple[str, Start]] = [
        ("python -c pass (baseline)", until_exit([sys.executable, "-c", "pass"])),
        ("omds-ld --version", until_exit([*CLI, "--version"])),
        ("a configuration error", until_exit([*CLI, "mcp", "--stdio", "--api", api])),
        ("mcp --stdio to initialize", stdio(api, until_tools=False)),
        ("mcp --stdio to tools/list", stdio(api, until_tools=True)),
        ("serve to its first 200", serve(folder)),
    ]
    print(f"start-up, median of {runs} fresh processes "
          "(wall ms, CPU ms, wall as a multiple of the bare interpreter's)")  # fmt: skip
    compared = len(sources) == 2
    print(f"{'':30}" + "".join(f"{name:>28}" for name in sources)
          + (f"{'now/before: wall, multiple':>30}" if compared else ""))  # fmt: skip
    base: dict[str, float] = {}
    envs = [environment(source) for source in sources.values()]
    for label, start in arms:
        cells = []
        multiples = []
        for name, (wall, cpu) in zip(sources, medians_of(start, envs, runs), strict=True):
            base.setdefault(name, wall)
            multiples.append((wall, wall / base[name]))
            cells.append(f"{wall * 1000:8.0f} {cpu * 1000:8.0f} {wall / base[name]:8.1f}x")
        if compared:
            (now, now_x), (before, before_x) = multiples
            cells.append(f"{now / before:14.2f} {now_x / before_x:14.2f}")
        print(f"{label:30}" + "".join(f"{c:>28}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
