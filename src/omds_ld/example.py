"""The example server, assembled: every insurer's interface, their authorization server, each
insurer's MCP server, the chat page and metrics, as one ASGI app built from one configuration
value. The command line only turns ``omds-ld serve``'s options into an ``ExampleConfig`` and
serves ``ExampleApp(config)``; a test builds the same app in process.

The MCP servers reach the interfaces of this same app in process (ASGI): the same HTTP requests
and answers, through the same middleware (access log, Host, body cap), without the network stack.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from omds_ld import metrics
from omds_ld.auth.redirects import LOOPBACK_NAMES
from omds_ld.auth.resource import LocalKeys
from omds_ld.auth.server import AuthSettings, ExampleAuthorizationServer
from omds_ld.auth.store import AuthStore
from omds_ld.auth.tokens import SCOPES, TOKEN_EXCHANGE, check, key_id
from omds_ld.chat.app import ChatPage
from omds_ld.chat.conversations import Conversations
from omds_ld.chat.login import Logins, LoginSettings
from omds_ld.example_config import ExampleConfig
from omds_ld.insurer.app import Interfaces, TokenCheck, api_base, icon_path
from omds_ld.insurer.config import ServerConfig
from omds_ld.insurer.data import ANONYMOUS, Insurer, load_insurers
from omds_ld.mcp.assembly import build_connectors
from omds_ld.mcp.config import AuthConfig, InstanceConfig, McpConfig
from omds_ld.mcp.confirmation_page import CALLBACK, CONFIRMATION_PATH
from omds_ld.mcp.service import McpHosting, page_address
from omds_ld.mcp.state import MemoryStateStore
from omds_ld.mcp.transport import AsgiTransport
from omds_ld.norm import Norm, load_norm
from omds_ld.norm.receipt import Signer
from omds_ld.process import freeze_startup_heap
from omds_ld.routing import indexed
from omds_ld.scenarios.agents.models import ModelAgent, make_agent
from omds_ld.settings import ConfigError

ISSUER_PATH = "/oauth"  # the authorization server's issuer, below the server's URL
MCP_CLIENT = "omds-ld-mcp"
CHAT_CLIENT = "omds-ld-chat"
PAGE_CLIENT = "omds-ld-confirmation-page"


@dataclass
class Authorization:
    """The example authorization server, as the rest of the example server needs it."""

    issuer: str
    base_url: str
    store: AuthStore
    routes: list[BaseRoute]
    keys: LocalKeys
    check: TokenCheck
    mcp_auth: AuthConfig
    settings: AuthSettings

    def chat_login(self, resources: tuple[str, ...]) -> LoginSettings:
        """The chat page as a client of the authorization server (its secret kept in the store,
        the same for every process on it)."""
        redirect = f"{self.base_url}/chat/callback"
        secret = own_client(
            self.store, CHAT_CLIENT,
            {"client_name": "The example server's chat page", "redirect_uris": [redirect],
             "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
             "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES)},
        )  # fmt: skip
        return LoginSettings(self.issuer, CHAT_CLIENT, secret, redirect, resources)


def auth_store(server: ServerConfig) -> AuthStore:
    """The authorization server's store, beside the insurers' (``<database>-auth.sqlite3``)."""
    return AuthStore(server.database.with_name(server.database.stem + "-auth.sqlite3"))


def authorization(config: ExampleConfig, insurers: Mapping[str, Insurer]) -> Authorization:
    """The example insurers' authorization server, and what the MCP servers and the interfaces
    need of it: its keys, and a client of its own for the MCP servers to exchange tokens."""
    base = config.server.base_url
    issuer = base + ISSUER_PATH
    store = auth_store(config.server)
    mcp_urls = {
        base + config.http.path(name): f"{insurer.display_name} · MCP server"
        for name, insurer in insurers.items()
    }
    if len(insurers) > 1:  # the broker endpoint, in front of them all (omds_ld.mcp.broker)
        mcp_urls[base + config.http.broker_path] = "The insurers · MCP server"
    api_urls = {
        base + api_base(name): f"{insurer.display_name} · interface"
        for name, insurer in insurers.items()
    }
    further = {url.rstrip("/"): "an MCP server run apart" for url in config.auth_resources}
    brokers = {
        b.subject: b.name for i in insurers.values() for b in i.brokers.values() if b.subject
    }
    required = config.server.require_token
    if not required:  # the demo's anonymous broker logs in at the confirmation page as itself
        brokers[ANONYMOUS.id] = ANONYMOUS.name
    server = ExampleAuthorizationServer(
        AuthSettings(
            issuer=issuer, resources={**mcp_urls, **api_urls, **further}, brokers=brokers,
            access_token_seconds=config.access_token_seconds,
            registrations_per_address=config.registrations_per_address,
            registrations=config.registrations,
            registrations_per_source=config.registrations_per_source,
            password=config.demo_password or secrets.token_urlsafe(9),
            documents_on_loopback=config.server.host in LOOPBACK_NAMES,
            pinned_documents=pinned_documents(config.client_documents),
        ),
        store,
    )  # fmt: skip
    # the MCP servers' own client: its secret kept in the store, the same for every process on it
    secret = own_client(
        store, MCP_CLIENT,
        {"client_name": "The example server's MCP servers",
         "grant_types": [TOKEN_EXCHANGE, "client_credentials"],
         "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES),
         "omds_ld_exchanges_for": sorted(mcp_urls)},
    )  # fmt: skip
    page_secret = _page_client(store, base)
    return Authorization(
        issuer=issuer,
        base_url=base,
        store=store,
        routes=server.routes(ISSUER_PATH),
        keys=LocalKeys(store.public_keys, store.grant_revoked),
        check=lambda token, audience: check(
            token, store.public_keys(key_id(token)), issuer, audience, store.grant_revoked
        ),
        mcp_auth=AuthConfig(
            mode="required" if required else "optional", issuer=issuer, public_url=base,
            token_url=f"{issuer}/token", client_id=MCP_CLIENT, client_secret=secret,
            # the demo's interfaces take anonymous callers: an anonymous MCP call stays so
            own_token=required,
            page_client_id=PAGE_CLIENT, page_client_secret=page_secret,
            anonymous_subject="" if required else ANONYMOUS.id,
        ),
        settings=server.settings,
    )  # fmt: skip


def _page_client(store: AuthStore, base: str) -> str:
    """The confirmation page as a client of the authorization server (it logs the person in
    before they may answer); its secret."""
    return own_client(
        store, PAGE_CLIENT,
        {"client_name": "The confirmation page of the example server's MCP servers",
         "redirect_uris": [f"{base}{CONFIRMATION_PATH}/{CALLBACK}"],
         "grant_types": ["authorization_code"], "response_types": ["code"],
         "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES)},
    )  # fmt: skip


def own_client(store: AuthStore, client_id: str, metadata: Mapping[str, Any]) -> str:
    """One of the example server's own clients (its MCP servers, its pages) registered with the
    secret the store keeps for it: every process on one store (replicas, a second serve) has
    the same secret, and each adds its own redirect URI to the others', so none locks another's
    logins out. Its secret."""
    secret = store.own_client_secret(client_id)
    known = store.client(client_id)
    merged = dict(metadata)
    for key in MERGED:  # each process's own addresses first, then the others' (the newest)
        mine = list(metadata.get(key, []))
        before = known[1].get(key, []) if known else []
        if mine:
            merged[key] = [*mine, *(u for u in before if u not in mine)][:MAX_MERGED]
    store.add_client(client_id, secret, merged)
    return secret


# the metadata of an own client that lists addresses of the process registering it
MERGED = ("redirect_uris", "omds_ld_exchanges_for")
MAX_MERGED = 60  # processes on one store at other addresses: the newest ones'


def pinned_documents(paths: Sequence[Path]) -> tuple[Mapping[str, Any], ...]:
    """The clients' metadata documents given as files, each checked as if it had been fetched."""
    import json

    from omds_ld.auth.cimd import DocumentRefused, check_document

    found = []
    for path in paths:
        try:
            document = json.loads(path.read_text("utf-8"))
            check_document(str(document.get("client_id", "")), document)
        except (OSError, ValueError, AttributeError, DocumentRefused) as error:
            raise ConfigError(f"--client-document {path}: {error}") from None
        found.append(document)
    return tuple(found)


def chat_agent(config: ExampleConfig) -> ModelAgent | None:
    """The chat page's model, if one is configured; a missing key is said now, not at the first
    message."""
    if not config.chat_model:
        return None
    try:
        return make_agent(config.chat_model, config.environment, config.chat_model_base_url)
    except ValueError as error:
        raise ConfigError(f"--chat-model: {error}") from None


class ExampleApp:
    """The example server as one ASGI app (see the module's text)."""

    def __init__(
        self,
        config: ExampleConfig,
        norm: Norm | None = None,
        insurers: Mapping[str, Insurer] | None = None,
    ) -> None:
        self.config = config
        self.norm = norm or load_norm()
        self.insurers = dict(insurers or load_insurers(config.server.insurers_folder))
        self.agent = chat_agent(config)
        self.authorization = authorization(config, self.insurers)
        self.interfaces = Interfaces(
            config.server, self.norm, self.insurers, self.authorization.check,
            receipt_keys=self.authorization.store.public_keys,
        )  # fmt: skip
        self.mcp = self._mcp_config()
        # the MCP servers reach the interfaces, and the authorization server, in this very app
        self.token_http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self, raise_app_exceptions=False),
            timeout=self.mcp.timeout_seconds,
        )
        state = MemoryStateStore()
        # the MCP servers' tools, from the norm version they are pinned to
        self.mcp_norm = load_norm(config.mcp_openapi) if config.mcp_openapi else self.norm
        connectors = build_connectors(
            self.mcp, self.mcp_norm, state, AsgiTransport(self, self.mcp.timeout_seconds),
            self.token_http, page_address(self.mcp.http, self.mcp.auth),
            # the authorization server's key signs the receipts its insurers check
            Signer(self.authorization.store.signing_key(), self.authorization.issuer),
        )  # fmt: skip
        self.hosting = McpHosting(
            connectors, self.mcp.http, state, self.mcp.auth, self.authorization.keys,
            page_http=self.token_http,
        )  # fmt: skip
        self.chat = self._chat_page()
        self.app = indexed(
            Starlette(
                routes=self.routes(),
                middleware=self.interfaces.middleware(),
                exception_handlers=self.interfaces.exception_handlers(),
                lifespan=self._lifespan,
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @property
    def base_url(self) -> str:
        return self.config.server.base_url

    def mcp_url(self, name: str) -> str:
        return self.base_url + self.mcp.http.path(name)

    def _mcp_config(self) -> McpConfig:
        base = self.base_url
        return McpConfig(
            instances=tuple(
                InstanceConfig(
                    name=name, display_name=insurer.display_name, api=base + api_base(name),
                    language=insurer.language, website=insurer.website,
                    icon=base + icon_path(name, insurer.icon[0]) if insurer.icon else None,
                )
                for name, insurer in self.insurers.items()
            ),
            http=self.config.http,
            request_log=self.config.request_log,
            auth=self.authorization.mcp_auth,
        )  # fmt: skip

    def _chat_page(self) -> ChatPage:
        """The chat page reaches the MCP servers as any MCP client does: over HTTP, at their
        address; where they want a broker's token, it logs brokers in."""
        mcp_urls = {name: self.mcp_url(name) for name in self.insurers}
        logins = None
        if self.config.server.require_token:
            settings = self.authorization.chat_login(tuple(mcp_urls.values()))
            logins = Logins(settings, self.token_http)
        database = self.config.server.database
        return ChatPage(
            mcp_urls,
            {name: insurer.display_name for name, insurer in self.insurers.items()},
            Conversations(
                database.with_name(database.stem + "-chat.sqlite3"),
                keep_seconds=self.config.chat_keep_hours * 3600,
            ),
            self.agent,
            logins,
        )

    def routes(self) -> list[BaseRoute]:
        # the MCP endpoints first: their paths are no interface's, and each request to them
        # would otherwise be matched against every interface's routes before
        return [
            *self.hosting.routes(),
            *self.interfaces.routes(),
            *self.authorization.routes,
            *self.chat.routes(),
            Route("/metrics", metrics.endpoint),
        ]

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            async with self.token_http, self.hosting.running(), self.chat.running():
                freeze_startup_heap()
                yield
        finally:
            self.authorization.store.close()
            self.interfaces.close()

    def banner(self) -> list[str]:
        """What ``omds-ld serve`` prints when it starts: where everything is."""
        from omds_ld import __version__

        base = self.base_url
        lines = [f"omds-ld {__version__} example server, store {self.config.server.database}"]
        for name, insurer in self.insurers.items():
            mode = "draft at the server" if insurer.draft_at_server else "tariff inquiry"
            lines.append(f"  {insurer.display_name:<30} {base}{api_base(name)}  ({mode})")
        if self.config.server.require_token:
            lines.append(
                f"Authorization: required, OAuth 2.1 (authorization server "
                f"{self.authorization.issuer})"
            )
        else:
            lines.append(
                "Authorization: off, the embedded demo (a token sent is still checked); "
                "--require-token turns it on"
            )
        given = " (from OMDS_LD_DEMO_PASSWORD)" if self.config.demo_password else ""
        brokers = ", ".join(sorted(self.authorization.settings.brokers))
        lines.append(
            f"Brokers' login ({brokers}): password {self.authorization.settings.password}{given}"
            " — printed here only, never on a page"
        )
        chatting = (
            f"with {self.agent.name}, or by hand"
            if self.agent
            else "by hand; --chat-model for a model"
        )
        lines.append(f"Chat page ({chatting}): {base}/chat")
        version = self.mcp_norm.openapi.get("info", {}).get("version")
        pinned = f", pinned to {self.config.mcp_openapi}" if self.config.mcp_openapi else ""
        lines.append(
            f"MCP servers (Streamable HTTP, tools of norm {version}{pinned}); to add them to Claude Code:"
        )
        lines += [
            f"  claude mcp add --transport http {name} {self.mcp_url(name)}"
            for name in self.insurers
        ]
        if len(self.insurers) > 1:
            lines.append(
                "The broker endpoint (every insurer's tools once, with an insurer argument):"
            )
            lines.append(
                f"  claude mcp add --transport http insurers {base}{self.mcp.http.broker_path}"
            )
        return lines


def add_software_client(
    server: ServerConfig,
    name: str,
    broker: str | None,
    exchange_for: tuple[str, ...] = (),
    insurers: Mapping[str, Insurer] | None = None,
) -> dict[str, str | None]:
    """``omds-ld auth add-client``: a confidential client of the authorization server, acting
    for ``broker`` (client credentials) and/or exchanging the tokens of the MCP servers run apart
    at ``exchange_for``. Its id and secret, shown once (the store keeps a hash of the secret)."""
    if not (broker or exchange_for):
        raise ConfigError("omds-ld auth add-client: give --broker, --exchange-for, or both")
    known = {
        b.subject
        for i in (insurers or load_insurers(server.insurers_folder)).values()
        for b in i.brokers.values()
        if b.subject
    }
    if broker and broker not in known:
        raise ConfigError(
            f"omds-ld auth add-client: no insurer knows the broker {broker!r}; "
            f"brokers: {', '.join(sorted(known))}"
        )
    client_id = f"{broker or 'mcp'}-{secrets.token_hex(4)}"
    secret = secrets.token_urlsafe(32)
    metadata: dict[str, object] = {
        "client_name": name, "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES),
    }  # fmt: skip
    if broker:
        metadata["omds_ld_broker"] = broker
    if exchange_for:
        metadata["grant_types"] = ["client_credentials", TOKEN_EXCHANGE]
        metadata["omds_ld_exchanges_for"] = [url.rstrip("/") for url in exchange_for]
    store = auth_store(server)
    try:
        store.add_client(client_id, secret, metadata)
    finally:
        store.close()
    return {"client_id": client_id, "client_secret": secret, "broker": broker}
