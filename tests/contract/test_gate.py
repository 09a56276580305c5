"""``omds-ld norm gate``: one command, one report, a non-zero exit when a budget or a scenario
regresses; run here against the norm as released before this round's changes (0.1.0)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from omds_ld.contract.sources import last_release
from tests.contract.test_tools_diff import current, write

ROOT = Path(__file__).resolve().parents[2]


def gate(folder: Path, *args: str | Path) -> tuple[int, str, dict[str, Any]]:
    """The gate as a maintainer runs it from a clone: exit code, report text and JSON."""
    command = [sys.executable, "-m", "omds_ld.cli", "norm", "gate",
               "--json", str(folder / "gate.json"), "--report", str(folder / "gate.md"),
               *map(str, args)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    report = json.loads((folder / "gate.json").read_text())
    text = (folder / "gate.md").read_text()
    assert text.strip() in done.stdout, done.stderr
    return done.returncode, text, report


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["steps"] if s["name"] == name)


def test_the_whole_gate_against_the_last_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What CI runs: every step, the report of what this round changed in the norm."""
    assert last_release() == "0.1.0"
    code, text, report = gate(tmp_path)
    with capsys.disabled():  # the report, in CI's log
        print("\n" + text)
    assert code == 0, text
    assert report["passed"] and report["complete"]
    diff = step(report, "diff")["data"]
    assert diff["old"]["version"] == "0.1.0" and diff["new"]["version"] == "0.2.0"
    added = {t["tool"] for t in diff["tools"] if t["status"] == "added"}
    assert added == {"createApplication", "readApplication", "listApplications",
                     "withdrawApplication"}  # fmt: skip
    assert "application" in " ".join(step(report, "scenarios")["lines"])
    new = step(report, "budgets")["data"]["new"]
    assert new["condensedRatio"] <= 0.15
    # each insurer's server, and the broker endpoint (compare-insurers-endpoint)
    assert set(new["toolsShown"]) == {"pfefferminzia", "disrupto", "angloamerican", "insurers"}
    conformance_lines = step(report, "conformance")["lines"]
    assert (
        len(conformance_lines) == 4 and sum("broker endpoint" in x for x in conformance_lines) == 2
    )
    assert all(line.startswith(("2025-11-25: pass", "2026-07-28: pass"))
               for line in conformance_lines)  # fmt: skip


def test_a_budget_overrun_fails_the_gate(tmp_path: Path) -> None:
    budgets = yaml.safe_load((ROOT / "src/omds_ld/norm/data/budgets.yaml").read_text())
    budgets["tools"]["pfefferminzia"] = 1000
    path = tmp_path / "budgets.yaml"
    path.write_text(yaml.safe_dump(budgets), "utf-8")
    code, text, report = gate(
        tmp_path, "--budgets", path, "--scenario", "pfefferminzia-skoda", "--skip", "conformance"
    )
    assert code == 1
    assert re.search(r"tools shown, pfefferminzia: \d+ → \d+ tokens \(budget 1000\) OVER", text)
    assert "OVER BUDGET: tools of pfefferminzia" in text
    assert step(report, "budgets")["passed"] is False and step(report, "diff")["passed"] is True
    assert step(report, "conformance")["passed"] is None
    assert "Gate: FAILED (budgets)" in text


def test_a_scenario_that_no_longer_passes_fails_the_gate(tmp_path: Path) -> None:
    """A norm without createOffer (a major version, so the diff's rules hold): the offer
    scenario passed with the release and fails now."""
    document = copy.deepcopy(current())
    for item in document["paths"].values():
        if item.get("post", {}).get("operationId") == "createOffer":
            del item["post"]
    document["info"]["version"] = "1.0.0"
    norm = write(tmp_path, "without-offers", document)
    code, text, report = gate(
        tmp_path, "--norm", norm, "--scenario", "pfefferminzia-offer",
        "--skip", "conformance,budgets",
    )  # fmt: skip
    assert code == 1
    assert step(report, "diff")["passed"] is True  # removing is allowed by a major version
    assert "createOffer: removed [BREAKING]" in text
    [line] = [x for x in step(report, "scenarios")["lines"] if x.startswith("pfefferminzia-offer")]
    assert line.startswith("pfefferminzia-offer: 0.1.0 pass → FAIL") and line.endswith("REGRESSED")
    assert "Gate: FAILED (scenarios)" in text


def test_a_version_that_breaks_the_rules_fails_the_gate(tmp_path: Path) -> None:
    document = copy.deepcopy(current())
    document["info"]["version"] = "0.1.1"  # the application step is more than a patch
    norm = write(tmp_path, "underversioned", document)
    code, text, report = gate(tmp_path, "--norm", norm, "--skip", "scenarios,budgets,conformance")
    assert code == 1
    assert step(report, "diff")["passed"] is False
    assert "FAILED: version 0.1.1 is not what the changes need" in text
    assert not report["complete"]
