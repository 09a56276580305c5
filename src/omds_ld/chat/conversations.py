"""Conversations kept in the embedded store: each a protocol in the scenario checker's format,
owned by the browser session that started it (a restart keeps them; they can be deleted)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from omds_ld.sqlite import connect, transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_conversations (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, created REAL NOT NULL, events TEXT NOT NULL,
    history TEXT
);
"""


def owner_of(browser_session: str) -> str:
    """How a browser session is kept: a hash, never the cookie's value."""
    return hashlib.sha256(browser_session.encode()).hexdigest()


class Conversations:
    """The conversations of the chat page, in one SQLite file beside the insurers' store."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = connect(path)
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(chat_conversations)")}
        if "history" not in columns:  # a store from before the page could chat with a model
            self._db.execute("ALTER TABLE chat_conversations ADD COLUMN history TEXT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def start(self, owner: str, first: dict[str, Any]) -> str:
        conversation = uuid.uuid4().hex
        with self._lock:
            self._db.execute(
                "INSERT INTO chat_conversations (id, owner, created, events) VALUES (?,?,?,?)",
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

    def append(self, conversation: str, owner: str, event: dict[str, Any]) -> int | None:
        """Add an event; its index in the conversation, or None if the conversation is gone."""
        with self._lock, transaction(self._db) as db:
            row = db.execute(
                "SELECT events FROM chat_conversations WHERE id=? AND owner=?",
                (conversation, owner),
            ).fetchone()
            if row is None:
                return None
            events = [*json.loads(row[0]), event]
            db.execute(
                "UPDATE chat_conversations SET events=? WHERE id=?",
                (json.dumps(events, ensure_ascii=False, default=str), conversation),
            )
        return len(events) - 1

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

    def delete(self, conversation: str, owner: str) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM chat_conversations WHERE id=? AND owner=?", (conversation, owner)
            )
        return cursor.rowcount == 1
