"""The chat page of the example server: the insurers' MCP servers, reached through the official MCP
client exactly as any MCP client reaches them, followed by hand (next steps as buttons).

Safe by default: it lives on the example server (loopback unless told otherwise); every
state-changing request must come from the page's own origin; a conversation belongs to the browser
session (an HttpOnly cookie) that started it and no other can read it; results go to the browser
as data and are shown as text, never as HTML.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml
from mcp import Client
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from omds_ld.chat.conversations import Conversations, owner_of
from omds_ld.scenarios.protocol import RUN_START, TOOL_CALL, now
from omds_ld.scenarios.session import result_text

COOKIE = "omds_ld_chat"
SESSIONLESS = "2026-07-28"


class ChatPage:
    """The chat page and its small JSON API, in front of the MCP servers at ``mcp_urls``."""

    def __init__(
        self,
        mcp_urls: Mapping[str, str],
        display_names: Mapping[str, str],
        conversations: Conversations,
    ) -> None:
        self.mcp_urls = dict(mcp_urls)
        self.display_names = dict(display_names)
        self.conversations = conversations
        self.static = resources.files("omds_ld.chat").joinpath("static")

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/chat", self.page, methods=["GET"]),
            Mount("/chat/static", StaticFiles(directory=str(self.static)), name="chat-static"),
            Route("/chat/api/servers", self.servers, methods=["GET"]),
            Route("/chat/api/conversations", self.start, methods=["POST"]),
            Route("/chat/api/conversations/{cid}", self.read, methods=["GET", "DELETE"]),
            Route("/chat/api/conversations/{cid}/calls", self.call, methods=["POST"]),
            Route("/chat/api/conversations/{cid}/protocol.jsonl", self.protocol, methods=["GET"]),
            Route("/chat/api/conversations/{cid}/scenario", self.scenario, methods=["POST"]),
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

    async def servers(self, request: Request) -> Response:
        """Every insurer's MCP server with its tools, as tools/list gives them."""
        out = []
        for name, url in self.mcp_urls.items():
            async with Client(url, mode=SESSIONLESS) as client:
                tools = (await client.list_tools()).tools
            out.append(
                {
                    "name": name,
                    "displayName": self.display_names.get(name, name),
                    "tools": [
                        {"name": t.name, "title": t.title, "description": t.description,
                         "inputSchema": t.input_schema}
                        for t in tools
                    ],
                }
            )  # fmt: skip
        return JSONResponse({"servers": out})

    # conversations

    async def start(self, request: Request) -> Response:
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        first = {"event": RUN_START, "time": now(), "agent": "by hand", "model": None,
                 "servers": list(self.mcp_urls)}  # fmt: skip
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
        events = self.conversations.events(cid, owner_of(browser)) if browser else None
        if events is None:  # someone else's is as unknown as one that never was
            return self._refused(404, "no such conversation")
        return JSONResponse({"id": cid, "events": events})

    def _own_events(self, request: Request) -> list[dict[str, Any]] | None:
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
        if not self._same_origin(request):
            return self._refused(403, "from the chat page of this server only")
        events = self._own_events(request)
        if events is None:
            return self._refused(404, "no such conversation")
        try:
            payload: Any = await request.json()
        except ValueError:
            return self._refused(400, "the body is no JSON")
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
        browser = self._browser(request)
        if not self._same_origin(request) or not browser:
            return self._refused(403, "from the chat page of this server only")
        owner = owner_of(browser)
        cid = request.path_params["cid"]
        if self.conversations.events(cid, owner) is None:
            return self._refused(404, "no such conversation")
        try:
            payload: Any = await request.json()
        except ValueError:
            return self._refused(400, "the body is no JSON")
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
        started = time.perf_counter()
        async with Client(self.mcp_urls[server], mode=SESSIONLESS) as client:
            result = await client.call_tool(tool, arguments)
        event = {
            "event": TOOL_CALL, "time": now(), "mcp.server": server, "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": arguments,
            "mcp.tool.result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
            "text": result_text(result), "is_error": bool(result.is_error),
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }  # fmt: skip
        self.conversations.append(cid, owner, event)
        return JSONResponse(event)


def scenario_yaml(events: list[dict[str, Any]], task: str, premium: Any, currency: str) -> str:
    """A scenario of the checker from a conversation's protocol (see ``ChatPage.scenario``)."""
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
    if premium is not None and len(servers) == 1:
        expected["premium"] = float(premium)
    elif premiums:
        expected["premiums"] = premiums
    else:
        raise ValueError("give the expected premium (the conversation reached none)")
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
    return str(yaml.safe_dump(scenario, allow_unicode=True, sort_keys=False))
