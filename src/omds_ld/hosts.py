"""Which Host and Origin a server answers: an allowlist compared exactly, and its ASGI guard.

Both servers (the insurer's interface and the MCP server) bind to loopback by default and must not
be reachable from a browser through DNS rebinding: a request names the host it meant, and a
name that is not ours is refused. Entries are ``host:port`` or ``host:*`` (any port), origins
``scheme://host:port`` or ``scheme://host:*``. Host and port are compared exactly, never by
prefix: ``127.0.0.1:*`` allows ``127.0.0.1:9092`` and not ``127.0.0.1:9092.evil.example``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from omds_ld.norm.problems import ProblemType

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")

_HOST = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}|\*))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<rest>.+)")


def _split(value: str) -> tuple[str, str | None] | None:
    match = _HOST.fullmatch(value.strip())
    if match is None:
        return None
    return match.group("host").lower(), match.group("port")


@dataclass(frozen=True)
class _Entry:
    scheme: str | None
    host: str
    port: str | None  # None: the default port only; "*": any port

    def matches(self, scheme: str | None, host: str, port: str | None) -> bool:
        if scheme != self.scheme or host != self.host:
            return False
        return self.port == "*" or self.port == port


def _entry(value: str, origin: bool) -> _Entry:
    scheme = None
    rest = value
    if origin:
        match = _ORIGIN.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is no origin (scheme://host[:port])")
        scheme, rest = match.group("scheme").lower(), match.group("rest")
    split = _split(rest)
    if split is None:
        raise ValueError(f"{value!r} is no host[:port]")
    return _Entry(scheme, *split)


class Allowlist:
    """The hosts and origins a server answers."""

    def __init__(self, hosts: Iterable[str], origins: Iterable[str] = ()) -> None:
        self.hosts = tuple(_entry(h, origin=False) for h in hosts)
        self.origins = tuple(_entry(o, origin=True) for o in origins)

    def allows_host(self, header: str | None) -> bool:
        """Whether a Host header names this server (a missing one does not)."""
        split = _split(header) if header else None
        if split is None or split[1] == "*":
            return False
        return any(e.matches(None, *split) for e in self.hosts)

    def allows_origin(self, header: str | None) -> bool:
        """Whether an Origin may call (none: not a browser's cross-origin request)."""
        if not header:
            return True
        match = _ORIGIN.fullmatch(header.strip())
        split = _split(match.group("rest")) if match else None
        if match is None or split is None or split[1] == "*":
            return False
        return any(e.matches(match.group("scheme").lower(), *split) for e in self.origins)


class HostGuard:
    """ASGI middleware: a request for a host (or from an origin) not allowed gets 421 (403)."""

    def __init__(self, app: ASGIApp, allowlist: Allowlist) -> None:
        self.app = app
        self.allowlist = allowlist
        from omds_ld.norm.problems import load_problem_types  # where a guard is made, not a CLI

        self.problems = load_problem_types()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not self.allowlist.allows_host(headers.get("host")):
            kind = self.problems["misdirected-request"]
            await _refuse(send, kind, "this server does not answer that Host")
            return
        if not self.allowlist.allows_origin(headers.get("origin")):
            kind = self.problems["forbidden-origin"]
            await _refuse(send, kind, "requests from that Origin are refused")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, kind: ProblemType, detail: str) -> None:
    body = json.dumps(
        {
            "type": kind.uri,
            "title": kind.title_en,
            "status": kind.status,
            "detail": f"{detail}; it answers only the hosts it serves (loopback unless configured)",
        }
    ).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": kind.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
