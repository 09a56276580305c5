"""``omds-ld mcp --stdio``: one instance over stdin and stdout, as a desktop client starts it
at every launch. It loads only what serving one instance over a pipe needs (no HTTP server, no
authorization of callers, no SDK client side: ``omds_ld.process.stdio_imports_only``), and
answers ``initialize`` before it reaches the insurer: the HTTP client is loaded at the first
call to the insurer, and the process knowledge is read by the first ``tools/list`` or tool call
(or in the background), so a slow or absent insurer never holds the handshake."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from mcp.server.stdio import stdio_server

from omds_ld import metrics
from omds_ld.mcp.assembly import build_connectors, http_transport, receipt_signer
from omds_ld.mcp.config import McpConfig
from omds_ld.mcp.connector import Connector
from omds_ld.mcp.state import make_state, state_in_use
from omds_ld.mcp.transport import RawAnswer, Transport
from omds_ld.norm import Norm
from omds_ld.process import freeze_startup_heap
from omds_ld.settings import ConfigError


class FirstCallTransport:
    """The HTTP client to the insurer, made at the first call (aiohttp takes ~0.15 s to load:
    the handshake does not wait for it)."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self._transport: Transport | None = None
        self._made: object = None  # the HttpTransport, closed on the way out

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> RawAnswer:
        if self._transport is None:
            made = http_transport(self.config)
            self._transport, self._made = made, made
        return await self._transport.request(method, url, headers, content)

    async def __aenter__(self) -> FirstCallTransport:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        close = getattr(self._made, "aclose", None)
        if close is not None:
            await close()


async def serve_stdio(connector: Connector) -> None:
    """One connector over stdio: stdout carries only the protocol, logs go to stderr. The
    process knowledge is read when a request needs it, else in the background."""
    connector.learn_in_background()
    freeze_startup_heap(collect=False)  # the start's garbage frozen too: initialize waits
    async with stdio_server() as (read_stream, write_stream):
        await connector.server.run(
            read_stream, write_stream, connector.server.create_initialization_options()
        )


async def run_stdio(config: McpConfig, norm: Norm) -> None:
    """``omds-ld mcp --stdio``: the one configured instance over stdin and stdout."""
    if len(config.instances) != 1:
        raise ConfigError("omds-ld mcp --stdio serves exactly one instance")
    metrics.not_counted()  # no /metrics to read them at
    state = make_state(config.redis_url)
    async with FirstCallTransport(config) as transport, state_in_use(state):
        connectors = build_connectors(
            config, norm, state, transport, receipts=receipt_signer(config)
        )
        await serve_stdio(next(iter(connectors.values())))
