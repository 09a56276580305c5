"""The broker endpoint: one MCP server for several insurers, each tool of the norm listed once.

The norm's MCP server is one per insurer, and a client tells them apart by name. A client that
compares ten insurers is shown the same tools ten times over. The broker endpoint lists each
tool once, with an ``insurer`` argument, and hands every call to that insurer's connector as if
it had been made at the insurer's own endpoint: the same checks, answers, idempotency,
confirmations and log lines. Every next step an answer names carries the insurer again, so a
client follows the steps as it would at the insurer's own server.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from omds_ld import __version__
from omds_ld.mcp.catalogue import ToolSpec
from omds_ld.mcp.condense import Shared, condense_problem
from omds_ld.mcp.connector import (
    INSTRUCTIONS,
    NORM_ICON,
    Connector,
    Context,
    NormServer,
    icon_of,
    norm_meta,
    session_id,
    tool_of,
    variant_asked,
)
from omds_ld.mcp.executor import (
    BROKER_CALL,
    MAX_SESSIONS_REMEMBERED,
    BrokerCall,
    Instance,
    tool_result,
)
from omds_ld.mcp.prompts import ProductPrompt
from omds_ld.norm import Norm

PROMPT_SEPARATOR = "/"  # an insurer's name and its prompt's, at the broker endpoint
NAME = ":insurers"  # the broker endpoint's key beside the connectors' names (never a name)
INSURER = "insurer"


class BrokerEndpoint:
    """Several insurers' connectors behind one MCP server."""

    def __init__(self, connectors: Mapping[str, Connector], norm: Norm) -> None:
        self.connectors = dict(connectors)
        self.norm = norm
        listing = ", ".join(
            f"{c.instance.display_name} ({INSURER}={name})" for name, c in self.connectors.items()
        )
        self.instance = Instance("insurers", "OMDS LD insurers", "en")
        self.server = NormServer(
            "omds-ld-insurers",
            version=__version__,
            title="Insurers (OMDS LD)",
            description="The MCP server of the OMDS LD norm in front of several insurers",
            icons=[icon_of(NORM_ICON)],
            instructions=INSTRUCTIONS.format(insurer=f"several insurers: {listing}")
            + f" Every tool takes `{INSURER}`, the name of the insurer to call; every answer's "
            "next steps give it.",
            on_list_tools=self._list_tools,
            on_call_tool=self.call_tool_for,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            get_tool_input_schema=self._input_schema,
        )
        # what each session was shown at any of the insurers (the latest used last)
        self._shown: OrderedDict[str, Shared] = OrderedDict()
        # built once for each set of offered tools and the insurers offering them
        self._tools: dict[tuple[Any, ...], list[types.Tool]] = {}

    def _offered(self) -> dict[str, list[str]]:
        """Each tool any insurer offers now, with the insurers that offer it."""
        offered: dict[str, list[str]] = {}
        for name, connector in self.connectors.items():
            for tool in connector.specs:
                offered.setdefault(tool, []).append(name)
        return offered

    def _schema(self, spec: ToolSpec, variant: str = "lean") -> dict[str, Any]:
        shown = dict(spec.schema(variant))
        insurer: dict[str, Any] = {"type": "string"}
        if spec.name == "listProducts":  # where a task starts: which insurers there are
            insurer["enum"] = list(self.connectors)
        return {
            **shown,
            "properties": {INSURER: insurer, **shown["properties"]},
            "required": [INSURER, *shown["required"]],
        }

    def tool_list(self, variant: str = "lean") -> list[types.Tool]:
        """Each tool once, with ``insurer``, its schema in a variant (``catalogue.VARIANTS``)."""
        offered = self._offered()
        key = (variant, *((tool, *names) for tool, names in offered.items()))
        tools = self._tools.get(key)
        if tools is None:
            specs = {tool: self.connectors[names[0]].specs[tool] for tool, names in offered.items()}
            tools = self._tools[key] = [
                tool_of(spec, self._schema(spec, variant)) for spec in specs.values()
            ]
        return list(tools)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        return next((dict(t.input_schema) for t in self.tool_list() if t.name == name), None)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        for connector in self.connectors.values():
            await connector.list_tools_for(ctx)  # each tells this session when its tools change
        ttl = min(c.tools_ttl_ms() for c in self.connectors.values())
        tools = self.tool_list(variant_asked(ctx) or "lean")
        return types.ListToolsResult(tools=tools, ttl_ms=ttl, _meta=norm_meta(self.norm))

    # each insurer's task templates, named by the insurer ("pfefferminzia/premium-…")

    async def _prompts(self, ctx: Any) -> dict[str, tuple[Connector, ProductPrompt]]:
        found = {}
        for name, connector in self.connectors.items():
            for prompt in await connector.prompts(ctx):
                found[f"{name}{PROMPT_SEPARATOR}{prompt.name}"] = (connector, prompt)
        return found

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompts = []
        for name, (connector, prompt) in (await self._prompts(ctx)).items():
            listed = prompt.prompt(connector.instance.display_name)
            prompts.append(listed.model_copy(update={"name": name}))
        ttl = min(c.tools_ttl_ms() for c in self.connectors.values())
        return types.ListPromptsResult(prompts=prompts, ttl_ms=ttl, cache_scope="public")

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        found = await self._prompts(ctx)
        if params.name not in found:
            raise MCPError(INVALID_PARAMS, f"no prompt {params.name}; prompts: {', '.join(found)}")
        connector, prompt = found[params.name]
        insurer = connector.instance.display_name
        text = prompt.task(insurer, dict(params.arguments or {})) + (
            f" Every tool takes {INSURER}={connector.instance.name} for {insurer}."
        )
        return types.GetPromptResult(
            description=prompt.prompt(insurer).description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
        )

    def _pick(self, arguments: Mapping[str, Any] | None) -> tuple[Connector | None, dict[str, Any]]:
        rest = dict(arguments or {})
        name = rest.pop(INSURER, None)
        return (self.connectors.get(name) if isinstance(name, str) else None), rest

    def binds(self, name: str, arguments: Mapping[str, Any] | None = None) -> bool:
        connector, _ = self._pick(arguments)
        return connector is not None and connector.binds(name)

    async def call_tool_for(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        connector, rest = self._pick(params.arguments)
        if connector is None:
            return self._unknown_insurer((params.arguments or {}).get(INSURER))
        token = BROKER_CALL.set(self._call_of(connector, session_id(ctx)))
        try:
            return await connector.call_tool_for(ctx, params.model_copy(update={"arguments": rest}))
        finally:
            BROKER_CALL.reset(token)

    def _call_of(self, connector: Connector, session: str | None) -> BrokerCall:
        """The insurer every next step names, and what this session was shown at any insurer
        (nothing for a call without a session)."""
        shared = None
        if session is not None:
            shared = self._shown.get(session)
            if shared is None:
                shared = self._shown[session] = Shared()
                if len(self._shown) > MAX_SESSIONS_REMEMBERED:
                    self._shown.popitem(last=False)
            self._shown.move_to_end(session)
        return BrokerCall({INSURER: connector.instance.name}, shared)

    async def refuse_hostile(
        self, name: str, arguments: dict[str, Any], session: str | None, caller: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        connector, rest = self._pick(arguments)
        if connector is None:
            return self._unknown_insurer(arguments.get(INSURER))
        token = BROKER_CALL.set(self._call_of(connector, session))
        try:
            return await connector.refuse_hostile(name, rest, session, caller)
        finally:
            BROKER_CALL.reset(token)

    def _unknown_insurer(self, given: Any) -> types.CallToolResult:
        """A call that names no insurer of this endpoint: an error listing them, and where each
        one's task starts."""
        known = list(self.connectors)
        said = "names no insurer" if given is None else f"names the insurer {given!r}, unknown"
        kind = self.norm.problem_types["invalid-parameter"]
        problem = {
            "type": kind.uri, "title": kind.title_en, "status": kind.status,
            "detail": f"the call {said} here; the insurers: {', '.join(known)}",
            "errors": [{"pointer": f"/{INSURER}", "detail": "one of " + ", ".join(known)}],
            "known": known,
            "bc:nextStep": [
                {"bc:operation": "listProducts", "bc:target": c.upstream.api_url + "/products",
                 "bc:parameters": {INSURER: name}}
                for name, c in self.connectors.items()
            ],
        }  # fmt: skip
        now = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        condensed = condense_problem(
            problem,
            operation="",
            insurer=self.instance.display_name,
            language=self.instance.language,
            kind="permanent",
            provenance={"insurer": self.instance.display_name, "operation": "", "url": "",
                        "time": now, "fromCache": False},
        )  # fmt: skip
        return tool_result(condensed, error=True)
