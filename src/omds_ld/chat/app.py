"""The chat page of the example server: the insurers' MCP servers, reached through the official MCP
client exactly as any MCP client reaches them, followed by hand (next steps as buttons).

Safe by default: it lives on the example server (loopback unless told otherwise); every
state-changing request must come from the page's own origin; a conversation belongs to the browser
session (an HttpOnly cookie) that started it and no other can read it; results go to the browser
as data and are shown as text, never as HTML.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx2
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, request_response
from starlette.staticfiles import StaticFiles

from omds_ld.chat.conversations import Conversations, owner_of
from omds_ld.chat.login import BearerAuth, LoginFailed, Logins
from omds_ld.chat.worker import TURN_END, USER, Workers, mcp_http
from omds_ld.scenarios.agents.models import INSTRUCTION, ModelAgent
from omds_ld.scenarios.grader import grade
from omds_ld.scenarios.protocol import MODEL_CALL, RUN_END, RUN_START, TOOL_CALL, now
from omds_ld.serving import BodyLimit

COOKIE = "omds_ld_chat"
MAX_BODY_BYTES = 256 * 1024  # of a request to the page's API: a message, a tool's arguments


@dataclass(frozen=True)
class _Own:
    """A request about a conversation of the browser session that sent it, and its JSON body."""

    owner: str
    cid: str
    events: list[dict[str, Any]]
    payload: dict[str, Any]


SESSIONLESS = "2026-07-28"


class ChatPage:
    """The chat page and its small JSON API, in front of the MCP servers at ``mcp_urls``."""

    def __init__(
        self,
        mcp_urls: Mapping[str, str],
        display_names: Mapping[str, str],
        conversations: Conversations,
        agent: ModelAgent | None = None,
        logins: Logins | None = None,
    ) -> None:
        self.mcp_urls = dict(mcp_urls)
        self.display_names = dict(display_names)
        self.conversations = conversations
        self.agent = agent
        # where the MCP endpoints want tokens: brokers log in, their tokens stay on the server
        self.logins = logins
        self.workers = Workers(self.mcp_urls, conversations, agent, auth=self._auth)
        self.static = resources.files("omds_ld.chat").joinpath("static")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the server runs; at its end every conversation's MCP sessions are closed."""
        try:
            yield
        finally:
            await self.workers.close()
            self.conversations.close()

    def routes(self) -> list[BaseRoute]:
        def route(path: str, endpoint: Any, methods: list[str]) -> Route:
            # every body of the page's API is a small JSON object: none past MAX_BODY_BYTES
            return Route(
                path, BodyLimit(request_response(endpoint), MAX_BODY_BYTES), methods=methods
            )

        api = "/chat/api/conversations"
        return [
            route("/chat", self.page, ["GET"]),
            Mount("/chat/static", StaticFiles(directory=str(self.static)), name="chat-static"),
            route("/chat/api/servers", self.servers, ["GET"]),
            route(api, self.start, ["POST"]),
            route(api + "/{cid}", self.read, ["GET", "DELETE"]),
            route(api + "/{cid}/calls", self.call, ["POST"]),
            route(api + "/{cid}/messages", self.say, ["POST"]),
            route(api + "/{cid}/events", self.stream, ["GET"]),
            route(api + "/{cid}/grade", self.grade, ["POST"]),
            route("/chat/login", self.login, ["GET"]),
            route("/chat/callback", self.callback, ["GET"]),
            route("/chat/api/logout", self.logout, ["POST"]),
            route(api + "/{cid}/protocol.jsonl", self.protocol, ["GET"]),
            route(api + "/{cid}/scenario", self.scenario, ["POST"]),
        ]

    # the browser session and where a request comes from

    @staticmethod
    def _browser(request: Request) -> str | None:
        return request.cookies.get(COOKIE)

    @staticmethod
    def _same_origin(request: Request) -> bool:
        """A state-changing request must name the page's own origin (browsers send it)."""
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        return origin == own

    @staticmethod
    def _refused(status: int, detail: str) -> JSONResponse:
        return JSONResponse({"status": status, "detail": detail}, status)

    # the page

    async def page(self, request: Request) -> Response:
        html = self.static.joinpath("chat.html").read_text("utf-8")
        response = HTMLResponse(html)
        if not self._browser(request):
            response.set_cookie(
                COOKIE, secrets.token_urlsafe(24), httponly=True, samesite="strict", path="/chat"
            )
        return response

    # logging in, where the MCP endpoints want tokens

    def _auth(self, owner: str, url: str) -> httpx2.Auth | None:
        broker = self.logins.of(owner) if self.logins else None
        return BearerAuth(broker, url) if broker else None

    def _must_log_in(self, request: Request) -> Response | None:
        """Where brokers log in: a 401 naming the login, unless this browser session has."""
        if self.logins is None:
            return None
        browser = self._browser(request)
        if browser and self.logins.of(owner_of(browser)):
            return None
        return JSONResponse(
            {
                "status": 401,
                "detail": "the MCP servers want a broker: log in",
                "login": "/chat/login",
            },
            401,
        )

    async def login(self, request: Request) -> Response:
        browser = self._browser(request)
        if self.logins is None or not browser:
            return RedirectResponse("/chat", 303)
        return RedirectResponse(self.logins.start(owner_of(browser)), 303)

    async def callback(self, request: Request) -> Response:
        browser = self._browser(request)
        if self.logins is None or not browser:
            return RedirectResponse("/chat", 303)
        code, state = request.query_params.get("code"), request.query_params.get("state")
        if not code or not state:
            why = request.query_params.get("error_description") or "no code came back"
            return self._refused(400, f"not logged in: {why}")
        try:
            await self.logins.finish(owner_of(browser), code, state)
        except LoginFailed as failure:
            return self._refused(400, f"not logged in: {failure}")
        return RedirectResponse("/chat", 303)

    async def logout(self, request: Request) -> Response:
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        if self.logins is not None:
            self.logins.forget(owner_of(browser))
        return Response(status_code=204)

    async def servers(self, request: Request) -> Response:
        """Every insurer's MCP server with its tools, as tools/list gives them."""
        refused = self._must_log_in(request)
        if refused is not None:
            return refused
        owner = owner_of(self._browser(request) or "")
        out = []
        for name, url in self.mcp_urls.items():
            auth = self._auth(owner, url)
            async with contextlib.AsyncExitStack() as stack:
                transport: Any = url
                if auth is not None:
                    http = await stack.enter_async_context(mcp_http(auth))
                    transport = streamable_http_client(url, http_client=http)
                client = await stack.enter_async_context(Client(transport, mode=SESSIONLESS))
                tools = (await client.list_tools()).tools
            out.append(
                {
                    "name": name,
                    "displayName": self.display_names.get(name, name),
                    "tools": [
                        {"name": t.name, "title": t.title, "description": t.description,
                         "inputSchema": t.input_schema,
                         "readOnly": bool(t.annotations and t.annotations.read_only_hint)}
                        for t in tools
                    ],
                }
            )  # fmt: skip
        model = (
            {"name": self.agent.name, "instruction": INSTRUCTION, "priced": self.agent.price
             is not None}
            if self.agent is not None
            else None
        )  # fmt: skip
        broker = self.logins.of(owner) if self.logins else None
        return JSONResponse(
            {"servers": out, "model": model, "broker": broker.subject if broker else None}
        )

    # conversations

    async def start(self, request: Request) -> Response:
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        refused = self._must_log_in(request)
        if refused is not None:
            return refused
        model = self.agent.name if self.agent is not None else None
        first = {"event": RUN_START, "time": now(), "agent": model or "by hand",
                 "gen_ai.request.model": model, "servers": list(self.mcp_urls),
                 "settings": {"instruction": INSTRUCTION} if model else {}}  # fmt: skip
        conversation = self.conversations.start(owner_of(browser), first)
        return JSONResponse({"id": conversation}, 201)

    async def read(self, request: Request) -> Response:
        browser = self._browser(request)
        cid = request.path_params["cid"]
        if request.method == "DELETE":
            if not self._same_origin(request) or not browser:
                return self._refused(403, "from the chat page of this server only")
            gone = self.conversations.delete(cid, owner_of(browser))
            return Response(status_code=204) if gone else self._refused(404, "no such conversation")
        events = self._own_events(request)
        if events is None:  # someone else's is as unknown as one that never was
            return self._refused(404, "no such conversation")
        return JSONResponse(
            {"id": cid, "events": events, "usage": usage_of(events), "busy": self.workers.busy(cid)}
        )

    async def _changing(self, request: Request, logged_in: bool = False) -> _Own | Response:
        """A state-changing request about a conversation: from the page's own origin, by the
        browser session the conversation is of (a broker logged in, where ``logged_in`` and the
        MCP servers want one), with a JSON object as its body; else the refusal."""
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        owner, cid = owner_of(browser), request.path_params["cid"]
        events = self.conversations.events(cid, owner)
        if events is None:
            return self._refused(404, "no such conversation")
        if logged_in and (refused := self._must_log_in(request)) is not None:
            return refused
        try:
            payload: Any = await request.json()
        except ValueError:
            return self._refused(400, "the body is no JSON")
        if not isinstance(payload, dict):
            return self._refused(400, "the body is no JSON object")
        return _Own(owner, cid, events, payload)

    def _own_events(self, request: Request) -> list[dict[str, Any]] | None:
        """The conversation's events if it is this browser session's; None for anyone else."""
        browser = self._browser(request)
        return (
            self.conversations.events(request.path_params["cid"], owner_of(browser))
            if browser
            else None
        )

    async def protocol(self, request: Request) -> Response:
        """The conversation as a protocol file of the scenario checker (JSONL)."""
        events = self._own_events(request)
        if events is None:
            return self._refused(404, "no such conversation")
        body = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
        name = f"conversation-{request.path_params['cid']}.jsonl"
        return Response(
            body, media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )  # fmt: skip

    async def scenario(self, request: Request) -> Response:
        """The conversation saved as a scenario (YAML): the task and expected premium the user
        gives, the servers it used, the risk object it sent as facts, the defaults it was left
        with as the assumptions a correct answer names."""
        own = await self._changing(request)
        if isinstance(own, Response):
            return own
        events, payload = own.events, own.payload
        task = str(payload.get("task") or "").strip()
        if not task:
            return self._refused(422, "a scenario needs the task, in words")
        try:
            text = scenario_yaml(
                events, task, payload.get("premium"), str(payload.get("currency") or "EUR")
            )
        except ValueError as error:
            return self._refused(422, str(error))
        return Response(text, media_type="application/yaml")

    async def call(self, request: Request) -> Response:
        """Call a tool at one insurer's MCP server, through the MCP client; record it."""
        own = await self._changing(request, logged_in=True)
        if isinstance(own, Response):
            return own
        owner, cid, payload = own.owner, own.cid, own.payload
        server, tool = payload.get("server"), payload.get("tool")
        arguments = payload.get("arguments") or {}
        if (
            server not in self.mcp_urls
            or not isinstance(tool, str)
            or not isinstance(arguments, dict)
        ):
            return self._refused(
                422, f"server is one of {', '.join(self.mcp_urls)}; a tool; arguments"
            )
        try:
            event = await self.workers.call(cid, owner, server, tool, arguments)
        except Exception as error:  # the MCP server could not be reached
            return self._refused(502, f"{server}'s MCP server: {type(error).__name__}: {error}")
        return JSONResponse(event)

    async def say(self, request: Request) -> Response:
        """The user's message to the model; the answer comes as the conversation's events."""
        own = await self._changing(request, logged_in=True)
        if isinstance(own, Response):
            return own
        if self.agent is None:
            return self._refused(
                409,
                "no model is configured (omds-ld serve --chat-model …); follow the steps by hand",
            )
        text = str(own.payload.get("text") or "").strip()
        if not text:
            return self._refused(422, "a message needs text")
        self.workers.say(own.cid, own.owner, text)
        return JSONResponse({"after": len(own.events) - 1}, 202)

    async def stream(self, request: Request) -> Response:
        """The conversation's events after ``after`` (or the Last-Event-ID), as server-sent events
        while the conversation is busy; then ``idle`` and the stream ends."""
        if self._own_events(request) is None:
            return self._refused(404, "no such conversation")
        owner, cid = owner_of(self._browser(request) or ""), request.path_params["cid"]
        try:
            after = int(request.headers.get("last-event-id") or request.query_params["after"])
        except (KeyError, ValueError):
            after = -1

        async def events() -> AsyncIterator[ServerSentEvent]:
            nonlocal after
            call, shown = -1, 0  # the model call whose text is streaming, and how much is sent
            while True:
                changed = self.workers.changes(cid)
                busy = self.workers.busy(cid)
                found = self.conversations.events(cid, owner) or []
                for index in range(after + 1, len(found)):
                    data = json.dumps({**found[index], "index": index}, ensure_ascii=False)
                    yield ServerSentEvent(data=data, id=str(index))
                    after = index
                serial, text = self.workers.partial(cid)
                if serial != call:
                    call, shown = serial, 0
                if len(text) > shown:  # the model's words as they come (not kept: no id)
                    piece = json.dumps({"text": text[shown:]}, ensure_ascii=False)
                    yield ServerSentEvent(data=piece, event="delta")
                    shown = len(text)
                if not busy:
                    yield ServerSentEvent(data="{}", event="idle")
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 15)

        return EventSourceResponse(events(), ping=10)

    async def grade(self, request: Request) -> Response:
        """Grade the conversation with the scenario checker's six criteria, against the premium the
        user expected (the task: the user's first message unless given)."""
        own = await self._changing(request)
        if isinstance(own, Response):
            return own
        events, payload = own.events, own.payload
        said = [str(e.get("text", "")) for e in events if e.get("event") == USER]
        task = str(payload.get("task") or (said[0] if said else "")).strip()
        expected = payload.get("premium")
        if expected in (None, "", {}):
            return self._refused(
                422, "say which premium you expected (a number, or one per insurer)"
            )
        try:
            scenario = scenario_of(
                events, task or "(by hand)", expected, str(payload.get("currency") or "EUR")
            )
        except ValueError as error:
            return self._refused(422, str(error))
        verdict = grade(as_protocol(events, scenario))
        return JSONResponse(
            {
                "passed": verdict.passed,
                "criteria": [
                    {"name": c.name, "passed": c.passed, "reason": c.reason,
                     "evidence": list(c.evidence)}
                    for c in verdict.criteria
                ],
            }
        )  # fmt: skip


def as_protocol(events: list[dict[str, Any]], scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """A conversation as the protocol of one run of ``scenario``: its start names the scenario,
    its turns' times add up to the run's, and it ends as its last turn ended."""
    turns = [e for e in events if e.get("event") == TURN_END]
    start = {**events[0], "scenario": scenario}
    end = {
        "event": RUN_END, "time": now(),
        "reason": str(turns[-1].get("reason", "done")) if turns else "done",
        "detail": str(turns[-1].get("detail", "")) if turns else "",
        "seconds": round(sum(float(t.get("seconds", 0)) for t in turns), 3),
    }  # fmt: skip
    return [start, *events[1:], end]


def usage_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The conversation's model calls, tokens and cost, summed."""
    calls = [e for e in events if e.get("event") == MODEL_CALL]
    return {
        "calls": len(calls),
        "input_tokens": sum(int(e.get("gen_ai.usage.input_tokens", 0)) for e in calls),
        "output_tokens": sum(int(e.get("gen_ai.usage.output_tokens", 0)) for e in calls),
        "cost_usd": round(sum(float(e.get("cost_usd", 0.0)) for e in calls), 6),
    }


def scenario_yaml(events: list[dict[str, Any]], task: str, premium: Any, currency: str) -> str:
    """A scenario of the checker from a conversation's protocol (see ``ChatPage.scenario``)."""
    scenario = scenario_of(events, task, premium, currency)
    return str(yaml.safe_dump(scenario, allow_unicode=True, sort_keys=False))


def scenario_of(
    events: list[dict[str, Any]], task: str, premium: Any, currency: str
) -> dict[str, Any]:
    """The scenario a conversation worked on: the task, the servers it used, the risk object it
    sent as facts, the defaults it was left with as the assumptions a correct answer names, and
    the expected premium the user gives (or the premiums it reached, with several servers)."""
    calls = [e for e in events if e.get("event") == TOOL_CALL and not e.get("is_error")]
    servers = list(dict.fromkeys(str(e["mcp.server"]) for e in calls))
    if not servers:
        raise ValueError("the conversation called no tool yet")
    facts: dict[str, Any] = {}
    defaults: dict[str, str] = {}
    premiums: dict[str, Any] = {}
    for event in calls:
        arguments = event.get("gen_ai.tool.call.arguments") or {}
        body = arguments.get("body") if isinstance(arguments, dict) else None
        if event["gen_ai.tool.name"] in ("createRiskObject", "updateRiskObject") and isinstance(
            body, dict
        ):
            facts = {k: v for k, v in body.items() if k not in ("@context", "@id")}
        elif event["gen_ai.tool.name"] == "inquireTariff" and isinstance(body, dict):
            risks = (body.get("p:instance") or {}).get("p:hasRiskObject") or []
            if risks and isinstance(risks[0], dict):
                facts = {k: v for k, v in risks[0].items() if k not in ("@context", "@id")}
        content = (event.get("mcp.tool.result") or {}).get("structuredContent") or {}
        if content.get("premium"):
            premiums[str(event["mcp.server"])] = content["premium"].get("gross")
            defaults = {str(d["label"]): str(d["label"]) for d in content.get("defaults", [])}
    if not facts:
        raise ValueError("the conversation sent no risk object to take as the task's facts")
    expected: dict[str, Any] = {"currency": currency}
    try:
        if isinstance(premium, dict) and premium:
            unknown = sorted(set(premium) - set(servers))
            if unknown:
                raise ValueError(f"the conversation used no {', '.join(unknown)}")
            expected["premiums"] = {str(k): float(v) for k, v in premium.items()}
        elif premium not in (None, "") and len(servers) == 1:
            expected["premium"] = float(premium)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the expected premium is no number: {error}") from None
    if "premium" not in expected and "premiums" not in expected:
        if not premiums:
            raise ValueError("give the expected premium (the conversation reached none)")
        expected["premiums"] = premiums
    scenario = {
        "id": "conversation-" + uuid.uuid4().hex[:8],
        "title": task[:80],
        "task": task,
        "servers": servers,
        "facts": facts,
        "expected": expected,
        "assumptions": [{"name": label, "wordings": {"any": [label]}} for label in defaults],
        "budget": {"tool_calls": max(12, 3 * len(calls)), "tokens": 100000, "cost": 1.0,
                   "seconds": 300},
        "runs": 3,
    }  # fmt: skip
    return scenario
