"""Access tokens of the norm: JWTs after RFC 9068, signed by an authorization server's key and
checked by every resource (an MCP endpoint, an insurer's interface) against that server's JWKS.

Every signing and checking step is joserfc's; this module only says which claims a token must
carry: issuer, audience (the one resource it is for, RFC 8707), expiry, subject, scope.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import ExpiredTokenError, JoseError
from joserfc.jwk import KeySet

from omds_ld.auth.identity import (
    ACCESS_TOKEN_TYPE,
    ALGORITHM,
    LEEWAY_SECONDS,
    READ,
    SCOPES,
    TOKEN_EXCHANGE,
    TOKEN_TYPE,
    WRITE,
    Identity,
    TokenRefused,
)

__all__ = [
    "ACCESS_TOKEN_TYPE", "ALGORITHM", "LEEWAY_SECONDS", "READ", "SCOPES", "TOKEN_EXCHANGE",
    "TOKEN_TYPE", "WRITE", "Identity", "RemoteKeys", "TokenRefused", "check", "issue", "key_id",
]  # fmt: skip


def issue(private_key: Any, claims: Mapping[str, Any]) -> str:
    """A signed access token with these claims (the key names itself by ``kid``)."""
    header = {"alg": ALGORITHM, "kid": private_key.kid, "typ": TOKEN_TYPE}
    return jwt.encode(header, dict(claims), private_key, algorithms=[ALGORITHM])


def check(
    token: str,
    keys: KeySet,
    issuer: str,
    audience: str,
    revoked: Callable[[str], bool] | None = None,
) -> Identity:
    """The identity of a token signed by one of ``keys``, issued by ``issuer`` for ``audience``,
    not expired, of a grant not ``revoked`` (where the authorization server is at hand to
    say); else TokenRefused saying which of these failed."""
    try:
        decoded = jwt.decode(token, keys, algorithms=[ALGORITHM])
    except JoseError as error:  # malformed, unknown key, bad signature
        raise TokenRefused(f"the token's signature does not verify ({error.error})") from None
    except ValueError as error:
        raise TokenRefused(f"the token is no JWT ({error})") from None
    if str(decoded.header.get("typ", "")).lower() not in (TOKEN_TYPE, f"application/{TOKEN_TYPE}"):
        raise TokenRefused("the token is no access token (typ at+jwt)")
    claims = decoded.claims
    registry = jwt.JWTClaimsRegistry(
        leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": audience},
        exp={"essential": True},
        sub={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        raise TokenRefused("the token has expired") from None
    except JoseError as error:
        claim = getattr(error, "claim", "") or error.error
        if claim == "iss":
            raise TokenRefused(f"the token was not issued by {issuer}") from None
        if claim == "aud":
            raise TokenRefused(f"the token is not for this resource ({audience})") from None
        raise TokenRefused(f"the token's claims do not hold ({error.description})") from None
    grant = str(claims.get("sid", ""))
    if grant and revoked is not None and revoked(grant):
        raise TokenRefused(
            "the token's grant was revoked (its code or a refresh token was used again, or "
            "the grant was revoked)"
        )
    actor = claims.get("act")
    return Identity(
        subject=str(claims["sub"]),
        client_id=str(claims.get("client_id", "")),
        audience=audience,
        scopes=frozenset(str(claims.get("scope", "")).split()),
        expires=float(claims["exp"]),
        token_id=str(claims.get("jti", "")),
        actor=str(actor.get("sub")) if isinstance(actor, dict) else None,
        name=str(claims.get("name", ""))[:200],
        grant=grant,
    )


class RemoteKeys:
    """An authorization server's JWKS, fetched over HTTP and kept; fetched again when a token names
    a key not in it (the server rotated its key), at most every ``min_refetch`` seconds."""

    def __init__(
        self,
        jwks_uri: str,
        client: httpx.AsyncClient,
        ttl: float = 3600.0,
        min_refetch: float = 30.0,
    ) -> None:
        self.jwks_uri = jwks_uri
        self.client = client
        self.ttl = ttl
        self.min_refetch = min_refetch
        self._keys: KeySet | None = None
        self._fetched = 0.0
        self._lock = asyncio.Lock()

    def revoked(self, grant: str) -> bool:
        """A remote authorization server's revocations are not seen here: they reach this
        resource when the server refuses to exchange the token, and at its expiry."""
        return False

    async def key_set(self, kid: str | None = None) -> KeySet:
        now = time.monotonic()
        stale = self._keys is None or now - self._fetched > self.ttl
        unknown = kid is not None and self._keys is not None and not _has(self._keys, kid)
        if stale or (unknown and now - self._fetched > self.min_refetch):
            async with self._lock:
                if self._fetched <= now:  # nobody fetched while this waited
                    try:
                        answer = await self.client.get(self.jwks_uri)
                        answer.raise_for_status()
                        self._keys = KeySet.import_key_set(answer.json())
                        self._fetched = time.monotonic()
                    except (httpx.HTTPError, ValueError, JoseError) as error:
                        if self._keys is None:
                            raise TokenRefused(
                                f"the authorization server's keys cannot be read ({error})",
                                reason="temporarily_unavailable",
                            ) from None
        assert self._keys is not None
        return self._keys


def _has(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys)


def key_id(token: str) -> str | None:
    """The ``kid`` a token's header names (unverified: only to pick the key set to verify with)."""
    try:
        header = jws.extract_compact(token.encode()).headers()
    except (JoseError, ValueError):
        return None
    kid = header.get("kid")
    return str(kid) if kid is not None else None
