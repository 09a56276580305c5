"""The MCP endpoint as an OAuth 2.1 resource server (MCP authorization, 2025-11-25): it publishes
its Protected Resource Metadata (RFC 9728), refuses a call without a valid token with 401 and a
``WWW-Authenticate`` naming that metadata, and one whose token lacks the scope with 403
``insufficient_scope``. The token's audience must be this endpoint's own URL (RFC 8707)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from joserfc.jwk import KeySet

from omds_ld.auth.identity import READ, WRITE, Identity, TokenRefused
from omds_ld.auth.tokens import check, key_id

PROBLEMS = "https://w3id.org/omds-ld/problems/"


class KeySource(Protocol):
    async def key_set(self, kid: str | None = None) -> KeySet: ...

    def revoked(self, grant: str) -> bool:
        """Whether a token's grant was revoked, as far as this resource can tell."""
        ...


class LocalKeys:
    """The keys of an authorization server in the same process (the example server)."""

    def __init__(
        self,
        public_keys: Callable[[str | None], KeySet],
        revoked: Callable[[str], bool] = lambda grant: False,
    ) -> None:
        self.public_keys = public_keys
        self.revoked = revoked  # the authorization server's word: its revoked grants

    async def key_set(self, kid: str | None = None) -> KeySet:
        return self.public_keys(kid)  # kept in memory; read from the store at most every 10 s


@dataclass(frozen=True)
class Refusal:
    """An HTTP refusal of the resource: status, headers and a message naming the problem type."""

    status: int
    headers: Mapping[str, str]
    message: str
    reason: str  # for the log and the metrics: missing, invalid, expired, audience, ...


def metadata_url(resource: str) -> str:
    """Where RFC 9728 puts a resource's metadata: the well-known path before the resource's."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"


class ResourceGuard:
    """The OAuth side of one MCP endpoint at ``resource`` (its canonical URL)."""

    def __init__(
        self,
        resource: str,
        issuer: str,
        keys: KeySource,
        *,
        name: str = "",
        read_scope: str = READ,
        write_scope: str = WRITE,
        published: bool = True,
    ) -> None:
        # every call needs ``read_scope``; one that creates or edits ``write_scope`` too
        self.read_scope, self.write_scope = read_scope, write_scope
        self.scopes = [read_scope, write_scope]
        self.resource = resource
        self.issuer = issuer
        self.keys = keys
        self.name = name
        self.metadata_url = metadata_url(resource)
        # whether its metadata is published (RFC 9728), and so named in a challenge: only where
        # tokens are required, else a client takes the metadata for a login it must make first
        self.published = published

    def metadata(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": self.name or self.resource,
            "resource_documentation": "https://w3id.org/omds-ld",
        }

    def _challenge(self, error: str | None = None, description: str = "") -> str:
        parts = [f'scope="{" ".join(self.scopes)}"']
        if self.published:
            parts.insert(0, f'resource_metadata="{self.metadata_url}"')
        if error:
            parts.insert(0, f'error="{error}"')
            if description:
                parts.insert(1, 'error_description="{}"'.format(description.replace('"', "'")))
        return "Bearer " + ", ".join(parts)

    async def identify(self, headers: Mapping[str, str]) -> Identity | Refusal:
        """Who the request's bearer token speaks for, or how it is refused (401)."""
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if not authorization or scheme.lower() != "bearer" or not token:
            return Refusal(
                401,
                {"WWW-Authenticate": self._challenge()},
                f"Unauthorized: this MCP endpoint needs an access token ({PROBLEMS}unauthorized); "
                f"how to get one: {self.metadata_url}",
                "missing",
            )
        try:
            keys = await self.keys.key_set(key_id(token))
            identity = check(token, keys, self.issuer, self.resource, self.keys.revoked)
        except TokenRefused as refused:
            if refused.reason == "temporarily_unavailable":
                return Refusal(503, {"Retry-After": "5"}, f"Service unavailable: {refused}", "keys")
            return Refusal(
                401,
                {"WWW-Authenticate": self._challenge("invalid_token", refused.description)},
                f"Unauthorized: {refused.description} ({PROBLEMS}unauthorized); "
                f"get a token for {self.resource}: {self.metadata_url}",
                _reason(refused.description),
            )
        if not identity.allows(self.read_scope):
            return self.insufficient(self.read_scope)
        return identity

    def insufficient(self, needed: str) -> Refusal:
        return Refusal(
            403,
            {"WWW-Authenticate": self._challenge("insufficient_scope", f"{needed} is needed")},
            f"Forbidden: the token lacks the scope {needed} ({PROBLEMS}insufficient-scope); "
            f"ask for {' '.join(self.scopes)}",
            "scope",
        )


def _reason(description: str) -> str:
    for word, reason in (("expired", "expired"), ("issued", "issuer"), ("resource", "audience"),
                         ("signature", "signature")):  # fmt: skip
        if word in description:
            return reason
    return "invalid"
