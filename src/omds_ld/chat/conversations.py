"""Conversations kept in the embedded store: each a protocol in the scenario checker's format,
owned by the browser session that started it (a restart keeps them; they can be deleted).

A conversation is kept for ``keep_seconds`` after its last event (the operator's
``--chat-keep-hours``, a day by default), then deleted with everything the model was told. The
norm's personal fields in its events (a body's name, birth date, address, IBAN; the same
values in an answer's text) are masked before they are written, unless the person asked to keep
them when the conversation started: what the page shows again and the protocol download holds.

One row per event: adding an event costs the same whatever the conversation's length, and a
reader asks for the events after the last one it has. A conversation is bounded: at most
``MAX_EVENTS`` events and ``MAX_BYTES`` of them."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from omds_ld.norm.personal import masked
from omds_ld.sqlite import connect, transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_conversations (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, created REAL NOT NULL, events TEXT NOT NULL,
    history TEXT
);
CREATE TABLE IF NOT EXISTS chat_keys (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS chat_events (
    conversation TEXT NOT NULL, idx INTEGER NOT NULL, event TEXT NOT NULL,
    PRIMARY KEY (conversation, idx)
);
"""
MAX_EVENTS = 2000
MAX_BYTES = 16 * 1024 * 1024
KEEP_SECONDS = 24 * 3600.0  # how long a conversation is kept after its last event, by default
PURGE_EVERY = 60.0  # the oldest conversations are looked for at most this often


class ConversationFull(Exception):
    """The conversation holds as much as a conversation may: start a new one."""


def owner_of(browser_session: str) -> str:
    """How a browser session is kept: a hash, never the cookie's value."""
    return hashlib.sha256(browser_session.encode()).hexdigest()


class Conversations:
    """The conversations of the chat page, in one SQLite file beside the insurers' store."""

    def __init__(self, path: Path, keep_seconds: float = KEEP_SECONDS) -> None:
        self.keep_seconds = keep_seconds
        # looked for every minute, or more often where conversations are kept less than ten
        self.purge_every = min(PURGE_EVERY, keep_seconds / 10)
        self._purged = 0.0
        self._lock = threading.Lock()
        self._db = connect(path)
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(chat_conversations)")}
        if "history" not in columns:  # a store from before the page could chat with a model
            self._db.execute("ALTER TABLE chat_conversations ADD COLUMN history TEXT")
        for column in ("size", "count", "personal"):
            if column not in columns:
                self._db.execute(
                    f"ALTER TABLE chat_conversations ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
                )
        if "touched" not in columns:  # the last event's time: a store from before has created
            self._db.execute("ALTER TABLE chat_conversations ADD COLUMN touched REAL")
            self._db.execute("UPDATE chat_conversations SET touched=created")
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS chat_conversations_touched ON chat_conversations (touched)"
        )
        self._move_old_events()
        self.purge()

    def purge(self, now: float | None = None) -> int:
        """Delete the conversations whose last event is older than ``keep_seconds``: how many."""
        now = time.time() if now is None else now
        with self._lock, transaction(self._db) as db:
            self._purged = now
            old = [
                str(row[0])
                for row in db.execute(
                    "SELECT id FROM chat_conversations WHERE touched < ?",
                    (now - self.keep_seconds,),
                )
            ]
            for cid in old:
                db.execute("DELETE FROM chat_events WHERE conversation=?", (cid,))
                db.execute("DELETE FROM chat_conversations WHERE id=?", (cid,))
        return len(old)

    def _purge_now_and_then(self) -> None:
        if time.time() - self._purged > self.purge_every:
            self.purge()

    def _move_old_events(self) -> None:
        """A store from before one row per event: its conversations' events move to rows."""
        with self._lock, transaction(self._db) as db:
            for cid, events in db.execute(
                "SELECT id, events FROM chat_conversations WHERE events != '[]'"
            ).fetchall():
                rows = [json.dumps(e, ensure_ascii=False) for e in json.loads(events)]
                db.executemany(
                    "INSERT OR IGNORE INTO chat_events VALUES (?,?,?)",
                    [(cid, index, row) for index, row in enumerate(rows)],
                )
                db.execute(
                    "UPDATE chat_conversations SET events='[]', count=?, size=? WHERE id=?",
                    (len(rows), sum(map(len, rows)), cid),
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def key(self) -> bytes:
        """The page's key for signing browser sessions, made once and kept (a restart keeps
        every browser's conversations)."""
        with self._lock, transaction(self._db) as db:
            row = db.execute("SELECT value FROM chat_keys WHERE name='cookies'").fetchone()
            if row is not None:
                return bytes(row[0])
            made = secrets.token_bytes(32)
            db.execute("INSERT INTO chat_keys VALUES ('cookies', ?)", (made,))
            return made

    def start(self, owner: str, first: dict[str, Any], keep_personal: bool = False) -> str:
        """A new conversation; ``keep_personal``: the person asked to keep the personal data
        in its events (else they are masked)."""
        self._purge_now_and_then()
        conversation = uuid.uuid4().hex
        row = json.dumps(first, ensure_ascii=False, default=str)
        started = time.time()
        with self._lock, transaction(self._db) as db:
            db.execute(
                "INSERT INTO chat_conversations "
                "(id, owner, created, touched, events, count, size, personal) "
                "VALUES (?,?,?,?,'[]',1,?,?)",
                (conversation, owner, started, started, len(row), int(keep_personal)),
            )
            db.execute("INSERT INTO chat_events VALUES (?,0,?)", (conversation, row))
        return conversation

    def size(self, conversation: str, owner: str) -> tuple[int, int] | None:
        """How many events the conversation has and their bytes; None if not this owner's."""
        with self._lock:
            row = self._db.execute(
                "SELECT count, size FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def events(self, conversation: str, owner: str, after: int = -1) -> list[dict[str, Any]] | None:
        """The conversation's events after index ``after`` (all of them by default), or None
        if it is not this owner's (or does not exist)."""
        rows = self.rows(conversation, owner, after)
        return None if rows is None else [json.loads(row) for row in rows]

    def rows(self, conversation: str, owner: str, after: int = -1) -> list[str] | None:
        """The same as kept, one JSON text each (for sending on unread), or None."""
        with self._lock:
            if not self._db.execute(
                "SELECT 1 FROM chat_conversations WHERE id=? AND owner=?", (conversation, owner)
            ).fetchone():
                return None
            rows = self._db.execute(
                "SELECT event FROM chat_events WHERE conversation=? AND idx>? ORDER BY idx",
                (conversation, after),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def append(self, conversation: str, owner: str, event: dict[str, Any]) -> int | None:
        """Add an event; its index in the conversation, or None if the conversation is gone.
        ConversationFull past ``MAX_EVENTS`` or ``MAX_BYTES``."""
        self._purge_now_and_then()
        with self._lock, transaction(self._db) as db:
            found = db.execute(
                "SELECT count, size, personal FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
            if found is None:
                return None
            count, size = int(found[0]), int(found[1])
            kept = event if found[2] else masked(event)
            row = json.dumps(kept, ensure_ascii=False, default=str)
            if count >= MAX_EVENTS or size + len(row) > MAX_BYTES:
                raise ConversationFull(
                    f"the conversation holds {count} events ({size} bytes), as many as one may"
                )
            db.execute("INSERT INTO chat_events VALUES (?,?,?)", (conversation, count, row))
            db.execute(
                "UPDATE chat_conversations SET count=?, size=?, touched=? WHERE id=?",
                (count + 1, size + len(row), time.time(), conversation),
            )
        return count

    def history(self, conversation: str, owner: str) -> list[dict[str, Any]] | None:
        """What the model has been told so far, in its provider's format (None: nothing yet)."""
        with self._lock:
            row = self._db.execute(
                "SELECT history FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
        return list(json.loads(row[0])) if row and row[0] else None

    def keep_history(self, conversation: str, owner: str, history: list[dict[str, Any]]) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE chat_conversations SET history=? WHERE id=? AND owner=?",
                (json.dumps(history, ensure_ascii=False, default=str), conversation, owner),
            )

    def keep_personal(self, conversation: str, owner: str, keep: bool) -> bool:
        """From now on, keep the personal data of the conversation's events as they are (or
        mask them again); False if it is not this owner's. What was kept masked stays masked."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE chat_conversations SET personal=? WHERE id=? AND owner=?",
                (int(keep), conversation, owner),
            )
        return cursor.rowcount == 1

    def keeps_personal(self, conversation: str, owner: str) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT personal FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
        return bool(row and row[0])

    def delete(self, conversation: str, owner: str) -> bool:
        with self._lock, transaction(self._db) as db:
            cursor = db.execute(
                "DELETE FROM chat_conversations WHERE id=? AND owner=?", (conversation, owner)
            )
            if cursor.rowcount == 1:
                db.execute("DELETE FROM chat_events WHERE conversation=?", (conversation,))
        return cursor.rowcount == 1
