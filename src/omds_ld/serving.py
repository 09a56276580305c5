"""How a server process listens: uvicorn with limits no slow or idle client can exhaust.

uvicorn times out idle keep-alive connections, but not a client that sends a request slowly: one
that trickles its headers (or never finishes its body) keeps its connection, and a thousand of
them exhaust the file descriptors. So every request must be read completely within a deadline
(``read_seconds``, head and body together), a request's head may not grow past 16 KiB (431),
the connections are capped (beyond the cap new ones get 503 at once), and an idle keep-alive
connection is closed after a while. Requests are parsed by httptools (llhttp), uvicorn's
fastest parser, which has no cap on a head of its own.

An idle connection is never closed with a request in it. Under load the event loop runs long
batches of callbacks, and uvicorn's keep-alive timer, due at the batch's start, may run after the
client's next request has arrived but before it is read: closing then resets the connection
(unread bytes make the kernel send RST) and the client loses a request it sent in good time. So
the timer looks first, and a connection with bytes waiting stays open to be read. And the idle
time is longer (20 s) than the clients' own (httpx, which the MCP SDK uses, gives a connection
up after 5 s idle, aiohttp after 15 s): the client gives a connection up before the server does,
so it never sends on one the server is closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import socket
import struct
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from omds_ld.settings import ConfigError, Limits

log = logging.getLogger("omds_ld.serving")


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (llhttp, its fastest), with a deadline for reading each
    request (head and body) and a cap on the size of its head, which llhttp does not have."""

    read_seconds = Limits.read_seconds
    max_head_bytes = Limits.max_head_bytes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head: int | None = 0  # bytes of the request head so far; None: it is read
        # the head as the parser reads it (line and headers): counted whatever the reads were,
        # so a head in one read, or pipelined behind another request, is capped too
        self._parsed = 0
        self._over = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends a request is cut too

    def data_received(self, data: bytes) -> None:
        if self._head is not None:
            self._head += len(data)
        super().data_received(data)
        if self._head is not None and self._head > self.max_head_bytes:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed = 0
        if self._deadline is None:
            self._arm()  # the next request on this connection starts

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        self._parsed += size
        if self._parsed > self.max_head_bytes:
            self._over = True
            raise _HeadTooLarge  # the parser stops here: this request never reaches the app

    def send_400_response(self, msg: str) -> None:
        if self._over:  # the parser stopped at the cap: that is a 431, not a malformed request
            self._refuse_head()
            return
        super().send_400_response(msg)

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()  # the request is read: the application takes its time
        self._head = 0

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        if waiting(self.transport):  # a request came while the loop was busy: read it
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
            return
        super().timeout_keep_alive_handler()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.read_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.info(
            "%s: request not read within %s s; connection closed", self.client, self.read_seconds
        )
        if self.cycle is None or not self.cycle.response_started:
            self.send_400_response(f"request not received within {self.read_seconds} s")
        self.transport.close()

    def _refuse_head(self) -> None:
        self._head = None
        if self.transport.is_closing():
            return
        log.info("%s: request head beyond %s bytes; refused", self.client, self.max_head_bytes)
        text = f"the request's line and headers exceed {self.max_head_bytes} bytes".encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; "
            b"charset=utf-8\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(text), text)
        )
        self.transport.close()


def waiting(transport: asyncio.BaseTransport) -> int:
    """The bytes that arrived on the transport's socket and are not read yet (0 where the
    platform cannot tell: not POSIX)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        import fcntl
        import termios

        answer = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (ImportError, OSError, ValueError):
        return 0
    return int(struct.unpack("i", answer)[0])


class _HeadTooLarge(Exception):
    """Raised in a parser callback: the head is past its cap."""


def protocol(limits: Limits) -> type[DeadlineProtocol]:
    """The protocol class with this process's read deadline and head cap."""
    return type(
        "ConfiguredProtocol",
        (DeadlineProtocol,),
        {"read_seconds": limits.read_seconds, "max_head_bytes": limits.max_head_bytes},
    )


# paths whose last segment is a secret of its own (a confirmation's id): logged as their route
SECRET_SEGMENT_PREFIXES = ("/omds-ld/confirmations/",)


def route_of(path: str) -> str:
    """A request's path as a log may keep it: no query (a code, a state), and no id that is
    someone's capability."""
    path = path.split("?", 1)[0]
    for prefix in SECRET_SEGMENT_PREFIXES:
        if path.startswith(prefix) and path != prefix + "callback":
            return prefix + "{id}"
    return path


class RouteOnly(logging.Filter):
    """uvicorn's access lines with the route of each path (``route_of``), never its secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], route_of(args[2]), args[3], args[4])
        return True


def _logging() -> dict[str, Any]:
    """uvicorn's logging, its access lines on stderr like every other log line (its default
    writes them to stdout, where only the banner belongs), each path as its route."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config.setdefault("filters", {})["routes"] = {"()": RouteOnly}
    config["handlers"]["access"]["filters"] = ["routes"]
    return config


def run(app: ASGIApp, host: str, port: int, log_level: str, limits: Limits | None = None) -> None:
    """Serve ``app`` until stopped, within ``limits`` (the defaults where not given)."""
    limits = limits or Limits()
    uvicorn.run(
        CompleteResponses(app),
        host=host,
        port=port,
        log_level=log_level,
        log_config=_logging(),
        http=protocol(limits),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=int(limits.keep_alive_seconds),
        proxy_headers=bool(limits.trusted_proxies),
        forwarded_allow_ips=list(limits.trusted_proxies),
    )


class CompleteResponses:
    """An ASGI app in front of another that ends a streamed response the app left open when it
    returned (the MCP SDK's event stream of a session ended by the server's shutdown): the
    client sees the stream end, not a broken connection, and uvicorn has no half response to
    complain of. An app that raised, or was cancelled, is left to the server as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "complete": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["complete"] = True
            await send(message)

        await self.app(scope, receive, tracked)
        if state["started"] and not state["complete"]:
            with contextlib.suppress(OSError, RuntimeError):  # the client may be gone already
                await send({"type": "http.response.body", "body": b"", "more_body": False})


PAYLOAD_TOO_LARGE = "https://w3id.org/omds-ld/problems/payload-too-large"


class _TooLarge(Exception):
    pass


class BodyLimit:
    """An ASGI app in front of another that lets no request body past ``limit`` bytes: a
    Content-Length above it is answered 413 before anything is read, a body that grows past it
    while it streams ends the request with 413 (the app never sees more than ``limit``).
    The answer names the norm's problem type ``payload-too-large``."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._refuse(send)
                return
        size = 0
        started = False

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.limit:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"type": PAYLOAD_TOO_LARGE, "title": "The request body is too large", "status": 413,
             "detail": f"the body exceeds {self.limit} bytes; nothing was done"}
        ).encode()  # fmt: skip
        await send(
            {"type": "http.response.start", "status": 413,
             "headers": [(b"content-type", b"application/problem+json"),
                         (b"content-length", str(len(body)).encode()),
                         (b"connection", b"close")]}
        )  # fmt: skip
        await send({"type": "http.response.body", "body": body})


def check_port(host: str, port: int) -> None:
    """Refuse at once, before anything is printed or built, a port another process listens on."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror}") from None
