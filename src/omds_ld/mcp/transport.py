"""How the MCP server reaches an insurer's interface: over HTTP, or through ASGI in one process.

Both carry the same HTTP requests and answers; the upstream cache and the pipeline above them do
not know which one is used. A failure to get an answer at all is ``InsurerUnavailable``: temporary,
distinct from any answer the insurer gives.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio
import httpx

from omds_ld.mcp.http1 import Client, HttpFailure, Origin

MAX_ANSWER_BYTES = 2 * 1024 * 1024

AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]


class InsurerUnavailable(Exception):
    """The insurer could not be asked: temporary, retry later."""

    def __init__(self, kind: Literal["timeout", "unreachable"], detail: str, url: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.url = url


@dataclass(frozen=True)
class RawAnswer:
    """What the insurer's interface answered: status, headers (lower-case names), body bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class Transport(Protocol):
    """Sends one HTTP request to the insurer's interface."""

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer: ...


def _too_large(url: str) -> InsurerUnavailable:
    return InsurerUnavailable("unreachable", "the insurer's answer is too large to use", url)


class HttpTransport:
    """The insurer's interface at a URL, over kept-alive HTTP/1.1 connections (``http1``).

    It trusts the certificates httpx trusts (certifi's, or those of ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``) and uses the proxy the environment names for the insurer's host. Each
    phase (a free connection, connecting, the whole answer) has the timeout; redirects are
    answers, not followed. The answer may come gzip-compressed (asked for: insurers are reached
    over the internet too), is decoded in bounded steps and refused beyond ``MAX_ANSWER_BYTES``.
    """

    def __init__(self, timeout: float, user_agent: str = "omds-ld") -> None:
        self.client = Client(timeout, httpx.create_ssl_context())
        self.origins: dict[tuple[str, str], Origin] = {}  # by (scheme, host:port)
        self.defaults = [(b"user-agent", user_agent.encode()), (b"accept-encoding", b"gzip")]

    def _origin(self, url: str) -> Origin:
        """Where ``url`` goes: direct, or through the proxy the environment names for it
        (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY; not for a host in NO_PROXY), as httpx does."""
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc)
        origin = self.origins.get(key)
        if origin is None:
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise InsurerUnavailable("unreachable", "the insurer's URL is not http(s)", url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            proxy = environment_proxy(parts.scheme, parts.netloc)
            origin = self.origins[key] = Origin(parts.scheme, parts.hostname, port, proxy)
        return origin

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        given = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        named = {k for k, _ in given}
        raw_headers = [h for h in self.defaults if h[0] not in named] + given
        try:
            answer = await self.client.request(
                self._origin(url), method, url, raw_headers, content, MAX_ANSWER_BYTES
            )
        except HttpFailure as failure:
            raise InsurerUnavailable(failure.kind, failure.detail, url) from None
        return RawAnswer(answer.status, _joined(answer.headers), answer.body)


def environment_proxy(scheme: str, netloc: str) -> str | None:
    """The proxy the environment names for a host, None: none or the host is in NO_PROXY."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _joined(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names in lower case; a repeated header's values joined with commas (RFC 9110)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


class AsgiTransport:
    """The insurer's interface served by an ASGI app of this same process.

    The same HTTP request and answer as over the network, without the network stack or an HTTP
    client in between; the timeout holds as it does over HTTP.
    """

    def __init__(self, app: AsgiApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        parts = urlsplit(url)
        raw_headers = [(b"host", parts.netloc.encode())]
        raw_headers += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        body = content or b""
        if content is not None:
            raw_headers.append((b"content-length", str(len(body)).encode()))
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": parts.scheme or "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": raw_headers,
            "server": (parts.hostname or "127.0.0.1", parts.port or 80),
            "client": ("127.0.0.1", 0),
        }
        status = 0
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []
        size = 0
        done = anyio.Event()
        asked = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()  # an app listening for a disconnect hears it once it answered
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = int(message["status"])
                answer_headers.update(_joined(message.get("headers", [])))
            elif message["type"] == "http.response.body":
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise _too_large(url)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    done.set()

        try:
            with anyio.fail_after(self.timeout):
                await self.app(scope, receive, send)
        except TimeoutError:
            raise InsurerUnavailable(
                "timeout", f"the insurer did not answer within {self.timeout} s", url
            ) from None
        if not done.is_set():
            raise InsurerUnavailable("unreachable", "the insurer's interface gave no answer", url)
        return RawAnswer(status, answer_headers, b"".join(chunks))
