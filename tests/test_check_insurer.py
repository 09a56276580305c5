"""``omds-ld check-insurer``: it passes the example insurers and an independent interface, and
names each class of defect in a broken one."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omds_ld.insurer.data import load_insurers
from tests.independent_insurer import Petcare
from tests.servers import ExampleServer


def check(api: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "check-insurer", "--api", api,
         "--json", str(report), "--html", str(tmp_path / "report.html"), *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return result.returncode, json.loads(report.read_text()), result.stdout


@pytest.mark.parametrize("insurer", sorted(load_insurers()))
def test_every_example_insurer_passes(insurer: str, server: ExampleServer, tmp_path: Path) -> None:
    code, report, out = check(server.api(insurer), tmp_path)
    assert code == 0, [c for c in report["checks"] if not c["passed"]]
    assert report["passed"] and report["premiums"], out[-2000:]
    names = {c["name"] for c in report["checks"]}
    for expected in ("JSON-LD of the norm", "response schema", "cache headers", "condenses",
                     "a body that violates its shape is refused", "a malformed body is refused",
                     "a premium with a conforming report", "an unknown id is refused"):  # fmt: skip
        assert expected in names, expected
    assert f"{len(report['checks'])} checks, 0 failed" in out
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")


def test_the_draft_insurers_are_checked_for_idempotency_and_no_change(
    server: ExampleServer, tmp_path: Path
) -> None:
    _, report, _ = check(server.api("pfefferminzia"), tmp_path)
    names = {c["name"] for c in report["checks"] if c["passed"]}
    assert {"a retry with the same key replays", "the same key with another body is refused",
            "a refused request changed nothing", "an unknown case is refused",
            "keeps components as they were (x-omds-ld keeps)",
            "keeps components, riskObjects as they were (x-omds-ld keeps)"} <= names  # fmt: skip


def test_a_part_the_norm_says_a_call_keeps_is_compared_as_the_insurer_answered_it() -> None:
    """#50: what check-insurer compares for x-omds-ld keeps: the draft without its risk objects
    (components), and its risk objects; a change of either is named."""
    from omds_ld.check.insurer import changed_parts

    vehicle = {"@id": "~/draft/risk-objects/1", "@type": "p:Vehicle", "p:powerKw": 110}
    draft = {"@id": "~/draft", "p:hasPart": [{"@id": "~/c/a", "p:included": True}],
             "p:hasRiskObject": [vehicle]}  # fmt: skip
    before = {"bc:draft": draft}
    added = {"bc:draft": {**draft, "p:hasRiskObject": [vehicle, {**vehicle, "@id": "~/2"}]}}
    included = {"bc:draft": {**draft, "p:hasPart": [{"@id": "~/c/a", "p:included": False}]}}
    both = {"components", "riskObjects"}
    assert changed_parts(before, before, both) == []
    assert changed_parts(before, added, {"components"}) == []  # a risk object's edit keeps them
    assert changed_parts(before, added, both) == ["riskObjects"]
    assert changed_parts(before, included, both) == ["components"]


@pytest.mark.parametrize("insurer", ["pfefferminzia", "angloamerican"])
def test_an_interface_taking_applications_is_checked_without_binding_anyone(
    insurer: str, server: ExampleServer, tmp_path: Path
) -> None:
    _, report, _ = check(server.api(insurer), tmp_path)
    passed = {(c["operation"], c["name"]) for c in report["checks"] if c["passed"]}
    for expected in (
        ("createOffer", "the offer carries its digest (bc:offerDigest)"),
        ("createOffer", "offers createApplication"),
        ("createApplication", "without consent, refused as consent-missing: its problem type"),
        (
            "createApplication",
            "consent to another offer, refused as consent-mismatch: its problem type",
        ),
        ("createApplication", "invalid personal data, refused by field: its problem type"),
        (
            "createApplication",
            "a receipt of the person's yes that does not verify, refused as receipt-invalid: "
            "its problem type",
        ),
        ("createApplication", "the refusal names the field, not its value"),
        ("listApplications", "a refused application changed nothing"),
        ("readApplication", "an unknown application is refused"),
    ):
        assert expected in passed, expected
    # with a receipt key the interface trusts: a receipt right in all but the application's
    # data is refused (an interface that took it would take a yes to data nobody saw)
    key = str(server.database.parent / "receipt-key.pem")
    _, keyed, _ = check(server.api(insurer), tmp_path, "--receipt-key", key)
    named = ("createApplication", "a receipt for another application's data (another IBAN), "
             "refused as receipt-invalid: its problem type")  # fmt: skip
    assert named in {(c["operation"], c["name"]) for c in keyed["checks"] if c["passed"]}, keyed
    with sqlite3.connect(server.database) as db:  # the check made no application at all
        offers = [c["where"] for c in report["checks"] if c["name"] == "offers createApplication"]
        offer_id = offers[0].rsplit("/", 1)[-1]
        assert (
            db.execute(
                "SELECT count(*) FROM applications WHERE offer_id=?", (offer_id,)
            ).fetchone()[0]
            == 0
        )


def test_an_independent_interface_passes(tmp_path: Path) -> None:
    with Petcare() as insurer:
        code, report, _ = check(insurer.api, tmp_path)
    assert code == 0, [c for c in report["checks"] if not c["passed"]]
    assert report["premiums"]


DEFECTS = {
    "not JSON": ("listProducts", "JSON object"),
    "no next steps": ("listProducts", "next steps"),
    "not a type of the norm": ("listProducts", "answer type"),
    "an error that is no problem": ("listProducts", "status"),
    "a remote context": ("listProducts", "JSON-LD of the norm"),
    "no published operations": ("readDefaultInstance", "an unknown id is refused"),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_broken_variant_fails_naming_its_defect(defect: str, tmp_path: Path) -> None:
    with Petcare(defect) as insurer:
        code, report, out = check(insurer.api, tmp_path)
    assert code == 1
    operation, name = DEFECTS[defect]
    failed = [(c["operation"], c["name"]) for c in report["checks"] if not c["passed"]]
    assert (operation, name) in failed, failed
    assert f"FAIL {operation} · {name} · FAIL" in out
