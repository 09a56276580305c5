"""The MCP service: connectors built from configuration, served over Streamable HTTP or stdio."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from omds_ld.mcp.config import HttpConfig, InstanceConfig, McpConfig
from omds_ld.mcp.connector import Connector
from omds_ld.mcp.executor import Instance
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.state import StateStore, StateUnavailable
from omds_ld.mcp.transport import Transport
from omds_ld.mcp.upstream import Upstream
from omds_ld.norm import Norm
from omds_ld.process import freeze_startup_heap

SESSION_HEADER = "mcp-session-id"
log = logging.getLogger("omds_ld.mcp")


def build_connectors(
    config: McpConfig, norm: Norm, state: StateStore, transport: Transport
) -> dict[str, Connector]:
    """One connector per configured instance, all on one state store and transport."""
    request_log = RequestLog(config.request_log)
    return {
        i.name: _connector(i, config, norm, state, transport, request_log) for i in config.instances
    }


def _connector(
    instance: InstanceConfig,
    config: McpConfig,
    norm: Norm,
    state: StateStore,
    transport: Transport,
    request_log: RequestLog,
) -> Connector:
    upstream = Upstream(
        name=instance.name,
        api_url=instance.api,
        transport=transport,
        state=state,
        headers=instance.upstream_headers,
        default_ttl=config.cache_ttl_seconds,
    )
    return Connector(
        norm=norm,
        instance=Instance(instance.name, instance.display_name, instance.language),
        upstream=upstream,
        state=state,
        request_log=request_log,
        refresh_seconds=config.refresh_seconds,
        disabled_tools=instance.disabled_tools,
    )


def http_client(config: McpConfig) -> httpx.AsyncClient:
    """The client every connector calls its insurer with: pooled, with a timeout."""
    return httpx.AsyncClient(timeout=httpx.Timeout(config.timeout_seconds), follow_redirects=False)


async def _refuse(
    send: Send, status: int, message: str, headers: Mapping[str, str] | None = None
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
    ).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class SessionBinding:
    """In front of one connector's endpoint: Host and Origin checked, sessions kept to their owner.

    A session opened here is bound to this connector for ``ttl`` seconds after its last request.
    Used at another connector's address it is refused with the name of its owner; after the
    binding lapses the session is unknown (404).
    """

    def __init__(
        self,
        name: str,
        app: Callable[[Scope, Receive, Send], Any],
        bindings: StateStore,
        http: HttpConfig,
    ) -> None:
        self.name = name
        self.app = app
        self.bindings = bindings
        self.http = http
        self.security = TransportSecurityMiddleware(
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=http.hosts,
                allowed_origins=http.origins,
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = await self.security.validate_request(request)
        if refused is not None:
            reason = bytes(refused.body).decode()
            await _refuse(
                send,
                refused.status_code,
                f"{reason}; this endpoint accepts only allowed hosts and origins",
            )
            return
        session = request.headers.get(SESSION_HEADER)
        ttl = self.http.session_binding_seconds
        if session:
            key = f"session:{session}"
            try:
                owner = await self.bindings.get_and_touch(key, ttl)
            except StateUnavailable as failure:
                log.warning("%s: session binding not read: %s", self.name, failure)
                await _refuse(
                    send, 503, "Service unavailable for a moment: session state cannot be read"
                )
                return
            if owner is None:
                await _refuse(
                    send, 404, "Session not found: unknown or expired; initialize a new session"
                )
                return
            if owner.decode() != self.name:
                owner_name = owner.decode()
                await _refuse(
                    send,
                    404,
                    f"Session belongs to the connector {owner_name!r} "
                    f"({self.http.path(owner_name)}), not to {self.name!r}; "
                    "initialize a new session here",
                )
                return
            if request.method == "DELETE":
                with contextlib.suppress(StateUnavailable):  # it lapses on its own
                    await self.bindings.delete(key)

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start" and not session:
                for header, value in message.get("headers", []):
                    if header.decode().lower() == SESSION_HEADER:
                        try:
                            await self.bindings.set(
                                f"session:{value.decode()}", self.name.encode(), ttl
                            )
                        except StateUnavailable as failure:  # unbound: the next request is 404
                            log.warning("%s: session not bound: %s", self.name, failure)
            await send(message)

        await self.app(scope, receive, bind)


class McpHosting:
    """Every connector's Streamable HTTP endpoint, for mounting in a Starlette app."""

    def __init__(
        self, connectors: Mapping[str, Connector], http: HttpConfig, state: StateStore
    ) -> None:
        self.connectors = dict(connectors)
        self.http = http
        self.managers = {
            name: StreamableHTTPSessionManager(
                app=connector.server,
                security_settings=TransportSecuritySettings(
                    enable_dns_rebinding_protection=True,
                    allowed_hosts=http.hosts,
                    allowed_origins=http.origins,
                ),
                session_idle_timeout=http.session_binding_seconds,
                json_response=True,
                max_request_body_size=http.max_body_bytes,
            )
            for name, connector in self.connectors.items()
        }
        self.state = state

    def routes(self) -> list[BaseRoute]:
        return [
            Route(
                self.http.path(name),
                SessionBinding(name, StreamableHTTPASGIApp(manager), self.state, self.http),
            )
            for name, manager in self.managers.items()
        ]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run every session manager; read each insurer's process knowledge at start."""
        async with contextlib.AsyncExitStack() as stack:
            for manager in self.managers.values():
                await stack.enter_async_context(manager.run())
            for connector in self.connectors.values():
                await connector.refresh(force=True)
            yield


async def serve_stdio(connector: Connector) -> None:
    """One connector over stdio: stdout carries only the protocol, logs go to stderr."""
    await connector.refresh(force=True)
    freeze_startup_heap()
    async with stdio_server() as (read_stream, write_stream):
        await connector.server.run(
            read_stream, write_stream, connector.server.create_initialization_options()
        )


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")
