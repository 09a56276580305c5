"""How the MCP server authenticates at the insurer: never with the token a broker sent it (the MCP
specification forbids passing it through), but with a token of its own for the insurer's
interface, from the insurer's authorization server:

- as the calling broker, by token exchange (RFC 8693) of the broker's token, when brokers
  authenticate at the MCP server;
- as itself (a software house's client, acting for its broker), by client credentials, when
  nobody authenticates at the MCP server (stdio, or HTTP with authorization off).

Tokens are kept until shortly before they expire; ``httpx`` speaks to the token endpoint, with the
client's secret in HTTP Basic authentication (RFC 6749 2.3.1).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass

import httpx

from omds_ld.auth.identity import ACCESS_TOKEN_TYPE, SCOPES, TOKEN_EXCHANGE, UpstreamTokenError

RENEW_BEFORE_SECONDS = 30  # a token is renewed this long before it expires
MAX_KEPT = 10_000  # exchanged tokens kept (one per broker token and insurer)


@dataclass(frozen=True)
class ClientSecret:
    """A confidential client of the insurer's authorization server."""

    token_url: str
    client_id: str
    client_secret: str


class UpstreamTokens:
    """Tokens for one insurer's interface (``resource``), kept until shortly before expiry."""

    def __init__(
        self, client: ClientSecret, resource: str, http: httpx.AsyncClient | None = None
    ) -> None:
        self.client = client
        self.resource = resource
        self.http = http or httpx.AsyncClient(timeout=10)
        self._kept: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def _token(self, key: str, form: dict[str, str]) -> str:
        kept = self._kept.get(key)
        if kept and kept[1] - RENEW_BEFORE_SECONDS > time.time():
            self._kept.move_to_end(key)
            return kept[0]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one request per token, however many calls wait for it
            kept = self._kept.get(key)
            if kept and kept[1] - RENEW_BEFORE_SECONDS > time.time():
                return kept[0]
            try:
                answer = await self.http.post(
                    self.client.token_url,
                    data={**form, "resource": self.resource},
                    auth=(self.client.client_id, self.client.client_secret),
                )
            except httpx.HTTPError as error:
                raise UpstreamTokenError(
                    f"the insurer's authorization server cannot be reached ({error})"
                ) from None
            finally:
                self._locks.pop(key, None)
            if answer.status_code != 200:
                try:
                    body = answer.json()
                    why = f"{body.get('error')}: {body.get('error_description', '')}"
                except ValueError:
                    why = f"HTTP {answer.status_code}"
                raise UpstreamTokenError(f"the insurer's authorization server refused: {why}")
            body = answer.json()
            token = str(body["access_token"])
            self._kept[key] = (token, time.time() + float(body.get("expires_in", 60)))
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
            return token

    async def own(self) -> str:
        """A token of the MCP server's own client (client credentials)."""
        return await self._token(
            "own", {"grant_type": "client_credentials", "scope": " ".join(SCOPES)}
        )

    async def exchanged(self, broker_token: str) -> str:
        """A token of the broker ``broker_token`` speaks for, at the insurer's interface."""
        key = hashlib.sha256(broker_token.encode()).hexdigest()
        return await self._token(
            key,
            {
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": broker_token,
                "subject_token_type": ACCESS_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE,
            },
        )
