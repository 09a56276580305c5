"""Nothing accepted is lost: business cases and offers survive a restart of the server."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from omds_ld.insurer.data import load_insurers
from omds_ld.insurer.draft import Draft
from omds_ld.insurer.store import Case, Claim, ClaimLost, Replay, Store
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


def test_the_database_file_itself_holds_what_was_committed_within_seconds(
    tmp_path: Path, client: httpx.Client
) -> None:
    """A commit goes to the write-ahead log; the store's own thread copies it into the file
    (the connection that commits on the event loop never does), so a copy of the file alone, as
    a plain file backup takes it, has every case of a few seconds before."""
    server = ExampleServer(tmp_path / "store.sqlite3")
    server.start()
    try:
        api = server.api("pfefferminzia")
        ids = {
            client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()[
                "bc:caseId"
            ]
            for _ in range(5)
        }
        deadline = time.monotonic() + 60
        while True:
            copy = tmp_path / "copy.sqlite3"
            copy.write_bytes((tmp_path / "store.sqlite3").read_bytes())  # not its -wal
            found = set()
            with contextlib.suppress(sqlite3.OperationalError), sqlite3.connect(copy) as db:
                found = {row[0] for row in db.execute("SELECT case_id FROM cases")}  # or no table
            copy.unlink()
            if ids <= found or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert ids <= found, "the file alone lacks committed cases"
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


def _store_with_case(tmp_path: Path) -> tuple[Store, Case]:
    store = Store(tmp_path / "unit.sqlite3")
    product = load_insurers()["pfefferminzia"].products["kraftfahrt-2025"]
    case = Case("pfefferminzia", "c1", "alpha", "draft", Draft.default(product), None, None, 1,
                "t", "t")  # fmt: skip
    store.insert_case(case)
    return store, case


def test_a_write_and_its_answer_commit_together_or_not_at_all(tmp_path: Path) -> None:
    """A failure after the write (an answer that cannot be encoded, say) rolls the write back."""
    store, case = _store_with_case(tmp_path)
    claim = store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15)
    assert isinstance(claim, Claim)
    with pytest.raises(UnicodeEncodeError), store.unit():
        store.update_case(replace(case, status="calculated"), expected_version=1)
        store.complete_idempotent("pfefferminzia", "alpha", "k", claim, 201, {}, b"{}")
        "\ud800".encode()
    after = store.get_case("pfefferminzia", "c1", "alpha")
    assert after is not None and after.version == 1 and after.status == "draft"
    assert store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15) == "in-progress"
    store.close()


def test_a_claim_whose_holder_died_lapses_after_its_lease(tmp_path: Path) -> None:
    """The holder is another process on the same file (it stalled or died): in this process its
    claim is only in the store, and lapses with its lease."""
    holder, case = _store_with_case(tmp_path)
    store = Store(holder.path)  # the process that gets the retries
    first = holder.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 0.3)
    assert isinstance(first, Claim)
    assert store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 0.3) == "in-progress"
    time.sleep(0.4)  # the holder never completed: nothing was done under its claim
    second = store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15)
    assert isinstance(second, Claim)
    with pytest.raises(ClaimLost), holder.unit():  # the first holder wakes up too late
        holder.update_case(replace(case, status="calculated"), expected_version=1)
        holder.complete_idempotent("pfefferminzia", "alpha", "k", first, 201, {}, b"late")
    with store.unit():
        store.update_case(replace(case, status="calculated"), expected_version=1)
        store.complete_idempotent("pfefferminzia", "alpha", "k", second, 201, {}, b"once")
    store.let_go("pfefferminzia", "alpha", "k")
    replay = store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15)
    assert isinstance(replay, Replay) and replay.body == b"once"
    after = store.get_case("pfefferminzia", "c1", "alpha")
    assert after is not None and after.version == 2
    store.close()
    holder.close()


def test_a_duplicate_of_a_running_request_is_told_at_once(tmp_path: Path) -> None:
    """In the process that runs it, a request holding its key is in flight: a duplicate gets
    'in-progress' (another body 'mismatch') without waiting for the write's transaction."""
    store, case = _store_with_case(tmp_path)
    claim = store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15)
    assert isinstance(claim, Claim)
    with store.unit():  # the write runs; another thread's claim must not wait for it
        answers: list[object] = []
        worker = threading.Thread(
            target=lambda: answers.extend(
                [store.begin_idempotent("pfefferminzia", "alpha", "k", f, 3600, 15)
                 for f in ("f", "other")]
            )
        )  # fmt: skip
        worker.start()
        worker.join(timeout=5)
        assert answers == ["in-progress", "mismatch"]
        store.update_case(replace(case, status="calculated"), expected_version=1)
        store.complete_idempotent("pfefferminzia", "alpha", "k", claim, 201, {}, b"done")
    store.let_go("pfefferminzia", "alpha", "k")
    assert isinstance(store.begin_idempotent("pfefferminzia", "alpha", "k", "f", 3600, 15), Replay)
    store.close()


def test_a_store_from_before_leases_gets_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE idempotency (insurer TEXT NOT NULL, broker TEXT NOT NULL, key TEXT NOT NULL,"
        " fingerprint TEXT NOT NULL, state TEXT NOT NULL, status INTEGER, headers TEXT, body BLOB,"
        " created REAL NOT NULL, PRIMARY KEY (insurer, broker, key));"
        "INSERT INTO idempotency VALUES ('p','b','k','f','done',201,'{}',x'7b7d',"
        f"{time.time()});"
    )
    old.commit()
    old.close()
    store = Store(path)
    replay = store.begin_idempotent("p", "b", "k", "f", 3600, 15)
    assert isinstance(replay, Replay) and replay.status == 201
    store.close()
