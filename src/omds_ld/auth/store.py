"""What the example authorization server keeps, in its own SQLite file beside the store: signing
keys, clients, authorization codes and refresh tokens. Secrets, codes and refresh tokens are kept
as hashes only; a signing key's private part never leaves this file and the process."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from joserfc.jwk import ECKey, KeySet

from omds_ld.sqlite import connect, transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS auth_keys (
    kid TEXT PRIMARY KEY, jwk TEXT NOT NULL, created REAL NOT NULL, retired REAL
);
CREATE TABLE IF NOT EXISTS auth_clients (
    client_id TEXT PRIMARY KEY, secret_hash TEXT, metadata TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS auth_codes (
    code_hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, redirect_uri TEXT, scope TEXT,
    subject TEXT NOT NULL, resource TEXT NOT NULL, challenge TEXT, challenge_method TEXT,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS auth_refresh_tokens (
    token_hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, subject TEXT NOT NULL, scope TEXT,
    resource TEXT NOT NULL, expires REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0
);
"""


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Grant:
    """An authorization code or a refresh token, as kept: to whom, for what, until when."""

    client_id: str
    subject: str
    scope: str
    resource: str
    expires: float
    redirect_uri: str = ""
    challenge: str = ""
    challenge_method: str = ""


class AuthStore:
    """One SQLite file; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._db = connect(path)
        self._db.executescript(_SCHEMA)
        self._published: tuple[float, KeySet] | None = None  # the public keys, read recently

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, transaction(self._db) as db:
            yield db

    # signing keys

    def signing_key(self) -> ECKey:
        """The newest key not retired; made on first use."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT jwk FROM auth_keys WHERE retired IS NULL ORDER BY created DESC LIMIT 1"
            ).fetchone()
            if row is not None:
                return ECKey.import_key(json.loads(row[0]))
            return self._new_key(db)

    def rotate_key(self, retire_after: float) -> str:
        """A new signing key from now on; keys before it stay published (their tokens still
        verify) and are retired ``retire_after`` seconds from now, once no token of theirs can
        still be valid. Returns the new key's id."""
        with self._transaction() as db:
            db.execute(
                "UPDATE auth_keys SET retired=? WHERE retired IS NULL",
                (time.time() + retire_after,),
            )
            return str(self._new_key(db).kid)

    @staticmethod
    def _new_key(db: sqlite3.Connection) -> ECKey:
        kid = secrets.token_urlsafe(12)
        key = ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": "ES256"})
        db.execute(
            "INSERT INTO auth_keys VALUES (?,?,?,NULL)",
            (kid, json.dumps(key.as_dict(private=True)), time.time()),
        )
        return key

    def public_keys(self, kid: str | None = None, fresh: bool = False) -> KeySet:
        """Every key whose tokens may still be valid: the current one and those retiring (read
        again after ten seconds, at once when a token names a key not among them, or when
        ``fresh`` is asked for: the published JWKS always is)."""
        published = self._published
        recent = not fresh and published is not None and time.monotonic() - published[0] < 10
        if recent and published and (kid is None or any(k.kid == kid for k in published[1])):
            return published[1]
        self.signing_key()  # there is always one
        with self._lock:
            rows = self._db.execute(
                "SELECT jwk FROM auth_keys WHERE retired IS NULL OR retired > ?", (time.time(),)
            ).fetchall()
        public = []
        for (raw,) in rows:
            key = ECKey.import_key(json.loads(raw))
            public.append(ECKey.import_key(key.as_dict(private=False)))
        keys = KeySet(public)  # type: ignore[arg-type]
        self._published = (time.monotonic(), keys)
        return keys

    # clients

    def add_client(self, client_id: str, secret: str | None, metadata: Mapping[str, Any]) -> None:
        """Register or replace a client (a new secret replaces the old one)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO auth_clients VALUES (?,?,?,?)",
                (client_id, digest(secret) if secret else None, json.dumps(dict(metadata)),
                 time.time()),
            )  # fmt: skip

    def client(self, client_id: str) -> tuple[str | None, dict[str, Any]] | None:
        """A client's secret hash and metadata, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT secret_hash, metadata FROM auth_clients WHERE client_id=?", (client_id,)
            ).fetchone()
        return None if row is None else (row[0], dict(json.loads(row[1])))

    @staticmethod
    def secret_matches(secret_hash: str | None, secret: str | None) -> bool:
        return bool(secret_hash and secret) and hmac.compare_digest(
            secret_hash or "", digest(secret or "")
        )

    # authorization codes: used once

    def add_code(self, code: str, grant: Grant) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM auth_codes WHERE expires < ?", (time.time(),))
            db.execute(
                "INSERT INTO auth_codes VALUES (?,?,?,?,?,?,?,?,?)",
                (digest(code), grant.client_id, grant.redirect_uri, grant.scope, grant.subject,
                 grant.resource, grant.challenge, grant.challenge_method, grant.expires),
            )  # fmt: skip

    def code(self, code: str, client_id: str) -> Grant | None:
        with self._lock:
            row = self._db.execute(
                "SELECT client_id, subject, scope, resource, expires, redirect_uri, challenge, "
                "challenge_method FROM auth_codes WHERE code_hash=? AND client_id=? AND expires>?",
                (digest(code), client_id, time.time()),
            ).fetchone()
        return None if row is None else Grant(*row)

    def use_code(self, code: str) -> bool:
        """Delete the code; False if it was used already (a second use gets nothing)."""
        with self._transaction() as db:
            return (
                db.execute("DELETE FROM auth_codes WHERE code_hash=?", (digest(code),)).rowcount
                == 1
            )

    # refresh tokens: rotated on use

    def add_refresh_token(self, token: str, grant: Grant) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM auth_refresh_tokens WHERE expires < ?", (time.time(),))
            db.execute(
                "INSERT INTO auth_refresh_tokens VALUES (?,?,?,?,?,?,0)",
                (digest(token), grant.client_id, grant.subject, grant.scope, grant.resource,
                 grant.expires),
            )  # fmt: skip

    def refresh_token(self, token: str) -> Grant | None:
        with self._lock:
            row = self._db.execute(
                "SELECT client_id, subject, scope, resource, expires FROM auth_refresh_tokens "
                "WHERE token_hash=? AND revoked=0 AND expires>?",
                (digest(token), time.time()),
            ).fetchone()
        return None if row is None else Grant(*row)

    def revoke_refresh_token(self, token: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE auth_refresh_tokens SET revoked=1 WHERE token_hash=?", (digest(token),)
            )
