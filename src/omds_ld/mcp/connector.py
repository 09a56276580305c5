"""One insurer's MCP server: its tools from the norm and its process knowledge, its executor."""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from omds_ld import __version__
from omds_ld.auth.identity import IDENTITY, TOKEN, Identity, UpstreamTokenError
from omds_ld.mcp.catalogue import (
    DEPRECATED_META,
    NORM_META,
    OPERATION_META,
    VARIANTS,
    ToolSpec,
    by_name,
    tools,
)
from omds_ld.mcp.condense import ANSWER_META, OUTPUT_SCHEMA
from omds_ld.mcp.confirm import (
    PAGE_WAIT_SECONDS,
    Confirmations,
    FormElicitation,
    Person,
    RoundTrip,
    UrlElicitation,
    UrlRoundTrip,
)
from omds_ld.mcp.executor import Executor, Instance
from omds_ld.mcp.prompts import ProductPrompt, product_prompts
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.resources import (
    LIST_TTL_MS,
    NORM_FILES,
    NormResources,
    list_resource_templates,
    list_resources,
    not_found,
    read_resource,
    read_templates,
)
from omds_ld.mcp.state import StateStore, StateUnavailable
from omds_ld.mcp.transport import InsurerUnavailable
from omds_ld.mcp.upstream import CALLER, Caller, Upstream
from omds_ld.norm import Norm
from omds_ld.norm.jsonld import NotJsonLd, canonical
from omds_ld.norm.receipt import Signer

if TYPE_CHECKING:
    from starlette.requests import Request

log = logging.getLogger("omds_ld.mcp")

INSTRUCTIONS = (
    "The tools are the operations of the OMDS LD norm at {insurer}. Start with listProducts: "
    "its answer says how the insurer works and names the first step. "
    "Every answer lists its next steps as tool · target · expected shapes, with the arguments or "
    "the ready body to use (the target is left out where an argument names it; 'one of' lists "
    "the values of one step each), and the fields of each shape. Change a business case only by a step "
    "an answer offered; read whenever it helps. In a body, write terms (properties and classes) "
    "exactly as the answers show them, short (p:Vehicle, p:make) or full "
    "(https://…/vocab#…); write IRIs of things (products, cases, components, attributes) in "
    "full. In an answer's text, ~ stands for the IRI it declares with '~ ='. An answer lists the "
    "values still at the insurer's default: name them as your assumptions. An error names its "
    "problem type, says what was wrong and lists what is still admissible; nothing was changed."
)


@dataclass(frozen=True)
class DirectSession:
    """What a tool call answered beside the SDK (``SessionBinding``'s direct answers) knows of its
    session: the protocol version it speaks, what its client declared. Such a call cannot ask the
    client anything."""

    protocol_version: str
    client_capabilities: types.ClientCapabilities | None = None
    client_params: types.InitializeRequestParams | None = None
    can_send_request: bool = False


@dataclass(frozen=True)
class DirectContext:
    """A tool call's request as the SDK's context would give it, for a call answered beside it."""

    request: Request
    session: DirectSession
    request_id: types.RequestId


# the context of a request: the SDK's, or that of a call answered beside it
Context = ServerRequestContext[Any] | DirectContext


class NormServer(Server[Any]):
    """The SDK's low-level server, announcing that the tool list can change, serving the norm's
    files as resources."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("on_list_resources", list_resources)
        kwargs.setdefault("on_list_resource_templates", list_resource_templates)
        kwargs.setdefault("on_read_resource", read_resource)
        super().__init__(*args, **kwargs)

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


@dataclass(frozen=True)
class ConnectorSettings:
    """How an operator runs one connector (``mcp.toml`` and flags): how often it reads the
    insurer's process knowledge, the tools switched off, those that wait for the person's yes
    besides the norm's binding operations, the rate of calls, where the confirmation page is."""

    refresh_seconds: float = 60.0
    disabled_tools: Collection[str] = ()
    # a call waits at most one timeout for the insurer; its idempotency claim a little longer
    lease_seconds: float = 15.0
    rate: tuple[float, float] | None = None  # calls per second and burst, per broker
    confirm_tools: Collection[str] = ()
    confirmation_page: str | None = None
    # the variant every listing is in, where a client has no URL to ask by (stdio)
    schemas: str = "lean"


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
        settings: ConnectorSettings = ConnectorSettings(),
        exchange: Callable[[str], Awaitable[str]] | None = None,
        receipts: Signer | None = None,
    ) -> None:
        for what, names in (
            ("disabled_tools", settings.disabled_tools),
            ("confirm_tools", settings.confirm_tools),
        ):
            unknown = sorted(set(names) - set(norm.operations))
            if unknown:
                raise ValueError(
                    f"{instance.name}: {what} names no operation of the norm: {unknown}"
                )
        self.disabled = frozenset(settings.disabled_tools)
        self.norm = norm
        self.instance = instance
        self.upstream = upstream
        self.executor = Executor(
            norm=norm,
            instance=instance,
            upstream=upstream,
            state=state,
            request_log=request_log,
            lease_seconds=settings.lease_seconds,
            rate=settings.rate,
            binding={*(n for n, op in norm.operations.items() if op.binds),
                     *settings.confirm_tools},
            confirmation_page=settings.confirmation_page,
            receipts=receipts,
        )  # fmt: skip
        # a broker's token for a token of the same broker at the insurer (RFC 8693), if brokers
        # authenticate; without it calls go with the MCP server's own credentials
        self.exchange = exchange
        self.refresh_seconds = settings.refresh_seconds
        self.schemas = settings.schemas
        self.draft_at_server: bool | None = None
        self.unread_because: str | None = None  # why the process knowledge is not known yet
        self._checked_at = 0.0
        self._learning: asyncio.Task[None] | None = None
        self._refreshing: asyncio.Task[None] | None = None
        # the SDK builds a ServerSession per request; what lasts is the client's Connection
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._connection_keys: weakref.WeakKeyDictionary[Connection, str] = (
            weakref.WeakKeyDictionary()
        )
        # the operations the insurer's interface publishes (its OpenAPI document); None: it
        # publishes none, so every operation of the norm is listed
        self.published: frozenset[str] | None = None
        # built once for each draft-at-server and published set: the specs and tools
        self._catalogues: dict[
            tuple[bool | None, frozenset[str] | None],
            tuple[dict[str, ToolSpec], list[types.Tool]],
        ] = {}
        self._variants: dict[tuple[str, bool | None, frozenset[str] | None], list[types.Tool]] = {}
        # the insurer's icon on its tools, where it gives one (a host shows whose tool it is)
        self.tool_icons = [icon_of(instance.icon)] if instance.icon else None
        self.server = self._server()
        self.templates = read_templates(norm, instance.name)
        # the files of the norm version its tools are made of
        self.norm_files = NORM_FILES if norm.source is None else NormResources(norm.source)

    def _server(self) -> NormServer:
        """The SDK's server of this connector, its handlers this connector's."""
        instance = self.instance
        return NormServer(
            f"omds-ld-{instance.name}",
            version=__version__,
            title=f"{instance.display_name} (OMDS LD)",
            description=f"The MCP server of the OMDS LD norm in front of {instance.display_name}",
            instructions=INSTRUCTIONS.format(insurer=instance.display_name),
            website_url=instance.website,
            icons=[icon_of(instance.icon or NORM_ICON)],
            on_list_tools=self._list_tools,
            on_call_tool=self.call_tool_for,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            # without it the SDK lists every tool on each sessionless call to find one schema
            get_tool_input_schema=self._input_schema,
        )

    def _catalogue(self) -> tuple[dict[str, ToolSpec], list[types.Tool]]:
        # until the process knowledge is known, every tool of the norm: a failed read says
        # nothing about the draft, and a tool listed too many is refused as temporary
        key = (self.draft_at_server, self.published)
        catalogue = self._catalogues.get(key)
        if catalogue is None:
            specs = by_name(
                t
                for t in tools(self.norm, key[0])
                if t.name not in self.disabled and (key[1] is None or t.name in key[1])
            )
            catalogue = self._catalogues[key] = (specs, self._describe(specs))
        return catalogue

    @property
    def specs(self) -> dict[str, ToolSpec]:
        return self._catalogue()[0]

    async def read_published(self) -> None:
        """Which operations the interface publishes, from its OpenAPI document (``…/openapi.json``)
        if it serves one: only those are tools, and no answer offers another."""
        url = self.upstream.api_url + "/openapi.json"
        try:
            answer = await self.upstream.transport.request(
                "GET", url, {"Accept": "application/json"}, None
            )
            document = json.loads(answer.content) if answer.status == 200 else None
        except (InsurerUnavailable, ValueError):
            return  # asked again with the process knowledge
        if not isinstance(document, dict) or not isinstance(document.get("paths"), dict):
            if answer.status == 404:
                self.published = None
            return
        found = {
            str(raw["operationId"])
            for item in document["paths"].values()
            if isinstance(item, dict)
            for raw in item.values()
            if isinstance(raw, dict) and raw.get("operationId")
        }
        self.published = frozenset(found & set(self.norm.operations))

    async def refresh(self, force: bool = False) -> bool:
        """Read the process knowledge again if it is due; whether the tool list changed."""
        if not force and time.monotonic() - self._checked_at < self.refresh_seconds:
            return False
        self._checked_at = time.monotonic()
        operation = self.norm.operation("readProcessKnowledge")
        try:
            answer = await self.upstream.send(operation, {}, {}, None, None, revalidate=True)
        except InsurerUnavailable as failure:
            return self._not_read(failure.detail)
        except StateUnavailable as failure:
            return self._not_read(str(failure))
        except UpstreamTokenError as failure:  # a refusal of its authorization server: reached
            return self._not_read(str(failure), True)
        if answer.status != 200 or not isinstance(answer.body, dict):
            # a refusal (401, say) is an answer: calls go on and get the insurer's own problem
            return self._not_read(f"the insurer answered {answer.status}", answer.status < 500)
        try:
            knowledge = canonical(answer.body, frozenset({"pk:ProcessKnowledge"}), answer.text)
        except NotJsonLd as error:
            return self._not_read(f"the insurer's answer is no JSON-LD of the norm: {error}", True)
        draft = bool(knowledge.get("pk:draftAtServer"))
        before = set(self.specs)
        await self.read_published()
        self.draft_at_server = draft
        changed = set(self.specs) != before
        self.unread_because = None
        if changed:
            log.info("%s: draft at the server is now %s", self.instance.name, draft)
            await self._announce_tool_change()
        return changed

    def _not_read(self, reason: str, reached: bool = False) -> bool:
        log.warning("%s: process knowledge not read: %s", self.instance.name, reason)
        if self.draft_at_server is None:
            self.unread_because = None if reached else reason
        return False

    def learn_in_background(self) -> None:
        """Until the process knowledge is known, ask for it again every few seconds (then the
        tool list may change, and the sessions are told)."""
        if self.draft_at_server is not None or self._learning is not None:
            return

        async def learn() -> None:
            delay = 1.0
            try:
                while self.draft_at_server is None:
                    await asyncio.sleep(delay)
                    await self.refresh(force=True)
                    delay = min(delay * 2, 30.0)
            finally:
                self._learning = None

        self._learning = _background(learn(), f"{self.instance.name}: learning")

    def stop(self) -> None:
        """Stop asking the insurer in the background (the server is shutting down)."""
        for task in (self._learning, self._refreshing):
            if task is not None:
                task.cancel()

    def _refresh_in_background(self) -> None:
        """A due re-read of the process knowledge, without making a call wait for it."""
        if self._refreshing is not None:
            return
        if time.monotonic() - self._checked_at < self.refresh_seconds:
            return

        async def again() -> None:
            try:
                await self.refresh()
            finally:
                self._refreshing = None

        self._refreshing = _background(again(), f"{self.instance.name}: refresh")

    async def _announce_tool_change(self) -> None:
        for connection in list(self._connections):
            try:
                await connection.send_tool_list_changed()
            except Exception as error:  # a closed session cannot be told anything
                log.debug("tool list change not sent: %r", error)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        spec = self.specs.get(name)
        return None if spec is None else dict(spec.shown_schema)

    def tool_list(self, variant: str = "lean") -> list[types.Tool]:
        """The tools offered now, their input schemas in a variant (``catalogue.VARIANTS``)."""
        if variant == "lean":
            return list(self._catalogue()[1])
        key = (variant, self.draft_at_server, self.published)
        listed = self._variants.get(key)
        if listed is None:
            listed = self._variants[key] = [
                tool_of(spec, spec.schema(variant), self.tool_icons) for spec in self.specs.values()
            ]
        return list(listed)

    def _describe(self, specs: dict[str, ToolSpec]) -> list[types.Tool]:
        return [tool_of(spec, spec.shown_schema, self.tool_icons) for spec in specs.values()]

    def _remember(self, ctx: Context) -> None:
        connection = _connection(ctx)
        if connection is not None:
            self._connections.add(connection)

    def _caller(self, ctx: Context) -> Caller:
        """The broker a request's checked token speaks for, and how to call the insurer as them:
        by exchanging that token, never by passing it on."""
        state = getattr(getattr(ctx, "request", None), "scope", {}).get("state") or {}
        identity: Identity | None = state.get(IDENTITY)
        if identity is None:
            return Caller()
        token = str(state.get(TOKEN, ""))
        exchange = self.exchange
        if exchange is None:
            return Caller(identity.subject)

        async def credentials() -> dict[str, str]:
            return {"Authorization": f"Bearer {await exchange(token)}"}

        return Caller(identity.subject, credentials)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = await self.list_tools_for(ctx)
        return types.ListToolsResult(
            tools=tools, ttl_ms=self.tools_ttl_ms(), _meta=norm_meta(self.norm)
        )

    def tools_ttl_ms(self) -> int:
        """How long a client may keep the tool list: until the process knowledge is read again
        (a change is announced besides); nothing while it is not known."""
        return int(self.refresh_seconds * 1000) if self.draft_at_server is not None else 0

    async def list_tools_for(self, ctx: ServerRequestContext[Any]) -> list[types.Tool]:
        """The tools offered now, for a request (its session is told when they change after
        this answer: a change the answer has already is not announced to it)."""
        caller = CALLER.set(self._caller(ctx))
        try:
            await self.refresh(force=self.draft_at_server is None)
        finally:
            CALLER.reset(caller)
        self._remember(ctx)
        self.learn_in_background()
        return self.tool_list(variant_asked(ctx) or self.schemas)

    def binds(self, name: str, arguments: Mapping[str, Any] | None = None) -> bool:
        """Whether calling this tool binds a customer (the person using the client confirms)."""
        spec = self.specs.get(name)
        return spec is not None and self.executor.gate.binds(spec)

    async def call_tool_for(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One tool call of a request, as its session and caller make it."""
        caller = CALLER.set(self._caller(ctx))
        try:
            result = await self._call(ctx, params)
        finally:
            CALLER.reset(caller)
        return result if wants_answer(ctx) else without_answer(result)

    async def _call(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        session = session_id(ctx) or self._stdio_session(ctx)
        if self.draft_at_server is None:
            await self.refresh(force=True)  # the call's one wait for the insurer
        else:
            self._refresh_in_background()
        self._remember(ctx)  # told of a change from now on (not of one this call brought)
        if self.draft_at_server is None and self.unread_because is not None:
            self.learn_in_background()
            return await self.executor.unavailable(
                params.name, self.unread_because or "not reached yet", session
            )
        specs = self.specs
        spec = specs.get(params.name)
        if spec is None:
            return await self.executor.unknown_tool(
                params.name, sorted(specs), session, switched_off=params.name in self.disabled
            )
        return await self.executor.call(
            spec, params.arguments, session, offered=specs.keys(), caller=_client(ctx),
            person=_person(ctx, params, self.executor.gate.confirmations), who=_who(ctx),
        )  # fmt: skip

    async def refuse_hostile(
        self, name: str, arguments: dict[str, Any], session: str | None, caller: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The tool error for a call whose arguments no request may carry (the HTTP endpoint
        answers it before the SDK parses the message)."""
        spec = self.specs.get(name)
        if spec is None:
            return await self.executor.unknown_tool(
                name, sorted(self.specs), session, switched_off=name in self.disabled
            )
        return await self.executor.call(
            spec, arguments, session, offered=self.specs.keys(), caller=caller
        )

    # the insurer's reads as resources (resources.read_templates)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The norm's files, the insurer's reads without parameters, and its products and
        their shapes as the product list names them."""
        listed = list(self.norm_files.listed().resources)
        plain = [t for t in self.templates if not t.parameters and t.operation in self.specs]
        for template in plain:
            listed.append(types.Resource(uri=template.uri(), name=template.operation,
                                         title=template.title, description=template.description,
                                         mime_type="application/ld+json"))  # fmt: skip
        products = await self._read(ctx, "listProducts", {})
        by_name = {t.operation: t for t in self.templates}
        for product in products.get("products", []) if products else []:
            if "readProduct" in by_name and product.get("productId"):
                listed.append(types.Resource(
                    uri=by_name["readProduct"].uri(productId=str(product["productId"])),
                    name=str(product["productId"]), title=str(product.get("label") or ""),
                    description="a product of the insurer, its whole JSON-LD",
                    mime_type="application/ld+json",
                ))  # fmt: skip
        for step in products.get("nextSteps", []) if products else []:
            shape = (step.get("arguments") or {}).get("shapeId")
            if step.get("tool") == "readShape" and shape and "readShape" in by_name:
                uri = by_name["readShape"].uri(shapeId=str(shape))
                if all(r.uri != uri for r in listed):
                    listed.append(types.Resource(uri=uri, name=str(shape),
                                                 title=f"Shape {shape}",
                                                 description="a SHACL shape of the insurer",
                                                 mime_type="application/ld+json"))  # fmt: skip
        # the same for every broker (the insurer's products are no secret): public
        return types.ListResourcesResult(
            resources=listed, ttl_ms=self.tools_ttl_ms(), cache_scope="public"
        )

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(uri_template=t.template, name=t.operation, title=t.title,
                                       description=t.description, mime_type="application/ld+json")
                for t in self.templates
                if t.parameters and t.operation in self.specs
            ],
            ttl_ms=LIST_TTL_MS,
        )  # fmt: skip

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith("omds-ld://norm/"):
            return self.norm_files.read(uri)
        for template in self.templates:
            found = template.match(uri)
            if found is None:
                continue
            answer = await self._read(ctx, template.operation, found, raise_refusal=True)
            text = json.dumps(answer.get("full"), ensure_ascii=False)
            return types.ReadResourceResult(
                contents=[
                    types.TextResourceContents(uri=uri, mime_type="application/ld+json", text=text)
                ]
            )
        known = ", ".join(t.template for t in self.templates)
        raise not_found(uri, f"no resource {uri}; the insurer's are {known} and omds-ld://norm/…")

    # a task template per product (prompts.product_prompts)

    async def prompts(self, ctx: ServerRequestContext[Any]) -> list[ProductPrompt]:
        """The insurer's task templates, one per product (from its product list and shapes)."""
        products = await self._read(ctx, "listProducts", {})
        shapes = []
        for step in products.get("nextSteps", []):
            shape = (step.get("arguments") or {}).get("shapeId")
            if step.get("tool") == "readShape" and shape:
                read = await self._read(ctx, "readShape", {"shapeId": str(shape)})
                if isinstance(read.get("shape"), dict):
                    shapes.append(read["shape"])
        return product_prompts(products.get("products", []), shapes)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        name = self.instance.display_name
        return types.ListPromptsResult(
            prompts=[p.prompt(name) for p in await self.prompts(ctx)],
            ttl_ms=self.tools_ttl_ms(),
            cache_scope="public",
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        found = {p.name: p for p in await self.prompts(ctx)}
        prompt = found.get(params.name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"no prompt {params.name}; prompts: {', '.join(found)}")
        text = prompt.task(self.instance.display_name, dict(params.arguments or {}))
        return types.GetPromptResult(
            description=prompt.prompt(self.instance.display_name).description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
        )

    async def _read(
        self,
        ctx: ServerRequestContext[Any],
        operation: str,
        parameters: Mapping[str, str],
        raise_refusal: bool = False,
    ) -> dict[str, Any]:
        """A read as its tool makes it (the same checks, rate limit, cache and log), with the
        insurer's whole JSON-LD; a refusal is an MCP error where ``raise_refusal``, else {}."""
        from omds_ld.mcp.condense import answer_of

        caller = CALLER.set(self._caller(ctx))
        try:
            if self.draft_at_server is None:
                await self.refresh(force=True)
            spec = self.specs.get(operation)
            if spec is None:
                if raise_refusal:
                    raise MCPError(INVALID_PARAMS, f"{operation} is not offered here")
                return {}
            result = await self.executor.call(
                spec, {**parameters, "full": True}, session_id(ctx), offered=self.specs.keys(),
                caller=_client(ctx),
            )  # fmt: skip
        finally:
            CALLER.reset(caller)
        if not isinstance(result, types.CallToolResult):  # a read never asks the person
            raise MCPError(INTERNAL_ERROR, f"{operation} asked for input")
        if result.is_error:
            if not raise_refusal:
                return {}
            answer = answer_of(result)
            code = (
                INVALID_PARAMS if 400 <= int(answer.get("status") or 500) < 500 else INTERNAL_ERROR
            )
            raise MCPError(code, getattr(result.content[0], "text", "refused"))
        return answer_of(result)

    def _stdio_session(self, ctx: Context) -> str | None:
        """Without HTTP, the connection is the session (stdio serves one client)."""
        if getattr(ctx, "request", None) is not None:
            return None  # HTTP without a session id: the sessionless era, nothing to remember
        connection = _connection(ctx)
        if connection is None:
            return None
        key = self._connection_keys.get(connection)
        if key is None:
            key = self._connection_keys[connection] = f"connection-{uuid.uuid4().hex}"
        return key


def variant_asked(ctx: Any) -> str | None:
    """The variant of the input schemas a request asks for by its endpoint's URL
    (``…/mcp?schemas=strict``, ``?schemas=gemini``), None: none of ``VARIANTS``."""
    request = getattr(ctx, "request", None)
    query = getattr(request, "query_params", None)
    asked = query.get("schemas") if query is not None else None
    return asked if asked in VARIANTS else None


def norm_meta(norm: Norm) -> dict[str, Any] | None:
    """The tools/list result's ``_meta``: the version of the norm the tools are made of (for
    ``omds-ld tools diff`` against a running server; never shown to a model)."""
    version = norm.openapi.get("info", {}).get("version")
    return {NORM_META: str(version)} if version else None


# the norm's mark, where an insurer gives no icon of its own: a client shows it beside the server
NORM_ICON = (
    "data:image/svg+xml;base64,"
    + base64.b64encode(
        b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" '
        b'rx="12" fill="#1f4e79"/><text x="32" y="41" font-family="sans-serif" font-size="22" '
        b'font-weight="bold" fill="#fff" text-anchor="middle">LD</text></svg>'
    ).decode()
)


def icon_of(source: str) -> types.Icon:
    """An icon a client can show: an https URL or a data: URI, its type where it says it."""
    kind = source[5:].split(";", 1)[0].split(",", 1)[0] if source.startswith("data:") else None
    if kind is None and source.lower().endswith(".svg"):
        kind = "image/svg+xml"
    elif kind is None and source.lower().endswith(".png"):
        kind = "image/png"
    return types.Icon(src=source, mime_type=kind)


def tool_of(
    spec: ToolSpec, input_schema: Mapping[str, Any], icons: list[types.Icon] | None = None
) -> types.Tool:
    """The MCP tool of a spec, as a client is shown it, with this input schema (and the
    insurer's icon, where it gives one); its ``_meta`` names the operation (how a tools diff
    tells a renamed tool) and whether it is deprecated."""
    operation = spec.operation
    meta: dict[str, Any] = {OPERATION_META: f"{operation.method} {operation.path}"}
    if operation.deprecated:
        meta[DEPRECATED_META] = True
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=dict(input_schema),
        output_schema=OUTPUT_SCHEMA,
        icons=icons,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.annotations.read_only,
            destructive_hint=spec.annotations.destructive,
            idempotent_hint=spec.annotations.idempotent,
            open_world_hint=True,
        ),
        _meta=meta,
    )


def _client(ctx: Context) -> str:
    """Who calls, for the rate limit: the broker, or else the HTTP client's address, or the one
    stdio client."""
    subject = CALLER.get().subject
    if subject:
        return f"broker:{subject}"
    client = getattr(getattr(ctx, "request", None), "client", None)
    return str(getattr(client, "host", None) or "stdio")


def wants_answer(ctx: Context) -> bool:
    """Whether the client declared the extension of the whole structured answer (``ANSWER_META``
    in its capabilities' extensions): only then does a tool result carry it in ``_meta``."""
    capabilities = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None)
    return isinstance(extensions, Mapping) and ANSWER_META in extensions


def without_answer(
    result: types.CallToolResult | types.InputRequiredResult,
) -> types.CallToolResult | types.InputRequiredResult:
    """A tool result without the whole structured answer (its text, structuredContent and the
    rest of ``_meta`` as they are)."""
    if not isinstance(result, types.CallToolResult) or not result.meta:
        return result
    if ANSWER_META not in result.meta:
        return result
    rest = {key: value for key, value in result.meta.items() if key != ANSWER_META}
    return result.model_copy(update={"meta": rest or None})


def _person(
    ctx: Context, params: types.CallToolRequestParams, confirmations: Confirmations
) -> Person | None:
    """How the person using the client can be asked: on the confirmation page, whose address
    goes to a client that declared URL mode (where there is a page: the person logs in there);
    else a form on the session (2025-11-25) or an input_required round trip (2026-07-28); or not
    at all (the client declared no elicitation)."""
    session = getattr(ctx, "session", None)
    capabilities = getattr(session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return None
    modern = getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS
    # 2025-11-25 over HTTP answers each call in JSON until the session has a stream to ask on
    can_ask = modern or getattr(session, "can_send_request", False)
    if elicitation.url is not None and confirmations.has_page and can_ask:
        if modern:
            return UrlRoundTrip(params, confirmations)
        return UrlElicitation(session, ctx.request_id, confirmations, PAGE_WAIT_SECONDS)
    if elicitation.form is None and elicitation.url is not None:
        return None  # an empty elicitation capability is form mode (the spec's default)
    if not can_ask:
        return None  # the person confirms on the confirmation page instead
    return RoundTrip(params) if modern else FormElicitation(session, ctx.request_id)


def _who(ctx: Context) -> str:
    """How the person confirming through the client is called: by the client they use (their
    subject is the broker the call's token names)."""
    client_params = getattr(getattr(ctx, "session", None), "client_params", None)
    client = getattr(getattr(client_params, "client_info", None), "name", None)
    return f"the person using {client}" if client else "the person using the client"


def _connection(ctx: Context) -> Connection | None:
    """The client's connection behind a request (the SDK keeps it on the per-request session;
    it has no public accessor on the low-level context yet)."""
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    return connection if isinstance(connection, Connection) else None


def _background(work: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
    """A task of the connector's own (as itself, whoever's call started it); a failure of it is
    logged, never lost."""
    context = contextvars.copy_context()
    context.run(CALLER.set, Caller())
    task = asyncio.get_running_loop().create_task(work, context=context)

    def done(finished: asyncio.Task[None]) -> None:
        if not finished.cancelled() and finished.exception() is not None:
            log.error("%s failed", what, exc_info=finished.exception())

    task.add_done_callback(done)
    return task


def session_id(ctx: Context) -> str | None:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        value = headers.get("mcp-session-id")
        return str(value) if value else None
    return None
