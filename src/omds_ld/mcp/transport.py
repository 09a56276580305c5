"""How the MCP server reaches an insurer's interface: over HTTP (``http_client``), or through
ASGI in one process.

Both carry the same HTTP requests and answers; the upstream cache and the pipeline above them do
not know which one is used. A failure to get an answer at all is ``InsurerUnavailable``: temporary,
distinct from any answer the insurer gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

MAX_ANSWER_BYTES = 2 * 1024 * 1024

AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]


class InsurerUnavailable(Exception):
    """The insurer could not be asked: temporary, retry later."""

    def __init__(self, kind: Literal["timeout", "unreachable"], detail: str, url: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.url = url


@dataclass(frozen=True)
class RawAnswer:
    """What the insurer's interface answered: status, headers (lower-case names), body bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class Transport(Protocol):
    """Sends one HTTP request to the insurer's interface."""

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer: ...


def too_large(url: str) -> InsurerUnavailable:
    return InsurerUnavailable("unreachable", "the insurer's answer is too large to use", url)


def joined(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names in lower case; a repeated header's values joined with commas (RFC 9110)."""
    values: dict[str, list[str]] = {}
    for name, value in raw:
        values.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return {name: ", ".join(each) for name, each in values.items()}


class AsgiTransport:
    """The insurer's interface served by an ASGI app of this same process.

    The same HTTP request and answer as over the network, without the network stack or an HTTP
    client in between; the timeout holds as it does over HTTP.
    """

    def __init__(self, app: AsgiApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        parts = urlsplit(url)
        raw_headers = [(b"host", parts.netloc.encode())]
        raw_headers += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        body = content or b""
        if content is not None:
            raw_headers.append((b"content-length", str(len(body)).encode()))
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": parts.scheme or "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": raw_headers,
            "server": (parts.hostname or "127.0.0.1", parts.port or 80),
            "client": ("127.0.0.1", 0),
        }
        status = 0
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []
        size = 0
        done = asyncio.Event()
        asked = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()  # an app listening for a disconnect hears it once it answered
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = int(message["status"])
                answer_headers.update(joined(message.get("headers", [])))
            elif message["type"] == "http.response.body":
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise too_large(url)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    done.set()

        try:
            async with asyncio.timeout(self.timeout):  # asyncio's: a third of anyio's cost
                await self.app(scope, receive, send)
        except TimeoutError:
            raise InsurerUnavailable(
                "timeout", f"the insurer did not answer within {self.timeout} s", url
            ) from None
        if not done.is_set():
            raise InsurerUnavailable("unreachable", "the insurer's interface gave no answer", url)
        return RawAnswer(status, answer_headers, b"".join(chunks))
