"""The benchmarks run on a clean machine and print their figures (no time is asserted)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import started

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *args: str) -> str:
    """A benchmark as its reader runs it, in a process group of its own: however it ends, the
    servers it started end with it."""
    process = started(subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        start_new_session=True,
    ))  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=1800)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever of its group is still there
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
    return stdout


def test_insurer_benchmark_prints_latency_and_throughput() -> None:
    out = run("insurer.py", "--requests", "20", "--seconds", "0.5")
    for arm in ("GET /healthz (baseline)", "listProducts", "calculatePremium (SHACL incl.)",
                "inquireTariff (SHACL incl.)"):  # fmt: skip
        row = next(line for line in out.splitlines() if line.strip().startswith(arm))
        figures = re.findall(r"p50 +(\d+\.\d+) ms.*?(\d+) req/s", row)
        assert figures and float(figures[0][0]) > 0 and int(figures[0][1]) > 0, row
    for arm in ("pySHACL (before)", "compiled constraints (now)", "compiled checks (the desk)"):
        row = next(line for line in out.splitlines() if line.strip().startswith(arm))
        assert float(re.findall(r"p50 +(\d+\.\d+) ms", row)[0]) > 0, row
    # each comparison a measured ratio, not a label
    assert re.search(r"compiled constraints \(now\) +p50 +[\d.]+ ms +x +\d+\.\d faster", out), out


def test_mcp_benchmark_compares_sizes_and_latency() -> None:
    out = run("mcp.py", "--requests", "5", "--insurers", "4")
    for heading in ("tools/list", "condensed text vs the insurer's full JSON-LD", "p50 latency",
                    "fast path", "slow path"):  # fmt: skip
        assert heading in out
    assert "FastMCP" in out and "all flows" in out
    assert "sessionless" in out and "standalone" in out
    by_process = out.split("the same CPU by process", 1)[1].split("reading answers", 1)[0]
    rows = {
        operation: line.split()[-5:]
        for line in by_process.splitlines()
        for operation in ("readCalculation", "calculatePremium", "readProduct", "inquireTariff")
        if line.strip().startswith(operation)
    }
    assert len(rows) == 4, by_process  # each operation: both servers' own and the interface's
    for *columns, ratio in rows.values():
        own, _, peer_own, _ = (float(x) for x in columns)  # the interface's: beyond the direct
        assert own >= 0 and peer_own >= 0, by_process
        assert ratio == "n/a" or float(ratio) >= 0, by_process
    eras = out.split("tokens per flow a model reads", 1)[1]
    for flow in ("pfefferminzia · an edited draft", "disrupto · two inquiries", "all flows"):
        assert flow in eras
    for client in ("session", "never echoes seen", "always echoes seen", "SDK default Client()"):
        assert client in eras.splitlines()[1], eras
    ratios = next(line for line in eras.splitlines() if line.strip().startswith("÷ a session"))
    figures = [float(x) for x in ratios.split()[3:]]  # each client's, measured: the session's 1
    assert len(figures) == 4 and figures[0] == 1.0 and all(f > 0 for f in figures), ratios
    comparison = out.split("a motor comparison at 4 insurers", 1)[1]
    for way in ("one MCP server per insurer", "the broker endpoint", "FastMCP's OpenAPI server",
                "4 times one insurer"):  # fmt: skip
        assert way in comparison
    assert "premiums the same every way: True" in comparison
    assert "the same in protocol 2026-07-28, sessionless" in comparison


def test_load_benchmark_runs_whole_flows_in_both_eras() -> None:
    out = run("load.py", "--agents", "6", "--abandoned", "20", "--settle-seconds", "1.5")
    for arm in ("serve · session", "serve · sessionless", "serve · light generator",
                "standalone · session", "standalone · sessionless",
                "standalone · light generator", "interface alone · plain HTTP"):  # fmt: skip
        assert f"{arm}" in out and "6/6" in out.split(arm, 1)[1].splitlines()[0], out
    assert "KiB each" in out and "CPU/flow" in out


def test_upstream_benchmark_compares_our_client_with_httpcore_and_httpx() -> None:
    out = run("upstream.py", "--requests", "5")
    assert "read a case" in out and "client CPU" in out
    for arm in ("ours (aiohttp", "httpcore's pool", "httpx's client"):
        row = next(line for line in out.splitlines() if arm in line)
        figures = row.split()[-6:]  # p50 and CPU for each of the three requests
        assert all(float(figure) > 0 for figure in figures), row


@pytest.mark.parametrize("spoken", [(), ("--sessionless",)], ids=["session", "sessionless"])
def test_against_benchmark_runs_the_flows_on_an_earlier_commits_server_and_this_trees(
    spoken: tuple[str, ...],
) -> None:
    out = run(
        "against.py", "--before", "HEAD", "--flows", "2", "--seconds", "1", "--rounds", "1",
        "--calls", "50", *spoken,
    )  # fmt: skip
    assert ("2026-07-28, no session" in out) == bool(spoken), out
    for server in ("before", "now"):
        for arm in ("interface alone", "serve, MCP"):
            row = next(line for line in out.splitlines() if f"1 · {server} · {arm}" in line)
            assert float(row.split()[-2]) > 0, out  # flows/s: flows reached the premium
    assert "a flow failed" not in out, out
    assert "now / before" in out
    # one call at a time: every call of every arm cost its server CPU (the 10 ms clock ticks at
    # least once over 50 calls), and the MCP layer's share is set against the earlier commit's
    for tool in ("readCalculation", "calculatePremium"):
        for server in ("before", "now"):
            row = next(line for line in out.splitlines() if f"{tool:<18} {server} " in line)
            mcp, direct = (float(figure) for figure in row.split()[2:4])
            assert mcp > 0 and direct > 0, out
        assert f"{tool:<18} what MCP adds, now / before:" in out, out


def test_startup_benchmark_times_whole_processes_against_a_bare_interpreter() -> None:
    # this tree against itself as "before": the two take turns, and now ÷ before is printed
    out = run("startup.py", "--runs", "1", "--source", str(ROOT / "src"))
    for arm in ("python -c pass (baseline)", "omds-ld --version", "a configuration error",
                "mcp --stdio to initialize", "mcp --stdio to tools/list",
                "serve to its first 200"):  # fmt: skip
        line = next(line for line in out.splitlines() if line.startswith(arm))
        # a multiple of the baseline, measured: a positive number (one start each: a start
        # nearly as fast as the bare interpreter's, like --version's, may come out below the
        # baseline's one sample); then now ÷ before of the wall time and of the multiple
        multiple = re.search(r"(\d+(?:\.\d+)?) ?x\s+(\d+\.\d+)\s+(\d+\.\d+)$", line.rstrip())
        assert multiple and float(multiple.group(1)) > 0, line
        assert float(multiple.group(2)) > 0 and float(multiple.group(3)) > 0, line


def test_asking_benchmark_sets_a_client_that_can_ask_against_one_that_cannot() -> None:
    out = run("asking.py", "--calls", "20", "--rounds", "1")
    for era in ("2025-11-25", "2026-07-28"):
        for who in ("cannot ask", "can ask"):
            line = next(x for x in out.splitlines() if f"{era} · a client that {who}" in x)
            # its figure, and its ratio to the client that cannot ask
            ratio = re.search(r"(\d+\.\d+) +x (\d+\.\d+)", line)
            assert ratio and float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0, line


def test_hop_benchmark_sets_the_interface_on_the_loop_against_a_worker_thread() -> None:
    out = run("hop.py", "--flows", "2", "--seconds", "1", "--rounds", "1")
    for arm in ("interface alone", "serve, MCP"):
        for where in ("in a thread", "on the loop"):
            line = next(x for x in out.splitlines() if f"1 · {where} · {arm}" in x)
            assert float(line.split()[-2]) > 0, line  # flows that reached the premium
        assert re.search(rf"{arm} +flows/s +\d+\.\d\d x +CPU per flow +\d+\.\d\d x", out), out
