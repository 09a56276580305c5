"""One date, the insurer's: around midnight in Vienna and in UTC (a set clock), the insurer's
today in its time zone decides what its answers say and which start an application may have,
never the UTC date. In process: the interface's service on a real SQLite file, its clock set."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import KeySet

from omds_ld.insurer.data import ANONYMOUS, builtin_insurers_folder, load_insurers
from omds_ld.insurer.problems import Problem
from omds_ld.insurer.service import InsurerService
from omds_ld.insurer.store import Store
from omds_ld.norm import load_norm
from omds_ld.norm.receipt import new_key, sign
from tests.insurer.test_flows import SKODA
from tests.mcp.applications import PAYMENT, PERSON

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
KEY = new_key()
# 23:30 in UTC is 00:30 of the next day in Vienna (CET, +01:00); 22:30 UTC is 23:30 in Vienna
AFTER_MIDNIGHT_IN_VIENNA = dt.datetime(2026, 12, 7, 23, 30, tzinfo=dt.UTC)
BEFORE_MIDNIGHT_IN_VIENNA = dt.datetime(2026, 12, 7, 22, 30, tzinfo=dt.UTC)


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def _service(tmp_path: Path, clock: Clock, folder: Path | None = None) -> InsurerService:
    """Pfefferminzia's interface on its clock (from ``folder``, where its data were edited)."""
    insurer = load_insurers(folder)["pfefferminzia"]
    assert insurer.time_zone == "Europe/Vienna"
    public = KeySet.import_key_set({"keys": [KEY.as_dict(private=False)]})
    return InsurerService(
        load_norm(), insurer, Store(tmp_path / "dates.sqlite3"), "/api", clock, lambda: public
    )


def _offer(service: InsurerService) -> dict[str, Any]:
    case = service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body
    case_id = {"caseId": case["bc:caseId"]}
    service.createRiskObject(ANONYMOUS, case_id, SKODA)
    service.calculatePremium(ANONYMOUS, case_id, None)
    return dict(service.createOffer(ANONYMOUS, case_id, None).body)


def _application(offer: dict[str, Any], start: str, at: dt.datetime) -> dict[str, Any]:
    consent = {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person",
               "bc:consentedAt": at.isoformat(timespec="seconds"),
               "bc:offerDigest": offer["bc:offerDigest"]}  # fmt: skip
    body = {"bc:policyholder": PERSON, "bc:payment": PAYMENT, "bc:startDate": start}
    confirmation = {"bc:confirmedBy": "anonymous", "bc:confirmedAt": consent["bc:consentedAt"],
                    "bc:confirmedVia": "test", "bc:shownDigest": "sha256:" + "0" * 64}  # fmt: skip
    confirmation["bc:receipt"] = sign(
        KEY, issuer="tests", broker="anonymous", confirmation=confirmation, consent=consent,
        application=body, now=at.timestamp(),
    )  # fmt: skip
    return {**body, "bc:consent": {**consent, "bc:confirmation": confirmation}}


@pytest.mark.parametrize(
    ("now", "today"),
    [(AFTER_MIDNIGHT_IN_VIENNA, "2026-12-08"), (BEFORE_MIDNIGHT_IN_VIENNA, "2026-12-07")],
)
def test_the_insurers_today_decides_around_midnight(
    tmp_path: Path, now: dt.datetime, today: str
) -> None:
    """The answers say the insurer's today; an application starting the day before it is
    refused (at 23:30 UTC the UTC date is the insurer's yesterday), one starting on it is taken."""
    clock = Clock(now)
    service = _service(tmp_path, clock)
    offer = _offer(service)
    assert offer["bc:insurerToday"] == today and offer["bc:timeZone"] == "Europe/Vienna"
    yesterday = (dt.date.fromisoformat(today) - dt.timedelta(days=1)).isoformat()
    clock.now = now + dt.timedelta(minutes=5)  # the customer agreed after the offer was made
    with pytest.raises(Problem) as refused:
        service.createApplication(
            ANONYMOUS, {"offerId": offer["bc:offerId"]}, _application(offer, yesterday, clock.now)
        )
    assert refused.value.slug == "personal-data-invalid"
    assert [e.pointer for e in refused.value.errors] == ["/bc:startDate"]
    made = service.createApplication(
        ANONYMOUS, {"offerId": offer["bc:offerId"]}, _application(offer, today, clock.now)
    )
    assert made.status == 201 and made.body["bc:startDate"] == today


def test_a_minimum_age_in_a_products_shape_is_measured_on_the_insurers_today(
    tmp_path: Path,
) -> None:
    """``bc:minimumAge`` on a product's field counts from the insurer's today, by its clock in
    its time zone: never this machine's date (the clock is set in January 2026, and at 23:30
    UTC on the 2nd it is already the 3rd in Vienna)."""
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    shapes = folder / "pfefferminzia" / "shapes.ttl"
    text = shapes.read_text()
    start = "sh:path pf:vertragsbeginn ; sh:order 2 ;"
    assert start in text
    shapes.write_text(text.replace(start, start + " bc:minimumAge 0 ;"))  # not after today
    service = _service(tmp_path, Clock(dt.datetime(2026, 1, 2, 23, 30, tzinfo=dt.UTC)), folder)
    case = service.createCalculation(ANONYMOUS, {}, {"p:hasRootProduct": PRODUCT}).body
    [attribute] = [a["@id"] for a in case["bc:draft"]["p:attribute"]
                   if a["p:property"].endswith("#vertragsbeginn")]  # fmt: skip

    def set_start(day: str) -> Any:
        values = {"bc:values": [{"bc:attribute": attribute, "p:value": day}]}
        return service.setAttributes(ANONYMOUS, {"caseId": case["bc:caseId"]}, values)

    with pytest.raises(Problem) as refused:
        set_start("2026-01-04")  # the insurer's tomorrow
    assert refused.value.slug == "shape-violation"
    assert set_start("2026-01-03").status == 200  # its today (the UTC date is the 2nd)
