"""The chat page's broker login, where the MCP endpoints want access tokens (serve --require-token).

The page is a confidential OAuth client of the insurers' authorization server: the browser is sent
to log in once (authorization code with PKCE, one grant for every MCP endpoint, RFC 8707 resources),
the page redeems the code for a token per endpoint and keeps them, with the refresh token, in this
process's memory only, under the browser session that logged in. The browser never holds a token.
Every MCP request of that browser's conversations carries the token for its endpoint, renewed
before it expires.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import httpx2

from omds_ld.auth.tokens import SCOPES

RENEW_BEFORE_SECONDS = 30
PENDING_SECONDS = 600  # a login started and not finished is forgotten after this
MAX_PENDING = 1000  # logins started and not finished, at most: past it the oldest is forgotten


class LoginFailed(Exception):
    """The authorization server gave no tokens; the message says why."""


@dataclass(frozen=True)
class LoginSettings:
    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    redirect_uri: str
    resources: tuple[str, ...]


class BrokerTokens:
    """One logged-in broker's tokens, one per MCP endpoint, renewed by the refresh token."""

    def __init__(
        self,
        settings: LoginSettings,
        http: httpx.AsyncClient,
        subject: str,
        refresh_token: str,
        tokens: dict[str, tuple[str, float]],
    ) -> None:
        self.settings = settings
        self.http = http
        self.subject = subject
        self._refresh = refresh_token
        self._tokens = tokens
        self._lock = asyncio.Lock()
        self.revoked = False

    async def revoke(self) -> None:
        """Logged out: the grant is revoked at the authorization server (RFC 7009; every refresh
        token of it), the access tokens dropped; nothing of this broker is used again."""
        self.revoked = True
        self._tokens.clear()
        async with self._lock:
            with contextlib.suppress(httpx.HTTPError):
                await self.http.post(
                    f"{self.settings.issuer}/revoke",
                    data={"token": self._refresh, "token_type_hint": "refresh_token"},
                    auth=(self.settings.client_id, self.settings.client_secret),
                )

    async def token(self, resource: str) -> str:
        if self.revoked:
            raise LoginFailed("logged out: log in again")
        kept = self._tokens.get(resource)
        if kept and kept[1] - RENEW_BEFORE_SECONDS > time.time():
            return kept[0]
        async with self._lock:  # a refresh token is used once: renewals one after another
            kept = self._tokens.get(resource)
            if kept and kept[1] - RENEW_BEFORE_SECONDS > time.time():
                return kept[0]
            answer = await _token_request(
                self.settings, self.http,
                {"grant_type": "refresh_token", "refresh_token": self._refresh,
                 "resource": resource},
            )  # fmt: skip
            self._refresh = str(answer.get("refresh_token") or self._refresh)
            self._tokens[resource] = _kept(answer)
            return self._tokens[resource][0]


def _kept(answer: dict[str, Any]) -> tuple[str, float]:
    return str(answer["access_token"]), time.time() + float(answer.get("expires_in", 60))


async def _token_request(
    settings: LoginSettings, http: httpx.AsyncClient, form: dict[str, str]
) -> dict[str, Any]:
    try:
        answer = await http.post(
            f"{settings.issuer}/token", data=form, auth=(settings.client_id, settings.client_secret)
        )
    except httpx.HTTPError as error:
        raise LoginFailed(f"the authorization server cannot be reached ({error})") from None
    try:
        body: dict[str, Any] = answer.json()
    except ValueError:
        body = {}
    if answer.status_code != 200 or "access_token" not in body:
        why = body.get("error_description") or body.get("error") or f"HTTP {answer.status_code}"
        raise LoginFailed(f"the authorization server refused: {why}")
    return body


class Logins:
    """Logins started and done, by browser session (the owner hash of the chat page's cookie)."""

    def __init__(self, settings: LoginSettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.http = http
        # state → owner, verifier, when: in the order started, so the oldest are at the front
        self._pending: OrderedDict[str, tuple[str, str, float]] = OrderedDict()
        self._brokers: dict[str, BrokerTokens] = {}

    def of(self, owner: str) -> BrokerTokens | None:
        return self._brokers.get(owner)

    async def forget(self, owner: str) -> None:
        """Log the browser session's broker out: its grant revoked, its tokens gone."""
        broker = self._brokers.pop(owner, None)
        if broker is not None:
            await broker.revoke()

    def start(self, owner: str) -> str:
        """Where to send the browser to log in (PKCE S256, every MCP endpoint as a resource)."""
        now = time.time()
        while self._pending and (
            len(self._pending) >= MAX_PENDING
            or now - next(iter(self._pending.values()))[2] > PENDING_SECONDS
        ):
            self._pending.popitem(last=False)
        state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        self._pending[state] = (owner, verifier, now)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = [
            ("response_type", "code"), ("client_id", self.settings.client_id),
            ("redirect_uri", self.settings.redirect_uri), ("state", state),
            ("scope", " ".join(SCOPES)), ("code_challenge", challenge.rstrip(b"=").decode()),
            ("code_challenge_method", "S256"),
            *(("resource", resource) for resource in self.settings.resources),
        ]  # fmt: skip
        return f"{self.settings.issuer}/authorize?{urlencode(query)}"

    async def finish(self, owner: str, code: str, state: str) -> BrokerTokens:
        """Redeem the code the browser came back with: a token for each MCP endpoint."""
        pending = self._pending.pop(state, None)
        if pending is None or pending[0] != owner or time.time() - pending[2] > PENDING_SECONDS:
            raise LoginFailed("this login was not started here, or has expired; log in again")
        first, *others = self.settings.resources
        answer = await _token_request(
            self.settings, self.http,
            {"grant_type": "authorization_code", "code": code, "code_verifier": pending[1],
             "redirect_uri": self.settings.redirect_uri, "resource": first},
        )  # fmt: skip
        subject = _subject(str(answer["access_token"]))
        broker = BrokerTokens(
            self.settings, self.http, subject, str(answer.get("refresh_token", "")),
            {first: _kept(answer)},
        )  # fmt: skip
        for resource in others:
            await broker.token(resource)
        self._brokers[owner] = broker
        return broker


def _subject(token: str) -> str:
    """Whom a token of our own authorization server names (read, not checked: the page just got
    it from that server, and every MCP endpoint checks it)."""
    import json

    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims.get("sub", ""))


class BearerAuth(httpx2.Auth):
    """The broker's current token for one MCP endpoint on every request of the MCP client."""

    def __init__(self, broker: BrokerTokens, resource: str) -> None:
        self.broker = broker
        self.resource = resource

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {await self.broker.token(self.resource)}"
        yield request
