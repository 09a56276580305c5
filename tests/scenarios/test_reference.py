"""The reference agent passes every shipped scenario in every run, through the real MCP servers."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from omds_ld.insurer.data import builtin_insurers_folder
from omds_ld.scenarios.agents.reference import ReferenceAgent
from omds_ld.scenarios.protocol import FINAL, RUN_START, TOOL_CALL, TOOLS_LIST, read_protocol
from omds_ld.scenarios.runner import run_all
from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario
from tests.servers import ExampleServer, running

SCENARIOS = {p.stem: p for p in builtin_scenarios()}
DOCS = Path(__file__).parents[2] / "docs" / "scenarios.md"


def documented_minimum(name: str) -> int:
    """The minimum calls docs/scenarios.md gives a shipped scenario."""
    found = re.search(rf"^\| `{re.escape(name)}` \| (\d+) \|$", DOCS.read_text("utf-8"), re.M)
    assert found, f"docs/scenarios.md has no minimum for {name}"
    return int(found.group(1))


def test_the_shipped_scenarios_cover_the_required_cases() -> None:
    loaded = [load_scenario(p) for p in SCENARIOS.values()]
    assert {"pfefferminzia-skoda", "disrupto-skoda", "angloamerican-home"} <= set(SCENARIOS)
    assert any(len(s.servers) == 2 for s in loaded), "a comparison at two insurers"
    assert any(len(s.servers) == 3 for s in loaded), "a comparison at three insurers"
    assert any(s.first_attempt for s in loaded), "one whose first body is refused"
    assert any("Vollkasko" in s.include for s in loaded), "a component swapped in its group"
    assert any(s.settings and s.servers == ("disrupto",) for s in loaded), "a value set, inquiry"
    assert any(s.settings and s.servers == ("angloamerican",) for s in loaded), "sums insured"
    assert any(s.include and s.servers == ("pfefferminzia",) for s in loaded), "optional component"
    assert any(s.offer for s in loaded), "a binding offer"
    assert any(s.exclude for s in loaded), "a component excluded (liability only)"
    assert any(len(s.objects) > 1 for s in loaded), "several risk objects in one task"
    assert any(len(s.per_server) > 1 for s in loaded), "one cover named differently at each"
    assert {s.outcome for s in loaded} == {"premium", "refused", "not offered"}, "a correct no"
    applications = {s.servers[0]: s for s in loaded if s.application_outcome == "accepted"}
    assert {"pfefferminzia", "angloamerican"} <= set(applications), "an application at each"
    assert any(s.application_outcome == "none" and s.person == "decline" for s in loaded)
    assert all(s.budget.tool_calls for s in loaded)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_reference_agent_passes_in_every_run(
    name: str, era: str, server: ExampleServer, tmp_path: Path
) -> None:
    """Every shipped scenario, in both protocol revisions: with a session, and without one
    (#50: the answers are short by what each call kept, the agent sends no seen back)."""
    scenario = load_scenario(SCENARIOS[name])
    records = asyncio.run(run_all([scenario], ReferenceAgent, None, server.url, tmp_path, era=era))
    assert len(records) == scenario.runs
    for record in records:
        failed = [f"{c.name}: {c.reason}" for c in record.grade.criteria if not c.passed]
        assert record.grade.passed, failed
        kinds = [e["event"] for e in read_protocol(record.protocol)]
        assert (
            kinds[0] == RUN_START and TOOLS_LIST in kinds and TOOL_CALL in kinds and FINAL in kinds
        )
        # the minimum the docs print is what the reference agent really needs
        assert kinds.count(TOOL_CALL) == documented_minimum(name)


def test_an_application_starts_on_the_insurers_today_whatever_this_machines_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent knows no date of its own. With the insurers at UTC+14 and the agent's machine
    at UTC-12 their days are always one or two apart: the application starts on the insurer's
    today, as its answers say, and is accepted (this machine's today would be its yesterday)."""
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    for described in folder.glob("*/insurer.yaml"):
        described.write_text(described.read_text() + "timeZone: Pacific/Kiritimati\n")
    scenario = load_scenario(SCENARIOS["pfefferminzia-application"])
    monkeypatch.setenv("TZ", "Etc/GMT+12")  # POSIX sign: twelve hours behind UTC
    time.tzset()
    try:
        with running(ExampleServer(tmp_path / "s.sqlite3", ["--insurers", str(folder)])) as server:
            [record] = asyncio.run(run_all([scenario], ReferenceAgent, 1, server.url, tmp_path))
            insurers_today = dt.datetime.now(ZoneInfo("Pacific/Kiritimati")).date()
            assert dt.date.today() < insurers_today  # the days differ, whenever this runs
    finally:
        monkeypatch.undo()
        time.tzset()
    failed = [f"{c.name}: {c.reason}" for c in record.grade.criteria if not c.passed]
    assert record.grade.passed, failed
    applied = [
        e for e in read_protocol(record.protocol)
        if e["event"] == TOOL_CALL and e["gen_ai.tool.name"] == "createApplication"
    ]  # fmt: skip
    starts = {e["gen_ai.tool.call.arguments"]["body"]["bc:startDate"] for e in applied}
    assert starts == {insurers_today.isoformat()}


def test_the_recovering_scenario_really_recovers(server: ExampleServer, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS["pfefferminzia-recover"])
    [record] = asyncio.run(run_all([scenario], ReferenceAgent, 1, server.url, tmp_path))
    calls = [e for e in read_protocol(record.protocol) if e["event"] == TOOL_CALL]
    refused = [c for c in calls if c["is_error"]]
    assert [c["gen_ai.tool.name"] for c in refused] == ["createRiskObject"]
    assert "kW" in refused[0]["text"]
    assert record.grade.passed
    # the protocol marks the refused call, and the report counts it
    assert [c.get("inadmissible") for c in calls] == [None, None, "refused", None, None]
    from omds_ld.scenarios.report import metrics, render, summarize

    measured = metrics(read_protocol(record.protocol))
    assert measured.inadmissible == 1
    [row] = summarize([(record.grade, measured)])
    assert row.inadmissible == 1.0
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(render([row]))
    assert "inadmissible" in console.export_text()


def test_expected_premiums_can_be_inquired_at_run_time(
    server: ExampleServer, tmp_path: Path
) -> None:
    scenario = load_scenario(SCENARIOS["compare-skoda"])
    assert scenario.inquire and not scenario.premiums
    [record] = asyncio.run(run_all([scenario], ReferenceAgent, 1, server.url, tmp_path))
    start = read_protocol(record.protocol)[0]
    assert start["scenario"]["expected"]["premiums"] == {
        "pfefferminzia": "1684.88",
        "disrupto": "1327.06",
    }
    assert (tmp_path / "compare-skoda.baseline.reference.0.jsonl").exists()
    assert record.grade.passed


def test_demo_prints_each_step_and_the_premium() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "demo"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for expected in (
        "listProducts", "createCalculation · https://pfefferminzia.example/products/kraftfahrt-2025",
        "createRiskObject", "premium 1684.88 EUR", "readDefaultInstance", "inquireTariff",
        "premium 1327.06 EUR", "Grade: passes all 9 criteria",
    ):  # fmt: skip
        assert expected in out, expected
