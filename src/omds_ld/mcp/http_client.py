"""The MCP server's HTTP client to an insurer's interface over the network (``omds-ld mcp``).

aiohttp's client session: kept-alive HTTP/1.1 connections, answers parsed by llhttp with the
head bounded as it is read, TLS by the standard library, proxies as the environment names them.
Imported only where an interface is reached over HTTP: ``omds-ld serve`` reaches its own in the
process (``transport.AsgiTransport``) and never pays for it.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
import zlib
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp.client import IDEMPOTENT_METHODS
from yarl import URL

from omds_ld.mcp.transport import (
    MAX_ANSWER_BYTES,
    InsurerUnavailable,
    RawAnswer,
    joined,
    too_large,
)

# What an answer's head may hold: a line (the status line, a header) of 8 KiB, a header of
# 16 KiB, 100 headers. aiohttp's parser (llhttp) counts them as it reads, whatever the size
# of a read: an insurer that sends headers by the megabyte is refused at the first one too many.
MAX_LINE_BYTES = 8190
MAX_FIELD_BYTES = 16384
MAX_HEADERS = 100
_FORBIDDEN = frozenset("\r\n\0")


class HttpTransport:
    """The insurer's interface at a URL, over kept-alive HTTP/1.1 connections (aiohttp).

    It trusts the certificates httpx trusts (certifi's, or those of ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``), read at the first HTTPS call (an insurer over plain HTTP never loads
    them), and uses the proxy the environment names for the insurer's host. The
    timeout holds for the whole call (a free connection, connecting, the whole answer), so an
    insurer that trickles its head or drips its answer cannot hold a call past it; redirects are
    answers, not followed. The answer may come gzip-compressed (asked for: insurers are reached
    over the internet too), is decoded in bounded steps and refused beyond ``MAX_ANSWER_BYTES``;
    its head is bounded as it is parsed. A connection goes back to the pool only after a whole
    answer and nothing after it; a call that may be repeated (a read, or a write with its
    idempotency key) goes once more on a fresh connection when the insurer closed the one it
    was sent on before answering, a write without a key never.
    """

    def __init__(self, timeout: float, user_agent: str = "omds-ld") -> None:
        self.timeout = timeout
        self._trusted: ssl.SSLContext | None = None  # made at the first HTTPS call
        self.defaults = {"user-agent": user_agent, "accept-encoding": "gzip"}
        self.proxies: dict[tuple[str, str], tuple[Any, Any]] = {}  # by (scheme, host:port)
        self._session: Any = None  # aiohttp's, made in the loop that first uses it

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=100, keepalive_timeout=4
            )  # at most 100 connections to one insurer; an idle one given up after 4 s, before
            # the shortest common server default (uvicorn's and Node's 5 s) closes it under us
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                auto_decompress=False,  # decoded here, in bounded steps
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("accept",),
                max_line_size=MAX_LINE_BYTES,
                max_field_size=MAX_FIELD_BYTES,
                max_headers=MAX_HEADERS,
                requote_redirect_url=False,
            )
        session: aiohttp.ClientSession = self._session
        return session

    def trusted(self) -> ssl.SSLContext:
        """The certificates an HTTPS insurer is checked against, as httpx has them:
        ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` where the environment names them, else certifi's
        bundle (loading it takes tens of milliseconds: only where an insurer speaks HTTPS)."""
        if self._trusted is None:
            if os.environ.get("SSL_CERT_FILE"):
                self._trusted = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
            elif os.environ.get("SSL_CERT_DIR"):
                self._trusted = ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
            else:
                import certifi

                self._trusted = ssl.create_default_context(cafile=certifi.where())
        return self._trusted

    def _proxy(self, url: URL) -> tuple[Any, Any]:
        """The proxy the environment names for ``url`` and the headers with its credentials
        (None: direct)."""
        key = (url.scheme, url.raw_authority)
        if key not in self.proxies:
            proxy = environment_proxy(url.scheme, url.raw_authority)
            if proxy is None:
                self.proxies[key] = (None, None)
            else:
                parts = URL(proxy)
                credentials = None
                if parts.user:
                    basic = aiohttp.encode_basic_auth(parts.user, parts.password or "")
                    credentials = {"Proxy-Authorization": basic}
                self.proxies[key] = (parts.with_user(None), credentials)
        return self.proxies[key]

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        target = _sendable(url)
        sent = {**self.defaults, **{k.lower(): v for k, v in headers.items()}}
        for name, value in sent.items():
            if _FORBIDDEN.intersection(name + value) or ":" in name or not name:
                raise InsurerUnavailable(
                    "unreachable", f"the header {name} cannot be sent as given", url
                )
        # aiohttp sends a request of an idempotent method once more itself; a write goes
        # once more only with its idempotency key (the insurer acts once per key)
        keyed = method not in IDEMPOTENT_METHODS and "idempotency-key" in sent
        proxy, proxy_headers = self._proxy(target)
        if proxy_headers and target.scheme == "http":  # the proxy reads the request itself
            sent = {**sent, "proxy-authorization": proxy_headers["Proxy-Authorization"]}
        try:
            try:
                return await self._exchange(method, target, sent, content, proxy, proxy_headers)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
                if isinstance(error, aiohttp.ClientConnectorError):
                    raise
                if method not in IDEMPOTENT_METHODS and not keyed:
                    raise InsurerUnavailable(
                        "unreachable",
                        "the insurer closed the connection before it answered (a write without "
                        "an idempotency key is not sent again)",
                        url,
                    ) from None
                if not keyed:
                    raise
            return await self._exchange(method, target, sent, content, proxy, proxy_headers)
        except TimeoutError:
            raise InsurerUnavailable(
                "timeout", f"the insurer did not answer within {self.timeout} s", url
            ) from None
        except aiohttp.ClientHttpProxyError as error:
            raise InsurerUnavailable(
                "unreachable",
                f"the proxy refused the tunnel to the insurer (status {error.status})",
                url,
            ) from None
        except aiohttp.ClientConnectorError as error:
            raise InsurerUnavailable(
                "unreachable", f"the insurer cannot be reached ({error})", url
            ) from None
        except aiohttp.ClientResponseError as error:  # the head: not HTTP, or beyond the bounds
            raise InsurerUnavailable(
                "unreachable", f"the insurer's answer is not HTTP/1.1 we read ({error.message})",
                url,
            ) from None  # fmt: skip
        except (aiohttp.ClientError, ValueError) as error:
            raise InsurerUnavailable(
                "unreachable", f"the insurer broke off its answer ({error!r})", url
            ) from None

    async def _exchange(
        self, method: str, url: URL, headers: dict[str, str], content: bytes | None,
        proxy: Any, proxy_headers: Any,
    ) -> RawAnswer:  # fmt: skip
        answer = await self.session().request(
            method, url, headers=headers, data=content, proxy=proxy, proxy_headers=proxy_headers,
            allow_redirects=False, ssl=self.trusted() if url.scheme == "https" else True,
        )  # fmt: skip
        whole = False
        try:
            body, decoded = await _read(answer, MAX_ANSWER_BYTES, str(url))
            whole = True
        finally:
            if whole:
                answer.release()  # back to the pool, if aiohttp finds nothing left to read
            else:
                answer.close()  # half an answer: the connection is never reused
        raw = answer.raw_headers
        if decoded:
            drop = (b"content-encoding", b"content-length")
            raw = tuple((k, v) for k, v in raw if k.lower() not in drop)
        return RawAnswer(answer.status, joined(raw), body)


def _sendable(url: str) -> URL:
    """``url`` as it is sent: never with its user information. A line break, a space or a
    character beyond ASCII is refused, not sent: no value a model chose can add a header or a
    request."""
    if not url.isascii() or _FORBIDDEN.intersection(url) or " " in url:
        raise InsurerUnavailable(
            "unreachable", "the URL cannot be sent to the insurer as given", url
        )
    try:
        target = URL(url, encoded=True)
    except ValueError:
        raise InsurerUnavailable(
            "unreachable", "the URL cannot be sent to the insurer as given", url
        ) from None
    if target.scheme not in ("http", "https") or not target.raw_host:
        raise InsurerUnavailable("unreachable", "the insurer's URL is not http(s)", url)
    return target.with_user(None) if target.raw_user else target


async def _read(answer: aiohttp.ClientResponse, limit: int, url: str) -> tuple[bytes, bool]:
    """The answer's body, decoded (gzip, in bounded steps), and whether it was decoded."""
    coding = answer.headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("gzip", "identity"):
        raise InsurerUnavailable(
            "unreachable", f"the insurer answered in an encoding not asked for: {coding}", url
        )
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if coding == "gzip" else None
    if inflate is None and (answer.content_length or 0) > limit:
        raise too_large(url)
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.content.iter_any():
        if inflate is not None:
            # never more than what still fits (and a byte to tell it did not): a small
            # compressed answer cannot unfold into gigabytes in memory
            try:
                chunk = inflate.decompress(chunk, limit - size + 1)
            except zlib.error as error:
                raise InsurerUnavailable(
                    "unreachable", f"the insurer's compressed answer is broken ({error})", url
                ) from None
        size += len(chunk)
        if size > limit:
            raise too_large(url)
        chunks.append(chunk)
    if inflate is not None and not inflate.eof and answer.method != "HEAD":
        raise InsurerUnavailable("unreachable", "the insurer's compressed answer ends early", url)
    return b"".join(chunks), inflate is not None


def environment_proxy(scheme: str, netloc: str) -> str | None:
    """The proxy the environment names for a host (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), None:
    none, or the host is in NO_PROXY."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
