"""The MCP server's HTTP/1.1 client as an insurer's interface meets it, over real sockets:
TLS and proxy tunnels, kept-alive connections and a server that closes them, answers framed
every way HTTP/1.1 allows, and requests it refuses to send."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from omds_ld.mcp.http_client import HttpTransport
from omds_ld.mcp.transport import InsurerUnavailable, RawAnswer


def _read_request(reader: BinaryIO) -> tuple[str, dict[str, str], bytes] | None:
    """One request from a connection's file: its line, headers (lower-case names), body."""
    line = reader.readline()
    if not line:
        return None
    headers: dict[str, str] = {}
    while (header := reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", 0)))
    return line.decode().strip(), headers, body


Handler = Callable[[socket.socket, int], None]


@contextlib.contextmanager
def _tcp_server(handle: Handler, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """A server on a free loopback port: each connection, with its number, to ``handle`` in
    a thread of its own; its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve(connection: socket.socket, number: int) -> None:
        with contextlib.suppress(OSError), connection:
            if tls is not None:
                connection = tls.wrap_socket(connection, server_side=True)
            handle(connection, number)

    def accept() -> None:
        number = 0
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            threading.Thread(target=serve, args=(connection, number), daemon=True).start()
            number += 1

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


def _answer(connection: socket.socket, body: bytes, *extra: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n" % len(body) + b"".join(extra)
    connection.sendall(head + b"\r\n" + body)


def _echo_all(connection: socket.socket, number: int) -> None:
    """Answers every request on the connection with its line and the connection's number."""
    reader = connection.makefile("rb")
    while (request := _read_request(reader)) is not None:
        _answer(connection, f"{request[0]} on connection {number}".encode())


def _ask(url: str, *calls: tuple[str, dict[str, str], bytes | None]) -> list[RawAnswer]:
    async def run() -> list[RawAnswer]:
        async with HttpTransport(timeout=2) as transport:
            return [await transport.request(m, url, h, b) for m, h, b in calls]

    return asyncio.run(run())


def test_calls_reuse_one_kept_alive_connection() -> None:
    with _tcp_server(_echo_all) as port:
        answers = _ask(f"http://127.0.0.1:{port}/api/products", *[("GET", {}, None)] * 3)
    assert [a.content for a in answers] == [b"GET /api/products HTTP/1.1 on connection 0"] * 3


def _closes_after_one(connection: socket.socket, number: int) -> None:
    """The first connection answers once and closes as the next request comes (a kept-alive
    connection the server timed out just as it was reused); the others answer everything."""
    if number > 0:
        _echo_all(connection, number)
        return
    reader = connection.makefile("rb")
    request = _read_request(reader)
    assert request is not None
    _answer(connection, f"{request[0]} on connection 0".encode())
    _read_request(reader)  # the next request is read, and closed on without an answer


@pytest.mark.parametrize(("method", "headers"), [("GET", {}), ("POST", {"Idempotency-Key": "k-1"})])
def test_a_repeatable_call_on_a_connection_the_server_closed_goes_on_a_new_one(
    method: str, headers: dict[str, str]
) -> None:
    with _tcp_server(_closes_after_one) as port:
        answers = _ask(f"http://127.0.0.1:{port}/a", ("GET", {}, None), (method, headers, b"{}"))
    assert answers[1].content == f"{method} /a HTTP/1.1 on connection 1".encode()


def test_a_write_without_idempotency_key_is_not_sent_twice() -> None:
    refused = pytest.raises(InsurerUnavailable, match="closed the connection before it answered")
    with _tcp_server(_closes_after_one) as port, refused as failed:
        _ask(f"http://127.0.0.1:{port}/a", ("GET", {}, None), ("POST", {}, b"{}"))
    assert failed.value.kind == "unreachable"


def _framed(connection: socket.socket, number: int) -> None:
    """/chunked: a chunked answer; /until-close: an answer that ends with its connection;
    /informational: an early hint before the answer; /drip: a byte every 0.2 s."""
    request = _read_request(connection.makefile("rb"))
    assert request is not None
    path = request[0].split()[1]
    if path == "/chunked":
        connection.sendall(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n"
        )
    elif path == "/until-close":
        connection.sendall(b"HTTP/1.0 200 OK\r\n\r\nread to the end")
    elif path == "/informational":
        connection.sendall(b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n")
        _answer(connection, b"the answer", b'etag: "v2"\r\n')
    elif path == "/head":  # what GET would answer, without its body
        connection.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 12\r\netag: "v1"\r\n\r\n')
        time.sleep(1)  # a client waiting for the 12 bytes would time out
    elif path == "/drip":
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
        for _ in range(100):
            connection.sendall(b"x")
            time.sleep(0.2)


@pytest.mark.parametrize(
    ("path", "content"),
    [("/chunked", b"hello, world"), ("/until-close", b"read to the end"),
     ("/informational", b"the answer")],
)  # fmt: skip
def test_an_answer_is_read_however_it_is_framed(path: str, content: bytes) -> None:
    with _tcp_server(_framed) as port:
        (answer,) = _ask(f"http://127.0.0.1:{port}{path}", ("GET", {}, None))
    assert answer.status == 200 and answer.content == content
    if path == "/informational":
        assert "link" not in answer.headers and answer.headers["etag"] == '"v2"'


def test_the_answer_to_head_is_its_head_though_it_names_a_length() -> None:
    with _tcp_server(_framed) as port:
        answers = _ask(f"http://127.0.0.1:{port}/head", *[("HEAD", {}, None)] * 2)
    assert [(a.status, a.content, a.headers["etag"]) for a in answers] == [(200, b"", '"v1"')] * 2


def test_an_answer_that_drips_past_the_timeout_is_a_timeout() -> None:
    """The timeout holds for the whole answer, not for each read: 100 bytes at 5 a second
    would keep a per-read timeout of 2 s waiting for 20 s."""
    with _tcp_server(_framed) as port:
        started = time.monotonic()
        with pytest.raises(InsurerUnavailable) as failed:
            _ask(f"http://127.0.0.1:{port}/drip", ("GET", {}, None))
    assert failed.value.kind == "timeout"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("path", "headers"),
    [("/a", {"Idempotency-Key": "k-1\r\nX-Injected: yes"}), ("/a\r\nX-Injected: yes", {}),
     ("/a b", {}), ("/a", {"Bad:Name": "v"})],
)  # fmt: skip
def test_a_request_that_would_carry_a_line_break_is_refused_and_not_sent(
    path: str, headers: dict[str, str]
) -> None:
    seen: list[str] = []

    def record(connection: socket.socket, number: int) -> None:
        seen.append(connection.recv(65536).decode())

    with _tcp_server(record) as port:
        with pytest.raises(InsurerUnavailable, match="cannot be sent") as failed:
            _ask(f"http://127.0.0.1:{port}{path}", ("POST", headers, b"{}"))
        time.sleep(0.1)
    assert failed.value.kind == "unreachable"
    assert all("X-Injected" not in request for request in seen)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: its file and its key's."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "insurer.test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return folder / "cert.pem", folder / "key.pem"


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[int]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    with _tcp_server(_echo_all, tls=context) as port:
        yield port


def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_https_trusts_the_certificates_ssl_cert_file_names(
    monkeypatch: pytest.MonkeyPatch, certificate: tuple[Path, Path], tls_server: int
) -> None:
    _no_proxy(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    answers = _ask(f"https://127.0.0.1:{tls_server}/api", *[("GET", {}, None)] * 2)
    assert [a.content for a in answers] == [b"GET /api HTTP/1.1 on connection 0"] * 2


def test_https_to_a_server_whose_certificate_is_not_trusted_is_unreachable(
    monkeypatch: pytest.MonkeyPatch, tls_server: int
) -> None:
    _no_proxy(monkeypatch)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(InsurerUnavailable, match="CERTIFICATE_VERIFY_FAILED") as failed:
        _ask(f"https://127.0.0.1:{tls_server}/api", ("GET", {}, None))
    assert failed.value.kind == "unreachable"


def _tunnel(connection: socket.socket, number: int) -> None:
    """A forward proxy for https: CONNECT with the right credentials opens a tunnel."""
    reader = connection.makefile("rb")
    request = _read_request(reader)
    assert request is not None
    expected = "Basic " + base64.b64encode(b"broker:s@cret").decode()
    if not request[0].startswith("CONNECT ") or request[1].get("proxy-authorization") != expected:
        connection.sendall(
            b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n"
        )
        return
    host, _, port = request[0].split()[1].rpartition(":")
    with socket.create_connection((host, int(port))) as upstream:
        connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        # One thread moves the bytes both ways: an SSL socket may not be read in one thread
        # and written in another at the same time.
        other = {connection: upstream, upstream: connection}
        while True:
            pending = isinstance(connection, ssl.SSLSocket) and connection.pending()
            ready = [connection] if pending else select.select(list(other), [], [], 5)[0]
            if not ready:
                return
            for source in ready:
                data = source.recv(65536)
                if not data:
                    return
                other[source].sendall(data)


@pytest.mark.parametrize("credentials", ["broker:s%40cret@", ""])
def test_https_goes_through_the_proxy_in_a_tunnel(
    monkeypatch: pytest.MonkeyPatch,
    certificate: tuple[Path, Path],
    tls_server: int,
    credentials: str,
) -> None:
    _no_proxy(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with _tcp_server(_tunnel) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://{credentials}127.0.0.1:{proxy}")
        if credentials:
            answers = _ask(f"https://127.0.0.1:{tls_server}/api", *[("GET", {}, None)] * 2)
            assert [a.content for a in answers] == [b"GET /api HTTP/1.1 on connection 0"] * 2
        else:
            with pytest.raises(InsurerUnavailable, match=r"proxy refused the tunnel .* 407"):
                _ask(f"https://127.0.0.1:{tls_server}/api", ("GET", {}, None))


def test_https_goes_in_a_tunnel_through_a_proxy_spoken_to_over_tls(
    monkeypatch: pytest.MonkeyPatch,
    certificate: tuple[Path, Path],
    tls_server: int,
) -> None:
    """An ``https://`` proxy: TLS to the proxy, and the insurer's TLS inside that tunnel."""
    _no_proxy(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    tunnels: list[int] = []

    def tunnel(connection: socket.socket, number: int) -> None:
        assert isinstance(connection, ssl.SSLSocket)  # the proxy is spoken to over TLS
        tunnels.append(number)
        _tunnel(connection, number)

    with _tcp_server(tunnel, tls=context) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"https://broker:s%40cret@127.0.0.1:{proxy}")
        answers = _ask(f"https://127.0.0.1:{tls_server}/api", *[("GET", {}, None)] * 2)
    assert [a.content for a in answers] == [b"GET /api HTTP/1.1 on connection 0"] * 2
    assert tunnels == [0]  # one tunnel, kept alive for both calls


def test_the_host_header_names_the_server_never_the_urls_user_information() -> None:
    seen: list[dict[str, str]] = []

    def record(connection: socket.socket, number: int) -> None:
        reader = connection.makefile("rb")
        while (request := _read_request(reader)) is not None:
            seen.append(request[1])
            _answer(connection, b"ok")

    with _tcp_server(record) as port:
        _ask(f"http://broker:s3cret@127.0.0.1:{port}/api", ("GET", {}, None))
    assert seen[0]["host"] == f"127.0.0.1:{port}"
    assert not any("s3cret" in value for value in seen[0].values())


def test_a_tunnel_to_an_ipv6_address_names_it_in_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []

    def refuse(connection: socket.socket, number: int) -> None:
        request = _read_request(connection.makefile("rb"))
        assert request is not None
        lines.append(request[0])
        connection.sendall(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")

    _no_proxy(monkeypatch)
    with _tcp_server(refuse) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy}")
        with pytest.raises(InsurerUnavailable, match="refused the tunnel"):
            _ask("https://[::1]:8443/api", ("GET", {}, None))
    assert lines == ["CONNECT [::1]:8443 HTTP/1.1"]


def _hostile(connection: socket.socket, number: int) -> None:
    """An insurer that answers /ok right and every other path as an attacker would."""
    reader = connection.makefile("rb")
    while (request := _read_request(reader)) is not None:
        path = request[0].split()[1]
        whole = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        if path == "/headers":  # three megabytes of short headers, in one write
            filler = b"x-filler: aaaaaaaaaaaaaaaaaaaa\r\n" * 100_000
            connection.sendall(b"HTTP/1.1 200 OK\r\n" + filler + b"content-length: 2\r\n\r\nok")
        elif path == "/long-header":  # one header of a megabyte
            connection.sendall(b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * 2**20 + b"\r\n\r\n")
        elif path == "/head-after":  # a whole answer, and the head of another in the same write
            connection.sendall(whole + b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        elif path == "/part-head-after":  # a whole answer, and part of another's head
            connection.sendall(whole + b"HTTP/1.1 200 OK\r\ncontent-le")
        elif path == "/endless":  # a chunked answer that never ends
            connection.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            while True:
                connection.sendall(b"10000\r\n" + b"a" * 0x10000 + b"\r\n")
        elif path == "/trickle":  # the head, a byte every 0.1 s
            for byte in b"HTTP/1.1 200 OK\r\n" + b"x-slow: yes\r\n" * 20:
                connection.sendall(bytes([byte]))
                time.sleep(0.1)
        elif path == "/half":  # a thousandth of the answer; the rest once asked again
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n" + b"a" * 1000)
            if _read_request(reader) is not None:
                connection.sendall(b"a" * 999_000 + whole)
        else:
            _answer(connection, f"{request[0]} on connection {number}".encode())


HOSTILE = {
    "/headers": ("unreachable", "not HTTP/1.1 we read"),
    "/long-header": ("unreachable", "not HTTP/1.1 we read"),
    "/endless": ("unreachable", "too large"),
    "/trickle": ("timeout", "did not answer within"),
    "/half": ("timeout", "did not answer within"),
    "/head-after": None,  # the answer is whole: what follows it is not read as the next one
    "/part-head-after": None,
}


@pytest.mark.parametrize("path", list(HOSTILE))
def test_a_hostile_answer_ends_the_call_in_time_and_the_next_call_is_answered_right(
    path: str,
) -> None:
    """Whatever an insurer sends, the call ends within its timeout, and the connection it
    leaves mid-message is never reused: the next call on the pool gets its own answer."""
    timeout = 1.0

    async def run(port: int) -> tuple[RawAnswer | InsurerUnavailable, float, RawAnswer]:
        async with HttpTransport(timeout=timeout) as transport:
            started = time.monotonic()
            try:
                first: RawAnswer | InsurerUnavailable = await transport.request(
                    "GET", f"http://127.0.0.1:{port}{path}", {}, None
                )
            except InsurerUnavailable as failure:
                first = failure
            took = time.monotonic() - started
            after = await transport.request("GET", f"http://127.0.0.1:{port}/ok", {}, None)
            return first, took, after

    with _tcp_server(_hostile) as port:
        first, took, after = asyncio.run(run(port))
    expected = HOSTILE[path]
    if expected is None:
        assert isinstance(first, RawAnswer) and first.content == b"ok"
    else:
        assert isinstance(first, InsurerUnavailable), first
        assert (first.kind, expected[1] in first.detail) == (expected[0], True), first.detail
    assert took < 2 * timeout, "within the call's timeout"
    assert after.status == 200
    assert after.content.startswith(b"GET /ok HTTP/1.1 on connection "), after.content
