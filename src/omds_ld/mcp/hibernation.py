"""Idle 2025-11-25 sessions cost (almost) nothing: their SDK state is let go and made again when
the client comes back.

The MCP SDK keeps, for every open session of the handshake era, a transport, a server task and its
streams (some 40 KiB) until the session ends or its idle timeout fires. A session nobody has used
for a while (no request in flight, no GET stream open) is *hibernated* here: its SDK state is
discarded, while the binding of the MCP endpoint keeps what the session was (its connector, its
broker and the client's ``initialize`` parameters, a few hundred bytes). The next request with its
session id *revives* it: a new transport under the same session id, its connection born initialized
with the parameters the client gave, so the client never notices.

This works with the SDK's session manager from outside and so reaches into what it does not
publish (``_server_instances``, ``_task_group``, ``_lifespan_state``, ``_discard_session``); the SDK
is pinned to its major version, and the tests exercise hibernation and revival end to end.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import InitializeRequestParams
from pydantic import ValidationError

log = logging.getLogger("omds_ld.mcp")


def prepare(manager: StreamableHTTPSessionManager) -> None:
    """Make the manager's discarding of a session forget the session only if it still is the
    transport discarded. The SDK forgets by id, which is right while an id is never used twice;
    a revived session reuses its id, and the task of the transport it had before ends a moment
    after hibernation: forgetting by id would then forget the revived session under its feet."""
    discard = manager._discard_session

    async def discard_own(session_id: str, transport: StreamableHTTPServerTransport) -> None:
        if manager._server_instances.get(session_id) is transport:
            await discard(session_id, transport)
        elif not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    manager._discard_session = discard_own  # type: ignore[method-assign]


def live(manager: StreamableHTTPSessionManager) -> int:
    """How many sessions the SDK holds state for now."""
    return len(manager._server_instances)


def is_live(manager: StreamableHTTPSessionManager, session: str) -> bool:
    return session in manager._server_instances


async def hibernate(manager: StreamableHTTPSessionManager, session: str) -> bool:
    """Let go of a session's SDK state; False if it holds none."""
    transport = manager._server_instances.get(session)
    if transport is None:
        return False
    await manager._discard_session(session, transport)
    return True


async def revive(
    manager: StreamableHTTPSessionManager,
    session: str,
    protocol_version: str,
    initialize: dict[str, Any] | None,
) -> None:
    """Make a hibernated session's SDK state again: a transport under its id, a connection that
    is initialized already, with the client's parameters of its ``initialize``."""
    if session in manager._server_instances or manager._task_group is None:
        return
    transport = StreamableHTTPServerTransport(
        mcp_session_id=session,
        is_json_response_enabled=manager.json_response,
        event_store=manager.event_store,
        security_settings=manager.security_settings,
        retry_interval=manager.retry_interval,
        idle_timeout=manager.session_idle_timeout,
    )
    manager._server_instances[session] = transport
    params = None
    if initialize:
        try:
            params = InitializeRequestParams.model_validate(
                {**initialize, "protocolVersion": protocol_version}
            )
        except ValidationError:
            params = None  # the client's parameters are not needed to serve it

    async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with transport.connect() as (read_stream, write_stream):
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream, write_stream, inline_methods=frozenset({"initialize"})
                )
                connection = Connection.for_loop(
                    dispatcher, session_id=session, protocol_version_hint=protocol_version
                )
                connection.client_params = params
                connection.initialized.set()  # the handshake was done before it hibernated
                task_status.started()
                scope = transport.idle_scope or anyio.CancelScope()
                with scope:
                    await serve_connection(
                        manager.app,
                        dispatcher,
                        connection=connection,
                        lifespan_state=manager._lifespan_state,
                    )
        except Exception:
            log.exception("revived session %s crashed", session[:8])
        finally:
            await manager._discard_session(session, transport)

    await manager._task_group.start(run)


def stream_answers(manager: StreamableHTTPSessionManager | None, session: str) -> None:
    """Answer a session's requests as server-sent events (SSE) instead of JSON, so that the
    server can ask its client within a request (elicitation). The SDK's answer mode is one per
    session manager; its transport keeps it as a plain attribute read on every request (a
    private-API reach, like the rest of this module)."""
    if manager is None:
        return
    transport = manager._server_instances.get(session)
    if transport is not None:
        transport.is_json_response_enabled = False
