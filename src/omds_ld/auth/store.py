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
CREATE TABLE IF NOT EXISTS auth_families (
    family TEXT PRIMARY KEY, revoked REAL NOT NULL, expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS auth_own_secrets (
    client_id TEXT PRIMARY KEY, secret TEXT NOT NULL
);
"""
REVOKED_AT_LEAST = 24 * 3600.0  # a revoked grant is remembered: longer than an access token lives
# columns added since the first stores were written: (table, column, declaration)
_ADDED = (
    ("auth_codes", "used", "INTEGER NOT NULL DEFAULT 0"),
    ("auth_codes", "family", "TEXT NOT NULL DEFAULT ''"),
    ("auth_refresh_tokens", "family", "TEXT NOT NULL DEFAULT ''"),
    ("auth_refresh_tokens", "used", "INTEGER NOT NULL DEFAULT 0"),
    ("auth_clients", "address", "TEXT"),
    ("auth_clients", "self_registered", "INTEGER NOT NULL DEFAULT 0"),
    ("auth_clients", "last_used", "REAL"),
)


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
    # what a code and every refresh token descended from it share: revoked together
    family: str = ""


class AuthStore:
    """One SQLite file; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._db = connect(path)
        self._db.executescript(_SCHEMA)
        for table, column, declaration in _ADDED:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        self._published: tuple[float, KeySet] | None = None  # the public keys, read recently
        # revoked grants (families) until their last token would expire: every token check of
        # this process asks, so they are kept in memory as well
        self._revoked = {
            str(family): float(expires)
            for family, expires in self._db.execute(
                "SELECT family, expires FROM auth_families WHERE expires > ?", (time.time(),)
            )
        }

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

    def add_client(
        self,
        client_id: str,
        secret: str | None,
        metadata: Mapping[str, Any],
        *,
        address: str | None = None,
        self_registered: bool = False,
    ) -> None:
        """Register or replace a client (a new secret replaces the old one). A client that
        registered itself is kept with the address it came from, for the bounds on them."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO auth_clients (client_id, secret_hash, metadata, created, "
                "address, self_registered) VALUES (?,?,?,?,?,?)",
                (client_id, digest(secret) if secret else None, json.dumps(dict(metadata)),
                 time.time(), address, int(self_registered)),
            )  # fmt: skip

    def own_client_secret(self, client_id: str) -> str:
        """The secret of one of the server's own clients (its MCP servers, its pages): made on
        first use and kept beside the signing keys, so that every process on this store
        presents the same one (a second process never locks the first one's logins out)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO auth_own_secrets VALUES (?,?)",
                (client_id, secrets.token_urlsafe(32)),
            )
            (secret,) = db.execute(
                "SELECT secret FROM auth_own_secrets WHERE client_id=?", (client_id,)
            ).fetchone()
        return str(secret)

    def client(self, client_id: str) -> tuple[str | None, dict[str, Any]] | None:
        """A client's secret hash and metadata, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT secret_hash, metadata FROM auth_clients WHERE client_id=?", (client_id,)
            ).fetchone()
        return None if row is None else (row[0], dict(json.loads(row[1])))

    def self_registered(self, address: str, name: str, since: float) -> tuple[int, int, int]:
        """How many clients registered themselves: from this address under this client_name
        since ``since`` (a window: behind one proxy, another client software or an hour later is
        not locked out); from this address and never used, whatever their names (its share of
        the whole); and in all."""
        with self._lock:
            mine, held, total = self._db.execute(
                "SELECT COALESCE(SUM(address=? AND created>=? AND "
                "COALESCE(json_extract(metadata, '$.client_name'), '')=?), 0), "
                "COALESCE(SUM(address=? AND last_used IS NULL), 0), COUNT(*) "
                "FROM auth_clients WHERE self_registered=1",
                (address, since, name, address),
            ).fetchone()
        return int(mine), int(held), int(total)

    def forget_unused_clients(self, older_than: float) -> int:
        """Clients that registered themselves more than ``older_than`` seconds ago and never
        got a code are forgotten; how many."""
        with self._transaction() as db:
            return db.execute(
                "DELETE FROM auth_clients WHERE self_registered=1 AND last_used IS NULL "
                "AND created < ?",
                (time.time() - older_than,),
            ).rowcount

    def client_used(self, client_id: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE auth_clients SET last_used=? WHERE client_id=?", (time.time(), client_id)
            )

    @staticmethod
    def secret_matches(secret_hash: str | None, secret: str | None) -> bool:
        return bool(secret_hash and secret) and hmac.compare_digest(
            secret_hash or "", digest(secret or "")
        )

    # families: a code and the refresh tokens it brought, revoked as one

    def revoke_family(self, family: str) -> None:
        """Revoke every refresh token a code brought (a code or a refresh token was used again:
        someone else may hold it). Kept until the longest of them would have expired."""
        if not family:
            return
        with self._transaction() as db:
            (expires,) = db.execute(
                "SELECT MAX(expires) FROM auth_refresh_tokens WHERE family=?", (family,)
            ).fetchone()
            # and at least as long as an access token of the grant can live
            until = max(float(expires or 0), time.time() + REVOKED_AT_LEAST)
            db.execute(
                "INSERT OR REPLACE INTO auth_families VALUES (?,?,?)", (family, time.time(), until)
            )
            db.execute("UPDATE auth_refresh_tokens SET revoked=1 WHERE family=?", (family,))
            self._revoked[family] = until

    def grant_revoked(self, family: str) -> bool:
        """Whether the grant a token names (its ``sid``) was revoked: its access tokens are
        refused too (RFC 6749 4.1.2: a code used twice revokes what its first use brought)."""
        until = self._revoked.get(family)
        return until is not None and until > time.time()

    def _family_revoked(self, db: sqlite3.Connection, family: str) -> bool:
        return bool(family) and (
            db.execute("SELECT 1 FROM auth_families WHERE family=?", (family,)).fetchone()
            is not None
        )

    # authorization codes: redeemed once; a second try revokes what the first brought

    def add_code(self, code: str, grant: Grant) -> None:
        with self._transaction() as db:
            now = time.time()
            db.execute("DELETE FROM auth_codes WHERE expires < ?", (now,))
            db.execute("DELETE FROM auth_families WHERE expires < ?", (now,))
            db.execute(
                "INSERT INTO auth_codes (code_hash, client_id, redirect_uri, scope, subject, "
                "resource, challenge, challenge_method, expires, used, family) "
                "VALUES (?,?,?,?,?,?,?,?,?,0,?)",
                (digest(code), grant.client_id, grant.redirect_uri, grant.scope, grant.subject,
                 grant.resource, grant.challenge, grant.challenge_method, grant.expires,
                 grant.family),
            )  # fmt: skip
        self.client_used(grant.client_id)

    def code(self, code: str, client_id: str) -> Grant | None:
        """The grant of a code not redeemed yet. A code redeemed already is a code stolen or
        replayed: the tokens its first use brought are revoked, and it gives nothing."""
        with self._lock:
            row = self._db.execute(
                "SELECT client_id, subject, scope, resource, expires, redirect_uri, challenge, "
                "challenge_method, family, used FROM auth_codes "
                "WHERE code_hash=? AND client_id=? AND expires>?",
                (digest(code), client_id, time.time()),
            ).fetchone()
        if row is None:
            return None
        if row[-1]:
            self.revoke_family(str(row[-2]))
            return None
        return Grant(*row[:-1])

    def redeem_code(self, code: str) -> bool:
        """Mark the code used, atomically; False if it was used already (then what its first use
        brought is revoked)."""
        with self._transaction() as db:
            won = (
                db.execute(
                    "UPDATE auth_codes SET used=1 WHERE code_hash=? AND used=0", (digest(code),)
                ).rowcount
                == 1
            )
            row = db.execute(
                "SELECT family FROM auth_codes WHERE code_hash=?", (digest(code),)
            ).fetchone()
        if not won and row is not None:
            self.revoke_family(str(row[0]))
        return won

    def burn_code(self, code: str) -> None:
        """A code a token request failed with (a wrong PKCE verifier, another redirect URI) is
        used up: nobody may try again with it."""
        with self._lock:
            self._db.execute("UPDATE auth_codes SET used=1 WHERE code_hash=?", (digest(code),))

    # refresh tokens: each redeemed once, rotated; a second use revokes the whole family

    def add_refresh_token(self, token: str, grant: Grant) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM auth_refresh_tokens WHERE expires < ?", (time.time(),))
            db.execute(
                "INSERT INTO auth_refresh_tokens (token_hash, client_id, subject, scope, "
                "resource, expires, revoked, family, used) VALUES (?,?,?,?,?,?,?,?,0)",
                (digest(token), grant.client_id, grant.subject, grant.scope, grant.resource,
                 grant.expires, int(self._family_revoked(db, grant.family)), grant.family),
            )  # fmt: skip

    def refresh_token(self, token: str) -> Grant | None:
        """The grant of a refresh token that may be redeemed: not used, not revoked, not
        expired. One used already revokes its family and gives nothing."""
        with self._lock:
            row = self._db.execute(
                "SELECT client_id, subject, scope, resource, expires, family, used, revoked "
                "FROM auth_refresh_tokens WHERE token_hash=? AND expires>?",
                (digest(token), time.time()),
            ).fetchone()
        if row is None:
            return None
        client_id, subject, scope, resource, expires, family, used, revoked = row
        if used:
            self.revoke_family(str(family))
        if used or revoked:
            return None
        return Grant(client_id, subject, scope, resource, expires, family=str(family))

    def redeem_refresh_token(self, token: str) -> bool:
        """Mark the refresh token used, atomically: of concurrent uses one wins; the others are
        reuse, which revokes the family (the winner's new token included)."""
        with self._transaction() as db:
            won = (
                db.execute(
                    "UPDATE auth_refresh_tokens SET used=1 WHERE token_hash=? AND used=0 "
                    "AND revoked=0",
                    (digest(token),),
                ).rowcount
                == 1
            )
            row = db.execute(
                "SELECT family FROM auth_refresh_tokens WHERE token_hash=?", (digest(token),)
            ).fetchone()
        if not won and row is not None:
            self.revoke_family(str(row[0]))
        return won

    def revoke_refresh_token(self, token: str) -> None:
        """Revoke a refresh token and its whole family (RFC 7009 revocation of the grant)."""
        with self._lock:
            row = self._db.execute(
                "SELECT family FROM auth_refresh_tokens WHERE token_hash=?", (digest(token),)
            ).fetchone()
            self._db.execute(
                "UPDATE auth_refresh_tokens SET revoked=1 WHERE token_hash=?", (digest(token),)
            )
        if row is not None:
            self.revoke_family(str(row[0]))
