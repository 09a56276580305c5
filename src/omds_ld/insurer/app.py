"""The example server: every insurer's interface under /omds-ld/insurers/<name>/api (Starlette)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from joserfc.jwk import KeySet
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omds_ld import jsonwire
from omds_ld.auth.tokens import READ, WRITE, Identity, TokenRefused
from omds_ld.hosts import LOOPBACK_HOSTS, LOOPBACK_ORIGINS, Allowlist, HostGuard
from omds_ld.insurer.answers import Answer
from omds_ld.insurer.config import ServerConfig
from omds_ld.insurer.data import ANONYMOUS, Broker, Insurer, load_insurers
from omds_ld.insurer.problems import FieldError, Problem
from omds_ld.insurer.service import InsurerService, offset_clock
from omds_ld.insurer.store import Claim, ClaimLost, Replay, Store
from omds_ld.norm import Norm, Operation, hygiene, load_norm
from omds_ld.norm.jsonld import CONTEXT_URL, context_document
from omds_ld.norm.receipt import load_key_set
from omds_ld.norm.schemas import SchemaValidator
from omds_ld.process import freeze_startup_heap
from omds_ld.routing import indexed
from omds_ld.serving import BodyLimit, route_of
from omds_ld.settings import ConfigError

# checks an access token for an audience (an interface's URL): its identity, or TokenRefused
TokenCheck = Callable[[str, str], Identity]
log = logging.getLogger("omds_ld.insurer")

PREFIX = "/omds-ld/insurers"
LD_JSON = "application/ld+json"
PROBLEM_JSON = "application/problem+json"
JSON_MEDIA = ("application/json", "application/ld+json")


def api_base(name: str) -> str:
    return f"{PREFIX}/{name}/api"


def _dumps(body: Any) -> bytes:
    return jsonwire.dumps(body)


def problem_body(
    norm: Norm, problem: Problem, instance: str, steps: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The RFC 9457 body of a problem, with the admissible operations as next steps."""
    kind = norm.problem_types[problem.slug]
    body: dict[str, Any] = {
        "@context": CONTEXT_URL,
        "type": kind.uri,
        "title": kind.title_en,
        "status": kind.status,
        "detail": problem.detail,
        "instance": instance,
        "bc:title": {"de": kind.title_de, "en": kind.title_en},
    }
    if problem.errors:
        body["errors"] = [{"pointer": e.pointer, "detail": e.detail} for e in problem.errors]
    body.update(problem.extra)
    body["bc:nextStep"] = list(problem.next_steps if problem.next_steps is not None else steps)
    return body


class OperationEndpoint:
    """One operation at one insurer: checks the request, keeps retries single, answers."""

    def __init__(
        self,
        config: ServerConfig,
        service: InsurerService,
        operation: Operation,
        tokens: TokenCheck | None = None,
    ) -> None:
        self.config = config
        self.service = service
        self.operation = operation
        self.tokens = tokens
        self.audience = config.base_url + api_base(service.insurer.name)
        self.by_subject = {b.subject: b for b in service.insurer.brokers.values() if b.subject}
        self.handler = service.handler(operation.operation_id)
        self._param_validators = {p.name: SchemaValidator(p.schema) for p in operation.parameters}

    async def respond(self, request: Request) -> Response:
        try:
            raw = await _read_body(request, self.config.max_body_bytes)
        except Problem as problem:
            return self._problem(problem, request.url.path)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            broker = self._broker(headers, request.state)
        except Problem as problem:
            return self._problem(problem, request.url.path)
        # on the event loop, not in a worker thread: the store is one connection under one lock,
        # so operations never overlapped in it, and threads only added hand-offs and a queue at
        # that lock (benchmarks/hop.py); a commit writes to the page cache (WAL, synchronous
        # NORMAL) and the checkpoint's disk waits are the store's own thread's
        return self.handle(
            broker=broker,
            path=request.url.path,
            path_params=dict(request.path_params),
            query=dict(request.query_params),
            headers=headers,
            raw=raw,
        )

    def _problem(self, problem: Problem, path: str) -> Response:
        body = problem_body(self.service.norm, problem, path, self.service.answers.entry_steps())
        status = self.service.norm.problem_types[problem.slug].status
        return Response(
            _dumps(body), status, headers=dict(problem.headers), media_type=PROBLEM_JSON
        )

    def handle(
        self,
        *,
        broker: Broker,
        path: str,
        path_params: Mapping[str, str],
        query: Mapping[str, str],
        headers: Mapping[str, str],
        raw: bytes,
    ) -> Response:
        """Carry out one request, on the event loop, from its checks to its commit.

        A write runs in one transaction of the store with its encoded answer and its idempotency
        record: it is answered 2xx exactly when it is committed, and a failure anywhere (the
        answer included) rolls all of it back, so "nothing was changed" is true."""
        store = self.service.store
        insurer = self.service.insurer.name
        claimed: tuple[str, str, Claim] | None = None
        try:
            params = self._params(path_params, query)
            body = self._body(headers, raw)
            key = self._idempotency_key(headers)
            if key is not None:
                state = self._claim(broker, key, path, body)
                if isinstance(state, Replay):
                    replayed = {**state.headers, "Idempotency-Replayed": "true"}
                    return Response(state.body, state.status, headers=replayed)
                claimed = (broker.id, key, state)
            return self._carry_out(broker, params, body, headers, claimed)
        except Problem as problem:
            if claimed is not None:
                store.release_idempotent(insurer, *claimed)
            return self._problem(problem, path)
        except ClaimLost:
            # the lease lapsed and another request with this key took over: it acts, this not
            return self._problem(
                Problem(
                    "idempotency-request-in-progress",
                    "another request with this Idempotency-Key took over; retry shortly",
                    headers={"Retry-After": "1"},
                ),
                path,
            )
        except Exception:
            log.exception("%s failed", self.operation.operation_id)
            if claimed is not None:
                store.release_idempotent(insurer, *claimed)
            return self._problem(
                Problem("internal-error", "the interface failed; nothing was changed, retry later"),
                path,
            )
        finally:
            if claimed is not None:  # committed or released: no longer running here
                store.let_go(insurer, claimed[0], claimed[1])

    def _carry_out(
        self,
        broker: Broker,
        params: Mapping[str, Any],
        body: Any,
        headers: Mapping[str, str],
        claimed: tuple[str, str, Claim] | None,
    ) -> Response:
        """The operation itself; a write with its encoded answer and its idempotency record in
        one transaction (an answer that cannot be encoded rolls the write back). A read carries
        its ETag and freshness, and is 304 to a client that has it."""
        store = self.service.store
        writes = self.operation.method != "GET" and self.operation.draft
        with store.unit() if writes else contextlib.nullcontext():
            answer: Answer = self.handler(broker, params, body)
            response_headers = {"Content-Type": LD_JSON, **answer.headers}
            encoded = _dumps(answer.body)
            if self.operation.method == "GET":
                etag = '"' + hashlib.sha256(encoded).hexdigest()[:32] + '"'
                # catalogue reads may be kept a minute; a broker's cases are revalidated;
                # personal data are never kept
                freshness = "no-cache" if self.operation.draft else "max-age=60"
                if self.operation.personal:
                    freshness = "no-store"
                cache_control = f"private, {freshness}"
                response_headers.update({"ETag": etag, "Cache-Control": cache_control})
                if headers.get("if-none-match") == etag:
                    return Response(
                        b"", 304, headers={"ETag": etag, "Cache-Control": cache_control}
                    )
            if claimed is not None:
                store.complete_idempotent(
                    self.service.insurer.name, *claimed, answer.status, response_headers, encoded
                )
        return Response(encoded, answer.status, headers=response_headers)

    def _broker(self, headers: Mapping[str, str], state: Any) -> Broker:
        """Who calls: a broker by its static demo token, or by an access token of the
        authorization server for this interface (its subject, ``sub``, is the broker); anonymous
        where tokens are not required. What the access log keeps of a token goes on ``state``
        (subject, audience, client, actor), never the token."""
        authorization = headers.get("authorization")
        unauthorized = {"WWW-Authenticate": 'Bearer realm="omds-ld"'}
        if not authorization:
            if self.config.require_token:
                raise Problem(
                    "unauthorized",
                    "this insurer refuses anonymous callers; send Authorization: Bearer <token>",
                    headers=unauthorized,
                )
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        broker = self.service.insurer.brokers.get(token) if scheme.lower() == "bearer" else None
        if broker is None and scheme.lower() == "bearer" and self.tokens and token.count(".") == 2:
            try:
                identity = self.tokens(token, self.audience)
            except TokenRefused as refused:
                raise Problem(
                    "unauthorized",
                    f"the access token is refused: {refused.description}",
                    headers={"WWW-Authenticate": f'Bearer realm="omds-ld", error="invalid_token", '
                             f'error_description="{refused.description}"'},
                ) from None  # fmt: skip
            state.token = {"subject": identity.subject, "audience": identity.audience,
                           "client": identity.client_id, "actor": identity.actor}  # fmt: skip
            self._check_scope(identity)
            broker = self.by_subject.get(identity.subject)
            if broker is None:
                # a client acting for no broker of this insurer reads the catalogue, nothing else
                if self.operation.method != "GET" or any(
                    p.name == "caseId" for p in self.operation.path_parameters
                ):
                    raise Problem(
                        "unauthorized",
                        f"{identity.subject} is no broker of this insurer: its token reads the "
                        "catalogue only",
                        headers=unauthorized,
                    )
                broker = Broker(id=f"client:{identity.client_id}", name=identity.client_id,
                                service=True)  # fmt: skip
        if broker is None:
            raise Problem(
                "unauthorized",
                "the bearer token names no broker of this insurer",
                headers=unauthorized,
            )
        state.broker = broker.id
        return broker

    def _check_scope(self, identity: Identity) -> None:
        """An access token allows what its scope says, exactly as at the MCP endpoints: every
        call needs omds-ld.read, a call that creates or edits omds-ld.write too."""
        needed = WRITE if self.operation.kind in ("create", "edit") else READ
        for scope in dict.fromkeys((READ, needed)):
            if not identity.allows(scope):
                raise Problem(
                    "insufficient-scope",
                    f"{self.operation.operation_id} needs the scope {scope}; the token has "
                    f"{' '.join(sorted(identity.scopes)) or 'none'}. Nothing was done.",
                    headers={"WWW-Authenticate": f'Bearer realm="omds-ld", '
                             f'error="insufficient_scope", scope="{scope}"'},
                )  # fmt: skip

    def _params(self, path_params: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for parameter in self.operation.path_parameters:
            value = path_params[parameter.name]
            if not self._param_validators[parameter.name].is_valid(value):
                raise Problem(
                    "not-found",
                    f"{parameter.name} {value!r} has not the form of an id, so nothing has it",
                )
            params[parameter.name] = value
        for parameter in self.operation.query_parameters:
            schema = parameter.schema
            if parameter.name not in query:
                params[parameter.name] = schema.get("default")
                continue
            raw_value = query[parameter.name]
            value_: Any = raw_value
            if schema.get("type") == "integer":
                try:
                    value_ = int(raw_value)
                except ValueError:
                    value_ = raw_value
            errors = self._param_validators[parameter.name].violations(value_)
            if errors:
                raise Problem(
                    "invalid-parameter",
                    f"{parameter.name}={raw_value!r} is not admissible: {errors[0].detail}",
                    errors=[FieldError(f"?{parameter.name}", errors[0].detail)],
                )
            params[parameter.name] = value_
        return params

    def _body(self, headers: Mapping[str, str], raw: bytes) -> Any:
        operation = self.operation
        if operation.request_schema is None:
            return None
        if not raw.strip():
            if operation.body_required:
                raise Problem(
                    "invalid-body",
                    f"{operation.operation_id} needs a JSON-LD body",
                    errors=[FieldError("", "a body is required")],
                )
            return {}
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in JSON_MEDIA and not media.endswith("+json"):
            raise Problem(
                "unsupported-media-type",
                f"bodies are application/ld+json or application/json, not {media or 'untyped'}",
            )
        try:
            body = jsonwire.loads(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise Problem(
                "malformed-request", f"the body is not well-formed JSON: {error}"
            ) from None
        except RecursionError:
            raise Problem(
                "invalid-body",
                f"the body is nested deeper than {hygiene.MAX_DEPTH} levels",
                errors=[FieldError("", f"at most {hygiene.MAX_DEPTH} levels of nesting")],
            ) from None
        hostile = hygiene.violations(body)
        if hostile:
            raise Problem(
                "invalid-body",
                "the body carries a value no request may carry; nothing was changed",
                errors=[FieldError(v.pointer, v.detail) for v in hostile],
            )
        violations = operation.body_violations(body)
        if violations:
            raise Problem(
                "invalid-body",
                f"the body does not match the schema of {operation.operation_id} "
                f"({len(violations)} violation(s))",
                errors=[FieldError(v.pointer, v.detail) for v in violations],
            )
        return body

    def _idempotency_key(self, headers: Mapping[str, str]) -> str | None:
        key = headers.get("idempotency-key")
        if key is None or not self.operation.takes_idempotency_key:
            return None
        if not self._param_validators["Idempotency-Key"].is_valid(key):
            raise Problem(
                "invalid-parameter",
                "Idempotency-Key must be 1 to 255 printable ASCII characters",
                errors=[FieldError("Idempotency-Key", "1 to 255 printable ASCII characters")],
            )
        return key

    def _claim(self, broker: Broker, key: str, path: str, body: Any) -> Claim | Replay:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        fingerprint = hashlib.sha256(
            f"{self.operation.operation_id}\n{path}\n{canonical}".encode()
        ).hexdigest()
        state = self.service.store.begin_idempotent(
            self.service.insurer.name,
            broker.id,
            key,
            fingerprint,
            self.config.idempotency_retention_seconds,
            self.config.idempotency_lease_seconds,
        )
        if state == "mismatch":
            raise Problem(
                "idempotency-key-reused",
                "this Idempotency-Key was used for another request; use a new key",
            )
        if state == "in-progress":
            raise Problem(
                "idempotency-request-in-progress",
                "a request with this Idempotency-Key is still being processed; retry shortly",
                headers={"Retry-After": "1"},
            )
        return state


async def _read_body(request: Request, limit: int) -> bytes:
    too_large = Problem("payload-too-large", f"the body exceeds {limit} bytes")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _openapi_for(norm: Norm, name: str) -> dict[str, Any]:
    document = dict(norm.openapi)
    document["servers"] = [{"url": api_base(name)}]
    return document


class Interfaces:
    """Every insurer's interface under /omds-ld/insurers/<name>/api, on one embedded store: the
    routes, what a request no route has is answered, the middleware every request passes, and
    the store to close at the end. ``tokens`` checks an access token for an interface (its URL
    the audience), if an authorization server issues them."""

    def __init__(
        self,
        config: ServerConfig,
        norm: Norm | None = None,
        insurers: Mapping[str, Insurer] | None = None,
        tokens: TokenCheck | None = None,
        receipt_keys: Callable[[], KeySet] | None = None,
    ) -> None:
        self.config = config
        self.norm = norm or load_norm()
        self.insurers = dict(insurers or load_insurers(config.insurers_folder))
        self.store = Store(config.database)
        self.store.purge_idempotent(config.idempotency_retention_seconds)
        clock = offset_clock(config.clock_offset_days * 86400)
        trusted = trusted_receipt_keys(config.trusted_receipt_keys, receipt_keys)
        self.services = {
            name: InsurerService(self.norm, insurer, self.store, api_base(name), clock, trusted)
            for name, insurer in self.insurers.items()
        }
        self.tokens = tokens

    def routes(self) -> list[BaseRoute]:
        """One route per operation path of every insurer, its OpenAPI file, and the server's
        index, the norm's context and health."""
        routes: list[BaseRoute] = []
        for name, service in self.services.items():
            by_path: dict[str, dict[str, OperationEndpoint]] = {}
            for operation in self.norm.operations.values():
                endpoint = OperationEndpoint(self.config, service, operation, self.tokens)
                by_path.setdefault(operation.path, {})[operation.method] = endpoint
            for path, endpoints in by_path.items():
                routes.append(
                    Route(api_base(name) + path, _dispatch(endpoints), methods=list(endpoints))
                )
            openapi = _static(_openapi_for(self.norm, name))
            routes.append(Route(api_base(name) + "/openapi.json", openapi))
            icon = service.insurer.icon
            if icon is not None:  # what an MCP client shows beside the insurer's server
                routes.append(Route(icon_path(name, icon[0]), _image(*icon)))
        index = _static(self.index())
        return [
            *routes,
            Route("/", index),
            Route(PREFIX, index),
            Route("/omds-ld/context.jsonld", _static(context_document(), LD_JSON)),
            Route("/healthz", _static({"status": "ok"})),
        ]

    def index(self) -> dict[str, Any]:
        return {
            "name": "omds-ld example server",
            "insurers": [
                {"name": name, "displayName": insurer.display_name, "api": api_base(name),
                 "openapi": api_base(name) + "/openapi.json",
                 "draftAtServer": insurer.draft_at_server}
                for name, insurer in self.insurers.items()
            ],
            "context": "/omds-ld/context.jsonld",
            "chat": "/chat",
        }  # fmt: skip

    def middleware(self) -> list[Middleware]:
        """What every request of the server passes, outermost first: the access log (if kept),
        Host and Origin, the body cap."""
        allowlist = Allowlist(
            (*LOOPBACK_HOSTS, *self.config.allowed_hosts),
            (*LOOPBACK_ORIGINS, *self.config.allowed_origins),
        )
        middleware = [
            Middleware(HostGuard, allowlist=allowlist),
            Middleware(BodyLimit, limit=self.config.max_request_bytes),
        ]
        if self.config.access_log:
            middleware.insert(0, Middleware(AccessLog, path=self.config.access_log))
        return middleware

    def exception_handlers(self) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
        """A path or method no route has: a problem of the norm, with where one can go."""

        async def not_found(request: Request, exc: Exception) -> Response:
            return _routing_problem(self.norm, self.services, request, exc)

        return {404: not_found, 405: not_found}

    def close(self) -> None:
        self.store.close()


def trusted_receipt_keys(
    files: tuple[Path, ...], authorization_server: Callable[[], KeySet] | None
) -> Callable[[], KeySet]:
    """The receipt keys the insurers trust: their authorization server's (read anew each time:
    they rotate) and those of the JWKS files given (read once, at start)."""
    given: list[Any] = []
    for path in files:
        try:
            given += load_key_set(path.read_text("utf-8")).keys
        except (OSError, ValueError) as error:
            raise ConfigError(f"--trust-receipt-keys {path}: {error}") from None

    def keys() -> KeySet:
        server = list(authorization_server().keys) if authorization_server is not None else []
        return KeySet([*server, *given])

    return keys


def create_app(
    config: ServerConfig,
    norm: Norm | None = None,
    insurers: Mapping[str, Insurer] | None = None,
    tokens: TokenCheck | None = None,
) -> Starlette:
    """The insurers' interfaces alone, as one app (the example server adds the rest beside them:
    ``omds_ld.example``)."""
    interfaces = Interfaces(config, norm, insurers, tokens)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        freeze_startup_heap()
        yield
        interfaces.close()

    app = indexed(
        Starlette(
            routes=interfaces.routes(),
            exception_handlers=interfaces.exception_handlers(),
            lifespan=lifespan,
            middleware=interfaces.middleware(),
        )
    )
    app.state.store = interfaces.store
    app.state.services = interfaces.services
    return app


class AccessLog:
    """One JSON line per HTTP request (method, path, status, duration): who asked the insurer what."""

    def __init__(self, app: ASGIApp, path: Path) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            entry: dict[str, Any] = {
                "method": scope["method"],
                "path": route_of(scope["path"]),
                "status": status,
                "durationMs": round((time.perf_counter() - started) * 1000, 2),
            }
            trace = _trace_id(scope)
            if trace:
                entry["traceId"] = trace
            state = scope.get("state") or {}
            if state.get("broker"):
                entry["broker"] = state["broker"]
            if state.get("token"):  # who the token speaks for, never the token
                entry["token"] = state["token"]
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry) + "\n")


def _dispatch(
    endpoints: Mapping[str, OperationEndpoint],
) -> Callable[[Request], Awaitable[Response]]:
    """One route per path, so that a wrong method is answered with every method the path has."""

    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await endpoints[method].respond(request)

    return endpoint


def icon_path(name: str, file: str) -> str:
    """Where an insurer's icon is served: beside its interface."""
    return f"{api_base(name)}/{file}"


def _image(file: str, content: bytes) -> Callable[[Request], Awaitable[Response]]:
    media = "image/svg+xml" if file.endswith(".svg") else "image/png"

    async def endpoint(request: Request) -> Response:
        return Response(content, media_type=media, headers={"Cache-Control": "max-age=86400"})

    return endpoint


def _static(body: Any, media: str = "application/json") -> Callable[[Request], Awaitable[Response]]:
    encoded = _dumps(body)

    async def endpoint(request: Request) -> Response:
        return Response(encoded, media_type=media)

    return endpoint


def _routing_problem(
    norm: Norm, services: Mapping[str, InsurerService], request: Request, exc: Exception
) -> Response:
    """A problem for an address or method no operation has, with where one can go instead."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    path = request.url.path
    parts = path.split("/")
    service = services.get(parts[3]) if path.startswith(PREFIX + "/") and len(parts) > 3 else None
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
    if status == 405:
        problem = Problem("method-not-allowed", f"{request.method} is not allowed on {path}")
    elif service is None:
        problem = Problem(
            "not-found",
            f"there is nothing at {path}; insurers: {', '.join(api_base(n) for n in services)}",
        )
    else:
        problem = Problem("not-found", f"{path} is no operation of {service.insurer.display_name}")
    steps = service.answers.entry_steps() if service else []
    body = problem_body(norm, problem, path, steps)
    return JSONResponse(body, status, headers=headers, media_type=PROBLEM_JSON)


def _trace_id(scope: Scope) -> str | None:
    """The trace id of a W3C ``traceparent`` header (version-traceid-spanid-flags), if valid."""
    for name, value in scope.get("headers", []):
        if name == b"traceparent":
            parts: list[str] = bytes(value).decode("latin-1").split("-")
            if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
                return parts[1]
    return None
