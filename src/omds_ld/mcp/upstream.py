"""The insurer's interface over HTTP, with a cache for reads shared by all tools of a connector."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from omds_ld.mcp.state import StateStore
from omds_ld.norm import Operation

MAX_ANSWER_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class UpstreamResponse:
    """The insurer's answer to one call, and whether it came from the cache."""

    status: int
    body: Any
    url: str
    method: str
    from_cache: bool


class InsurerUnavailable(Exception):
    """The insurer could not be asked: temporary, retry later."""

    def __init__(self, kind: Literal["timeout", "unreachable"], detail: str, url: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.url = url


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
    served from before the write.
    """

    def __init__(
        self,
        *,
        name: str,
        api_url: str,
        client: httpx.AsyncClient,
        state: StateStore,
        headers: Mapping[str, str] | None = None,
        default_ttl: float = 30.0,
        revalidate_ttl: float = 600.0,
    ) -> None:
        self.name = name
        self.api_url = api_url.rstrip("/")
        self.client = client
        self.state = state
        self.headers = dict(headers or {})
        self.default_ttl = default_ttl
        self.revalidate_ttl = revalidate_ttl

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

    async def _generation(self, scope: str) -> str:
        value = await self.state.get(f"gen:{self.name}:{scope}")
        return value.decode() if value else "0"

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
        headers = {"Accept": "application/ld+json, application/problem+json", **self.headers}
        if operation.method != "GET":
            if idempotency_key:
                headers["Idempotency-Key"] = idempotency_key
            response = await self._request(operation.method, url, headers, body)
            await self.state.incr(f"gen:{self.name}:{scope}")
            return UpstreamResponse(
                response.status_code, _json(response), url, operation.method, False
            )

        key = f"cache:{self.name}:{await self._generation(scope)}:{url}"
        cached_raw = await self.state.get(key)
        cached = json.loads(cached_raw) if cached_raw else None
        if cached and cached["fresh_until"] > time.time() and not revalidate:
            return UpstreamResponse(cached["status"], cached["body"], url, "GET", True)
        if cached and cached.get("etag"):
            headers["If-None-Match"] = cached["etag"]
        response = await self._request("GET", url, headers, None)
        if response.status_code == 304 and cached:
            await self._keep(key, cached, response)
            return UpstreamResponse(cached["status"], cached["body"], url, "GET", True)
        answer = UpstreamResponse(response.status_code, _json(response), url, "GET", False)
        if response.status_code == 200:
            await self._keep(key, {"status": 200, "body": answer.body}, response)
        return answer

    async def _keep(self, key: str, entry: dict[str, Any], response: httpx.Response) -> None:
        control = _cache_control(response.headers.get("cache-control"))
        if "no-store" in control:
            return
        etag = response.headers.get("etag") or entry.get("etag")
        if "no-cache" in control:
            fresh = 0.0
        elif control.get("max-age"):
            fresh = float(control["max-age"] or 0)
        else:
            fresh = self.default_ttl
        if fresh <= 0 and not etag:
            return
        entry = {**entry, "etag": etag, "fresh_until": time.time() + fresh}
        ttl = max(fresh, self.revalidate_ttl if etag else 0.0)
        await self.state.set(key, json.dumps(entry).encode(), ttl)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: Any
    ) -> httpx.Response:
        content = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False).encode()
            headers = {**headers, "Content-Type": "application/ld+json"}
        try:
            response = await self.client.request(method, url, headers=headers, content=content)
        except httpx.TimeoutException as error:
            raise InsurerUnavailable(
                "timeout", f"the insurer did not answer in time ({error!r})", url
            ) from None
        except httpx.TransportError as error:
            raise InsurerUnavailable(
                "unreachable", f"the insurer cannot be reached ({error!r})", url
            ) from None
        if len(response.content) > MAX_ANSWER_BYTES:
            raise InsurerUnavailable("unreachable", "the insurer's answer is too large to use", url)
        return response


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return {"detail": response.text[:500]}
