"""Who is calling: brokers by bearer token, anonymous demo callers, cases private to their broker."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.insurer.test_bad_input import PRODUCT
from tests.servers import ExampleServer

ALPHA = {"Authorization": "Bearer pf-demo-alpha-7b1e4c"}
BETA = {"Authorization": "Bearer pf-demo-beta-92d0aa"}


def test_a_case_is_visible_to_its_broker_only(client: httpx.Client, server: ExampleServer) -> None:
    api = server.api("pfefferminzia")
    case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=ALPHA)
    case_id = case.json()["bc:caseId"]
    assert client.get(f"{api}/calculations/{case_id}", headers=ALPHA).status_code == 200
    foreign = client.get(f"{api}/calculations/{case_id}", headers=BETA)
    unknown = client.get(f"{api}/calculations/ffffffffffffffffffff", headers=BETA)
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json()["type"] == unknown.json()["type"]
    # a foreign case reads exactly like one that does not exist: nothing is revealed
    unknown_id = "ffffffffffffffffffff"
    assert foreign.text.replace(case_id, "ID") == unknown.text.replace(unknown_id, "ID")
    assert client.get(f"{api}/calculations/{case_id}").status_code == 404


def test_anonymous_callers_can_be_refused(tmp_path: Path, client: httpx.Client) -> None:
    server = ExampleServer(tmp_path / "store.sqlite3", extra_args=["--require-token"])
    server.start()
    try:
        api = server.api("pfefferminzia")
        refused = client.get(f"{api}/products")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert refused.json()["type"].endswith("/unauthorized")
        assert client.get(f"{api}/products", headers=ALPHA).status_code == 200
    finally:
        server.stop()
