"""The MCP service: connectors built from configuration, served over Streamable HTTP or stdio."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import mcp_types as types
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp_types import INTERNAL_ERROR, SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from opentelemetry.context import attach, detach
from opentelemetry.propagate import extract
from opentelemetry.trace import ProxyTracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from omds_ld import jsonwire, metrics
from omds_ld.auth.identity import IDENTITY, TOKEN, Identity
from omds_ld.auth.resource import KeySource, Refusal, ResourceGuard
from omds_ld.auth.tokens import RemoteKeys
from omds_ld.hosts import Allowlist
from omds_ld.mcp import hibernation
from omds_ld.mcp.assembly import build_connectors, http_transport, public_base, receipt_signer
from omds_ld.mcp.broker import NAME as BROKER
from omds_ld.mcp.broker import BrokerEndpoint
from omds_ld.mcp.config import AuthConfig, HttpConfig, McpConfig
from omds_ld.mcp.confirm import Confirmations
from omds_ld.mcp.confirmation_page import CONFIRMATION_PATH, ConfirmationPage
from omds_ld.mcp.connector import (
    Connector,
    Context,
    DirectContext,
    DirectSession,
    NormServer,
)
from omds_ld.mcp.events import RETRY_MILLISECONDS, StreamEvents
from omds_ld.mcp.executor import Instance
from omds_ld.mcp.state import StateStore, StateUnavailable, make_state, state_in_use
from omds_ld.mcp.upstream import CALLER, Caller
from omds_ld.norm import Norm, hygiene
from omds_ld.process import freeze_startup_heap
from omds_ld.settings import ConfigError

if TYPE_CHECKING:
    pass

SESSION_HEADER = "mcp-session-id"
RATE_LIMITED = "https://w3id.org/omds-ld/problems/rate-limited"
log = logging.getLogger("omds_ld.mcp")


def http_client(config: McpConfig) -> httpx.AsyncClient:
    """A client for the other HTTP the server does (an authorization server's keys)."""
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


class _Refused(Exception):
    """A step refuses the request: the JSON-RPC error answered, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: Mapping[str, str] | None = None,
        code: int = -32000,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.headers, self.code = status, message, headers, code
        self.reason = reason  # counted as a refused identity, by this reason


@dataclass
class _Exchange:
    """One HTTP request at an MCP endpoint, as its steps learn it."""

    scope: Scope
    receive: Receive
    send: Send
    request: Request
    identity: Identity | None = None
    client: str = "unknown"  # who opens sessions, for their caps: the broker, or the address
    session: str | None = None
    initialize: str = ""  # what the session's client said in its initialize, kept with it
    opening: dict[str, Any] = field(default_factory=dict)  # a new session's initialize
    message: Any = None  # a POST's JSON-RPC message, as parsed

    @property
    def subject(self) -> str:
        return self.identity.subject if self.identity is not None else ""


class Endpoint(Protocol):
    """An MCP server an endpoint serves: one insurer's connector, or the broker endpoint."""

    norm: Norm
    instance: Instance
    server: NormServer

    async def refuse_hostile(
        self, name: str, arguments: dict[str, Any], session: str | None, caller: str
    ) -> types.CallToolResult | types.InputRequiredResult: ...

    def binds(self, name: str, arguments: Mapping[str, Any] | None = None) -> bool: ...

    async def call_tool_for(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult: ...


class SessionBinding:
    """In front of one connector's endpoint: Host and Origin checked, sessions kept to their owner,
    hostile tool calls answered before the SDK parses them.

    A request goes through named steps, in this order (``__call__``): admission (Host, Origin,
    who calls), the session it names (bound here, owned by the caller, ended or revived), its
    body (size, the cap on new sessions, the write scope, hostile arguments), and the binding of
    a session the SDK opens in its answer. Each step refuses by raising ``_Refused``.

    A session opened here is bound to this connector for ``ttl`` seconds after its last request.
    Used at another connector's address it is refused with the name of its owner; after the
    binding lapses the session is unknown (404). A session is in flight from the moment its
    request arrives until its answer is sent, and is never hibernated while in flight.

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
        connector: Endpoint | None = None,
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
        # the sessions opened here and not lapsed: id → (who opened it, last request)
        self.open: dict[str, tuple[str, float]] = {}
        # requests of a session in flight now (a GET stream is in flight while it is open)
        self.in_flight: dict[str, int] = {}
        self.manager = manager  # the SDK's, for hibernating idle sessions and reviving them
        # sessions whose SDK state is being let go now: a request for one waits until it is gone
        self.hibernating: dict[str, asyncio.Event] = {}
        # the server's info as a 2026-07-28 result carries it (made at the first such answer)
        self.stamp: dict[str, Any] | None = None
        metrics.open_sessions(name, lambda: len(self.open))
        if manager is not None:
            metrics.live_sessions(name, lambda: hibernation.live(manager))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(scope, receive, send, Request(scope))
        try:
            await self._admit(exchange)
            exchange.session = exchange.request.headers.get(SESSION_HEADER) or None
            if exchange.session is None:
                if await self._read_body(exchange) or await self._answer_directly(exchange):
                    return
                await self.app(scope, exchange.receive, self._binding(exchange))
                return
            self._hold(exchange.session)
            try:
                if await self._continue_session(exchange):
                    return
                if await self._read_body(exchange):
                    return
                if await self._answer_directly(exchange):
                    return
                await self._revive(exchange)
                await self.app(scope, exchange.receive, send)
            finally:
                self._release(exchange.session)
        except _Refused as refusal:
            if refusal.reason:
                self.refused(self.name, refusal.reason)
            await _refuse(send, refusal.status, refusal.message, refusal.headers, refusal.code)

    # admission: who may send anything here at all

    async def _admit(self, exchange: _Exchange) -> None:
        """Host and Origin exactly as allowed; the caller's token checked (where one is
        required, or sent)."""
        request = exchange.request
        if not self.allowlist.allows_host(request.headers.get("host")):
            raise _Refused(421, "Invalid Host header; this endpoint accepts only allowed hosts")
        if not self.allowlist.allows_origin(request.headers.get("origin")):
            raise _Refused(403, "Invalid Origin header; this endpoint accepts only allowed origins")
        if self.guard is not None and (self.required or "authorization" in request.headers):
            found = await self.guard.identify(request.headers)
            if isinstance(found, Refusal):
                raise _Refused(found.status, found.message, found.headers, reason=found.reason)
            exchange.identity = found
            state = exchange.scope.setdefault("state", {})
            state[IDENTITY] = found
            state[TOKEN] = request.headers["authorization"].partition(" ")[2].strip()
            state["broker"] = found.subject  # the access log's, like the interfaces'
        exchange.client = exchange.subject or (request.client.host if request.client else "unknown")

    # the session a request names

    def _hold(self, session: str) -> None:
        """The session is in flight from now: no sweep hibernates it under the request."""
        self.in_flight[session] = self.in_flight.get(session, 0) + 1

    def _release(self, session: str) -> None:
        left = self.in_flight.pop(session, 1) - 1
        if left:
            self.in_flight[session] = left
        if session in self.open:
            self.open[session] = (self.open[session][0], time.monotonic())

    async def _continue_session(self, exchange: _Exchange) -> bool:
        """The session's binding read: it must be this connector's and the caller's. A DELETE
        ends it; any other request revives it if it hibernated. True if answered here."""
        session = exchange.session
        assert session is not None
        key = f"session:{session}"
        try:
            owner = await self.bindings.get_and_touch(key, self.http.session_binding_seconds)
        except StateUnavailable as failure:
            log.warning("%s: session binding not read: %s", self.name, failure)
            raise _Refused(
                503, "Service unavailable for a moment: session state cannot be read"
            ) from None
        if owner is None:
            raise _Refused(404, "Session not found: unknown or expired; initialize a new session")
        owner_name, _, rest = owner.decode().partition("\n")
        owner_subject, _, exchange.initialize = rest.partition("\n")
        if owner_name == self.name and owner_subject != exchange.subject:
            # another broker's session is as unknown as one that never was
            raise _Refused(
                404,
                "Session not found: unknown, expired or not yours; initialize one",
                reason="session",
            )
        if owner_name != self.name:
            raise _Refused(
                404,
                f"Session belongs to the connector {owner_name!r} "
                f"({self.http.path(owner_name)}), not to {self.name!r}; "
                "initialize a new session here",
            )
        going = self.hibernating.get(session)
        if going is not None:  # swept just before this request came: revive it once it is gone
            await going.wait()
        live = self.manager is None or hibernation.is_live(self.manager, session)
        if exchange.request.method == "DELETE":
            self.open.pop(session, None)
            with contextlib.suppress(StateUnavailable):  # it lapses on its own
                await self.bindings.delete(key)
            if not live:  # a hibernated session has nothing more to end than its binding
                await exchange.send({"type": "http.response.start", "status": 200, "headers": []})
                await exchange.send({"type": "http.response.body", "body": b""})
                return True
            return False
        self.open[session] = (self.open.get(session, (exchange.client, 0.0))[0], time.monotonic())
        return False

    async def _revive(self, exchange: _Exchange) -> None:
        """A hibernated session's SDK state made again, for a request the SDK answers."""
        session = exchange.session
        if session is None or self.manager is None or hibernation.is_live(self.manager, session):
            return
        version = exchange.request.headers.get("mcp-protocol-version") or ""
        initialize = exchange.initialize
        opening = json.loads(initialize) if initialize else None
        await hibernation.revive(self.manager, session, version or _negotiated(initialize), opening)
        self._stream_to_ask(session, opening or {})

    def _stream_to_ask(self, session: str, opening: Mapping[str, Any]) -> None:
        """A session whose client can be asked (elicitation, form mode) is answered as a stream
        (SSE) from its next request on, so that a binding call can ask the person within it;
        every other session keeps answers in plain JSON."""
        if _asks_in_stream(opening):
            hibernation.stream_answers(self.manager, session)

    # the body

    async def _read_body(self, exchange: _Exchange) -> bool:
        """A POST's body, read whole within its size: a new session's initialize within the
        caps, a change with the write scope, hostile arguments answered as the tool error they
        are (True: answered here). The SDK then gets the body as it came."""
        if exchange.request.method != "POST" or self.connector is None:
            return False
        body = await _read_all(exchange.receive, self.http.max_body_bytes)
        if body is None:
            raise _Refused(413, "Request body too large")
        message = _message(body)
        if exchange.session is None and _method(message) == "initialize":
            self._session_cap(exchange.client)
            exchange.opening = _initialize_params(message)
        guard, identity = self.guard, exchange.identity
        if (
            guard is not None
            and identity is not None
            and not identity.allows(guard.write_scope)
            and self._changes_a_case(message)
        ):
            refusal = guard.insufficient(guard.write_scope)
            raise _Refused(refusal.status, refusal.message, refusal.headers, reason=refusal.reason)
        if await self._answer_hostile(body, message, exchange):
            return True
        exchange.message = message
        exchange.receive = _replaying(body, exchange.receive)
        return False

    # a tool call answered beside the SDK

    async def _answer_directly(self, exchange: _Exchange) -> bool:
        """A tools/call answered here, without the SDK's session machinery in between (its
        streams, tasks and middleware cost more than the call's own work): the same connector
        call, its result shaped for the wire by the SDK's serializer for the protocol version
        (and stamped with the server's info in the 2026-07-28 era, as the SDK does). Only where
        nothing but the answer can pass: a tool that binds no customer (only a binding call
        asks the person, so a client that can be asked is answered here too, in JSON even where
        its session streams), no OpenTelemetry tracing set up (the SDK's spans stay whole).
        True if answered here."""
        call = _direct_call(exchange)
        if call is None or self.connector is None:
            return False
        request_id, params, version, capabilities = call
        if self.connector.binds(params.name, params.arguments):
            return False
        session = DirectSession(version, client_capabilities=capabilities)
        context = DirectContext(exchange.request, session, request_id)
        # the caller's W3C trace context (in the request's _meta) is the call's, as the SDK's
        # middleware makes it
        carried = extract(params.meta) if params.meta else None
        traced = carried is not None and trace.get_current_span(carried).get_span_context().is_valid
        token = attach(carried) if carried is not None and traced else None
        try:
            result = await self.connector.call_tool_for(context, params)
            # the whole structured answer in _meta is JSON already (read from the insurer's
            # JSON): it goes on as it is, not through pydantic's dump twice
            meta = dict(result.meta or {})
            if version in MODERN_PROTOCOL_VERSIONS:  # the server's stamp, as the SDK's runner
                # made once: the SDK's property copies it deeply at every access, against a
                # caller that changes it; this one is only written out
                if self.stamp is None:
                    self.stamp = self.connector.server.server_info_stamp
                meta[SERVER_INFO_META_KEY] = self.stamp
            plain = _plain_result(result, version)
            try:
                encoded = None if plain is None else _encoded(request_id, plain, meta)
            except TypeError:  # a value only pydantic's dump makes JSON of
                encoded = None
            if encoded is None:
                dumped = result.model_dump(
                    by_alias=True, mode="json", exclude_none=True, exclude={"meta"}
                )
                shaped = serialize_server_result("tools/call", version, dumped)
                encoded = _encoded(request_id, shaped, meta)
        except Exception:
            log.exception("%s: a tool call answered directly failed", self.name)
            encoded = jsonwire.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
                }
            )
        finally:
            if token is not None:
                detach(token)
        await _answer_json(exchange, encoded)
        return True

    # a new session

    def _binding(self, exchange: _Exchange) -> Send:
        """A send that binds the session the SDK opens in its answer (if it opens one) to this
        connector and the caller, with the client's initialize."""
        send, client, subject = exchange.send, exchange.client, exchange.subject

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start":
                for header, value in message.get("headers", []):
                    if header.decode().lower() == SESSION_HEADER:
                        session = value.decode()
                        self.open[session] = (client, time.monotonic())
                        self._stream_to_ask(session, exchange.opening)
                        try:
                            await self.bindings.set(
                                f"session:{session}",
                                f"{self.name}\n{subject}\n{json.dumps(exchange.opening)}".encode(),
                                self.http.session_binding_seconds,
                            )
                        except StateUnavailable as failure:  # unbound: the next request is 404
                            log.warning("%s: session not bound: %s", self.name, failure)
            await send(message)

        return bind

    async def hibernate_idle(self) -> int:
        """Let go of the SDK state of sessions idle longer than ``hibernate_seconds``; a session
        with a request in flight (or one that came while this ran) is never idle."""
        if self.manager is None or self.http.hibernate_seconds <= 0:
            return 0
        done = 0
        for session in list(self.open):
            opened = self.open.get(session)  # read now: a request may have come meanwhile
            if opened is None or self.in_flight.get(session):
                continue
            if time.monotonic() - opened[1] > self.http.hibernate_seconds:
                going = self.hibernating[session] = asyncio.Event()
                try:
                    done += await hibernation.hibernate(self.manager, session)
                finally:
                    del self.hibernating[session]
                    going.set()
        return done

    def _changes_a_case(self, message: Any) -> bool:
        """Whether the message calls a tool that creates or edits (such needs omds-ld.write)."""
        assert self.connector is not None
        if _method(message) != "tools/call":
            return False
        params = message.get("params")
        name = str(params.get("name", "")) if isinstance(params, dict) else ""
        operation = self.connector.norm.operations.get(name)
        return operation is not None and operation.kind in ("create", "edit")

    def _session_cap(self, client: str) -> None:
        """Whether a new session may open here (an initialize; nothing else opens one): within
        the endpoint's cap of open sessions, and the caller's of live ones; else refused with
        the seconds until a slot frees."""
        now = time.monotonic()
        ttl = self.http.session_binding_seconds
        for lapsed in [s for s, (_, last) in self.open.items() if now - last > ttl]:
            del self.open[lapsed]
        if len(self.open) >= self.http.max_sessions:
            oldest = min(last for _, last in self.open.values())
            raise _Refused(
                503,
                f"Too many open sessions ({len(self.open)}) at this connector; retry later "
                f"({RATE_LIMITED})",
                {"Retry-After": str(max(1, round(oldest + ttl - now)))},
            )
        # a hibernated session holds no SDK state: it frees its caller's slot when it hibernates
        hibernates = self.manager is not None and self.http.hibernate_seconds > 0
        idle = self.http.hibernate_seconds if hibernates else ttl
        mine = [
            last
            for session, (owner, last) in self.open.items()
            if owner == client and (not hibernates or hibernation.is_live(self.manager, session))  # type: ignore[arg-type]
        ]
        if len(mine) >= self.http.max_sessions_per_client:
            raise _Refused(
                429,
                f"Too many open sessions ({len(mine)}) from this client; close one (DELETE), "
                f"reuse it, or send requests of their own (2026-07-28) ({RATE_LIMITED})",
                {"Retry-After": str(max(1, round(min(mine) + idle - now)))},
            )

    async def _answer_hostile(self, body: bytes, message: Any, exchange: _Exchange) -> bool:
        """Answer a tools/call with hostile arguments as the tool error it is; False otherwise."""
        assert self.connector is not None
        if message is _TOO_DEEP:
            raise _Refused(
                400, f"Parse error: nested deeper than {hygiene.MAX_DEPTH} levels", code=-32700
            )
        if _method(message) != "tools/call":
            return False
        params = message.get("params")
        if not isinstance(params, dict) or not hygiene.violations(params.get("arguments")):
            return False
        name = str(params.get("name", ""))
        arguments = params.get("arguments")
        caller = CALLER.set(Caller(exchange.subject or None))  # for its log line and records
        try:
            result = await self.connector.refuse_hostile(
                name,
                arguments if isinstance(arguments, dict) else {},
                exchange.session,
                exchange.client,
            )
        finally:
            CALLER.reset(caller)
        answer = {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        await _answer_json(exchange, answer)
        return True


_TOO_DEEP = object()  # a message nested deeper than JSON can be read


def _encoded(request_id: types.RequestId, shaped: dict[str, Any], meta: Mapping[str, Any]) -> bytes:
    """A tool call's JSON-RPC answer in JSON."""
    if meta:
        shaped["_meta"] = meta
    return jsonwire.dumps({"jsonrpc": "2.0", "id": request_id, "result": shaped})


# what a result of text and structuredContent has set (tool_result, without_answer)
_PLAIN_RESULT = frozenset({"content", "structured_content", "is_error", "meta"})


def _plain_result(result: Any, version: str) -> dict[str, Any] | None:
    """A tool result of text blocks and structuredContent (every answer and refusal of the
    norm's) written as the SDK's serializer writes it for ``version``, without pydantic's
    dump and validation in between; None for any other result (the SDK's serializer shapes
    it). ``_meta`` is left to the caller."""
    if result.__class__ is not types.CallToolResult or result.model_fields_set - _PLAIN_RESULT:
        return None
    content = []
    for block in result.content:
        if block.__class__ is not types.TextContent or block.model_fields_set - {"type", "text"}:
            return None
        content.append({"text": block.text, "type": "text"})
    shaped: dict[str, Any] = {"content": content, "isError": result.is_error}
    if version in MODERN_PROTOCOL_VERSIONS:
        shaped["resultType"] = "complete"
    if result.structured_content is not None:
        shaped["structuredContent"] = result.structured_content
    return shaped


# the params of the plainest call: a tool's name and its arguments, nothing else
_PLAIN_PARAMS = frozenset({"name", "arguments"})


def _plain_params(params: Any) -> types.CallToolRequestParams | None:
    """The params of a call with a tool's name and its arguments as an object and nothing else:
    both eras' schemas admit them as they are, so only the model the server reads is made (the
    version's schema is not asked too). None for any other params (the SDK's validation reads
    them against the version's schema)."""
    if params.__class__ is not dict or not params.keys() <= _PLAIN_PARAMS:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if name.__class__ is not str or not (arguments is None or arguments.__class__ is dict):
        return None
    # pydantic's validation of a dict this plain: a third of model_construct's Python loop
    return types.CallToolRequestParams.model_validate(params, by_name=False)


async def _answer_json(exchange: _Exchange, answer: Mapping[str, Any] | bytes) -> None:
    """A JSON-RPC answer of the endpoint's own, in JSON (200), with the session it names."""
    # any string the caller sent encodes (jsonwire)
    encoded = answer if isinstance(answer, bytes) else jsonwire.dumps(answer)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(encoded)).encode()),
    ]
    if exchange.session is not None:
        headers.append((SESSION_HEADER.encode(), exchange.session.encode()))
    await exchange.send({"type": "http.response.start", "status": 200, "headers": headers})
    await exchange.send({"type": "http.response.body", "body": encoded})


def _asks_in_stream(opening: Any) -> bool:
    """Whether a session's client can be asked within a call (elicitation, form or URL mode),
    so that its answers come as a stream (SSE)."""
    return _can_ask(opening.get("capabilities") if isinstance(opening, Mapping) else None)


def _can_ask(capabilities: Any) -> bool:
    """Whether client capabilities declare elicitation in either mode (an empty elicitation
    capability is form mode; URL mode alone is asked too: ``elicitation/create`` with the
    confirmation page's address, never the address in the model's text)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, Mapping) else None
    return isinstance(elicitation, Mapping)


def _direct_call(
    exchange: _Exchange,
) -> tuple[types.RequestId, types.CallToolRequestParams, str, types.ClientCapabilities] | None:
    """A request's tools/call, its id, protocol version and the client's capabilities, if it may
    be answered beside the SDK (``SessionBinding._answer_directly``); None for anything the SDK
    answers."""
    message, request = exchange.message, exchange.request
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    if message.get("method") != "tools/call" or isinstance(request_id, bool):
        return None
    has_json = _accepts_json(request.headers.get("accept", ""))
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not isinstance(request_id, (int, str)) or not has_json or content_type != "application/json":
        return None
    if not isinstance(trace.get_tracer_provider(), ProxyTracerProvider):
        return None
    version = request.headers.get("mcp-protocol-version") or ""
    if exchange.session is not None:  # 2025: the session's version, its client as it opened
        if version not in HANDSHAKE_PROTOCOL_VERSIONS or version != _negotiated(
            exchange.initialize
        ):
            return None
        declared = _session_capabilities(exchange.initialize or "")
        if declared is None:
            return None
    else:  # 2026-07-28: the envelope each request carries, checked as the SDK checks it
        if version not in MODERN_PROTOCOL_VERSIONS or any(
            name.startswith("mcp-param-") for name in request.headers
        ):
            return None
        route = classify_inbound_request(message, headers=request.headers)
        if not isinstance(route, InboundModernRoute):
            return None
        try:
            declared = types.ClientCapabilities.model_validate(
                route.client_capabilities or {}, by_name=False
            )
        except ValueError:  # pydantic's ValidationError is one: the SDK says what is wrong
            return None
    # a client that can be asked is answered here too: only a binding call asks, and those the
    # SDK answers (SessionBinding._answer_directly)
    try:
        params = _plain_params(message.get("params"))
        if params is None:
            validate_client_request("tools/call", version, message.get("params"))
            params = types.CallToolRequestParams.model_validate(
                message.get("params"), by_name=False
            )
    except (ValueError, KeyError):  # pydantic's ValidationError is one: the SDK says what is wrong
        return None
    return request_id, params, version, declared


@functools.lru_cache(maxsize=256)  # a client sends the same Accept at every call
def _accepts_json(accept: str) -> bool:
    """Whether an Accept header admits JSON, with the wildcards of RFC 9110 (as the SDK reads
    it: parameters such as q are not weighed)."""
    media = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return not media.isdisjoint(("application/json", "application/*", "*/*"))


@functools.lru_cache(maxsize=4096)
def _session_capabilities(initialize: str) -> types.ClientCapabilities | None:
    """The capabilities a session's client declared in its initialize (None: none that can be
    read), read once per session rather than at each of its calls (the model is only read)."""
    try:
        opening = json.loads(initialize) if initialize else {}
        capabilities = opening.get("capabilities") if isinstance(opening, Mapping) else None
        return types.ClientCapabilities.model_validate(capabilities or {}, by_name=False)
    except ValueError:  # pydantic's ValidationError is one
        return None


def _message(body: bytes) -> Any:
    """The JSON-RPC message of a body: what it parses to, ``_TOO_DEEP``, or None if it is no
    JSON at all (the SDK answers that)."""
    try:
        return jsonwire.loads(body)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:
        return None


def _method(message: Any) -> str | None:
    return str(message.get("method")) if isinstance(message, dict) else None


def _manager(endpoint: Endpoint, http: HttpConfig) -> StreamableHTTPSessionManager:
    """The SDK's session manager of one endpoint: its Host and Origin rules, its sessions' idle
    time, JSON answers where nothing streams, every SSE stream primed with an event id and a
    retry interval (SEP-1699)."""
    return StreamableHTTPSessionManager(
        app=endpoint.server,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=http.hosts,
            allowed_origins=http.origins,
        ),
        session_idle_timeout=http.session_binding_seconds,
        json_response=True,
        max_request_body_size=http.max_body_bytes,
        event_store=StreamEvents(),
        retry_interval=RETRY_MILLISECONDS,
    )


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
        page_http: httpx.AsyncClient | None = None,
    ) -> None:
        self.connectors = dict(connectors)
        # the confirmation page asks the authorization server through this client
        self.page_http = page_http
        # every endpoint: each connector's, and where there are several insurers the broker
        # endpoint in front of them all
        self.endpoints: dict[str, Endpoint] = dict(self.connectors)
        self.paths = {name: http.path(name) for name in self.connectors}
        if len(self.connectors) > 1:
            norm = next(iter(self.connectors.values())).norm
            self.endpoints[BROKER] = BrokerEndpoint(self.connectors, norm)
            self.paths[BROKER] = http.broker_path
        self.http = http
        self.auth = auth or AuthConfig(mode="off")
        self.refused = refused
        self.guards: dict[str, ResourceGuard] = {}
        if self.auth.checks_tokens:
            if keys is None:
                raise ValueError("checking tokens needs the authorization server's keys")
            base = public_base(http, self.auth)
            self.guards = {
                name: ResourceGuard(
                    base + self.paths[name], self.auth.issuer, keys,
                    name=endpoint.instance.display_name,
                    read_scope=self.auth.read_scope, write_scope=self.auth.write_scope,
                    published=self.auth.mode == "required",
                )
                for name, endpoint in self.endpoints.items()
            }  # fmt: skip
        self.managers = {name: _manager(e, http) for name, e in self.endpoints.items()}
        for manager in self.managers.values():
            hibernation.prepare(manager)
        self.state = state
        self.bindings = {
            name: SessionBinding(
                name,
                StreamableHTTPASGIApp(manager),
                state,
                http,
                self.endpoints[name],
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
            Route(self.paths[name], binding) for name, binding in self.bindings.items()
        ]
        page = page_address(self.http, self.auth)
        login = self.auth.page_login
        if page is not None and login is not None and self.page_http is not None:
            guards = {name: self.guards[name] for name in self.connectors}
            confirmations = Confirmations(self.state, page)
            routes += ConfirmationPage(confirmations, login, guards, self.page_http, page).routes()
        for name, guard in self.guards.items():  # RFC 9728: where each endpoint says who it trusts
            if not guard.published:  # tokens optional: no client is sent to log in first
                continue
            routes.append(
                Route(
                    f"/.well-known/oauth-protected-resource{self.paths[name]}",
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


def _initialize_params(message: Any) -> dict[str, Any]:
    """What a client said in its ``initialize`` (to revive its session later), or nothing."""
    params = message.get("params") if _method(message) == "initialize" else None
    if not isinstance(params, dict):
        return {}
    return {k: params[k] for k in ("protocolVersion", "capabilities", "clientInfo") if k in params}


@functools.lru_cache(maxsize=4096)  # asked at each call of a session: read once per session
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


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


def standalone_app(config: McpConfig, norm: Norm) -> Starlette:
    """``omds-ld mcp --http``: every configured instance's endpoint, health and metrics, in
    front of insurers reached over HTTP; authorization as ``config.auth`` says (it must say)."""
    if not config.auth.mode:
        raise ConfigError(
            "omds-ld mcp --http: say who may call: --auth-issuer URL (OAuth, the norm's way) or "
            "--no-auth (every caller the same anonymous broker); or [auth] in --config"
        )
    state = make_state(config.redis_url)
    client = http_client(config)  # the authorization server's keys
    keys = RemoteKeys(config.auth.keys_uri, client) if config.auth.checks_tokens else None
    page = page_address(config.http, config.auth)
    transport = http_transport(config)
    connectors = build_connectors(
        config, norm, state, transport, confirmation_page=page, receipts=receipt_signer(config)
    )
    hosting = McpHosting(connectors, config.http, state, config.auth, keys, page_http=client)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client, transport, state_in_use(state), hosting.running():
            freeze_startup_heap()
            yield

    return Starlette(
        routes=[*hosting.routes(), Route("/healthz", healthz), Route("/metrics", metrics.endpoint)],
        lifespan=lifespan,
    )


def page_address(http: HttpConfig, auth: AuthConfig) -> str | None:
    """Where the confirmation page is: only where it can log the person in (an authorization
    server that knows it as a client); None: there is none."""
    if auth.page_login is None:
        return None
    return public_base(http, auth) + CONFIRMATION_PATH


def standalone_banner(config: McpConfig) -> list[str]:
    """What ``omds-ld mcp --http`` prints when it starts."""
    base = (config.auth.public_url or f"http://{config.http.host}:{config.http.port}").rstrip("/")
    lines = [
        f"Authorization: {config.auth.mode}, OAuth 2.1 ({config.auth.issuer})"
        if config.auth.checks_tokens
        else "Authorization: off (--no-auth): every caller is the same broker"
    ]
    lines += [
        f"  claude mcp add --transport http {i.name} {base}{config.http.path(i.name)}"
        for i in config.instances
    ]
    if len(config.instances) > 1:
        lines.append(
            f"  claude mcp add --transport http insurers {base}{config.http.broker_path}"
            "  (the broker endpoint: every insurer's tools once, with an insurer argument)"
        )
    return lines
