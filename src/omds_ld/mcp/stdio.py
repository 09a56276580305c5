"""``omds-ld mcp --stdio``: one instance over stdin and stdout, as a desktop client starts it
at every launch. It loads only what serving one instance over a pipe needs (no HTTP server, no
authorization of callers)."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from omds_ld.mcp.assembly import build_connectors, http_transport, receipt_signer
from omds_ld.mcp.config import McpConfig
from omds_ld.mcp.connector import Connector
from omds_ld.mcp.state import make_state, state_in_use
from omds_ld.norm import Norm
from omds_ld.process import freeze_startup_heap
from omds_ld.settings import ConfigError


async def serve_stdio(connector: Connector) -> None:
    """One connector over stdio: stdout carries only the protocol, logs go to stderr."""
    await connector.refresh(force=True)
    connector.learn_in_background()
    freeze_startup_heap()
    async with stdio_server() as (read_stream, write_stream):
        await connector.server.run(
            read_stream, write_stream, connector.server.create_initialization_options()
        )


async def run_stdio(config: McpConfig, norm: Norm) -> None:
    """``omds-ld mcp --stdio``: the one configured instance over stdin and stdout."""
    if len(config.instances) != 1:
        raise ConfigError("omds-ld mcp --stdio serves exactly one instance")
    state = make_state(config.redis_url)
    async with http_transport(config) as transport, state_in_use(state):
        connectors = build_connectors(
            config, norm, state, transport, receipts=receipt_signer(config)
        )
        await serve_stdio(next(iter(connectors.values())))
