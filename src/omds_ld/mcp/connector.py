"""One insurer's MCP server: its tools from the norm and its process knowledge, its executor."""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from collections.abc import Collection
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession

from omds_ld import __version__
from omds_ld.mcp.catalogue import ToolSpec, by_name, tools
from omds_ld.mcp.condense import OUTPUT_SCHEMA
from omds_ld.mcp.executor import Executor, Instance
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.state import StateStore, StateUnavailable
from omds_ld.mcp.transport import InsurerUnavailable
from omds_ld.mcp.upstream import Upstream
from omds_ld.norm import Norm

log = logging.getLogger("omds_ld.mcp")

INSTRUCTIONS = (
    "The tools are the operations of the OMDS LD norm at {insurer}. Start with listProducts. "
    "Every answer lists its next steps as tool · target · expected shapes, with the arguments or "
    "the ready body to use, and the fields of each shape. Change a business case only by a step "
    "an answer offered; read whenever it helps. In a body, write terms (properties and classes) "
    "exactly as the answers show them, short (p:Vehicle, p:make) or full "
    "(https://…/vocab#…); write IRIs of things (products, cases, components, attributes) in "
    "full. In an answer's text, ~ stands for the IRI it declares with '~ ='. An answer lists the "
    "values still at the insurer's default: name them as your assumptions. An error names its "
    "problem type, says what was wrong and lists what is still admissible; nothing was changed."
)


class NormServer(Server[Any]):
    """The SDK's low-level server, announcing that the tool list can change."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class Connector:
    """The MCP server of the norm in front of one insurer's interface."""

    def __init__(
        self,
        *,
        norm: Norm,
        instance: Instance,
        upstream: Upstream,
        state: StateStore,
        request_log: RequestLog,
        refresh_seconds: float = 60.0,
        disabled_tools: Collection[str] = (),
    ) -> None:
        unknown = sorted(set(disabled_tools) - set(norm.operations))
        if unknown:
            raise ValueError(
                f"{instance.name}: disabled_tools names no operation of the norm: {unknown}"
            )
        self.disabled = frozenset(disabled_tools)
        self.norm = norm
        self.instance = instance
        self.upstream = upstream
        self.executor = Executor(
            norm=norm, instance=instance, upstream=upstream, state=state, request_log=request_log
        )
        self.refresh_seconds = refresh_seconds
        self.draft_at_server: bool | None = None
        self._checked_at = 0.0
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._connection_keys: weakref.WeakKeyDictionary[ServerSession, str] = (
            weakref.WeakKeyDictionary()
        )
        # built once: the tools for an insurer with and without the draft at the server
        self._specs = {
            draft: by_name(t for t in tools(norm, draft) if t.name not in self.disabled)
            for draft in (True, False)
        }
        self._tools = {draft: self._describe(specs) for draft, specs in self._specs.items()}
        self.server = NormServer(
            f"omds-ld-{instance.name}",
            version=__version__,
            title=f"{instance.display_name} (OMDS LD)",
            description=f"The MCP server of the OMDS LD norm in front of {instance.display_name}",
            instructions=INSTRUCTIONS.format(insurer=instance.display_name),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            # without it the SDK lists every tool on each sessionless call to find one schema
            get_tool_input_schema=self._input_schema,
        )

    @property
    def specs(self) -> dict[str, ToolSpec]:
        return self._specs[bool(self.draft_at_server)]

    async def refresh(self, force: bool = False) -> bool:
        """Read the process knowledge again if it is due; whether the tool list changed."""
        if not force and time.monotonic() - self._checked_at < self.refresh_seconds:
            return False
        self._checked_at = time.monotonic()
        operation = self.norm.operation("readProcessKnowledge")
        try:
            answer = await self.upstream.send(operation, {}, {}, None, None, revalidate=True)
        except InsurerUnavailable as failure:
            log.warning("%s: process knowledge not read: %s", self.instance.name, failure.detail)
            return False
        except StateUnavailable as failure:
            log.warning("%s: process knowledge not read: %s", self.instance.name, failure)
            return False
        if answer.status != 200 or not isinstance(answer.body, dict):
            return False
        draft = bool(answer.body.get("pk:draftAtServer"))
        changed = self.draft_at_server is not None and draft != self.draft_at_server
        self.draft_at_server = draft
        if changed:
            log.info("%s: draft at the server is now %s", self.instance.name, draft)
            await self._announce_tool_change()
        return changed

    async def _announce_tool_change(self) -> None:
        for session in list(self._sessions):
            try:
                await session.send_tool_list_changed()
            except Exception as error:  # a closed session cannot be told anything
                log.debug("tool list change not sent: %r", error)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        spec = self.specs.get(name)
        return None if spec is None else dict(spec.input_schema)

    def tool_list(self) -> list[types.Tool]:
        return list(self._tools[bool(self.draft_at_server)])

    @staticmethod
    def _describe(specs: dict[str, ToolSpec]) -> list[types.Tool]:
        return [
            types.Tool(
                name=spec.name,
                title=spec.title,
                description=spec.description,
                input_schema=dict(spec.input_schema),
                output_schema=OUTPUT_SCHEMA,
                annotations=types.ToolAnnotations(
                    read_only_hint=spec.annotations.read_only,
                    destructive_hint=spec.annotations.destructive,
                    idempotent_hint=spec.annotations.idempotent,
                    open_world_hint=True,
                ),
            )
            for spec in specs.values()
        ]

    def _remember(self, ctx: ServerRequestContext[Any]) -> None:
        session = getattr(ctx, "session", None)
        if isinstance(session, ServerSession):
            self._sessions.add(session)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        await self.refresh(force=self.draft_at_server is None)
        return types.ListToolsResult(tools=self.tool_list())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember(ctx)
        await self.refresh(force=self.draft_at_server is None)
        specs = self.specs
        spec = specs.get(params.name)
        session = _session_id(ctx) or self._stdio_session(ctx)
        if spec is None:
            return await self.executor.unknown_tool(
                params.name, sorted(specs), session, switched_off=params.name in self.disabled
            )
        return await self.executor.call(spec, params.arguments, session, offered=specs.keys())

    def _stdio_session(self, ctx: ServerRequestContext[Any]) -> str | None:
        """Without HTTP, the connection is the session (stdio serves one client)."""
        if getattr(ctx, "request", None) is not None:
            return None  # HTTP without a session id: the sessionless era, nothing to remember
        session = getattr(ctx, "session", None)
        if not isinstance(session, ServerSession):
            return None
        key = self._connection_keys.get(session)
        if key is None:
            key = self._connection_keys[session] = f"connection-{uuid.uuid4().hex}"
        return key


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        value = headers.get("mcp-session-id")
        return str(value) if value else None
    return None
