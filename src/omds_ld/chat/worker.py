"""One worker per open conversation of the chat page: it holds the conversation's MCP sessions (one
per insurer's server, through the official MCP client) and does its jobs one after another, a
tool call by hand or a turn of the model, recording every event in the conversation as it happens.

A worker lives in the server's event loop while its conversation is in use and ends, closing its
sessions, after a while without jobs; the next job starts a new one. The model's memory of a
conversation is kept in the store beside its events, so a restart loses neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from omds_ld.chat.conversations import ConversationFull, Conversations
from omds_ld.mcp.condense import answer_extension
from omds_ld.norm.personal import MASK
from omds_ld.scenarios.agents.models import ModelAgent
from omds_ld.scenarios.protocol import FINAL, MODEL_CALL, PERSON, TOOL_CALL, TOOLS_LIST, now
from omds_ld.scenarios.scenario import Budget
from omds_ld.scenarios.session import (
    ANSWERED_ON_THE_PAGE,
    AgentGaveUp,
    BudgetExceeded,
    RunSession,
    answer_shown_by,
    confirmation_page,
    result_text,
)

log = logging.getLogger("omds_ld.chat")
ANSWERED = [answer_extension()]  # the page shows what the whole structured answer says
USER = "gen_ai.user.message"
TURN_END = "chat.turn.end"
# a binding call waits for the person: what the confirmation shows, and where it is answered
ASKED = "chat.confirmation.asked"
MAX_WAITING_CALLS = 1000  # calls by hand kept in memory to be made again once answered
ASK_SECONDS = 600.0  # how long a question waits for the person before the call goes on unanswered
# What one turn of the model may spend before it is stopped (the page says so when it happens)
TURN_BUDGET = Budget(tool_calls=40, tokens=400_000, cost=2.0, seconds=600)


class NotKept(Exception):
    """A call cannot be made again as it was: what it was made with is no longer kept."""


class ConversationWriter:
    """Records a conversation's events in the store and wakes whoever streams them."""

    def __init__(
        self,
        conversations: Conversations,
        cid: str,
        owner: str,
        changed: Callable[[str], None],
    ) -> None:
        self.conversations, self.cid, self.owner, self.changed = conversations, cid, owner, changed

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        entry = {"event": event, "time": now(), **fields}
        try:
            entry["index"] = self.conversations.append(self.cid, self.owner, entry)
        except ConversationFull as full:  # the page refuses new jobs well before: never lost
            log.warning("conversation %s: %s; %s not kept", self.cid[:8], full, event)
            entry["index"] = None
        self.changed(event)
        return entry


@dataclass
class _Call:
    server: str
    tool: str
    arguments: dict[str, Any]
    done: asyncio.Future[dict[str, Any]]
    # the confirmation page the person says they answered: the call is made again after it
    answered: str | None = None


@dataclass
class _Say:
    text: str


@dataclass
class _Worker:
    cid: str
    owner: str
    queue: asyncio.Queue[_Call | _Say] = field(default_factory=asyncio.Queue)
    pending: int = 0  # jobs given and not yet done: while > 0 the conversation is busy
    closed: bool = False
    task: asyncio.Task[None] | None = None


def mcp_http(auth: httpx2.Auth) -> httpx2.AsyncClient:
    """An HTTP client for an MCP client, with the MCP transports' timeouts and this auth."""
    return httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=300.0))


def _why(error: BaseException) -> tuple[str, str]:
    """How a turn ended that ended without a final answer: the reason kind and its words."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, BudgetExceeded):
        return "budget", f"stopped, over the turn's budget: {error}"
    if isinstance(error, TimeoutError):
        return "budget", f"stopped after {TURN_BUDGET.seconds} s"
    if isinstance(error, AgentGaveUp):
        return "agent", str(error)
    return "error", f"{type(error).__name__}: {error}"


class Workers:
    """The workers of the page's open conversations, and the wake-ups of their event streams."""

    def __init__(
        self,
        mcp_urls: Mapping[str, str],
        conversations: Conversations,
        agent: ModelAgent | None,
        idle_seconds: float = 300.0,
        auth: Callable[[str, str], httpx2.Auth | None] | None = None,
    ) -> None:
        self.mcp_urls = dict(mcp_urls)
        self.conversations = conversations
        self.agent = agent
        # how a browser session's MCP requests authenticate at an endpoint (its broker's token)
        self.auth = auth
        self.idle_seconds = idle_seconds
        self._workers: dict[str, _Worker] = {}
        self._changes: dict[str, asyncio.Event] = {}
        # the text of the model call under way, as it is streamed: (which call, text so far);
        # never stored (the call's event keeps the whole text), only shown while it comes
        self._partial: dict[str, tuple[int, str]] = {}
        # questions to the person a model's call waits on: (conversation, page) → their answer
        self._asked: dict[tuple[str, str], asyncio.Future[str | None]] = {}
        # a call by hand waiting for the person's answer on its page, by conversation and page:
        # its arguments as made (the conversation keeps them masked), to make it again
        self._made: dict[tuple[str, str], dict[str, Any]] = {}

    # streaming: who waits for a conversation's next event

    def changes(self, cid: str) -> asyncio.Event:
        """The event set at the conversation's next change (take it before reading the store)."""
        return self._changes.setdefault(cid, asyncio.Event())

    def _changed(self, cid: str) -> None:
        self._changes.pop(cid, asyncio.Event()).set()

    def partial(self, cid: str) -> tuple[int, str]:
        """The model's text streamed so far in its call under way, and which call that is."""
        return self._partial.get(cid, (0, ""))

    def _streamed(self, cid: str, piece: str) -> None:
        serial, text = self.partial(cid)
        self._partial[cid] = (serial, text + piece)
        self._changed(cid)

    def _recorded(self, cid: str, event: str) -> None:
        if event == MODEL_CALL:  # the call is kept whole: what streamed of it is done
            self._partial[cid] = (self.partial(cid)[0] + 1, "")
        self._changed(cid)

    def busy(self, cid: str) -> bool:
        worker = self._workers.get(cid)
        return worker is not None and not worker.closed and worker.pending > 0

    # jobs

    def _worker(self, cid: str, owner: str) -> _Worker:
        worker = self._workers.get(cid)
        if worker is None or worker.closed:
            worker = _Worker(cid, owner)
            worker.task = asyncio.create_task(self._run(worker), name=f"chat {cid}")
            self._workers[cid] = worker
        return worker

    async def call(
        self,
        cid: str,
        owner: str,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        answered: str | None = None,
    ) -> dict[str, Any]:
        """A tool call by hand, in the conversation's MCP session with the server; its event.
        ``answered``: the confirmation page the person answered, after which it is made again."""
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        worker = self._worker(cid, owner)
        worker.pending += 1
        worker.queue.put_nowait(_Call(server, tool, arguments, done, answered))
        event = await done
        page = (event.get("confirmation") or {}).get("url")
        if page:
            self._made[(cid, page)] = arguments
            while len(self._made) > MAX_WAITING_CALLS:  # never answered: the oldest goes
                self._made.pop(next(iter(self._made)))
        return event

    async def ask_person(self, writer: ConversationWriter, page: str) -> str | None:
        """A model's binding call waits here: the conversation shows the confirmation page's
        address (an event), the person logs in there and answers, and says so through
        ``answer``; None if they do not in time."""
        asked: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._asked[(writer.cid, page)] = asked
        writer.write(ASKED, url=page)
        try:
            return await asyncio.wait_for(asked, ASK_SECONDS)
        except TimeoutError:
            return None
        finally:
            self._asked.pop((writer.cid, page), None)

    async def answer(
        self, cid: str, owner: str, page: str, call: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The person says they answered a confirmation on its page: the model's call waiting on
        it goes on, or a call made by hand is made again (its event)."""
        waiting = self._asked.get((cid, page))
        if waiting is not None and not waiting.done():
            waiting.set_result(ANSWERED_ON_THE_PAGE)
            return None
        if call is None:
            return None
        arguments = self._made.pop((cid, page), None)
        if arguments is None:  # made before a restart: as kept, unless masked
            arguments = call["gen_ai.tool.call.arguments"]
            if MASK in json.dumps(arguments, ensure_ascii=False):
                raise NotKept("its personal data were not kept: make the call again")
        return await self.call(
            cid, owner, call["mcp.server"], call["gen_ai.tool.name"], arguments, answered=page
        )

    def say(self, cid: str, owner: str, text: str) -> None:
        """The user's message to the model; the turn runs in the background, streamed."""
        worker = self._worker(cid, owner)
        worker.pending += 1
        worker.queue.put_nowait(_Say(text))

    async def close(self, owner: str | None = None) -> None:
        """Stop every worker (the server is shutting down), or those of one browser session
        (its broker logged out); their MCP sessions are closed. The next job of a conversation
        starts a worker anew, as whoever is logged in then."""
        tasks = [
            w.task
            for w in self._workers.values()
            if w.task is not None and (owner is None or w.owner == owner)
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # a worker's life

    async def _run(self, worker: _Worker) -> None:
        writer = ConversationWriter(
            self.conversations,
            worker.cid,
            worker.owner,
            lambda event: self._recorded(worker.cid, event),
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                clients: dict[str, Client] = {}

                async def client(server: str) -> Client:
                    if server not in clients:
                        url = self.mcp_urls[server]
                        auth = self.auth(worker.owner, url) if self.auth else None
                        if auth is None:
                            connected = Client(url, mode="legacy", extensions=ANSWERED)
                        else:
                            http = await stack.enter_async_context(mcp_http(auth))
                            connected = Client(
                                streamable_http_client(url, http_client=http),
                                mode="legacy",
                                extensions=ANSWERED,
                            )
                        clients[server] = await stack.enter_async_context(connected)
                    return clients[server]

                while True:
                    try:
                        job = await asyncio.wait_for(worker.queue.get(), self.idle_seconds)
                    except TimeoutError:
                        if worker.queue.empty():  # nothing can be put between check and close
                            worker.closed = True
                            return
                        continue
                    try:
                        if isinstance(job, _Call):
                            await self._by_hand(job, client, writer)
                        else:
                            await self._turn(job, worker, client, writer)
                    finally:
                        worker.pending -= 1
                        self._changed(worker.cid)
        finally:
            worker.closed = True
            self._partial.pop(worker.cid, None)
            self._fail_waiting(worker, writer)

    def _fail_waiting(self, worker: _Worker, writer: ConversationWriter) -> None:
        """Jobs left when a worker ends unexpectedly (its sessions broke) are told so."""
        while not worker.queue.empty():
            job = worker.queue.get_nowait()
            worker.pending -= 1
            if isinstance(job, _Call):
                if not job.done.done():
                    job.done.set_exception(ConnectionError("the conversation's session ended"))
            else:
                writer.write(TURN_END, reason="error", detail="the MCP sessions ended", seconds=0)
        self._changed(worker.cid)

    @staticmethod
    async def _by_hand(
        job: _Call,
        client: Callable[[str], Awaitable[Client]],
        writer: ConversationWriter,
    ) -> None:
        started = time.perf_counter()
        try:
            result = await (await client(job.server)).call_tool(job.tool, job.arguments)
        except Exception as error:
            job.done.set_exception(error)
            return
        if job.answered is not None:  # what the person answered on the page, as it shows
            answer = answer_shown_by(result)
            if answer is not None:
                writer.write(PERSON, answer=answer, via="confirmation page", url=job.answered)
        page = confirmation_page(result)
        # a binding call by hand: the person answers on its page, logged in as the broker
        asked = {"confirmation": {"url": page}} if page else {}
        event = writer.write(
            TOOL_CALL,
            **{
                "mcp.server": job.server, "gen_ai.tool.name": job.tool,
                "gen_ai.tool.call.arguments": job.arguments,
                "mcp.tool.result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
                "text": result_text(result), "is_error": bool(result.is_error),
                "duration_ms": round((time.perf_counter() - started) * 1000, 2), "by_hand": True,
                **asked,
            },
        )  # fmt: skip
        job.done.set_result(event)

    async def _turn(
        self,
        job: _Say,
        worker: _Worker,
        client: Callable[[str], Awaitable[Client]],
        writer: ConversationWriter,
    ) -> None:
        """One turn of the model: from the user's message to its final answer, every model call
        and tool call recorded as it happens."""
        started = time.monotonic()
        writer.write(USER, text=job.text)
        if self.agent is None:
            writer.write(TURN_END, reason="error", detail="no model is configured", seconds=0)
            return
        history = self.conversations.history(worker.cid, worker.owner) or self.agent.history()
        before = list(history)
        self.agent.add_user(history, job.text)
        try:
            session = RunSession(
                {s: await client(s) for s in self.mcp_urls}, writer, TURN_BUDGET,
                person=lambda page: self.ask_person(writer, page), via="confirmation page",
            )  # fmt: skip
            for server in self.mcp_urls:
                listed = await (await client(server)).list_tools()
                session.tools[server] = [
                    t.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for t in listed.tools
                ]
                writer.write(TOOLS_LIST, **{"mcp.server": server, "tools": session.tools[server]})
            final = await asyncio.wait_for(
                self.agent.converse(
                    history,
                    session,
                    TURN_BUDGET.tool_calls + 5,
                    on_text=lambda piece: self._streamed(worker.cid, piece),
                ),
                TURN_BUDGET.seconds,
            )
        except Exception as error:
            reason, detail = _why(error)
            self.conversations.keep_history(worker.cid, worker.owner, before)
        else:
            writer.write(FINAL, text=final)
            self.conversations.keep_history(worker.cid, worker.owner, history)
            reason, detail = "done", ""
        writer.write(
            TURN_END, reason=reason, detail=detail, seconds=round(time.monotonic() - started, 3)
        )
