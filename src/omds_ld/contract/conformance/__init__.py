"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tools/node/package.json``) against an MCP server of the norm, as each protocol revision
defines it.

A run is the suite's own form for "what does this revision require": ``server
--requirements ERA``, exactly the server scenarios the revision requires, frozen at its release
(``conformance list --server --requirements ERA``). Each era has a baseline here: the checks
that fail, each with its reason; the suite fails the run on any other failure, and on a baseline
entry that passes. Beside the suite's verdict:

- every required scenario ran: one whose checks were all skipped proves nothing and fails the
  run (``skipped``);
- a scenario that passes only against the suite's own fixture tools proves nothing about the
  server (``FALSE_PASSES``, with why): it is never counted as a pass.

The verdict names three figures per revision (``Count``): the scenarios the server passed, those
baselined (expected failures, with their reasons) and the false passes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ERAS = ("2025-11-25", "2026-07-28")
# passes that say nothing of the server: the suite calls a fixture tool the norm's server does
# not have, and our "no such tool" tool error happens to satisfy its check
FALSE_PASSES = {
    "tools-call-error": "calls the suite's fixture tool test_error_handling: our answer is the "
    "tool error for a tool that does not exist, which the check takes for the fixture's error",
    "tools-call-simple-text": "calls the suite's fixture tool test_simple_text: our tool error "
    "for a tool that does not exist is a text content block, which is all the check asks",
    "input-required-result-ignore-extra-params": "calls the suite's fixture tool "
    "test_input_required_result_elicitation: our tool error for a tool that does not exist is a "
    "complete result, which is all the check asks",
}
# a check that neither passed nor failed (the scenario did not apply)
NOT_RUN = frozenset({"SKIPPED", "INFO"})
# checks the suite adds to every scenario (every message valid by the revision's schema): one
# of them having run says nothing about whether the scenario itself ran
GENERIC = frozenset({"wire-schema-valid", "wire-schema-harness-error"})


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


def required(listing: str) -> list[str]:
    """The server scenarios a revision requires, from ``conformance list --server
    --requirements ERA``."""
    section = listing.split("Server scenarios", 1)[-1].split("Client scenarios", 1)[0]
    return re.findall(r"^\s+- (\S+)$", section, re.MULTILINE)


def results(output: Path) -> dict[str, list[dict[str, object]]]:
    """Each scenario's checks, as the suite wrote them (``server-<scenario>-<time>/checks.json``)."""
    found: dict[str, list[dict[str, object]]] = {}
    for folder in output.iterdir() if output.is_dir() else ():
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", folder.name)
        checks = folder / "checks.json"
        if checks.is_file():
            found[name] = json.loads(checks.read_text("utf-8"))
    return found


def not_run(scenarios: list[str], ran: dict[str, list[dict[str, object]]]) -> list[str]:
    """The required scenarios that did not run: no results, or every check of their own
    skipped (the generic checks the suite adds to every scenario do not count)."""
    return [
        scenario
        for scenario in scenarios
        if not any(
            c.get("status") not in NOT_RUN and c.get("id") not in GENERIC
            for c in ran.get(scenario, [])
        )
    ]


def baselined(era: str) -> dict[str, list[str]]:
    """The baseline's expected failures of ``era``, by scenario (its ``scenario:check``
    entries), each with the reason the comment above it gives."""
    found: dict[str, list[str]] = {}
    reason: list[str] = []
    commenting = False
    for line in baseline(era).read_text("utf-8").splitlines():
        text = line.strip()
        if text.startswith("#"):
            reason = [*reason, text.lstrip("# ")] if commenting else [text.lstrip("# ")]
            commenting = True
            continue
        commenting = False
        if text.startswith("- "):
            scenario = text[2:].split(":", 1)[0].strip()
            found.setdefault(scenario, []).append(" ".join(reason))
        elif text:  # a key ("server:"): the comment above it was the file's own
            reason = []
    return found


@dataclass(frozen=True)
class Count:
    """What a run of one revision's required scenarios shows: those the server passed, those
    that fail as the baseline expects (with why), and those that pass only against the suite's
    fixtures (false passes, never counted)."""

    required: int
    passed: tuple[str, ...]
    baselined: tuple[str, ...]
    false_passes: tuple[str, ...]

    def line(self, era: str) -> str:
        return (
            f"{len(self.passed)} of the {self.required} scenarios {era} requires passed; "
            f"{len(self.baselined)} baselined (expected failures, each with its reason in "
            f"baseline-{era}.yml); {len(self.false_passes)} false passes, never counted "
            f"({', '.join(sorted(self.false_passes))})"
        )


def count(era: str, scenarios: list[str], ran: dict[str, list[dict[str, object]]]) -> Count:
    """Each required scenario as one of: passed (its own checks ran, none failed), baselined
    (a check the baseline expects to fail failed), or a false pass (``FALSE_PASSES``)."""
    expected = baselined(era)
    passed, base, false = [], [], []
    for scenario in scenarios:
        checks = ran.get(scenario, [])
        failed = any(c.get("status") == "FAILURE" for c in checks)
        if scenario in FALSE_PASSES:
            false.append(scenario)
        elif scenario in expected or failed:
            base.append(scenario)
        else:
            passed.append(scenario)
    return Count(len(scenarios), tuple(passed), tuple(base), tuple(false))


def run_suite(url: str, era: str, tools_folder: Path, timeout: float = 600) -> Outcome:
    """Run what ``era`` requires against ``url``, against its baseline."""
    command = node_tool(tools_folder.resolve(), "conformance")
    if command is None:
        return Outcome(era, False, f"the suite is not installed in {tools_folder} (npm install)")
    with tempfile.TemporaryDirectory(prefix="omds-ld-conformance-") as folder:
        home, output = Path(folder), Path(folder) / "results"
        env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}

        def suite(*arguments: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*command, *arguments], capture_output=True, text=True, timeout=timeout,
                env=env, cwd=home,
            )  # fmt: skip

        listed = suite("list", "--server", "--requirements", era)
        scenarios = required(listed.stdout)
        if listed.returncode != 0 or not scenarios:
            return Outcome(era, False, f"the suite lists no requirements of {era}: {listed.stderr}")
        result = suite(
            "server", "--url", url, "--requirements", era,
            "--expected-failures", str(baseline(era)), "-o", str(output),
        )  # fmt: skip
        if result.returncode != 0:
            tail = (result.stdout[-1500:] + result.stderr[-500:]).strip()
            return Outcome(era, False, f"exit {result.returncode}: {tail}")
        skipped = not_run(scenarios, results(output))
        if skipped:
            return Outcome(era, False, "required scenarios did not run: " + ", ".join(skipped))
        return Outcome(era, True, count(era, scenarios, results(output)).line(era))
