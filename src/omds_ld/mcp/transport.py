"""How the MCP server reaches an insurer's interface: over HTTP, or through ASGI in one process.

Both carry the same HTTP requests and answers; the upstream cache and the pipeline above them do
not know which one is used. A failure to get an answer at all is ``InsurerUnavailable``: temporary,
distinct from any answer the insurer gives.
"""

from __future__ import annotations

import ssl
import urllib.request
import zlib
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import unquote, urlsplit

import anyio
import httpcore
import httpx

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
    """The insurer's interface at a URL, over a pool of kept-alive HTTP/1.1 connections.

    httpcore's pool without httpx's client on top (no cookies, auth flows or URL normalization
    to pass through: a third of a millisecond a call), trusting the certificates and using the
    proxies from the environment as httpx does. Each phase (connect, write, read, wait
    for a connection) has the timeout; redirects are answers, not followed. The answer may come
    gzip-compressed (asked for: insurers are reached over the internet too), is decoded in
    bounded steps and refused beyond ``MAX_ANSWER_BYTES`` decoded.
    """

    def __init__(self, timeout: float, user_agent: str = "omds-ld") -> None:
        # the certificates httpx trusts: certifi's, or SSL_CERT_FILE / SSL_CERT_DIR if set
        self.ssl_context = httpx.create_ssl_context()
        self.pools: dict[str | None, httpcore.AsyncConnectionPool] = {}  # by proxy, None: direct
        self.routes: dict[tuple[str, str], str | None] = {}  # (scheme, host): its proxy
        phases = ("connect", "read", "write", "pool")
        self.extensions: dict[str, Any] = {"timeout": dict.fromkeys(phases, timeout)}
        self.defaults = [(b"user-agent", user_agent.encode()), (b"accept-encoding", b"gzip")]

    def _pool(self, url: str) -> httpcore.AsyncConnectionPool:
        """The pool for ``url``: direct, or through the proxy the environment names for it
        (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY; not for a host in NO_PROXY), as httpx did."""
        parts = urlsplit(url)
        route = (parts.scheme, parts.netloc)
        if route not in self.routes:
            self.routes[route] = environment_proxy(parts.scheme, parts.netloc)
        proxy = self.routes[route]
        pool = self.pools.get(proxy)
        if pool is None:
            pool = self.pools[proxy] = _new_pool(proxy, self.ssl_context)
        return pool

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for pool in self.pools.values():
            await pool.aclose()

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        given = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        named = {k for k, _ in given}
        raw_headers = [h for h in self.defaults if h[0] not in named] + given
        try:
            async with self._pool(url).stream(
                method, url, headers=raw_headers, content=content, extensions=self.extensions
            ) as response:
                answer_headers = _joined(response.headers)
                body = await _body(response, answer_headers, url)
        except httpcore.TimeoutException as error:
            raise InsurerUnavailable(
                "timeout", f"the insurer did not answer in time ({error!r})", url
            ) from None
        except _FAILURES as error:
            raise InsurerUnavailable(
                "unreachable", f"the insurer cannot be reached ({error!r})", url
            ) from None
        except zlib.error as error:
            raise InsurerUnavailable(
                "unreachable", f"the insurer's compressed answer is broken ({error})", url
            ) from None
        return RawAnswer(response.status, answer_headers, body)


def environment_proxy(scheme: str, netloc: str) -> str | None:
    """The proxy the environment names for a host, None: none or the host is in NO_PROXY."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _new_pool(proxy: str | None, ssl_context: ssl.SSLContext) -> httpcore.AsyncConnectionPool:
    limits: dict[str, Any] = {
        "max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0
    }  # fmt: skip
    if proxy is None:
        return httpcore.AsyncConnectionPool(ssl_context=ssl_context, **limits)
    parts = urlsplit(proxy)
    auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return httpcore.AsyncHTTPProxy(bare, proxy_auth=auth, ssl_context=ssl_context, **limits)


# everything but a timeout that keeps the pool from getting an answer
_FAILURES = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
    httpcore.ConnectionNotAvailable,
)


def _joined(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names in lower case; a repeated header's values joined with commas (RFC 9110)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


async def _body(response: httpcore.Response, headers: dict[str, str], url: str) -> bytes:
    """The answer's body, decoded, at most ``MAX_ANSWER_BYTES``."""
    coding = headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("identity", "gzip"):
        raise InsurerUnavailable(
            "unreachable", f"the insurer answered in an encoding not asked for: {coding}", url
        )
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if coding == "gzip" else None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_stream():
        if inflate is not None:
            # never more than what still fits (and a byte to tell it did not): a small
            # compressed answer cannot unfold into gigabytes in memory
            chunk = inflate.decompress(chunk, MAX_ANSWER_BYTES - size + 1)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _too_large(url)
        chunks.append(chunk)
    if inflate is not None:
        if not inflate.eof:
            raise zlib.error("the compressed answer ends early")
        del headers["content-encoding"]
        headers.pop("content-length", None)
    return b"".join(chunks)


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
