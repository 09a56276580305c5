"""Both ways to the insurer's interface carry the same request and fail the same way."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import http.server
import socket
import struct
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from omds_ld.mcp.http_client import HttpTransport
from omds_ld.mcp.transport import MAX_ANSWER_BYTES, AsgiTransport, InsurerUnavailable, RawAnswer

URL = "http://insurer.example:8080/api/calculations?offset=2"


async def echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers with what it was asked, the way an insurer's interface sees it."""
    message = await receive()
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    body = (
        f"{scope['method']} {scope['path']}?{scope['query_string'].decode()} "
        f"host={headers['host']} length={headers.get('content-length')} "
        f"key={headers.get('idempotency-key')} body={message['body'].decode()}"
    ).encode()
    await send({"type": "http.response.start", "status": 201,
                "headers": [(b"ETag", b'"v1"'), (b"content-type", b"text/plain")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


async def slow(scope: Any, receive: Any, send: Any) -> None:
    await asyncio.sleep(5)


async def flood(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    chunk = b"x" * (256 * 1024)
    for _ in range(MAX_ANSWER_BYTES // len(chunk) + 2):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def test_in_process_call_carries_the_same_http_request() -> None:
    answer = asyncio.run(
        AsgiTransport(echo, timeout=5).request("POST", URL, {"Idempotency-Key": "k-1"}, b'{"a":1}')
    )
    assert answer == RawAnswer(
        201,
        {"etag": '"v1"', "content-type": "text/plain"},
        b'POST /api/calculations?offset=2 host=insurer.example:8080 length=7 key=k-1 body={"a":1}',
    )


def test_in_process_call_that_takes_too_long_is_a_timeout() -> None:
    with pytest.raises(InsurerUnavailable) as failure:
        asyncio.run(AsgiTransport(slow, timeout=0.2).request("GET", URL, {}, None))
    assert failure.value.kind == "timeout"
    assert failure.value.url == URL


def test_in_process_answer_beyond_the_limit_is_refused() -> None:
    with pytest.raises(InsurerUnavailable, match="too large"):
        asyncio.run(AsgiTransport(flood, timeout=5).request("GET", URL, {}, None))


def gigabyte_of_zeros_gzipped() -> bytes:
    """A gzip answer of about a megabyte that unfolds into a gigabyte: one megabyte of zeros
    deflated and fully flushed (so the block stands alone), the block 1024 times over."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    megabyte = b"0" * (1 << 20)
    block = deflate.compress(megabyte) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(megabyte, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + block * 1024 + deflate.flush() + struct.pack("<II", crc, (1 << 30) % (1 << 32))


GIGABYTE_BOMB = gigabyte_of_zeros_gzipped()


class _Gzip(http.server.BaseHTTPRequestHandler):
    """Answers gzip-compressed when asked to: /small a short text, /bomb a small answer that
    unfolds beyond the limit, /broken bytes that are no gzip, /brotli an encoding not asked for."""

    def do_GET(self) -> None:
        asked = self.headers.get("Accept-Encoding", "")
        payloads = {
            "/small": ("gzip", gzip.compress(b"a short answer, compressed")),
            "/bomb": ("gzip", gzip.compress(b"0" * (MAX_ANSWER_BYTES + 1))),
            "/gigabyte": ("gzip", GIGABYTE_BOMB),
            "/broken": ("gzip", b"not gzip at all"),
            "/brotli": ("br", b"whatever"),
        }
        coding, body = payloads[self.path]
        if coding == "gzip" and "gzip" not in asked:
            coding, body = "identity", b"uncompressed: the client did not ask for gzip"
        self.send_response(200)
        self.send_header("Content-Encoding", coding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Flood(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(MAX_ANSWER_BYTES + 1))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client stopped reading: what it should do
            self.wfile.write(b"x" * (MAX_ANSWER_BYTES + 1))

    def log_message(self, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left before its answer (the timeout's test) is no error to print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def _serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on a free loopback port, in a thread; its host:port."""
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gzip_server() -> Iterator[str]:
    with _serving(_Gzip) as address:
        yield f"http://{address}"


def _get(url: str) -> RawAnswer:
    async def run() -> RawAnswer:
        async with HttpTransport(timeout=5) as transport:
            return await transport.request("GET", url, {}, None)

    return asyncio.run(run())


def test_http_answer_compressed_is_read_decoded(gzip_server: str) -> None:
    answer = _get(f"{gzip_server}/small")
    assert answer.content == b"a short answer, compressed"
    assert "content-encoding" not in answer.headers and "content-length" not in answer.headers


def test_http_compressed_answer_that_unfolds_beyond_the_limit_is_refused(
    gzip_server: str,
) -> None:
    with pytest.raises(InsurerUnavailable, match="too large"):
        _get(f"{gzip_server}/bomb")


def test_a_gzip_bomb_of_a_gigabyte_is_refused_without_unfolding_it(gzip_server: str) -> None:
    """A megabyte on the wire that would unfold into a gigabyte: refused as too large, having
    held no more than a few times the answer limit in memory (never the gigabyte)."""
    tracemalloc.start()
    try:
        with pytest.raises(InsurerUnavailable, match="too large"):
            _get(f"{gzip_server}/gigabyte")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(GIGABYTE_BOMB) < 2 << 20
    assert peak < 8 * MAX_ANSWER_BYTES + (16 << 20), f"{peak >> 20} MiB held"


@pytest.mark.parametrize(
    ("path", "reason"), [("/broken", "compressed answer is broken"), ("/brotli", "encoding")]
)
def test_http_answer_that_cannot_be_decoded_is_unreachable(
    gzip_server: str, path: str, reason: str
) -> None:
    with pytest.raises(InsurerUnavailable, match=reason) as failure:
        _get(gzip_server + path)
    assert failure.value.kind == "unreachable"


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy that answers itself: with the request line and credentials it was given."""

    def do_GET(self) -> None:
        text = f"proxy saw {self.path} auth={self.headers.get('Proxy-Authorization')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: Any) -> None:
        pass


def test_http_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _serving(_Proxy) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://broker:s%40cret@{proxy}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        answer = _get("http://insurer.example:8080/api/products")
    credentials = base64.b64encode(b"broker:s@cret").decode()
    assert answer.content.decode() == (
        f"proxy saw http://insurer.example:8080/api/products auth=Basic {credentials}"
    )


def test_http_to_a_host_in_no_proxy_goes_direct(
    monkeypatch: pytest.MonkeyPatch, gzip_server: str
) -> None:
    with _serving(_Proxy) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        answer = _get(f"{gzip_server}/small")
    assert answer.content == b"a short answer, compressed"


@pytest.fixture
def flooding_server() -> Iterator[str]:
    with _serving(_Flood) as address:
        yield f"http://{address}/products"


def test_http_answer_beyond_the_limit_is_refused(flooding_server: str) -> None:
    async def run() -> None:
        async with HttpTransport(timeout=5) as transport:
            await transport.request("GET", flooding_server, {}, None)

    with pytest.raises(InsurerUnavailable, match="too large"):
        asyncio.run(run())


class _Echo(http.server.BaseHTTPRequestHandler):
    """Over the network: what it was asked; /slow answers late, /moved redirects."""

    def do_POST(self) -> None:
        if self.path == "/slow":
            time.sleep(2)
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        text = (
            f"{self.command} {self.path} host={self.headers['Host']} "
            f"length={self.headers.get('Content-Length')} "
            f"key={self.headers.get('Idempotency-Key')} body={body.decode()}"
        ).encode()
        self.send_response(201)
        self.send_header("ETag", '"v1"')
        self.send_header("Link", "<a>")
        self.send_header("Link", "<b>")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    with _serving(_Echo) as address:
        yield address


async def _over_http(
    url: str, timeout: float = 5, path: str = "/api/calculations?offset=2"
) -> RawAnswer:
    async with HttpTransport(timeout) as transport:
        return await transport.request(
            "POST", f"http://{url}{path}", {"Idempotency-Key": "k-1"}, b'{"a":1}'
        )


def test_http_call_carries_the_same_request_as_the_in_process_one(echo_server: str) -> None:
    answer = asyncio.run(_over_http(echo_server))
    assert answer.status == 201
    assert (
        answer.content
        == (
            f'POST /api/calculations?offset=2 host={echo_server} length=7 key=k-1 body={{"a":1}}'
        ).encode()
    )
    assert answer.headers["etag"] == '"v1"'
    assert answer.headers["link"] == "<a>, <b>"  # a repeated header joined


def test_http_redirect_is_answered_not_followed(echo_server: str) -> None:
    answer = asyncio.run(_over_http(echo_server, path="/moved"))
    assert answer.status == 302 and answer.headers["location"] == "/elsewhere"


def test_http_call_that_takes_too_long_is_a_timeout(echo_server: str) -> None:
    with pytest.raises(InsurerUnavailable) as failure:
        asyncio.run(_over_http(echo_server, timeout=0.3, path="/slow"))
    assert failure.value.kind == "timeout"


def test_http_interface_not_listening_is_unreachable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(InsurerUnavailable) as failure:
        asyncio.run(_over_http(f"127.0.0.1:{port}"))
    assert failure.value.kind == "unreachable"
