"""The embedded store: business cases, offers and idempotency records in one SQLite file (WAL).

A write and everything it answers commit together (``Store.unit``): the changed case, the
encoded answer and the idempotency record are one transaction, so a write is answered 2xx exactly
when it is committed, and a crash leaves either all of it or none. An idempotency claim is a lease
with a token: a claim whose holder died lapses after the lease, and only the current holder can
complete it.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from omds_ld.insurer.draft import Draft
from omds_ld.sqlite import connect, transaction

log = logging.getLogger("omds_ld.insurer.store")

Status = Literal["draft", "calculated", "offered"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cases (
    insurer TEXT NOT NULL, case_id TEXT NOT NULL, broker TEXT NOT NULL, status TEXT NOT NULL,
    draft TEXT NOT NULL, premium TEXT, offer_id TEXT, version INTEGER NOT NULL,
    created TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (insurer, case_id)
);
CREATE TABLE IF NOT EXISTS offers (
    insurer TEXT NOT NULL, offer_id TEXT NOT NULL, case_id TEXT NOT NULL, broker TEXT NOT NULL,
    record TEXT NOT NULL, created TEXT NOT NULL,
    PRIMARY KEY (insurer, offer_id)
);
CREATE TABLE IF NOT EXISTS applications (
    insurer TEXT NOT NULL, application_id TEXT NOT NULL, offer_id TEXT NOT NULL,
    broker TEXT NOT NULL, state TEXT NOT NULL, record TEXT NOT NULL, created TEXT NOT NULL,
    updated TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (insurer, application_id)
);
CREATE INDEX IF NOT EXISTS applications_of_offer ON applications (insurer, offer_id, broker);
CREATE TABLE IF NOT EXISTS spent_receipts (
    insurer TEXT NOT NULL, receipt_id TEXT NOT NULL, application_id TEXT NOT NULL,
    spent TEXT NOT NULL,
    PRIMARY KEY (insurer, receipt_id)
);
CREATE TABLE IF NOT EXISTS idempotency (
    insurer TEXT NOT NULL, broker TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    state TEXT NOT NULL, status INTEGER, headers TEXT, body BLOB, created REAL NOT NULL,
    PRIMARY KEY (insurer, broker, key)
);
"""
# columns added since the first release; a store from before gets them when it is opened
_ADDED_COLUMNS = {"idempotency": {"token": "TEXT", "lease_until": "REAL"}}


@dataclass(frozen=True)
class Case:
    """A business case as stored: who owns it, its status, draft and premium."""

    insurer: str
    case_id: str
    broker: str
    status: Status
    draft: Draft
    premium: Mapping[str, Any] | None
    offer_id: str | None
    version: int
    created: str
    updated: str


@dataclass(frozen=True)
class Offer:
    """A binding offer as stored."""

    insurer: str
    offer_id: str
    case_id: str
    broker: str
    record: Mapping[str, Any]
    created: str


@dataclass(frozen=True)
class Application:
    """An application as stored: its offer, state and record (the policyholder's personal data,
    the payment, the consent with its confirmation, and the insurer's decision)."""

    insurer: str
    application_id: str
    offer_id: str
    broker: str
    state: str
    record: Mapping[str, Any]
    created: str
    updated: str
    version: int = 1


@dataclass(frozen=True)
class Replay:
    """A stored answer to replay for a retried request."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    created: float = 0.0


@dataclass(frozen=True)
class Claim:
    """This request holds the key until ``lease_until``; ``token`` proves it when completing."""

    token: str
    lease_until: float


IdempotencyState = Literal["in-progress", "mismatch"]


class ClaimLost(Exception):
    """The request's idempotency lease lapsed and another request took the key over."""


class EditConflict(Exception):
    """The case changed between reading and writing it."""


class Checkpoints:
    """The write-ahead log copied into the database file by a thread of its own, on its own
    connection, every ``every`` seconds (PASSIVE: it never holds up a writer). The store's
    connection checkpoints never itself, so a commit on the event loop never waits for the disk
    (a checkpoint syncs the log and the file)."""

    def __init__(self, path: Path, every: float = 2.0) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(path, every), name="omds-ld checkpoints", daemon=True
        )
        self._thread.start()

    def _run(self, path: Path, every: float) -> None:
        db = connect(path)
        try:
            while not self._stop.wait(every):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as error:  # the next round tries again
                    log.warning("checkpoint of %s failed: %s", path.name, error)
        finally:
            db.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class Store:
    """SQLite in WAL mode; one connection, serialised by a lock, safe to use from threads; its
    checkpoints in a thread of their own (``Checkpoints``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._unit = threading.local()
        # keys whose request runs in this process now, with their fingerprint: a duplicate sees
        # them at once, without waiting for the store (a write holds it for its transaction)
        self._flight_lock = threading.Lock()
        self._in_flight: dict[tuple[str, str, str], str] = {}
        self._db = connect(path)
        self._db.row_factory = sqlite3.Row
        # a committed write survives a crash of the process (NORMAL in WAL mode may lose the
        # last transactions on a power loss, never on a crash of the process alone)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # Checkpoints does it, off the loop
        self._db.executescript(_SCHEMA)
        for table, columns in _ADDED_COLUMNS.items():
            present = {row["name"] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns.items():
                if name not in present:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        self._checkpoints = Checkpoints(path)

    def close(self) -> None:
        self._checkpoints.stop()
        with self._lock:
            self._db.close()  # the last connection: the log is copied back and removed

    @contextmanager
    def unit(self) -> Iterator[None]:
        """One transaction for everything in the block: committed if the block ends normally,
        rolled back (nothing changed) if it raises. The store's own writes inside it join it."""
        with self._lock:
            if getattr(self._unit, "active", False):
                yield
                return
            self._unit.active = True
            try:
                with transaction(self._db):
                    yield
            finally:
                self._unit.active = False

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if getattr(self._unit, "active", False):  # part of the unit around it
                yield self._db
                return
            with transaction(self._db):
                yield self._db

    # business cases

    def insert_case(self, case: Case) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO cases VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    case.insurer,
                    case.case_id,
                    case.broker,
                    case.status,
                    json.dumps(case.draft.to_dict()),
                    json.dumps(case.premium) if case.premium is not None else None,
                    case.offer_id,
                    case.version,
                    case.created,
                    case.updated,
                ),
            )

    def get_case(self, insurer: str, case_id: str, broker: str) -> Case | None:
        """The case if it exists and belongs to this broker; None otherwise (foreign = unknown)."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM cases WHERE insurer=? AND case_id=? AND broker=?",
                (insurer, case_id, broker),
            ).fetchone()
        return _case(row) if row else None

    def update_case(self, case: Case, *, expected_version: int) -> Case:
        """Write a changed case if nobody changed it since ``expected_version``."""
        updated = replace(case, version=expected_version + 1)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE cases SET status=?, draft=?, premium=?, offer_id=?, version=?, updated=? "
                "WHERE insurer=? AND case_id=? AND version=?",
                (
                    updated.status,
                    json.dumps(updated.draft.to_dict()),
                    json.dumps(updated.premium) if updated.premium is not None else None,
                    updated.offer_id,
                    updated.version,
                    updated.updated,
                    updated.insurer,
                    updated.case_id,
                    expected_version,
                ),
            )
            if cursor.rowcount != 1:
                raise EditConflict(case.case_id)
        return updated

    # offers

    def insert_offer(self, offer: Offer, case: Case, *, expected_version: int) -> Case:
        """Store an offer and mark its case offered, in one transaction."""
        updated = replace(case, version=expected_version + 1)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE cases SET status=?, offer_id=?, version=?, updated=? "
                "WHERE insurer=? AND case_id=? AND version=?",
                (
                    updated.status,
                    updated.offer_id,
                    updated.version,
                    updated.updated,
                    updated.insurer,
                    updated.case_id,
                    expected_version,
                ),
            )
            if cursor.rowcount != 1:
                raise EditConflict(case.case_id)
            db.execute(
                "INSERT INTO offers VALUES (?,?,?,?,?,?)",
                (
                    offer.insurer,
                    offer.offer_id,
                    offer.case_id,
                    offer.broker,
                    json.dumps(offer.record),
                    offer.created,
                ),
            )
        return updated

    def get_offer(self, insurer: str, offer_id: str, broker: str) -> Offer | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM offers WHERE insurer=? AND offer_id=? AND broker=?",
                (insurer, offer_id, broker),
            ).fetchone()
        if row is None:
            return None
        return Offer(
            insurer=row["insurer"],
            offer_id=row["offer_id"],
            case_id=row["case_id"],
            broker=row["broker"],
            record=json.loads(row["record"]),
            created=row["created"],
        )

    # applications

    def insert_application(self, application: Application) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO applications VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    application.insurer,
                    application.application_id,
                    application.offer_id,
                    application.broker,
                    application.state,
                    json.dumps(application.record),
                    application.created,
                    application.updated,
                    application.version,
                ),
            )

    def spend_receipt(self, insurer: str, receipt_id: str, application_id: str, at: str) -> bool:
        """Spend a receipt of a person's yes on one application (in the unit that inserts it);
        False where it was spent before: one receipt, one application."""
        with self._transaction() as db:
            spent = db.execute(
                "INSERT OR IGNORE INTO spent_receipts VALUES (?,?,?,?)",
                (insurer, receipt_id, application_id, at),
            )
            return spent.rowcount == 1

    def get_application(self, insurer: str, application_id: str, broker: str) -> Application | None:
        """The application if it exists and belongs to this broker (foreign = unknown)."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM applications WHERE insurer=? AND application_id=? AND broker=?",
                (insurer, application_id, broker),
            ).fetchone()
        return _application(row) if row else None

    def applications_of(self, insurer: str, offer_id: str, broker: str) -> list[Application]:
        """An offer's applications, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM applications WHERE insurer=? AND offer_id=? AND broker=? "
                "ORDER BY created DESC, rowid DESC",
                (insurer, offer_id, broker),
            ).fetchall()
        return [_application(row) for row in rows]

    def update_application(self, application: Application, *, expected_version: int) -> Application:
        """Write a changed application if nobody changed it since ``expected_version``."""
        updated = replace(application, version=expected_version + 1)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE applications SET state=?, record=?, updated=?, version=? "
                "WHERE insurer=? AND application_id=? AND version=?",
                (
                    updated.state,
                    json.dumps(updated.record),
                    updated.updated,
                    updated.version,
                    updated.insurer,
                    updated.application_id,
                    expected_version,
                ),
            )
            if cursor.rowcount != 1:
                raise EditConflict(application.application_id)
        return updated

    # idempotency records

    def begin_idempotent(
        self,
        insurer: str,
        broker: str,
        key: str,
        fingerprint: str,
        retention_seconds: float,
        lease_seconds: float,
    ) -> Claim | IdempotencyState | Replay:
        """Claim a key for a request (a lease), or say why not: a replay of the committed
        answer, another request holding the lease, or another request that used the key.

        A claim whose lease lapsed was never completed (completing commits with the write), so
        nothing was done under it: the key is free again, for any body."""
        flight = (insurer, broker, key)
        with self._flight_lock:
            running = self._in_flight.get(flight)
            if running is not None:
                return "in-progress" if running == fingerprint else "mismatch"
            self._in_flight[flight] = fingerprint
        try:
            state = self._claim(insurer, broker, key, fingerprint, retention_seconds, lease_seconds)
        except BaseException:
            self.let_go(insurer, broker, key)
            raise
        if not isinstance(state, Claim):
            self.let_go(insurer, broker, key)
        return state

    def let_go(self, insurer: str, broker: str, key: str) -> None:
        """The request holding the key in this process has ended (its record is in the store)."""
        with self._flight_lock:
            self._in_flight.pop((insurer, broker, key), None)

    def _claim(
        self,
        insurer: str,
        broker: str,
        key: str,
        fingerprint: str,
        retention_seconds: float,
        lease_seconds: float,
    ) -> Claim | IdempotencyState | Replay:
        now = time.time()
        claim = Claim(secrets.token_hex(8), now + lease_seconds)
        with self._transaction() as db:
            db.execute(
                "DELETE FROM idempotency WHERE insurer=? AND broker=? AND key=? AND ("
                "created<? OR (state='in-progress' AND COALESCE(lease_until, 0)<?))",
                (insurer, broker, key, now - retention_seconds, now),
            )
            row = db.execute(
                "SELECT * FROM idempotency WHERE insurer=? AND broker=? AND key=?",
                (insurer, broker, key),
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO idempotency (insurer, broker, key, fingerprint, state, created, "
                    "token, lease_until) VALUES (?,?,?,?,'in-progress',?,?,?)",
                    (insurer, broker, key, fingerprint, now, claim.token, claim.lease_until),
                )
                return claim
        if row["fingerprint"] != fingerprint:
            return "mismatch"
        if row["state"] == "in-progress":
            return "in-progress"
        return Replay(
            status=int(row["status"]),
            headers=json.loads(row["headers"]),
            body=bytes(row["body"]),
            created=float(row["created"]),
        )

    def complete_idempotent(
        self,
        insurer: str,
        broker: str,
        key: str,
        claim: Claim,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
    ) -> None:
        """Store the answer under the key; raises ClaimLost if the lease went to another request
        (inside a unit, that rolls the write back: it is done once, by the lease's holder)."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE idempotency SET state='done', status=?, headers=?, body=?, "
                "lease_until=NULL WHERE insurer=? AND broker=? AND key=? AND token=? "
                "AND state='in-progress'",
                (status, json.dumps(dict(headers)), body, insurer, broker, key, claim.token),
            )
            if cursor.rowcount != 1:
                raise ClaimLost(key)

    def release_idempotent(self, insurer: str, broker: str, key: str, claim: Claim) -> None:
        """Forget a claimed key whose request was rejected, so the key may be used again."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM idempotency WHERE insurer=? AND broker=? AND key=? AND token=? "
                "AND state='in-progress'",
                (insurer, broker, key, claim.token),
            )

    def purge_idempotent(self, retention_seconds: float) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM idempotency WHERE created<?", (time.time() - retention_seconds,)
            )
            return cursor.rowcount


def _case(row: sqlite3.Row) -> Case:
    return Case(
        insurer=row["insurer"],
        case_id=row["case_id"],
        broker=row["broker"],
        status=row["status"],
        draft=Draft.from_dict(json.loads(row["draft"])),
        premium=json.loads(row["premium"]) if row["premium"] else None,
        offer_id=row["offer_id"],
        version=int(row["version"]),
        created=row["created"],
        updated=row["updated"],
    )


def _application(row: sqlite3.Row) -> Application:
    return Application(
        insurer=row["insurer"],
        application_id=row["application_id"],
        offer_id=row["offer_id"],
        broker=row["broker"],
        state=row["state"],
        record=json.loads(row["record"]),
        created=row["created"],
        updated=row["updated"],
        version=int(row["version"]),
    )
