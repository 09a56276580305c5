"""Client ID Metadata Documents: a client named by the https URL of its metadata, with the MCP
SDK's own OAuth client; each document the authorization server must not use, refused with why;
every authorization response naming its issuer (RFC 9207)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from omds_ld.scenarios.embedded import free_port
from tests.auth.flow import REDIRECT, Storage, logged_in_at, oauth_client, pkce
from tests.servers import ExampleServer, running, started

DOCUMENTS = """
import asyncio, json, sys
from starlette.applications import Starlette
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

BASE = sys.argv[1]

def document(name, **more):
    return {"client_id": f"{BASE}/{name}", "client_name": "Maklersoftware Beispiel",
            "redirect_uris": [REDIRECT], "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none", **more}

async def good(request):
    return JSONResponse(document("client.json"), headers={"Cache-Control": "max-age=60"})

async def other(request):
    return JSONResponse(document("client.json"))  # names another URL than its own

async def moved(request):
    return RedirectResponse(f"{BASE}/client.json", 302)

async def big(request):
    return JSONResponse(document("big.json", client_uri="https://example.com/" + "x" * 6000))

async def secret(request):
    return JSONResponse(document("secret.json", token_endpoint_auth_method="client_secret_post"))

async def slow(request):
    await asyncio.sleep(6)
    return JSONResponse(document("slow.json"))

app = Starlette(routes=[Route("/client.json", good), Route("/other.json", other),
                        Route("/moved.json", moved), Route("/big.json", big),
                        Route("/secret.json", secret), Route("/slow.json", slow)])
""".replace("REDIRECT", repr(REDIRECT))


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "omds-ld test documents")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))  # fmt: skip
    return cert_path, key_path


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An https server on loopback with clients' metadata documents, good and bad."""
    folder = Path(tmp_path_factory.mktemp("documents"))
    cert, key = certificate(folder)
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    (folder / "documents.py").write_text(DOCUMENTS)
    process = started(subprocess.Popen(
        [sys.executable, "-c",
         "import sys, uvicorn; sys.path.insert(0, sys.argv[2]); import documents; "
         "uvicorn.run(documents.app, host='127.0.0.1', port=int(sys.argv[3]), "
         "ssl_certfile=sys.argv[4], ssl_keyfile=sys.argv[5], log_level='warning')",
         base, str(folder), str(port), str(cert), str(key)],
    ))  # fmt: skip
    try:
        for _ in range(100):
            try:
                httpx.get(
                    f"{base}/client.json", verify=ssl.create_default_context(cafile=cert), timeout=1
                )
                break
            except httpx.TransportError:
                asyncio.run(asyncio.sleep(0.1))
        yield base, cert
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(
    documents: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    """The example server with authorization required, trusting the documents' certificate."""
    folder = Path(tmp_path_factory.mktemp("cimd"))
    before = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(documents[1])
    try:
        with running(ExampleServer(folder / "s.sqlite3", extra_args=["--require-token"])) as s:
            yield s
    finally:
        if before is None:
            os.environ.pop("SSL_CERT_FILE", None)
        else:
            os.environ["SSL_CERT_FILE"] = before


def authorize(server: ExampleServer, client_id: str) -> httpx.Response:
    _, challenge = pkce()
    return httpx.get(f"{server.url}/oauth/authorize", params={
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
        "resource": server.mcp("pfefferminzia"), "code_challenge": challenge,
        "code_challenge_method": "S256", "state": "s1",
    }, timeout=30)  # fmt: skip


def test_a_client_named_by_its_metadata_document_logs_in_with_the_sdk(
    server: ExampleServer, documents: tuple[str, Path]
) -> None:
    metadata = httpx.get(f"{server.url}/.well-known/oauth-authorization-server/oauth").json()
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True
    url = f"{documents[0]}/client.json"
    storage = Storage()

    async def run() -> list[str]:
        async with oauth_client(
            server.mcp("pfefferminzia"), "alpha", storage, metadata_url=url
        ) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "createCalculation" in asyncio.run(run())
    # the SDK named itself by the document's URL, registering nothing
    assert storage.tokens is not None and storage.tokens.refresh_token
    payload = storage.tokens.access_token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["client_id"] == url and claims["sub"] == "alpha"
    page = authorize(server, url)
    assert page.status_code == 200
    assert "Maklersoftware Beispiel" in page.text
    assert f"as the document at {url} says of itself" in page.text


def test_every_authorization_response_names_the_issuer(
    server: ExampleServer, documents: tuple[str, Path]
) -> None:
    page = authorize(server, f"{documents[0]}/client.json")
    location = asyncio.run(logged_in_at(str(page.url), "alpha"))
    query = httpx.URL(location).params
    assert query["iss"] == f"{server.url}/oauth" and query["state"] == "s1" and query["code"]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("other.json", "names another client_id than its URL"),
        ("moved.json", "is not followed elsewhere"),
        ("big.json", "is over 5120 bytes"),
        ("secret.json", "is a public client"),
        ("slow.json", "came too slowly"),
        ("missing.json", "answered 404"),
    ],
)
def test_a_document_that_cannot_be_used_is_refused_with_why(
    server: ExampleServer, documents: tuple[str, Path], name: str, why: str
) -> None:
    page = authorize(server, f"{documents[0]}/{name}")
    assert page.status_code == 400 and why in page.text, page.text[-600:]


@pytest.mark.parametrize(
    ("client_id", "why"),
    [
        ("https://10.1.2.3/client.json", "resolves to an address that is not public (10.1.2.3)"),
        ("https://169.254.169.254/latest/meta-data", "not public (169.254.169.254)"),
        ("https://100.64.1.2/client.json", "not public (100.64.1.2)"),  # shared address space
        # IPv6 that reaches an IPv4 address (NAT64, 6to4, mapped) is judged by that address
        ("https://[64:ff9b::a9fe:a9fe]/client.json", "not public (64:ff9b::a9fe:a9fe)"),
        ("https://[64:ff9b::a00:1]/client.json", "not public (64:ff9b::a00:1)"),
        ("https://[64:ff9b:1::7f00:1]/client.json", "not public (64:ff9b:1::7f00:1)"),
        ("https://[2002:a00:1::1]/client.json", "not public (2002:a00:1::1)"),
        ("https://[::ffff:10.1.2.3]/client.json", "not public"),
        ("https://[::127.0.0.1]/client.json", "not public"),
        ("http://example.com/client.json", "a client_id URL is https"),
        ("https://user:pw@example.com/client.json", "carries no user or password"),
        ("https://example.com/", "names a document (a path), not a site"),
    ],
)
def test_no_document_is_fetched_from_where_it_must_not_be(
    server: ExampleServer, client_id: str, why: str
) -> None:
    page = authorize(server, client_id)
    assert page.status_code == 400 and why in page.text, page.text[-600:]


def test_an_ipv6_address_that_reaches_loopback_is_loopback() -> None:
    """Where documents on loopback are refused (a server in front of a network), an IPv6
    address that reaches 127.0.0.1 (NAT64, 6to4, IPv4-mapped or -compatible) is refused as
    loopback is; one that reaches a public IPv4 address is public."""
    from omds_ld.auth.cimd import _public

    for address in ("64:ff9b::7f00:1", "2002:7f00:1::1", "::ffff:127.0.0.1", "::127.0.0.1",
                    "64:ff9b:1::808:808", "2001:0:4136:e378:8000:63bf:3fff:fdd2"):  # fmt: skip
        assert not _public(address, loopback=False), address
    assert _public("64:ff9b::7f00:1", loopback=True)  # the demo's own loopback, as 127.0.0.1
    for address in ("64:ff9b::808:808", "2002:808:808::1", "2606:4700::1111", "8.8.8.8"):
        assert _public(address, loopback=False), address


def test_a_client_document_the_operator_gives_is_checked_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "client.json"
    bad.write_text(json.dumps({"client_id": "https://client.example/meta.json",
                               "redirect_uris": ["http://evil.example/cb"]}))  # fmt: skip
    started = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "serve", "--port", str(free_port()),
         "--database", str(tmp_path / "s.sqlite3"), "--client-document", str(bad)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 2
    assert started.stderr.strip().splitlines() == [
        f"omds-ld: --client-document {bad}: the client's metadata document: http redirect URIs "
        "go to loopback only (127.0.0.1, [::1], localhost); else https"
    ]


@contextlib.contextmanager
def trickling_host(cert: Path) -> Iterator[int]:
    """An https host that answers a status line and then one byte of a header every half
    second, never ending its head (each byte well within any read timeout). Yields its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, cert.parent / "key.pem")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def trickle(raw: socket.socket) -> None:
        with contextlib.suppress(OSError), context.wrap_socket(raw, server_side=True) as tls:
            tls.settimeout(5)
            tls.recv(4096)
            tls.sendall(b"HTTP/1.1 200 OK\r\nx-trickle: ")
            while not stop.is_set():
                tls.sendall(b"x")
                stop.wait(0.5)

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=trickle, args=(raw,), daemon=True).start()

    server_thread = threading.Thread(target=serve, daemon=True)
    server_thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        server_thread.join(5)
        listener.close()


def test_a_host_that_trickles_its_head_is_cut_at_the_deadline_and_holds_no_interface(
    server: ExampleServer, documents: tuple[str, Path]
) -> None:
    """One deadline for the whole fetch, on fetch slots of their own: six logins named by a
    document whose host never ends its head are each refused (too slowly, or too many at
    once), and the insurers' interfaces answer meanwhile."""
    started = time.monotonic()
    with trickling_host(documents[1]) as port, ThreadPoolExecutor(6) as pool:
        pages = [
            pool.submit(authorize, server, f"https://127.0.0.1:{port}/client-{n}.json")
            for n in range(6)
        ]
        products = httpx.get(  # as broker alpha, by its static demo token
            server.api("pfefferminzia") + "/products",
            headers={"Authorization": "Bearer pf-demo-alpha-7b1e4c"}, timeout=30,
        )  # fmt: skip
        assert products.status_code == 200
        for page in pages:
            answered = page.result(timeout=60)
            assert answered.status_code == 400, answered.text[-400:]
            assert "came too slowly" in answered.text or "at once" in answered.text
    # cut at the fetch's deadline (3 s), not at some later read timeout: the whole round is
    # over well before a deadline of 15 s would have let it
    assert time.monotonic() - started < 12, f"{time.monotonic() - started:.1f} s"
