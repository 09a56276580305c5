"""The checker's commands: grade protocols again, write the report as a self-contained page."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.runner import run_once
from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario
from tests.servers import ExampleServer


def test_grade_reads_protocols_and_writes_an_html_report(
    server: ExampleServer, tmp_path: Path
) -> None:
    scenario = load_scenario(next(p for p in builtin_scenarios() if p.stem == "disrupto-skoda"))
    record = asyncio.run(run_once(scenario, ReferenceAgent(), server.url, tmp_path, 1))
    html = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "scenario", "grade", str(record.protocol), "--html", str(html)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("premium", "offered", "iris", "assumptions", "stated", "budget"):
        assert f"ok   {name}" in result.stdout
    page = html.read_text()
    assert page.startswith("<!doctype html>") and "disrupto-skoda" in page and "<svg" in page
    assert "http://" not in page.replace("http://www.w3.org", "") and "<script" not in page


def test_an_unknown_agent_is_refused_with_what_exists() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "scenario", "run", "--agent", "llama:7b"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "reference, anthropic:MODEL or openai:MODEL" in result.stderr


def test_every_example_of_the_help_is_a_command_line_the_cli_takes() -> None:
    """Each command's --help ends with examples; each parses as it is written (no flag that is
    not there, no value missing)."""
    import re
    import shlex

    from omds_ld.commands import EXAMPLES, build_parser

    parser = build_parser()
    lines = []
    for text in EXAMPLES.values():
        joined = text.replace("\\\n", " ")
        lines += [line.strip() for line in joined.splitlines() if "omds-ld " in line]
    assert len(lines) >= 20
    for line in lines:
        command = re.split(r"\s{2,}", line.split("omds-ld ", 1)[1])[0]
        parser.parse_args(shlex.split(command))  # SystemExit (exit 2) on a wrong line
