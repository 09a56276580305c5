"""A broker's OAuth flow as an MCP client does it, with the official SDK's own OAuth client
(``mcp.client.auth``): discovery, dynamic registration, authorization code with PKCE; the login
page is filled in and sent as a browser would (its form, its hidden fields, its Origin)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from omds_ld.mcp.condense import answer_extension

REDIRECT = "http://127.0.0.1:1/callback"  # never reached: the test reads the code off the redirect


class Storage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class _Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.fields: list[tuple[str, str]] = []  # a name may come more than once (resource)

    def data(self, **more: str) -> dict[str, list[str]]:
        """The form's fields as it sends them, with ``more`` filled in."""
        sent: dict[str, list[str]] = {}
        for name, value in [*self.fields, *more.items()]:
            sent.setdefault(name, []).append(value)
        return sent

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action = values.get("action", "")
        elif tag == "input" and values.get("type") == "hidden":
            self.fields.append((values["name"], values.get("value", "")))


async def log_in(url: str, broker: str, password: str = "demo") -> AuthorizationCodeResult:
    """What a broker does in the browser: open the login page, choose, send; the code comes back
    in the redirect to the client."""
    location = await logged_in_at(url, broker, password)
    query = parse_qs(urlsplit(location).query)
    if "code" not in query:
        raise PermissionError(f"no code: {query}")
    return AuthorizationCodeResult(
        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
    )


async def logged_in_at(url: str, broker: str, password: str = "demo") -> str:
    """Log in at an authorization URL as a browser would; where the browser is sent back to."""
    async with httpx.AsyncClient(timeout=30) as browser:
        page = await browser.get(url)
        page.raise_for_status()
        form = _Form()
        form.feed(page.text)
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        sent = await browser.post(
            urljoin(url, form.action),
            data=form.data(broker=broker, password=password),
            headers={"Origin": origin},
        )
    if sent.status_code != 302:
        raise PermissionError(f"login refused ({sent.status_code}): {sent.text[:300]}")
    return str(sent.headers["location"])


def provider(
    mcp_url: str,
    broker: str,
    storage: Storage | None = None,
    metadata_url: str | None = None,
    **login: Any,
) -> OAuthClientProvider:
    """The SDK's OAuth client for one MCP endpoint, logging in as ``broker`` when asked to."""
    results: asyncio.Queue[AuthorizationCodeResult] = asyncio.Queue()

    async def redirect(url: str) -> None:
        results.put_nowait(await log_in(url, broker, **login))

    async def callback() -> AuthorizationCodeResult:
        return await results.get()

    return OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="omds-ld tests", redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="client_secret_post",
        ),
        storage=storage or Storage(),
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=metadata_url,
    )  # fmt: skip


@asynccontextmanager
async def oauth_client(
    mcp_url: str,
    broker: str,
    storage: Storage | None = None,
    mode: str = "legacy",
    metadata_url: str | None = None,
) -> AsyncIterator[Client]:
    """An MCP client of ``mcp_url`` that authorizes as ``broker`` through the SDK's OAuth flow
    (named by its metadata document at ``metadata_url``, or registering itself)."""
    auth = provider(mcp_url, broker, storage, metadata_url)
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        Client(streamable_http_client(mcp_url, http_client=http), mode=mode) as client,
    ):
        yield client


@asynccontextmanager
async def bearer_client(
    mcp_url: str, token: str, mode: str = "legacy", whole_answers: bool = False
) -> AsyncIterator[Client]:
    """An MCP client of ``mcp_url`` that sends one access token with every request (and, with
    ``whole_answers``, declares the extension that brings the whole structured answer)."""
    extensions = [answer_extension()] if whole_answers else []
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(
            streamable_http_client(mcp_url, http_client=http), mode=mode, extensions=extensions
        ) as client,
    ):
        yield client


def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636)."""
    import base64
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    return verifier, challenge.decode()


def register(base_url: str, **metadata: Any) -> dict[str, Any]:
    """Dynamic client registration (RFC 7591) at the example server's authorization server."""
    answer = httpx.post(
        f"{base_url}/oauth/register",
        json={"client_name": "omds-ld tests", "redirect_uris": [REDIRECT],
              "grant_types": ["authorization_code", "refresh_token"],
              "token_endpoint_auth_method": "client_secret_post", **metadata},
        timeout=30,
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    registered: dict[str, Any] = answer.json()
    return registered


def redeem(
    base_url: str, client: dict[str, Any], code: str, verifier: str, resource: str
) -> httpx.Response:
    """A code redeemed at the token endpoint by the client it was issued to."""
    return httpx.post(
        f"{base_url}/oauth/token",
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
              "code_verifier": verifier, "resource": resource,
              "client_id": client["client_id"], "client_secret": client["client_secret"]},
        timeout=30,
    )  # fmt: skip


def tokens_by_hand(
    base_url: str, broker: str, resource: str, scope: str = "omds-ld.read omds-ld.write"
) -> dict[str, Any]:
    """A broker's tokens for one resource, the way any OAuth client gets them: register, log in
    (authorization code with PKCE), redeem the code."""
    from urllib.parse import urlencode

    client = register(base_url)
    verifier, challenge = pkce()
    query = urlencode({"response_type": "code", "client_id": client["client_id"],
                       "redirect_uri": REDIRECT, "state": "s", "scope": scope,
                       "resource": resource, "code_challenge": challenge,
                       "code_challenge_method": "S256"})  # fmt: skip
    code = asyncio.run(log_in(f"{base_url}/oauth/authorize?{query}", broker)).code
    answer = redeem(base_url, client, code, verifier, resource)
    assert answer.status_code == 200, answer.text
    tokens: dict[str, Any] = {**answer.json(), "client": client}
    return tokens
