"""The insurer's interface, with a cache for reads shared by all tools of a connector."""

from __future__ import annotations

import contextvars
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from opentelemetry.propagate import inject

from omds_ld import jsonwire, metrics
from omds_ld.mcp.state import StateStore
from omds_ld.mcp.transport import RawAnswer, Transport
from omds_ld.norm import Operation

# the longest an answer is kept fresh, whatever the insurer's max-age says
MAX_FRESH = 3600.0

Credentials = Callable[[], Awaitable[Mapping[str, str]]]


@dataclass(frozen=True)
class Caller:
    """Whom a call to the insurer is made for: a broker (``subject``, as the authorization
    server names it) with how to authenticate as them, or nobody (the MCP server itself)."""

    subject: str | None = None
    credentials: Credentials | None = None


# set for the length of one MCP request by the connector; the MCP server's own reads run without
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar(
    "caller",
    default=Caller(),  # noqa: B039 (frozen: nobody can change the default)
)


@dataclass(frozen=True)
class UpstreamResponse:
    """The insurer's answer to one call, and whether it came from the cache."""

    status: int
    body: Any
    url: str
    method: str
    from_cache: bool
    # reads: how old the answer is and until when (epoch seconds) the insurer lets it be reused;
    # None for writes
    age: float | None = None
    fresh_until: float | None = None
    # the insurer answered a retried write with the answer of the first request (Idempotency-Key)
    replayed: bool = False
    # why the body cannot be used at all (not JSON, empty), or None
    invalid: str | None = None
    media_type: str = ""
    # the JSON text the body was read from (b"" where there is none)
    text: bytes = b""


def _cache_control(value: str | None) -> dict[str, str | None]:
    directives: dict[str, str | None] = {}
    for part in (value or "").split(","):
        name, _, argument = part.strip().partition("=")
        if name:
            directives[name.lower()] = argument.strip('"') or None
    return directives


class Upstream:
    """Calls one insurer's operations; reads are cached, writes invalidate what they touch.

    Freshness follows the insurer: ``Cache-Control: max-age`` keeps an answer fresh that long,
    ``no-cache`` keeps it to revalidate with its ``ETag`` (a 304 reuses it), ``no-store`` keeps
    nothing. An answer without ``Cache-Control`` is kept ``default_ttl`` seconds. Every write bumps
    the generation of the resource it acts on (``/calculations/<id>``), so no read below it is
    served from before the write. A cache entry is a line of JSON (the generation it was read
    in, ETag, fresh until) followed by the insurer's body as it came; a read takes the generation
    and the entry in one round trip to the state store. A 304 to a ``no-cache`` answer writes
    nothing: the entry lives ``revalidate_ttl`` from its last full answer.
    """

    def __init__(
        self,
        *,
        name: str,
        api_url: str,
        transport: Transport,
        state: StateStore,
        headers: Mapping[str, str] | None = None,
        default_ttl: float = 30.0,
        revalidate_ttl: float = 600.0,
        own_credentials: Credentials | None = None,
    ) -> None:
        self.name = name
        self.api_url = api_url.rstrip("/")
        self.transport = transport
        self.state = state
        self.headers = {
            "Accept": "application/ld+json, application/problem+json",
            **(headers or {}),
        }
        self.default_ttl = default_ttl
        self.revalidate_ttl = revalidate_ttl
        # how the MCP server authenticates as itself (client credentials), if not by a static token
        self.own_credentials = own_credentials
        # a generation outlives every entry read under the one before it, so that no entry
        # from before a write is ever fresh again
        self.generation_ttl = 2 * max(MAX_FRESH, revalidate_ttl)

    def url(
        self, operation: Operation, path_params: Mapping[str, str], query: Mapping[str, Any]
    ) -> str:
        url = operation.href(self.api_url, **path_params)
        present = {k: v for k, v in query.items() if v is not None}
        return f"{url}?{urlencode(present)}" if present else url

    @staticmethod
    def _scope(operation: Operation, path_params: Mapping[str, str]) -> str:
        path = operation.href("", **path_params)
        return "/".join(path.split("/")[:3])

    async def send(
        self,
        operation: Operation,
        path_params: Mapping[str, str],
        query: Mapping[str, Any],
        body: Any,
        idempotency_key: str | None,
        *,
        revalidate: bool = False,
    ) -> UpstreamResponse:
        """Call an operation; ``revalidate`` asks the insurer even if a cached read is fresh."""
        url = self.url(operation, path_params, query)
        scope = self._scope(operation, path_params)
        headers = dict(self.headers)
        caller = CALLER.get()
        credentials = caller.credentials or self.own_credentials
        if credentials is not None:
            headers.update(await credentials())
        inject(headers)  # the caller's trace goes on to the insurer (W3C traceparent), if any
        if operation.method != "GET":
            return await self._write(operation, url, scope, headers, body, idempotency_key)
        if operation.personal:
            # the norm says it carries personal data: never kept here, whatever the insurer's
            # Cache-Control says (an insurer that forgets no-store changes nothing)
            return await self._read(url, scope, None, headers, revalidate=True)
        # kept per broker: what one broker may read is never served to another from here
        key = f"cache:{self.name}:{caller.subject or '-'}:{url}"
        return await self._read(url, scope, key, headers, revalidate)

    async def _write(
        self,
        operation: Operation,
        url: str,
        scope: str,
        headers: dict[str, str],
        body: Any,
        idempotency_key: str | None,
    ) -> UpstreamResponse:
        """A write, with its key; every read below its resource is stale from now on."""
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        content = None
        if body is not None:
            content = jsonwire.dumps(body)
            headers["Content-Type"] = "application/ld+json"
        answer = await self._request(operation.method, url, headers, content)
        # a new generation, never one used before: entries read before this write are stale
        # (a counter could start again at 1 once its key expired, and revive old entries)
        await self.state.set(
            f"gen:{self.name}:{scope}", secrets.token_hex(8).encode(), self.generation_ttl
        )
        replayed = answer.headers.get("idempotency-replayed", "").lower() == "true"
        parsed, invalid = _json(answer)
        return UpstreamResponse(
            answer.status, parsed, url, operation.method, False, replayed=replayed,
            invalid=invalid, media_type=_media(answer), text=answer.content if invalid is None else b"",
        )  # fmt: skip

    async def _read(
        self, url: str, scope: str, key: str | None, headers: dict[str, str], revalidate: bool
    ) -> UpstreamResponse:
        """A read: from the cache while fresh (the resource's generation and the entry in one
        round trip; an entry from before the latest write is no entry), else asked again, with
        the entry's ETag if it has one. Without a key it is neither looked up nor kept."""
        if key is None:
            raw_generation, raw_entry = None, None
        else:
            raw_generation, raw_entry = await self.state.get_many([f"gen:{self.name}:{scope}", key])
        generation = raw_generation.decode() if raw_generation else "0"
        cached = _entry(raw_entry)
        if cached is not None and cached[0].get("gen") != generation:
            cached = None
        now = time.time()
        if cached is not None:
            meta, content = cached
            if meta["fresh_until"] > now and not revalidate:
                age = max(0.0, now - float(meta.get("stored", now)))
                return UpstreamResponse(
                    200, jsonwire.loads(content), url, "GET", True, age, meta["fresh_until"],
                    text=content,
                )  # fmt: skip
            if meta.get("etag"):
                headers["If-None-Match"] = meta["etag"]
        answer = await self._request("GET", url, headers, None)
        fresh_until = now + (_freshness(answer, self.default_ttl) or 0.0)
        if answer.status == 304 and cached is not None and key is not None:
            meta, content = cached
            if fresh_until > now:  # a new lease of freshness
                await self._keep(key, generation, answer, content, meta.get("etag"))
            return UpstreamResponse(
                200, jsonwire.loads(content), url, "GET", True, 0.0, fresh_until, text=content
            )
        parsed, invalid = _json(answer)
        result = UpstreamResponse(
            answer.status, parsed, url, "GET", False, 0.0, fresh_until,
            invalid=invalid, media_type=_media(answer), text=answer.content if invalid is None else b"",
        )  # fmt: skip
        if (
            key is not None
            and answer.status == 200
            and isinstance(result.body, dict)
            and not invalid
        ):
            await self._keep(key, generation, answer, answer.content, None)
        return result

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        """One request to the insurer, its time measured (``omds_ld_insurer_request_seconds``)."""
        started = time.perf_counter()
        status = 0
        try:
            answer = await self.transport.request(method, url, dict(headers), content)
            status = answer.status
            return answer
        finally:
            metrics.observe_insurer(self.name, method, status, time.perf_counter() - started)

    async def forget(
        self, operation: Operation, path_params: Mapping[str, str], query: Mapping[str, Any]
    ) -> None:
        """Drop a kept read (an answer found to break the norm is never served again)."""
        subject = CALLER.get().subject or "-"
        await self.state.delete(
            f"cache:{self.name}:{subject}:{self.url(operation, path_params, query)}"
        )

    async def _keep(
        self, key: str, generation: str, answer: RawAnswer, content: bytes, etag: str | None
    ) -> None:
        fresh = _freshness(answer, self.default_ttl)
        if fresh is not None:
            fresh = min(fresh, MAX_FRESH)
        etag = answer.headers.get("etag") or etag
        if fresh is None or (fresh <= 0 and not etag):  # no-store, or nothing to revalidate by
            return
        now = time.time()
        meta = {"gen": generation, "etag": etag, "fresh_until": now + fresh, "stored": now}
        ttl = max(fresh, self.revalidate_ttl if etag else 0.0)
        await self.state.set(key, jsonwire.dumps(meta) + b"\n" + content, ttl)


def _freshness(answer: RawAnswer, default_ttl: float) -> float | None:
    """How long an answer may be used without asking again, by its Cache-Control; None: it must
    not be kept at all (no-store)."""
    control = _cache_control(answer.headers.get("cache-control"))
    if "no-store" in control:
        return None
    if "no-cache" in control:
        return 0.0
    if control.get("max-age"):
        return float(control["max-age"] or 0)
    return default_ttl


def _entry(raw: bytes | None) -> tuple[dict[str, Any], bytes] | None:
    """A cache entry: its metadata and the body bytes."""
    if not raw:
        return None
    meta, _, content = raw.partition(b"\n")
    return jsonwire.loads(meta), content


def _json(answer: RawAnswer) -> tuple[Any, str | None]:
    """The body as JSON, and why it cannot be used if it cannot (the start of a text body is
    kept as ``detail``, so an error page still says something)."""
    if not answer.content:
        return None, "an empty body"
    try:
        return jsonwire.loads(answer.content), None
    except ValueError:
        text = answer.content[:500].decode("utf-8", "replace")
        return {"detail": text}, "a body that is not JSON"


def _media(answer: RawAnswer) -> str:
    return answer.headers.get("content-type", "").split(";")[0].strip().lower()
