"""Where an authorization may send a browser back: which redirect URIs a client may register
(RFC 8252 for native apps, OAuth 2.1 for the rest), and which redirect matches a registered one.

Below both the authorization server (registrations) and client metadata documents (CIMD): one
rule for both ways a client names its redirect URIs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

MAX_URI = 2000  # characters of a URI a client names (a redirect URI, a document's URL)
LOOPBACK_NAMES = ("127.0.0.1", "::1", "localhost")


def redirect_uri_problem(uri: Any) -> str | None:
    """Why a redirect URI may not be registered, or None: https anywhere, http to loopback only
    (any port), or a private-use scheme of a native app (reverse domain name, RFC 8252 7.1);
    never a fragment, never javascript:, data:, file: or the like."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI is a non-empty string"
    if len(uri) > MAX_URI:
        return f"a redirect URI has at most {MAX_URI} characters"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"{uri[:80]!r} is no URI"
    if parts.fragment or "#" in uri:
        return "a redirect URI has no fragment"
    if parts.scheme == "https":
        return None if parts.hostname else "an https redirect URI names a host"
    if parts.scheme == "http":
        if (parts.hostname or "") in LOOPBACK_NAMES:
            return None
        return "http redirect URIs go to loopback only (127.0.0.1, [::1], localhost); else https"
    if "." in parts.scheme and parts.scheme.replace(".", "").replace("-", "").isalnum():
        return None  # com.example.app:/callback
    return (
        f"the scheme {parts.scheme or '(none)'}: is not for redirects: https, http to loopback, "
        "or a private-use scheme of your app (reverse domain name, e.g. com.example.app:)"
    )


def redirect_matches(redirect_uri: str, registered: Iterable[str]) -> bool:
    """Exactly a registered URI; for a loopback one on any port (RFC 8252 7.3: a native app
    listens on whichever port is free)."""
    registered = list(registered)
    return redirect_uri in registered or (
        _loopback(redirect_uri) and _portless(redirect_uri) in map(_portless, registered)
    )


def _loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_NAMES


def _portless(uri: str) -> str:
    parts = urlsplit(uri)
    host = parts.hostname or ""
    return parts._replace(netloc=f"[{host}]" if ":" in host else host).geturl()
