"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tools/node/package.json``) against an MCP server of the norm, in both protocol eras.

Each era has a baseline here: the checks that fail, each with its reason; everything else the
suite runs must pass, and the scenarios in ``REQUIRED`` must have passed every check.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ERAS = ("2025-11-25", "2026-07-28")
# what must pass in each era (the rest: whatever the suite runs, less the baseline's entries)
REQUIRED = {
    "2025-11-25": ["server-initialize", "tools-list", "ping", "server-session-lifecycle",
                   "dns-rebinding-protection", "resources-list", "prompts-list"],
    "2026-07-28": ["tools-list", "tools-call-error", "tools-call-simple-text", "resources-list",
                   "dns-rebinding-protection", "prompts-list"],
}  # fmt: skip


def baseline(era: str) -> Path:
    return Path(str(resources.files(__name__).joinpath(f"baseline-{era}.yml")))


def node_tool(folder: Path, name: str) -> list[str] | None:
    """A peer tool run with the pinned Node 22 of ``folder`` (``npm install --prefix
    tools/node``); None where either is missing."""
    bin_folder = folder / "node_modules" / ".bin"
    node, tool = bin_folder / "node", bin_folder / name
    return [str(node), str(tool)] if node.exists() and tool.exists() else None


@dataclass(frozen=True)
class Outcome:
    """One era's run: whether it passed, and what to say about it."""

    era: str
    passed: bool
    detail: str


def run_suite(url: str, era: str, tools_folder: Path, timeout: float = 600) -> Outcome:
    """Run the suite against ``url`` in one era, against its baseline."""
    command = node_tool(tools_folder.resolve(), "conformance")
    if command is None:
        return Outcome(era, False, f"the suite is not installed in {tools_folder} (npm install)")
    with tempfile.TemporaryDirectory(prefix="omds-ld-conformance-") as folder:
        home, output = Path(folder), Path(folder) / "results"
        env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
        result = subprocess.run(
            [*command, "server", "--url", url, "--spec-version", era,
             "--expected-failures", str(baseline(era)), "-o", str(output)],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=home,
        )  # fmt: skip
        if result.returncode != 0:
            tail = (result.stdout[-1500:] + result.stderr[-500:]).strip()
            return Outcome(era, False, f"exit {result.returncode}: {tail}")
        missing = []
        for scenario in REQUIRED[era]:
            folders = [f for f in output.iterdir() if f.name.startswith(f"server-{scenario}-")]
            checks = json.loads((folders[0] / "checks.json").read_text()) if folders else []
            if not checks or any(c["status"] != "SUCCESS" for c in checks):
                missing.append(scenario)
        if missing:
            return Outcome(era, False, "required scenarios failed: " + ", ".join(missing))
        ran = sum(1 for f in output.iterdir() if f.is_dir())
        return Outcome(era, True, f"{ran} scenarios, all but the baseline's entries passed")
