"""A lean HTTP/1.1 client for the MCP server's requests to the insurer's interface.

Kept-alive connections per origin, answers parsed by httptools (llhttp, what uvicorn parses
with), TLS by the standard library, proxies as the environment names them (an HTTP proxy sees
the whole URL; an ``https`` URL goes through a ``CONNECT`` tunnel). What the MCP server needs of
a client is small: no cookies, redirects, auth flows or HTTP/2; in exchange a request costs
a quarter to two fifths of the CPU it costs through httpcore's pool and its h11 state machine
(``docs/insurer-operator.md``). Every answer is read whole, decoded (gzip, in bounded steps) and
refused beyond ``limit`` bytes; each phase (a free connection, connecting, the whole answer)
has the timeout, so a server that drips its answer cannot hold a call past it.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import zlib
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

import httptools

Headers = list[tuple[bytes, bytes]]


class HttpFailure(Exception):
    """No answer: the server could not be reached, broke off, or did not answer in time."""

    def __init__(self, kind: Literal["timeout", "unreachable"], detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass
class Answer:
    """A whole answer: status, headers as sent (decoded body: no content-encoding), body."""

    status: int
    headers: Headers
    body: bytes


@dataclass(frozen=True)
class Origin:
    """Where a connection goes: the server, and the proxy on the way (None: direct)."""

    scheme: str
    host: str
    port: int
    proxy: str | None = None


class _Stale(Exception):
    """A kept-alive connection the server had closed before it read the request."""


_FORBIDDEN = frozenset(b"\r\n\0")


class _Reading:
    """The answer one request is reading: its parts so far, decoded and counted."""

    def __init__(self, limit: int, bodiless: bool = False) -> None:
        self.done: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.limit = limit
        self.bodiless = bodiless  # an answer to HEAD: its head is all of it
        self.status = 0
        self.headers: Headers = []
        self.chunks: list[bytes] = []
        self.size = 0
        self.inflate: zlib._Decompress | None = None
        self.received = False  # any byte of the answer
        self.keep_alive = False

    def begin(self) -> None:
        self.headers = []  # an informational answer (1xx) before it is forgotten

    def headers_complete(self, status: int) -> None:
        self.status = status
        if 100 <= status < 200:
            return
        for name, value in self.headers:
            if name.lower() != b"content-encoding":
                continue
            coding = value.strip().lower()
            if coding == b"gzip":
                self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif coding != b"identity":
                raise HttpFailure(
                    "unreachable", "the insurer answered in an encoding not asked for: "
                    + coding.decode("latin-1")
                )  # fmt: skip

    def body(self, chunk: bytes) -> None:
        if self.inflate is not None:
            # never more than what still fits (and a byte to tell it did not): a small
            # compressed answer cannot unfold into gigabytes in memory
            try:
                chunk = self.inflate.decompress(chunk, self.limit - self.size + 1)
            except zlib.error as error:
                raise HttpFailure(
                    "unreachable", f"the insurer's compressed answer is broken ({error})"
                ) from None
        self.size += len(chunk)
        if self.size > self.limit:
            raise HttpFailure("unreachable", "the insurer's answer is too large to use")
        self.chunks.append(chunk)

    def complete(self, keep_alive: bool) -> None:
        if 100 <= self.status < 200:
            return  # the answer itself is still to come
        headers = self.headers
        if self.inflate is not None:
            if not self.inflate.eof:
                self.fail(HttpFailure("unreachable", "the insurer's compressed answer ends early"))
                return
            drop = (b"content-encoding", b"content-length")
            headers = [(k, v) for k, v in headers if k.lower() not in drop]
        self.keep_alive = keep_alive
        if not self.done.done():
            self.done.set_result(Answer(self.status, headers, b"".join(self.chunks)))

    def fail(self, error: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(error)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: a request at a time, its answer fed to httptools' parser."""

    def __init__(self) -> None:
        self.transport: asyncio.BaseTransport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.reading: _Reading | None = None
        self.lost = False
        self.idle_since = time.monotonic()
        self.answers = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reading = self.reading
        if reading is None:  # bytes nobody asked for: this connection is no good any more
            self.close()
            return
        reading.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            cause = error.__context__
            reading.fail(cause if isinstance(cause, HttpFailure) else _broken(error))
            self.close()
        except httptools.HttpParserError as error:
            reading.fail(_broken(error))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        reading = self.reading
        if reading is None or reading.done.done():
            return
        if reading.status and not _delimited(reading.headers):
            reading.complete(keep_alive=False)  # an answer that ends with its connection
        elif not reading.received and self.answers:
            reading.fail(_Stale())
        else:
            reading.fail(
                HttpFailure("unreachable", f"the insurer broke off the connection ({exc!r})")
            )

    # httptools' callbacks
    def on_message_begin(self) -> None:
        if self.reading is not None:
            self.reading.begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.reading is not None:
            self.reading.headers.append((name, value))

    def on_headers_complete(self) -> None:
        reading = self.reading
        if reading is not None:
            reading.headers_complete(self.parser.get_status_code())
            if reading.bodiless and reading.status >= 200:
                # httptools cannot be told to expect no body: the answer is complete, and the
                # connection is not reused, where the parser would wait for content-length bytes
                reading.complete(keep_alive=False)

    def on_body(self, body: bytes) -> None:
        if self.reading is not None:
            self.reading.body(body)

    def on_message_complete(self) -> None:
        if self.reading is not None:
            self.reading.complete(self.parser.should_keep_alive())

    async def exchange(self, request: bytes, limit: int) -> Answer:
        assert isinstance(self.transport, asyncio.WriteTransport)
        self.reading = reading = _Reading(limit, bodiless=request.startswith(b"HEAD "))
        try:
            self.transport.write(request)
            answer = await reading.done
        finally:
            self.reading = None
        self.answers += 1
        if not reading.keep_alive:
            self.close()
        return answer

    def usable(self, idle_seconds: float) -> bool:
        transport = self.transport
        return (
            not self.lost
            and transport is not None
            and not transport.is_closing()
            and time.monotonic() - self.idle_since < idle_seconds
        )

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _delimited(headers: Headers) -> bool:
    """Whether the answer says where it ends (else it ends with the connection)."""
    return any(k.lower() in (b"content-length", b"transfer-encoding") for k, _ in headers)


def _broken(error: Exception) -> HttpFailure:
    return HttpFailure("unreachable", f"the insurer's answer is not HTTP/1.1 ({error})")


class _TunnelHead(asyncio.Protocol):
    """The proxy's answer to ``CONNECT``, up to its empty line."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.head += data
        if self.done.done():
            return
        if b"\r\n\r\n" in self.head:
            line = bytes(self.head).split(b"\r\n", 1)[0].split()
            status = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
            self.done.set_result(status)
        elif len(self.head) > 65536:
            self.done.set_result(0)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(0)


class Client:
    """Kept-alive HTTP/1.1 connections, at most ``max_connections`` in use at once and
    ``max_idle`` idle per origin, an idle one closed after ``idle_seconds``."""

    def __init__(
        self,
        timeout: float,
        ssl_context: ssl.SSLContext,
        *,
        max_connections: int = 100,
        max_idle: int = 20,
        idle_seconds: float = 5.0,
    ) -> None:
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self.idle_seconds = idle_seconds
        self.idle: dict[Origin, list[_Connection]] = {}
        self.in_use: set[_Connection] = set()
        self.slots = asyncio.Semaphore(max_connections)

    async def aclose(self) -> None:
        for idle in self.idle.values():
            for connection in idle:
                connection.close()
        self.idle.clear()
        for connection in self.in_use:
            connection.close()

    async def request(
        self, origin: Origin, method: str, url: str, headers: Headers, body: bytes | None,
        limit: int,
    ) -> Answer:  # fmt: skip
        """``url``'s answer; a reused connection the server had closed meanwhile is replaced
        once for a request that may be repeated (GET, or one with an idempotency key)."""
        try:
            async with asyncio.timeout(self.timeout):
                await self.slots.acquire()
        except TimeoutError:
            raise HttpFailure(
                "timeout", f"no connection to the insurer became free within {self.timeout} s"
            ) from None
        try:
            request = _request_bytes(origin, method, url, headers, body)
            repeatable = method in ("GET", "HEAD") or any(
                k == b"idempotency-key" for k, _ in headers
            )
            for _ in range(2):
                connection = self._reused(origin) or await self._connect(origin)
                try:
                    return await self._exchange(origin, connection, request, limit)
                except _Stale:
                    if not repeatable:
                        raise HttpFailure(
                            "unreachable", "the insurer closed the kept-alive connection"
                        ) from None
            raise HttpFailure("unreachable", "the insurer closed the connection twice")
        finally:
            self.slots.release()

    async def _exchange(
        self, origin: Origin, connection: _Connection, request: bytes, limit: int
    ) -> Answer:
        self.in_use.add(connection)
        clean = False
        try:
            async with asyncio.timeout(self.timeout):
                answer = await connection.exchange(request, limit)
            clean = True
            return answer
        except TimeoutError:
            raise HttpFailure(
                "timeout", f"the insurer did not answer within {self.timeout} s"
            ) from None
        finally:
            self.in_use.discard(connection)
            if clean and connection.usable(self.idle_seconds):
                self._put_idle(origin, connection)
            else:
                connection.close()  # half an answer, or the server's end: never reused

    def _reused(self, origin: Origin) -> _Connection | None:
        idle = self.idle.get(origin)
        while idle:
            connection = idle.pop()  # the most recently used: least likely closed
            if connection.usable(self.idle_seconds):
                return connection
            connection.close()
        return None

    def _put_idle(self, origin: Origin, connection: _Connection) -> None:
        idle = self.idle.setdefault(origin, [])
        connection.idle_since = time.monotonic()
        idle.append(connection)
        if len(idle) > self.max_idle:
            idle.pop(0).close()

    async def _connect(self, origin: Origin) -> _Connection:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._open(origin)
        except TimeoutError:
            raise HttpFailure(
                "timeout", f"the insurer could not be reached within {self.timeout} s"
            ) from None
        except (OSError, ssl.SSLError) as error:
            raise HttpFailure("unreachable", f"the insurer cannot be reached ({error!r})") from None

    async def _open(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self.ssl_context if origin.scheme == "https" else None
        if origin.proxy is None:
            _, connection = await loop.create_connection(
                _Connection, origin.host, origin.port, ssl=tls,
                server_hostname=origin.host if tls else None,
            )  # fmt: skip
            return connection
        proxy = urlsplit(origin.proxy)
        if not proxy.hostname:
            raise HttpFailure("unreachable", f"the proxy {origin.proxy} names no host")
        proxy_host = proxy.hostname
        proxy_tls = self.ssl_context if proxy.scheme == "https" else None
        proxy_port = proxy.port or (443 if proxy.scheme == "https" else 80)
        if tls is None:  # plain HTTP: the proxy is asked with the whole URL
            _, connection = await loop.create_connection(
                _Connection, proxy_host, proxy_port, ssl=proxy_tls,
                server_hostname=proxy_host if proxy_tls else None,
            )  # fmt: skip
            return connection
        transport, head = await loop.create_connection(
            _TunnelHead, proxy_host, proxy_port, ssl=proxy_tls,
            server_hostname=proxy_host if proxy_tls else None,
        )  # fmt: skip
        host = f"[{origin.host}]" if ":" in origin.host else origin.host  # an IPv6 address
        authority = f"{host}:{origin.port}".encode()
        credentials = _proxy_authorization(origin.proxy)
        transport.write(
            b"CONNECT " + authority + b" HTTP/1.1\r\nhost: " + authority + b"\r\n"
            + b"".join(b"%s: %s\r\n" % pair for pair in credentials) + b"\r\n"
        )  # fmt: skip
        status = await head.done
        if status != 200:
            transport.close()
            raise HttpFailure(
                "unreachable", f"the proxy refused the tunnel to the insurer (status {status})"
            )
        connection = _Connection()
        secured = await loop.start_tls(transport, connection, tls, server_hostname=origin.host)
        assert secured is not None
        connection.connection_made(secured)
        return connection


def _proxy_authorization(proxy: str) -> Headers:
    parts = urlsplit(proxy)
    if not parts.username:
        return []
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return [(b"proxy-authorization", b"Basic " + base64.b64encode(pair))]


def _request_bytes(
    origin: Origin, method: str, url: str, headers: Headers, body: bytes | None
) -> bytes:
    """The request as sent. A line break (or a space in the URL) anywhere is refused, not
    sent: no value a model chose can add a header or a request."""
    parts = urlsplit(url)
    through_proxy = origin.proxy is not None and origin.scheme == "http"
    target = (
        url if through_proxy else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    )
    try:
        # never the URL's user information: Host names the server only
        lines = [(b"host", parts.netloc.rpartition("@")[2].encode("ascii"))]
        head = method.encode("ascii") + b" " + target.encode("ascii") + b" HTTP/1.1\r\n"
    except UnicodeEncodeError:
        raise HttpFailure("unreachable", "the URL cannot be sent to the insurer as given") from None
    if _FORBIDDEN.intersection(head[:-2]) or head.count(b" ") != 2:
        raise HttpFailure("unreachable", "the URL cannot be sent to the insurer as given")
    if through_proxy and origin.proxy is not None:
        lines += _proxy_authorization(origin.proxy)
    lines += headers
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append((b"content-length", str(len(body or b"")).encode()))
    for name, value in lines:
        if _FORBIDDEN.intersection(name + value) or b":" in name or not name:
            raise HttpFailure(
                "unreachable", f"the header {name.decode('latin-1')} cannot be sent as given"
            )
    head += b"".join(name + b": " + value + b"\r\n" for name, value in lines)
    return head + b"\r\n" + (body or b"")
