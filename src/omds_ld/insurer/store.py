"""The embedded store: business cases, offers and idempotency records in one SQLite file (WAL)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from omds_ld.insurer.draft import Draft

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
CREATE TABLE IF NOT EXISTS idempotency (
    insurer TEXT NOT NULL, broker TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    state TEXT NOT NULL, status INTEGER, headers TEXT, body BLOB, created REAL NOT NULL,
    PRIMARY KEY (insurer, broker, key)
);
"""


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
class Replay:
    """A stored answer to replay for a retried request."""

    status: int
    headers: Mapping[str, str]
    body: bytes


IdempotencyState = Literal["new", "in-progress", "mismatch"]


class EditConflict(Exception):
    """The case changed between reading and writing it."""


class Store:
    """SQLite in WAL mode; one connection, serialised by a lock, safe to use from threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

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

    # idempotency records

    def begin_idempotent(
        self, insurer: str, broker: str, key: str, fingerprint: str, retention_seconds: float
    ) -> IdempotencyState | Replay:
        """Claim a key for a request, or say why not: a replay, in progress, or another request."""
        now = time.time()
        with self._transaction() as db:
            db.execute(
                "DELETE FROM idempotency WHERE insurer=? AND broker=? AND key=? AND created<?",
                (insurer, broker, key, now - retention_seconds),
            )
            row = db.execute(
                "SELECT * FROM idempotency WHERE insurer=? AND broker=? AND key=?",
                (insurer, broker, key),
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO idempotency VALUES (?,?,?,?,?,?,?,?,?)",
                    (insurer, broker, key, fingerprint, "in-progress", None, None, None, now),
                )
                return "new"
        if row["fingerprint"] != fingerprint:
            return "mismatch"
        if row["state"] == "in-progress":
            return "in-progress"
        return Replay(
            status=int(row["status"]), headers=json.loads(row["headers"]), body=bytes(row["body"])
        )

    def complete_idempotent(
        self,
        insurer: str,
        broker: str,
        key: str,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE idempotency SET state='done', status=?, headers=?, body=? "
                "WHERE insurer=? AND broker=? AND key=?",
                (status, json.dumps(dict(headers)), body, insurer, broker, key),
            )

    def release_idempotent(self, insurer: str, broker: str, key: str) -> None:
        """Forget a claimed key whose request was rejected, so the key may be used again."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM idempotency WHERE insurer=? AND broker=? AND key=? AND state='in-progress'",
                (insurer, broker, key),
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
