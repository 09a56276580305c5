"""Who a request speaks for, and the words of the norm's tokens, without a library loaded: what
the MCP server's tools and their callers need at every call. Signing and checking are
``omds_ld.auth.tokens`` (joserfc), asking for the insurer's token ``omds_ld.auth.upstream``
(httpx), loaded only where authorization is used."""

from __future__ import annotations

from dataclasses import dataclass

READ = "omds-ld.read"
WRITE = "omds-ld.write"
SCOPES = (READ, WRITE)
ALGORITHM = "ES256"
TOKEN_TYPE = "at+jwt"  # RFC 9068: an access token, never an ID token taken for one
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
LEEWAY_SECONDS = 30  # clock skew tolerated between the authorization server and a resource


@dataclass(frozen=True)
class Identity:
    """Who a valid token speaks for, and what it allows."""

    subject: str  # the broker (or, for a software house's client without one, the client)
    client_id: str
    audience: str
    scopes: frozenset[str]
    expires: float
    token_id: str = ""
    actor: str | None = None  # RFC 8693 ``act``: who exchanged the token for the subject
    name: str = ""  # how the authorization server calls the subject (a display name)
    grant: str = ""  # ``sid``: the grant the token came from (a code and its refresh tokens)

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


class TokenRefused(Exception):
    """A token that must not be accepted; ``reason`` is the RFC 6750 error code."""

    def __init__(self, description: str, reason: str = "invalid_token") -> None:
        super().__init__(description)
        self.description = description
        self.reason = reason


IDENTITY = "omds_ld.identity"  # where a request's checked identity is kept (ASGI scope["state"])
TOKEN = "omds_ld.token"  # and the token it came with: for the token exchange, never logged


class UpstreamTokenError(Exception):
    """The insurer's authorization server did not give a token; the detail says why."""
