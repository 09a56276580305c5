"""One run's access to the MCP servers: every call recorded in the protocol, the budget enforced."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from mcp import Client

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.grader import inadmissible
from omds_ld.scenarios.person import PagePerson
from omds_ld.scenarios.protocol import (
    BROKER_ENDPOINT,
    INSURER_ARGUMENT,
    MODEL_CALL,
    PERSON,
    TOOL_CALL,
    insurer_at,
)
from omds_ld.scenarios.scenario import Budget


class BudgetExceeded(Exception):
    """The run would spend more than its budget allows; it is stopped."""


class AgentGaveUp(Exception):
    """The agent found no way on."""


CONFIRMATION_PAGE = re.compile(r"(https?://\S+/omds-ld/confirmations/[\w-]+)")


def confirmation_page(result: Any) -> str | None:
    """The confirmation page a refused binding call names (confirmation-required), if any."""
    if not result.is_error:
        return None
    problem = answer_of(result).get("problem") or {}
    if not str(problem.get("type", "")).endswith("/confirmation-required"):
        return None
    found = CONFIRMATION_PAGE.search(result_text(result))
    return found.group(1) if found else None


def answer_shown_by(result: Any) -> str | None:
    """What the person answered on the page, as the retried call shows it: their no, their yes
    (the call went through to the insurer), or nothing (they have not answered)."""
    if not result.is_error:
        return "confirm"
    slug = str((answer_of(result).get("problem") or {}).get("type", "")).rsplit("/", 1)[-1]
    if slug == "confirmation-declined":
        return "decline"
    if slug == "confirmation-required":
        return None
    return "confirm"  # past the confirmation: refused by the insurer, or failed on the way


def result_text(result: Any) -> str:
    """The exact text a model sees of a tool result: its text content blocks."""
    return "\n".join(
        getattr(block, "text", "") for block in result.content if getattr(block, "text", None)
    )


# how the person using the chat page answers a confirmation: they are shown its page (its
# address), log in and answer there themselves; ANSWERED_ON_THE_PAGE once they say they did, None if not
ANSWERED_ON_THE_PAGE = "answered"
Answerer = Callable[[str], Awaitable[str | None]]


FULL_ANSWER = "omds-ld.full_answer"


def _split_full(result: Any) -> dict[str, Any]:
    """The insurer's whole JSON-LD that ``full`` added, taken out of the result (the agent gets
    what it would have got without); for the protocol."""
    from omds_ld.mcp.condense import ANSWER_META

    meta = result.meta if isinstance(result.meta, dict) else {}
    answer = meta.get(ANSWER_META)
    full = answer.pop("full", None) if isinstance(answer, dict) else None
    if full is None:
        return {}
    result.content = result.content[:-1]  # the JSON-LD full added, last
    return {FULL_ANSWER: json.dumps(full, ensure_ascii=False, separators=(",", ":"))}


class Recorder(Protocol):
    """Where a run's events go: a protocol file, or a chat page's conversation."""

    def write(self, event: str, **fields: Any) -> dict[str, Any]: ...


class RunSession:
    """The tools of the scenario's servers, called through the real MCP client."""

    def __init__(
        self,
        clients: Mapping[str, Client],
        writer: Recorder,
        budget: Budget,
        person: str | Answerer | None = None,
        page_person: PagePerson | None = None,
        via: str = "confirmation page",
        measure: bool = False,
        consent: Mapping[str, str] | None = None,
    ) -> None:
        self.clients = dict(clients)
        # every call also asks for the insurer's whole JSON-LD (full), which the protocol keeps
        # beside the condensed text and the agent never sees: what the condensing saves
        self.measure = measure
        # how the person using the client answers a confirmation: always the same (confirm,
        # decline: a scenario's script, answered at the page as ``page_person`` logged in), on
        # the page themselves (the chat page's person), or None: nobody answers
        self.person = person
        self.page_person = page_person or PagePerson()
        # the customer's consent as the scripted person states it on the page (by, method, at)
        self.consent = dict(consent or {})
        self.via = via
        self.writer = writer
        self.budget = budget
        self.tools: dict[str, list[dict[str, Any]]] = {}
        # the next steps each insurer's answers offered so far, to tell inadmissible calls
        self.offered: dict[str, list[Mapping[str, Any]]] = {}
        self.tool_calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.started = time.monotonic()

    def _check(self) -> None:
        if time.monotonic() - self.started > self.budget.seconds:
            raise BudgetExceeded(f"wall time over {self.budget.seconds} s")
        if self.tokens > self.budget.tokens:
            raise BudgetExceeded(f"{self.tokens} tokens, over {self.budget.tokens}")
        if self.cost > self.budget.cost:
            raise BudgetExceeded(f"cost {self.cost:.4f}, over {self.budget.cost}")

    async def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool at a server (or at an insurer by name, through the broker endpoint where
        the run has no server of its own for it); the call and its raw result go into the
        protocol first. A binding call the person must confirm first is put to them (where
        someone answers) and, once they answered, made again: its second result is the one
        returned."""
        server, arguments = self._route(server, arguments)
        result = await self._call(server, tool, arguments)
        page = confirmation_page(result)
        if not page or self.person is None:
            return result
        if isinstance(self.person, str):
            if await self._scripted(page, self.person):
                result = await self._call(server, tool, arguments)
            return result
        if await self.person(page) != ANSWERED_ON_THE_PAGE:
            return result
        # what they answered on the page shows in the retried call: the person's event first
        retried, event = await self._invoke(server, tool, arguments)
        answer = answer_shown_by(retried)
        if answer is not None:
            self.writer.write(PERSON, answer=answer, via=self.via, url=page)
        self.writer.write(TOOL_CALL, **event)
        return retried

    def _route(self, server: str, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The server a call goes to, and its arguments: an insurer without a server of its own
        in this run is called at the broker endpoint, naming it."""
        if server in self.clients or BROKER_ENDPOINT not in self.clients:
            return server, dict(arguments)
        return BROKER_ENDPOINT, {INSURER_ARGUMENT: server, **arguments}

    async def _call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> Any:
        result, event = await self._invoke(server, tool, arguments)
        self.writer.write(TOOL_CALL, **event)
        return result

    async def _invoke(
        self, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        """The call, and its event for the protocol."""
        self._check()
        if self.tool_calls >= self.budget.tool_calls:
            raise BudgetExceeded(f"more than {self.budget.tool_calls} tool calls")
        self.tool_calls += 1
        started = time.perf_counter()
        sent = {**arguments, "full": True} if self.measure else dict(arguments)
        result = await self.clients[server].call_tool(tool, sent)
        measured = _split_full(result) if self.measure else {}
        content = answer_of(result)
        offered = self.offered.setdefault(insurer_at(server, arguments), [])
        kind = inadmissible(tool, arguments, content, bool(result.is_error), offered)
        offered.extend(content.get("nextSteps", []))
        return result, {
            "mcp.server": server,
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": dict(arguments),
            "mcp.tool.result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
            "text": result_text(result),
            "is_error": bool(result.is_error),
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            **({"inadmissible": kind} if kind else {}),
            **measured,
        }

    async def _scripted(self, page: str, answer: str) -> bool:
        """The scenario's person logs in at the page, reads what it binds the customer to and
        answers as scripted; the answer goes into the protocol. False: they could not."""
        if answer not in ("confirm", "decline"):
            return False
        answered = await self.page_person.answer(page, answer, self.consent)
        self.writer.write(
            PERSON, answer=answer, via=self.via, url=page, shown=answered.shown,
            status=answered.status,
            **({"consent": dict(answered.stated)} if answered.stated else {}),
        )  # fmt: skip
        return answered.status == 200

    def model_call(
        self,
        *,
        model: str,
        usage: Mapping[str, int],
        raw_usage: Mapping[str, Any],
        cost: float,
        duration_ms: float,
        said: str = "",
        calls: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Record one model call with raw and normalised usage, its cost, what the model said and
        which tools it asked for; then check the budget."""
        spent = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        self.tokens += spent
        self.cost += cost
        self.writer.write(
            MODEL_CALL,
            **{
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": usage.get("input_tokens", 0),
                "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
                "gen_ai.usage.cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
                "gen_ai.usage.cache_creation_input_tokens": usage.get(
                    "cache_creation_input_tokens", 0
                ),
                "raw_usage": dict(raw_usage),
                "cost_usd": cost,
                "duration_ms": duration_ms,
                "text": said,
                "tool_calls": [dict(c) for c in calls],
            },
        )
        self._check()
