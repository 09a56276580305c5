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
import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import anyio.to_thread
import httpx2
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, request_response
from starlette.staticfiles import StaticFiles

from omds_ld.chat.conversations import (
    MAX_BYTES,
    MAX_EVENTS,
    Conversations,
    owner_of,
)
from omds_ld.chat.login import BearerAuth, LoginFailed, Logins
from omds_ld.chat.worker import ASKED, TURN_BUDGET, TURN_END, USER, NotKept, Workers, mcp_http
from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.agents.models import INSTRUCTION, ModelAgent
from omds_ld.scenarios.grader import grade
from omds_ld.scenarios.protocol import MODEL_CALL, PERSON, RUN_END, RUN_START, TOOL_CALL, now
from omds_ld.serving import BodyLimit

COOKIE = "omds_ld_chat"
MAX_BODY_BYTES = 256 * 1024  # of a request to the page's API: a message, a tool's arguments


@dataclass(frozen=True)
class _Own:
    """A request about a conversation of the browser session that sent it, and its JSON body."""

    owner: str
    cid: str
    count: int  # the events it has
    full: bool  # too near its bound to take another call or turn
    payload: dict[str, Any]


# what one job (a call by hand, a turn of the model within its budget) may add at most
JOB_EVENTS = 2 * TURN_BUDGET.tool_calls + 20
# the page's own headers: nothing but its own files, never in a frame
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


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
        self.key = conversations.key()  # signs the browser sessions' cookies
        self.static = resources.files("omds_ld.chat").joinpath("static")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the server runs the conversations past their keeping are deleted (looked for
        every minute, or more often); at its end every conversation's MCP sessions are closed."""

        async def purging() -> None:
            while True:
                await anyio.sleep(self.conversations.purge_every)
                await anyio.to_thread.run_sync(self.conversations.purge)

        purger = asyncio.create_task(purging())
        try:
            yield
        finally:
            purger.cancel()
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
            route(api + "/{cid}/confirmations", self.confirm, ["POST"]),
            route(api + "/{cid}/events", self.stream, ["GET"]),
            route(api + "/{cid}/grade", self.grade, ["POST"]),
            route(api + "/{cid}/personal", self.personal, ["POST"]),
            route("/chat/login", self.login, ["GET"]),
            route("/chat/callback", self.callback, ["GET"]),
            route("/chat/api/logout", self.logout, ["POST"]),
            route(api + "/{cid}/protocol.jsonl", self.protocol, ["GET"]),
            route(api + "/{cid}/scenario", self.scenario, ["POST"]),
        ]

    # the browser session and where a request comes from

    def _browser(self, request: Request) -> str | None:
        """The browser session of a request: a cookie this server issued (signed with the
        store's key), or None; a value it never issued is no session."""
        value = request.cookies.get(COOKIE) or ""
        token, _, signature = value.partition(".")
        if not token or not hmac.compare_digest(signature, self._sign(token)):
            return None
        return value

    def _sign(self, token: str) -> str:
        return hmac.new(self.key, token.encode(), hashlib.sha256).hexdigest()[:32]

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
        response = HTMLResponse(html, headers=PAGE_HEADERS)
        if not self._browser(request):
            # Lax: a link from elsewhere brings the cookie along, so it is never replaced and
            # the conversations stay; every change is checked for the page's own Origin
            token = secrets.token_urlsafe(24)
            response.set_cookie(
                COOKIE, f"{token}.{self._sign(token)}", httponly=True, samesite="lax",
                path="/chat", secure=request.url.scheme == "https",
            )  # fmt: skip
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
        owner = owner_of(browser)
        if self.logins is not None:
            await self.logins.forget(owner)
        # the conversations' MCP sessions were the broker's: ended, made anew on the next job
        await self.workers.close(owner)
        return Response(status_code=204)

    async def servers(self, request: Request) -> Response:
        """Every insurer's MCP server with its tools, as tools/list gives them."""
        refused = self._must_log_in(request)
        if refused is not None:
            return refused
        owner = owner_of(self._browser(request) or "")
        out = []
        for name, url in self.mcp_urls.items():
            listed: dict[str, Any] = {
                "name": name, "displayName": self.display_names.get(name, name), "tools": []
            }  # fmt: skip
            try:
                tools = await self._tools(owner, url)
            except Exception as error:  # one server refusing or down is said, the others listed
                listed["error"] = refusal_text(error)
            else:
                listed["tools"] = [
                    {"name": t.name, "title": t.title, "description": t.description,
                     "inputSchema": t.input_schema,
                     "readOnly": bool(t.annotations and t.annotations.read_only_hint)}
                    for t in tools
                ]  # fmt: skip
            out.append(listed)
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

    async def _tools(self, owner: str, url: str) -> list[Any]:
        """The tools an MCP server lists, asked in a request of its own (2026-07-28)."""
        auth = self._auth(owner, url)
        async with contextlib.AsyncExitStack() as stack:
            transport: Any = url
            if auth is not None:
                http = await stack.enter_async_context(mcp_http(auth))
                transport = streamable_http_client(url, http_client=http)
            client = await stack.enter_async_context(Client(transport, mode=SESSIONLESS))
            return list((await client.list_tools()).tools)

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
        conversation = await anyio.to_thread.run_sync(
            self.conversations.start, owner_of(browser), first
        )
        return JSONResponse({"id": conversation}, 201)

    async def read(self, request: Request) -> Response:
        browser = self._browser(request)
        cid = request.path_params["cid"]
        if request.method == "DELETE":
            if not self._same_origin(request) or not browser:
                return self._refused(403, "from the chat page of this server only")
            gone = await anyio.to_thread.run_sync(self.conversations.delete, cid, owner_of(browser))
            return Response(status_code=204) if gone else self._refused(404, "no such conversation")
        rows = (
            await anyio.to_thread.run_sync(self.conversations.rows, cid, owner_of(browser))
            if browser
            else None
        )
        if rows is None:  # someone else's is as unknown as one that never was
            return self._refused(404, "no such conversation")
        # the events as kept, put together as text: a long conversation parses nothing here
        usage = usage_of([json.loads(r) for r in rows if f'"{MODEL_CALL}"' in r[:80]])
        keeps = await anyio.to_thread.run_sync(
            self.conversations.keeps_personal, cid, owner_of(browser or "")
        )
        head = json.dumps(
            {"id": cid, "usage": usage, "busy": self.workers.busy(cid), "keepPersonal": keeps}
        )
        return Response(
            head[:-1] + ', "events": [' + ",".join(rows) + "]}", media_type="application/json"
        )

    async def _changing(self, request: Request, logged_in: bool = False) -> _Own | Response:
        """A state-changing request about a conversation: from the page's own origin, by the
        browser session the conversation is of (a broker logged in, where ``logged_in`` and the
        MCP servers want one), with a JSON object as its body; else the refusal."""
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        owner, cid = owner_of(browser), request.path_params["cid"]
        size = await anyio.to_thread.run_sync(self.conversations.size, cid, owner)
        if size is None:
            return self._refused(404, "no such conversation")
        if logged_in and (refused := self._must_log_in(request)) is not None:
            return refused
        try:
            payload: Any = await request.json()
        except ValueError:
            return self._refused(400, "the body is no JSON")
        if not isinstance(payload, dict):
            return self._refused(400, "the body is no JSON object")
        count, held = size
        full = count + JOB_EVENTS > MAX_EVENTS or held > MAX_BYTES * 0.9
        return _Own(owner, cid, count, full, payload)

    async def _events(self, cid: str, owner: str, after: int = -1) -> list[dict[str, Any]] | None:
        """A conversation's events, read off the event loop (a long one takes a while)."""
        return await anyio.to_thread.run_sync(self.conversations.events, cid, owner, after)

    async def _own_events(self, request: Request) -> list[dict[str, Any]] | None:
        """The conversation's events if it is this browser session's; None for anyone else."""
        browser = self._browser(request)
        if not browser:
            return None
        return await self._events(request.path_params["cid"], owner_of(browser))

    def _full(self, own: _Own) -> Response:
        return self._refused(
            409,
            f"this conversation holds {own.count} events, as many as one may; start a new one "
            "(download this one as its protocol first)",
        )

    async def personal(self, request: Request) -> Response:
        """``{"keep": true}``: the person asks to keep the personal data of this conversation's
        events from now on (its protocol download then holds them); ``false``: masked again."""
        own = await self._changing(request)
        if isinstance(own, Response):
            return own
        keep = own.payload.get("keep")
        if not isinstance(keep, bool):
            return self._refused(400, "keep must be true or false")
        await anyio.to_thread.run_sync(self.conversations.keep_personal, own.cid, own.owner, keep)
        return JSONResponse({"keep": keep})

    async def protocol(self, request: Request) -> Response:
        """The conversation as a protocol file of the scenario checker (JSONL), gradable by
        ``omds-ld scenario grade``: its start names the scenario made of the conversation (the
        task its first message, the premiums it reached as expected). One that cannot be made
        a scenario yet (no risk object sent, no premium reached) comes as its events alone."""
        events = await self._own_events(request)
        if events is None:
            return self._refused(404, "no such conversation")
        said = [str(e.get("text", "")) for e in events if e.get("event") == USER]
        try:
            scenario = scenario_of(events, said[0] if said else "(by hand)", None, "EUR")
            events = as_protocol(events, scenario)
        except ValueError:
            pass
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
        events, payload = await self._events(own.cid, own.owner) or [], own.payload
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
        if own.full:
            return self._full(own)
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
        except Exception as error:  # the MCP server could not be reached, or refused
            return self._refused(502, f"{server}'s MCP server: {refusal_text(error)}")
        return JSONResponse(event)

    async def confirm(self, request: Request) -> Response:
        """The person's answer to a binding call's confirmation, given on this page: only to a
        question this conversation was asked (its page's address is in its events)."""
        own = await self._changing(request, logged_in=True)
        if isinstance(own, Response):
            return own
        url, answer = own.payload.get("url"), own.payload.get("answer")
        if answer != "answered" or not isinstance(url, str):
            return self._refused(
                422, "answer is answered (the person answered on the page); url the page's"
            )
        events = await self._events(own.cid, own.owner) or []
        asked = [e for e in events if e.get("event") == ASKED and e.get("url") == url]
        by_hand = [e for e in events if (e.get("confirmation") or {}).get("url") == url]
        if not asked and not by_hand:
            return self._refused(404, "this conversation was asked no such confirmation")
        if any(e.get("event") == PERSON and e.get("url") == url for e in events):
            return self._refused(409, "this confirmation was answered already")
        try:
            event = await self.workers.answer(
                own.cid, own.owner, url, None if asked else by_hand[-1]
            )
        except NotKept as gone:
            return self._refused(409, str(gone))
        return JSONResponse(event) if event is not None else JSONResponse({}, 202)

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
        if own.full:
            return self._full(own)
        text = str(own.payload.get("text") or "").strip()
        if not text:
            return self._refused(422, "a message needs text")
        self.workers.say(own.cid, own.owner, text)
        return JSONResponse({"after": own.count - 1}, 202)

    async def stream(self, request: Request) -> Response:
        """The conversation's events after ``after`` (or the Last-Event-ID), as server-sent events
        while the conversation is busy; then ``idle`` and the stream ends."""
        browser = self._browser(request)
        owner, cid = owner_of(browser or ""), request.path_params["cid"]
        if (
            not browser
            or await anyio.to_thread.run_sync(self.conversations.size, cid, owner) is None
        ):
            return self._refused(404, "no such conversation")
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
                for index, event in enumerate(
                    await self._events(cid, owner, after) or [], after + 1
                ):
                    data = json.dumps({**event, "index": index}, ensure_ascii=False)
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
        """Grade the conversation with the scenario checker's criteria, against the premium the
        user expected (the task: the user's first message unless given)."""
        own = await self._changing(request)
        if isinstance(own, Response):
            return own
        events, payload = await self._events(own.cid, own.owner) or [], own.payload
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


def refusal_text(error: BaseException) -> str:
    """What a person reads when an MCP server cannot be used: its own words of refusal (the
    JSON-RPC error it answered, and when to retry), or what went wrong on the way."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, MCPError):  # the server answered with a JSON-RPC error
        return f"refused: {error}"
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if response is None or not isinstance(status, int):
        return f"{type(error).__name__}: {error}"
    try:
        said = str(json.loads(response.content)["error"]["message"])
    except (ValueError, KeyError, TypeError, AttributeError):
        said = f"HTTP {status}"
    wait = response.headers.get("retry-after")
    return f"refused ({status}): {said}" + (f"; retry in {wait} s" if wait else "")


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


def title_of(task: str, most: int = 80) -> str:
    """A saved scenario's title: the task, cut after a whole word where it is long."""
    words = " ".join(task.split())
    if len(words) <= most:
        return words
    cut = words[: most - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def scenario_yaml(events: list[dict[str, Any]], task: str, premium: Any, currency: str) -> str:
    """A scenario of the checker from a conversation's protocol (see ``ChatPage.scenario``)."""
    scenario = scenario_of(events, task, premium, currency)
    return str(yaml.safe_dump(scenario, allow_unicode=True, sort_keys=False))


def scenario_of(
    events: list[dict[str, Any]], task: str, premium: Any, currency: str
) -> dict[str, Any]:
    """The scenario a conversation worked on: the task, the servers it used, the risk object it
    sent as facts, the values it set and the components it chose (by the labels the answers
    show), the defaults it was left with as the assumptions a correct answer names, a binding
    offer and an application with the customer's data and what the person answered, and the
    expected premium the user gives (or the premiums it reached, with several servers).
    Personal data the conversation kept masked stay masked: fill them in before a run."""
    calls = [e for e in events if e.get("event") == TOOL_CALL and not e.get("is_error")]
    servers = list(dict.fromkeys(str(e["mcp.server"]) for e in calls))
    if not servers:
        raise ValueError("the conversation called no tool yet")
    worked = _worked_on(calls)
    if not worked["facts"]:
        raise ValueError("the conversation sent no risk object to take as the task's facts")
    scenario = {
        "id": "conversation-" + uuid.uuid4().hex[:8],
        "title": title_of(task),
        "task": task,
        "servers": servers,
        "facts": worked["facts"],
        **{key: worked[key] for key in ("set", "include", "exclude", "application") if worked[key]},
        **({"person": "confirm"} if worked["application"] and _confirmed(events) else {}),
        "expected": _expected(worked, servers, premium, currency),
        "assumptions": [{"name": label, "wordings": {"any": [label]}} for label in worked["defaults"]],
        "budget": {"tool_calls": max(12, 3 * len(calls)), "tokens": 100000, "cost": 1.0,
                   "seconds": 300},
        "runs": 3,
    }  # fmt: skip
    return scenario


def _worked_on(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """What the conversation's calls did to the case: the facts, values set and components
    chosen (by label), the defaults left, the premiums, an offer, an application."""
    labels: dict[str, str] = {}  # an attribute's IRI or a component's id → its label
    worked: dict[str, Any] = {"facts": {}, "set": {}, "include": [], "exclude": [],
                              "defaults": {}, "premiums": {}, "offer": False,
                              "application": {}, "state": None}  # fmt: skip
    for event in calls:
        tool = event["gen_ai.tool.name"]
        arguments = event.get("gen_ai.tool.call.arguments") or {}
        body = arguments.get("body") if isinstance(arguments, dict) else None
        content = answer_of(event.get("mcp.tool.result") or {})
        if tool in ("createRiskObject", "updateRiskObject") and isinstance(body, dict):
            worked["facts"] = {k: v for k, v in body.items() if k not in ("@context", "@id")}
        elif tool == "inquireTariff" and isinstance(body, dict):
            risks = (body.get("p:instance") or {}).get("p:hasRiskObject") or []
            if risks and isinstance(risks[0], dict):
                worked["facts"] = {
                    k: v for k, v in risks[0].items() if k not in ("@context", "@id")
                }
        elif tool == "setAttributes" and isinstance(body, dict):
            for value in body.get("bc:values") or []:
                name = labels.get(str(value.get("bc:attribute")), str(value.get("bc:attribute")))
                worked["set"][name] = value.get("p:value")
        elif tool in ("includeComponent", "excludeComponent"):
            chosen = labels.get(
                str(arguments.get("componentId")), str(arguments.get("componentId"))
            )
            worked["include" if tool == "includeComponent" else "exclude"].append(chosen)
        elif tool == "createOffer" and content.get("offer"):
            worked["offer"] = True
        elif tool == "createApplication" and content.get("application") and isinstance(body, dict):
            worked["application"] = _application_of(body)
            worked["state"] = content["application"].get("state")
        _learn_labels(content.get("draft") or {}, labels)
        if content.get("premium") and not content.get("application"):
            worked["premiums"][str(event["mcp.server"])] = content["premium"].get("gross")
        if content.get("draft") and "defaults" in content:  # an offer's answer has no draft
            worked["defaults"] = {str(d["label"]): str(d["label"]) for d in content["defaults"]}
    return worked


def _learn_labels(draft: dict[str, Any], labels: dict[str, str]) -> None:
    for attribute in draft.get("attributes") or []:
        labels[str(attribute.get("iri"))] = str(attribute.get("label"))
    for component in draft.get("components") or []:
        labels[str(component.get("componentId"))] = str(component.get("label"))
        for attribute in component.get("attributes") or []:
            labels[str(attribute.get("iri"))] = str(attribute.get("label"))


def _application_of(body: dict[str, Any]) -> dict[str, Any]:
    """An application's body as a scenario keeps the customer's data (``application:``)."""
    consent = body.get("bc:consent") or {}
    out: dict[str, Any] = {
        "policyholder": dict(body.get("bc:policyholder") or {}),
        "payment": dict(body.get("bc:payment") or {}),
        "startDate": body.get("bc:startDate", "today"),
    }
    if consent:
        out["consent"] = {"by": consent.get("bc:consentedBy"),
                          "method": consent.get("bc:consentMethod")}  # fmt: skip
    return out


def _confirmed(events: list[dict[str, Any]]) -> bool:
    return any(e.get("event") == PERSON and e.get("answer") == "confirm" for e in events)


def _expected(
    worked: dict[str, Any], servers: list[str], premium: Any, currency: str
) -> dict[str, Any]:
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
        if not worked["premiums"]:
            raise ValueError("give the expected premium (the conversation reached none)")
        expected["premiums"] = worked["premiums"]
    if worked["offer"]:
        expected["offer"] = True
    if worked["state"]:
        expected["application"] = worked["state"]
    return expected
