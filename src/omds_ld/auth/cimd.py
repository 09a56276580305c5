"""Client ID Metadata Documents: a client whose ``client_id`` is an https URL is described by the
JSON document at that URL (the 2026-07-28 authorization spec's way, instead of registering).

The authorization server fetches it safely, because whoever starts a login chooses the URL:

- https only (http and loopback addresses only where the server itself runs on loopback: the
  example's demo and its tests); no user info, no fragment, a path;
- the host's every address public (never private, link-local, reserved, multicast; loopback as
  above), and the connection made to the address that was checked (no DNS rebinding);
- no redirects; at most ``MAX_BYTES``; within ``TIMEOUT_SECONDS`` in all;
- the document a JSON object whose ``client_id`` is the URL itself, with ``redirect_uris`` that a
  registered client could have, a public client (``token_endpoint_auth_method`` none);
- kept for its ``Cache-Control: max-age`` (at most an hour; five minutes without one), a bounded
  number of them, so a login's pages and its token request fetch it once.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from omds_ld.auth.redirects import redirect_uri_problem

MAX_BYTES = 5 * 1024
TIMEOUT_SECONDS = 3.0
MAX_FETCHES = 4  # documents fetched at once; one more asked for meanwhile is refused as busy
MAX_KEPT = 1000
DEFAULT_SECONDS = 300.0
MAX_SECONDS = 3600.0
MARK = "omds_ld_metadata_document"  # in a Client's metadata: where its document came from
_MAX_AGE = re.compile(r"max-age=(\d+)")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class DocumentRefused(Exception):
    """Why a client's metadata document is not used (said to the person and in the log)."""


def is_document_url(client_id: str) -> bool:
    """Whether a client_id names a metadata document (an http(s) URL) rather than a registration."""
    return client_id.startswith(("https://", "http://"))


# IPv6 ranges that carry an IPv4 address and reach it: the address inside decides (the
# well-known NAT64 prefix, RFC 6052: 64:ff9b::7f00:1 is 127.0.0.1; 6to4 and IPv4-mapped are read
# by the ipaddress module); those below are refused whole (local-use NAT64 of RFC 8215, the
# deprecated IPv4-compatible and SIIT forms, Teredo)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NEVER = tuple(
    ipaddress.ip_network(n) for n in ("64:ff9b:1::/48", "::/96", "::ffff:0:0:0/96", "2001::/32")
)


def _public(address: str, loopback: bool) -> bool:
    ip = ipaddress.ip_address(address)
    if ip.is_loopback:
        return loopback
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in NEVER):
            return False
        inside = _translated(ip)
        if inside is not None:
            return _public(str(inside), loopback)
    # is_global, not "not is_private": shared address space (100.64.0.0/10, a carrier's NAT)
    # is neither private nor global, and no metadata is fetched from there either
    return ip.is_global and not ip.is_multicast


def _translated(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address of a translation range reaches, if it is one."""
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.ipv4_mapped or ip.sixtofour


Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address of ``host`` (getaddrinfo)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


class MetadataDocuments:
    """Fetches and keeps client metadata documents; ``loopback`` admits loopback hosts (and http
    to them), for a server that runs on loopback itself."""

    def __init__(
        self,
        loopback: bool = False,
        resolver: Resolver = resolve,
        verify: Any = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.loopback = loopback
        self.resolver = resolver
        # certificates are checked against the system's CAs, or the file SSL_CERT_FILE names
        cafile = os.environ.get("SSL_CERT_FILE")
        self.verify = (
            ssl.create_default_context(cafile=cafile) if verify is True and cafile else verify
        )
        self.clock = clock
        self._kept: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._pinned: set[str] = set()
        self._lock = threading.Lock()
        # a host that trickles cannot hold more than these: the rest are refused, not queued
        self._fetching = threading.BoundedSemaphore(MAX_FETCHES)

    def pin(self, metadata: Mapping[str, Any]) -> str:
        """Keep a client's document as the operator gave it, never fetched nor expiring: an
        authorization server without outbound access admits the clients it knows this way."""
        url = str(metadata.get("client_id", ""))
        if not is_document_url(url):
            raise DocumentRefused("a client's metadata document names its https URL as client_id")
        checked = check_document(url, metadata)
        with self._lock:
            self._kept[url] = (float("inf"), checked)
            self._pinned.add(url)
        return url

    def kept(self, url: str) -> dict[str, Any] | None:
        """The document fetched for ``url`` and still fresh, without fetching."""
        with self._lock:
            found = self._kept.get(url)
            if found is None or found[0] < self.clock():
                return None
            return dict(found[1])

    def document(self, url: str) -> dict[str, Any]:
        """The client's metadata, fetched (or kept); DocumentRefused says why not."""
        kept = self.kept(url)
        if kept is not None:
            return kept
        if not self._fetching.acquire(blocking=False):
            raise DocumentRefused(
                "too many clients' metadata documents are being fetched at once; try again"
            )
        try:
            metadata, seconds = self._fetch(url)
        finally:
            self._fetching.release()
        with self._lock:
            self._kept[url] = (self.clock() + seconds, metadata)
            self._kept.move_to_end(url)
            while len(self._kept) > MAX_KEPT + len(self._pinned):
                oldest = next(u for u in self._kept if u not in self._pinned)
                del self._kept[oldest]
        return dict(metadata)

    def _target(self, url: str) -> tuple[str, int, str]:
        """Host, port and the one checked address to connect to."""
        if len(url) > 2000:
            raise DocumentRefused("a client_id URL has at most 2000 characters")
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.username or parts.password:
            raise DocumentRefused("a client_id URL carries no user or password")
        if parts.fragment or "#" in url:
            raise DocumentRefused("a client_id URL has no fragment")
        if parts.path in ("", "/"):
            raise DocumentRefused("a client_id URL names a document (a path), not a site")
        loopback_http = parts.scheme == "http" and self.loopback and host in LOOPBACK_HOSTS
        if parts.scheme != "https" and not loopback_http:
            raise DocumentRefused("a client_id URL is https")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise DocumentRefused("a client_id URL's port is a number") from None
        try:
            addresses = self.resolver(host, port)
        except OSError:
            raise DocumentRefused(f"{host} cannot be resolved") from None
        if not addresses:
            raise DocumentRefused(f"{host} has no address")
        refused = [a for a in addresses if not _public(a, self.loopback)]
        if refused:
            raise DocumentRefused(
                f"{host} resolves to an address that is not public ({refused[0]}): "
                "no metadata is fetched from there"
            )
        if parts.scheme == "http" and not all(
            ipaddress.ip_address(a).is_loopback for a in addresses
        ):
            raise DocumentRefused("http is for loopback only; a client_id URL is https")
        return host, port, addresses[0]

    def _fetch(self, url: str) -> tuple[dict[str, Any], float]:
        host, port, address = self._target(url)
        parts = urlsplit(url)
        netloc = f"[{address}]" if ":" in address else address
        direct = parts._replace(netloc=f"{netloc}:{port}").geturl()
        deadline = time.monotonic() + TIMEOUT_SECONDS
        body = b""
        # the watchdog below is the deadline; httpx's own timeouts only back it up (a second
        # later, so that a slow host is always refused as one: "came too slowly")
        http = httpx.Client(verify=self.verify, timeout=TIMEOUT_SECONDS + 1, trust_env=False)
        # one deadline for the whole fetch: a host that trickles its head (each byte within the
        # read timeout) has its connection closed under it when the time is up
        watchdog = threading.Timer(TIMEOUT_SECONDS, http.close)
        watchdog.start()
        try:
            with (
                http,
                http.stream(
                    "GET", direct,
                    headers={"Host": parts.netloc.rsplit("@", 1)[-1], "Accept": "application/json"},
                    extensions={"sni_hostname": host},
                    follow_redirects=False,
                ) as response,
            ):  # fmt: skip
                if response.is_redirect:
                    raise DocumentRefused(
                        "the client's metadata document is not followed elsewhere"
                    )
                if response.status_code != 200:
                    raise DocumentRefused(f"the client's metadata document answered {response.status_code}")  # fmt: skip
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise DocumentRefused(f"the client's metadata document is over {MAX_BYTES} bytes")  # fmt: skip
                    if time.monotonic() > deadline:
                        raise DocumentRefused("the client's metadata document came too slowly")
                cache = response.headers.get("cache-control", "")
        except (httpx.HTTPError, RuntimeError, OSError) as error:
            if time.monotonic() >= deadline:
                raise DocumentRefused("the client's metadata document came too slowly") from None
            raise DocumentRefused(f"the client's metadata document could not be read ({type(error).__name__})") from None  # fmt: skip
        finally:
            watchdog.cancel()
        try:
            metadata = json.loads(body)
        except ValueError:
            raise DocumentRefused("the client's metadata document is not JSON") from None
        return check_document(url, metadata), _seconds(cache)


def _seconds(cache_control: str) -> float:
    if "no-store" in cache_control:
        return 0.0
    found = _MAX_AGE.search(cache_control)
    return min(float(found.group(1)), MAX_SECONDS) if found else DEFAULT_SECONDS


def check_document(url: str, metadata: Any) -> dict[str, Any]:
    """The document's metadata as a client's, or DocumentRefused: it names itself by the URL, its
    redirect URIs are admissible, it is a public client."""
    if not isinstance(metadata, Mapping):
        raise DocumentRefused("the client's metadata document is not a JSON object")
    if metadata.get("client_id") != url:
        raise DocumentRefused("the client's metadata document names another client_id than its URL")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > 10:
        raise DocumentRefused("the client's metadata document lists 1 to 10 redirect_uris")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            raise DocumentRefused(f"the client's metadata document: {problem}")
    method = metadata.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise DocumentRefused(
            "a client named by a metadata document is a public client "
            "(token_endpoint_auth_method none), it has no secret here"
        )
    kept = {
        key: metadata[key]
        for key in ("client_name", "client_uri", "logo_uri", "redirect_uris", "grant_types",
                    "response_types", "scope")
        if key in metadata
    }  # fmt: skip
    name = kept.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > 200):
        raise DocumentRefused("the client's client_name is a string of at most 200 characters")
    grants = kept.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or set(grants) - {"authorization_code", "refresh_token"}:
        raise DocumentRefused("a client named by a metadata document uses the authorization code")
    return {**kept, "token_endpoint_auth_method": "none", MARK: url}
