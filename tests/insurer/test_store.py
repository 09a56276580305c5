"""Nothing accepted is lost: business cases and offers survive a restart of the server."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.insurer.test_bad_input import PRODUCT
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer


def test_restart_keeps_every_business_case(tmp_path: Path, client: httpx.Client) -> None:
    server = ExampleServer(tmp_path / "store.sqlite3")
    server.start()
    try:
        api = server.api("pfefferminzia")
        case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()
        case_id = case["bc:caseId"]
        client.post(f"{api}/calculations/{case_id}/risk-objects", json=SKODA).raise_for_status()
        priced = client.post(f"{api}/calculations/{case_id}/premium").json()
        offer = client.post(f"{api}/calculations/{case_id}/offers").json()
        server.restart()
        after = client.get(f"{api}/calculations/{case_id}").json()
        assert after["bc:status"] == "offered"
        assert after["bc:premium"] == priced["bc:premium"]
        assert after["bc:draft"] == {**priced["bc:draft"]}
        assert client.get(f"{api}/offers/{offer['bc:offerId']}").json() == offer
    finally:
        server.stop()


def test_idempotency_records_survive_a_restart(tmp_path: Path, client: httpx.Client) -> None:
    server = ExampleServer(tmp_path / "store.sqlite3")
    server.start()
    try:
        api = server.api("pfefferminzia")
        key = {"Idempotency-Key": "restart-1"}
        first = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=key)
        server.restart()
        again = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=key)
        assert again.json()["bc:caseId"] == first.json()["bc:caseId"]
        assert len(server.snapshot()["cases"]) == 1
    finally:
        server.stop()
