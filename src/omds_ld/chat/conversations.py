"""Conversations kept in the embedded store: each a protocol in the scenario checker's format,
owned by the browser session that started it (a restart keeps them; they can be deleted)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_conversations (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, created REAL NOT NULL, events TEXT NOT NULL
);
"""


def owner_of(browser_session: str) -> str:
    """How a browser session is kept: a hash, never the cookie's value."""
    return hashlib.sha256(browser_session.encode()).hexdigest()


class Conversations:
    """The conversations of the chat page, in one SQLite file beside the insurers' store."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def start(self, owner: str, first: dict[str, Any]) -> str:
        conversation = uuid.uuid4().hex
        with self._lock:
            self._db.execute(
                "INSERT INTO chat_conversations VALUES (?,?,?,?)",
                (conversation, owner, time.time(), json.dumps([first])),
            )
        return conversation

    def events(self, conversation: str, owner: str) -> list[dict[str, Any]] | None:
        """The conversation's events, or None if it is not this owner's (or does not exist)."""
        with self._lock:
            row = self._db.execute(
                "SELECT events FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
        return None if row is None else list(json.loads(row[0]))

    def append(self, conversation: str, owner: str, event: dict[str, Any]) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute(
                "SELECT events FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
            if row is None:
                self._db.execute("ROLLBACK")
                return False
            events = [*json.loads(row[0]), event]
            self._db.execute(
                "UPDATE chat_conversations SET events=? WHERE id=?",
                (json.dumps(events), conversation),
            )
            self._db.execute("COMMIT")
        return True

    def delete(self, conversation: str, owner: str) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM chat_conversations WHERE id=? AND owner=?", (conversation, owner)
            )
        return cursor.rowcount == 1
