"""The MCP service: connectors built from configuration, served over Streamable HTTP or stdio."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from omds_ld import metrics
from omds_ld.auth.resource import IDENTITY, TOKEN, KeySource, Refusal, ResourceGuard
from omds_ld.auth.tokens import Identity
from omds_ld.auth.upstream import ClientSecret, UpstreamTokens
from omds_ld.hosts import Allowlist
from omds_ld.mcp import hibernation
from omds_ld.mcp.config import AuthConfig, HttpConfig, InstanceConfig, McpConfig
from omds_ld.mcp.connector import Connector
from omds_ld.mcp.executor import Instance
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.state import StateStore, StateUnavailable
from omds_ld.mcp.transport import Transport
from omds_ld.mcp.upstream import CALLER, Caller, Upstream
from omds_ld.norm import Norm, hygiene
from omds_ld.process import freeze_startup_heap

SESSION_HEADER = "mcp-session-id"
RATE_LIMITED = "https://w3id.org/omds-ld/problems/rate-limited"
# how long an idempotency claim outlives the insurer's timeout (a crashed call's key is free then)
LEASE_MARGIN = 2.0
log = logging.getLogger("omds_ld.mcp")


def build_connectors(
    config: McpConfig,
    norm: Norm,
    state: StateStore,
    transport: Transport,
    token_http: httpx.AsyncClient | None = None,
) -> dict[str, Connector]:
    """One connector per configured instance, all on one state store and transport
    (``token_http`` reaches the insurer's authorization server, if not over the network)."""
    request_log = RequestLog(config.request_log)
    return {
        i.name: _connector(i, config, norm, state, transport, request_log, token_http)
        for i in config.instances
    }


def _connector(
    instance: InstanceConfig,
    config: McpConfig,
    norm: Norm,
    state: StateStore,
    transport: Transport,
    request_log: RequestLog,
    token_http: httpx.AsyncClient | None = None,
) -> Connector:
    tokens = None
    if config.auth.upstream:
        tokens = UpstreamTokens(
            ClientSecret(config.auth.token_url, config.auth.client_id, config.auth.client_secret),
            resource=instance.api.rstrip("/"),
            http=token_http,
        )
    upstream = Upstream(
        name=instance.name,
        api_url=instance.api,
        transport=transport,
        state=state,
        headers=instance.upstream_headers,
        default_ttl=config.cache_ttl_seconds,
        own_credentials=(
            _bearer(tokens.own) if tokens is not None and config.auth.own_token else None
        ),
    )
    return Connector(
        norm=norm,
        instance=Instance(instance.name, instance.display_name, instance.language),
        upstream=upstream,
        state=state,
        request_log=request_log,
        refresh_seconds=config.refresh_seconds,
        disabled_tools=instance.disabled_tools,
        # a call waits at most one timeout for the insurer; its idempotency claim a little longer
        lease_seconds=config.timeout_seconds + LEASE_MARGIN,
        rate=(config.calls_per_minute / 60, config.call_burst) if config.calls_per_minute else None,
        exchange=tokens.exchanged if tokens is not None else None,
    )


def _bearer(token: Callable[[], Any]) -> Callable[[], Any]:
    async def headers() -> dict[str, str]:
        return {"Authorization": f"Bearer {await token()}"}

    return headers


def http_client(config: McpConfig) -> httpx.AsyncClient:
    """The client every connector calls its insurer with: pooled, with a timeout."""
    return httpx.AsyncClient(timeout=httpx.Timeout(config.timeout_seconds), follow_redirects=False)


async def _refuse(
    send: Send,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    code: int = -32000,
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    ).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def _read_all(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None if it is larger than ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the buffered body once, then whatever the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class SessionBinding:
    """In front of one connector's endpoint: Host and Origin checked, sessions kept to their owner,
    hostile tool calls answered before the SDK parses them.

    A session opened here is bound to this connector for ``ttl`` seconds after its last request.
    Used at another connector's address it is refused with the name of its owner; after the
    binding lapses the session is unknown (404).

    A tools/call whose arguments no request may carry (a lone surrogate, a control character,
    nesting too deep: ``omds_ld.norm.hygiene``) gets the connector's tool error for it here, the
    same in both protocol eras: the SDK's parsers would refuse some of it as a protocol error in
    one era and not in the other.
    """

    def __init__(
        self,
        name: str,
        app: Callable[[Scope, Receive, Send], Any],
        bindings: StateStore,
        http: HttpConfig,
        connector: Connector | None = None,
        guard: ResourceGuard | None = None,
        required: bool = True,
        refused: Callable[[str, str], None] | None = None,
        manager: StreamableHTTPSessionManager | None = None,
    ) -> None:
        self.name = name
        self.app = app
        self.bindings = bindings
        self.http = http
        self.connector = connector
        self.guard = guard
        self.required = required  # False: a token sent is checked, none is anonymous (demo)
        self.refused = refused or metrics.refused
        self.allowlist = Allowlist(http.hosts, http.origins)
        # the sessions opened here and not lapsed: id → (client address, last request)
        self.open: dict[str, tuple[str, float]] = {}
        # requests of a session in flight now (a GET stream is in flight while it is open)
        self.in_flight: dict[str, int] = {}
        self.manager = manager  # the SDK's, for hibernating idle sessions and reviving them
        metrics.open_sessions(name, lambda: len(self.open))
        if manager is not None:
            metrics.live_sessions(name, lambda: hibernation.live(manager))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self.allowlist.allows_host(request.headers.get("host")):
            await _refuse(
                send, 421, "Invalid Host header; this endpoint accepts only allowed hosts"
            )
            return
        if not self.allowlist.allows_origin(request.headers.get("origin")):
            await _refuse(
                send, 403, "Invalid Origin header; this endpoint accepts only allowed origins"
            )
            return
        identity: Identity | None = None
        if self.guard is not None and (self.required or "authorization" in request.headers):
            found = await self.guard.identify(request.headers)
            if isinstance(found, Refusal):
                self.refused(self.name, found.reason)
                await _refuse(send, found.status, found.message, found.headers)
                return
            identity = found
            state = scope.setdefault("state", {})
            state[IDENTITY] = identity
            state[TOKEN] = request.headers["authorization"].partition(" ")[2].strip()
            state["broker"] = identity.subject  # the access log's, like the interfaces'
        subject = identity.subject if identity is not None else ""
        session = request.headers.get(SESSION_HEADER)
        ttl = self.http.session_binding_seconds
        # who opens sessions, for their caps: the broker, or else the client's address
        client = subject or (request.client.host if request.client else "unknown")
        if not session and request.method == "POST":
            refused = self._session_cap(client)
            if refused is not None:
                status, message, wait = refused
                await _refuse(send, status, message, {"Retry-After": str(wait)})
                return
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
            owner_name, _, rest = owner.decode().partition("\n")
            owner_subject, _, initialize = rest.partition("\n")
            if owner_name == self.name and owner_subject != subject:
                # another broker's session is as unknown as one that never was
                self.refused(self.name, "session")
                await _refuse(
                    send, 404, "Session not found: unknown, expired or not yours; initialize one"
                )
                return
            if owner_name != self.name:
                await _refuse(
                    send,
                    404,
                    f"Session belongs to the connector {owner_name!r} "
                    f"({self.http.path(owner_name)}), not to {self.name!r}; "
                    "initialize a new session here",
                )
                return
            if request.method == "DELETE":
                self.open.pop(session, None)
                with contextlib.suppress(StateUnavailable):  # it lapses on its own
                    await self.bindings.delete(key)
                if self.manager is not None and not hibernation.is_live(self.manager, session):
                    # a hibernated session has nothing more to end than its binding
                    await send({"type": "http.response.start", "status": 200, "headers": []})
                    await send({"type": "http.response.body", "body": b""})
                    return
            else:
                self.open[session] = (self.open.get(session, (client, 0.0))[0], time.monotonic())
                if self.manager is not None and not hibernation.is_live(self.manager, session):
                    version = request.headers.get("mcp-protocol-version") or ""
                    await hibernation.revive(
                        self.manager,
                        session,
                        version or _negotiated(initialize),
                        json.loads(initialize) if initialize else None,
                    )

        opening: dict[str, Any] = {}  # an initialize's parameters, kept with the binding
        if request.method == "POST" and self.connector is not None:
            body = await _read_all(receive, self.http.max_body_bytes)
            if body is None:
                await _refuse(send, 413, "Request body too large")
                return
            if not session:
                opening = _initialize_params(body)
            guard = self.guard
            if (
                guard is not None
                and identity is not None
                and not identity.allows(guard.write_scope)
                and self._changes_a_case(body)
            ):
                refusal = guard.insufficient(guard.write_scope)
                self.refused(self.name, refusal.reason)
                await _refuse(send, refusal.status, refusal.message, refusal.headers)
                return
            if await self._answer_hostile(body, session, client, send, subject):
                return
            receive = _replaying(body, receive)

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start" and not session:
                for header, value in message.get("headers", []):
                    if header.decode().lower() == SESSION_HEADER:
                        self.open[value.decode()] = (client, time.monotonic())
                        try:
                            await self.bindings.set(
                                f"session:{value.decode()}",
                                f"{self.name}\n{subject}\n{json.dumps(opening)}".encode(),
                                ttl,
                            )
                        except StateUnavailable as failure:  # unbound: the next request is 404
                            log.warning("%s: session not bound: %s", self.name, failure)
            await send(message)

        if not session:
            await self.app(scope, receive, bind)
            return
        self.in_flight[session] = self.in_flight.get(session, 0) + 1
        try:
            await self.app(scope, receive, bind)
        finally:
            left = self.in_flight.pop(session, 1) - 1
            if left:
                self.in_flight[session] = left
            if session in self.open:
                self.open[session] = (self.open[session][0], time.monotonic())

    async def hibernate_idle(self) -> int:
        """Let go of the SDK state of sessions idle longer than ``hibernate_seconds``."""
        if self.manager is None or self.http.hibernate_seconds <= 0:
            return 0
        now = time.monotonic()
        done = 0
        for session, (_, last) in list(self.open.items()):
            idle = now - last > self.http.hibernate_seconds
            if idle and not self.in_flight.get(session):
                done += await hibernation.hibernate(self.manager, session)
        return done

    def _changes_a_case(self, body: bytes) -> bool:
        """Whether the message calls a tool that creates or edits (such needs omds-ld.write)."""
        assert self.connector is not None
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return False  # answered as what it is further on
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        name = str(params.get("name", "")) if isinstance(params, dict) else ""
        operation = self.connector.norm.operations.get(name)
        return operation is not None and operation.kind in ("create", "edit")

    def _session_cap(self, client: str) -> tuple[int, str, int] | None:
        """Whether a new session may open: None, or the status, message and seconds to wait."""
        now = time.monotonic()
        ttl = self.http.session_binding_seconds
        for lapsed in [s for s, (_, last) in self.open.items() if now - last > ttl]:
            del self.open[lapsed]
        if len(self.open) >= self.http.max_sessions:
            oldest = min(last for _, last in self.open.values())
            return (
                503,
                f"Too many open sessions ({len(self.open)}) at this connector; retry later "
                f"({RATE_LIMITED})",
                max(1, round(oldest + ttl - now)),
            )
        mine = [last for address, last in self.open.values() if address == client]
        if len(mine) >= self.http.max_sessions_per_client:
            return (
                429,
                f"Too many open sessions ({len(mine)}) from this client; close one (DELETE) or "
                f"reuse it ({RATE_LIMITED})",
                max(1, round(min(mine) + ttl - now)),
            )
        return None

    async def _answer_hostile(
        self, body: bytes, session: str | None, client: str, send: Send, subject: str = ""
    ) -> bool:
        """Answer a tools/call with hostile arguments as the tool error it is; False otherwise."""
        assert self.connector is not None
        try:
            message = json.loads(body)
        except RecursionError:
            await _refuse(
                send,
                400,
                f"Parse error: nested deeper than {hygiene.MAX_DEPTH} levels",
                code=-32700,
            )
            return True
        except ValueError:
            return False  # the SDK answers what is not JSON
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        if not isinstance(params, dict) or not hygiene.violations(params.get("arguments")):
            return False
        name = str(params.get("name", ""))
        arguments = params.get("arguments")
        caller = CALLER.set(Caller(subject or None))  # for its log line and records
        try:
            result = await self.connector.refuse_hostile(
                name, arguments if isinstance(arguments, dict) else {}, session, client
            )
        finally:
            CALLER.reset(caller)
        answer = {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        encoded = json.dumps(answer).encode()  # ASCII: nothing the caller sent can break it
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(encoded)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": encoded})
        return True


class McpHosting:
    """Every connector's Streamable HTTP endpoint, for mounting in a Starlette app."""

    def __init__(
        self,
        connectors: Mapping[str, Connector],
        http: HttpConfig,
        state: StateStore,
        auth: AuthConfig | None = None,
        keys: KeySource | None = None,
        refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.connectors = dict(connectors)
        self.http = http
        self.auth = auth or AuthConfig(mode="off")
        self.refused = refused
        self.guards: dict[str, ResourceGuard] = {}
        if self.auth.checks_tokens:
            if keys is None:
                raise ValueError("checking tokens needs the authorization server's keys")
            base = (self.auth.public_url or f"http://{http.host}:{http.port}").rstrip("/")
            self.guards = {
                name: ResourceGuard(
                    base + http.path(name), self.auth.issuer, keys,
                    name=connector.instance.display_name,
                    read_scope=self.auth.read_scope, write_scope=self.auth.write_scope,
                )
                for name, connector in self.connectors.items()
            }  # fmt: skip
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
        self.bindings = {
            name: SessionBinding(
                name,
                StreamableHTTPASGIApp(manager),
                state,
                http,
                self.connectors[name],
                guard=self.guards.get(name),
                required=self.auth.mode == "required",
                refused=refused,
                manager=manager,
            )
            for name, manager in self.managers.items()
        }

    async def _hibernating(self) -> None:
        """Every few seconds: let go of idle sessions' SDK state."""
        every = max(0.5, min(10.0, self.http.hibernate_seconds / 4))
        while True:
            await asyncio.sleep(every)
            for binding in self.bindings.values():
                try:
                    await binding.hibernate_idle()
                except Exception:  # never the end of the sweeping
                    log.exception("%s: hibernating idle sessions failed", binding.name)

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route(self.http.path(name), binding) for name, binding in self.bindings.items()
        ]
        for name, guard in self.guards.items():  # RFC 9728: where each endpoint says who it trusts
            routes.append(
                Route(
                    f"/.well-known/oauth-protected-resource{self.http.path(name)}",
                    _metadata_route(guard.metadata()),
                )
            )
        return routes

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run every session manager; read each insurer's process knowledge at start."""
        async with contextlib.AsyncExitStack() as stack:
            for manager in self.managers.values():
                await stack.enter_async_context(manager.run())
            for connector in self.connectors.values():
                await connector.refresh(force=True)
                connector.learn_in_background()  # an insurer down at start is temporary
                stack.callback(connector.stop)
            if self.http.hibernate_seconds > 0:
                sweeper = asyncio.get_running_loop().create_task(self._hibernating())
                stack.callback(sweeper.cancel)
            yield


def _initialize_params(body: bytes) -> dict[str, Any]:
    """What a client said in its ``initialize`` (to revive its session later), or nothing."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return {}
    params = message.get("params")
    if not isinstance(params, dict):
        return {}
    return {k: params[k] for k in ("protocolVersion", "capabilities", "clientInfo") if k in params}


def _negotiated(initialize: str) -> str:
    try:
        version = json.loads(initialize).get("protocolVersion")
    except (ValueError, AttributeError):
        version = None
    return str(version or "2025-11-25")


def _metadata_route(metadata: Mapping[str, Any]) -> Callable[[Request], Any]:
    body = json.dumps(metadata).encode()

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return endpoint


async def serve_stdio(connector: Connector) -> None:
    """One connector over stdio: stdout carries only the protocol, logs go to stderr."""
    await connector.refresh(force=True)
    connector.learn_in_background()
    freeze_startup_heap()
    async with stdio_server() as (read_stream, write_stream):
        await connector.server.run(
            read_stream, write_stream, connector.server.create_initialization_options()
        )


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")
