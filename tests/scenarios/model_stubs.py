"""Scripted models for testing the adapters end to end: an OpenAI-compatible HTTP server on a
free loopback port, and a fake Anthropic client. Both play the seed's Pfefferminzia example,
reading what they need (IRIs, the case id, the premium) from the tool results they are sent."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from anthropic.types import Message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.insurer.test_flows import SKODA
from tests.servers import in_thread

PRODUCT = re.compile(r"https://pfefferminzia\.example/products/[a-z0-9-]+")
CASE = re.compile(r"Business case ([0-9a-f]+)")
PREMIUM = re.compile(r"Premium: ([0-9.]+) EUR")
DEFAULTS = re.compile(r"Still at the insurer's default: (.+)")
USAGE = {"input": 1000, "step": 100, "output": 50}
NEVER_DONE = "Frag immer weiter."  # a user message that makes the scripted model loop
APPLY = "und stelle den Antrag"  # a user message that makes the scripted model apply for the offer
OFFER = re.compile(r"Offer ([0-9a-f]+) <")
TODAY = re.compile(r"Today at the insurer: (\d{4}-\d{2}-\d{2})")


def next_move(tool_results: list[str]) -> tuple[str, dict[str, Any]] | str:
    """The script: a tool call (name, arguments) or the final answer, from the results so far."""
    turn = len(tool_results)
    last = tool_results[-1] if tool_results else ""
    if turn == 0:
        return ("pfefferminzia__listProducts", {})
    if turn == 1:
        product = PRODUCT.search(last)
        return (
            "pfefferminzia__createCalculation",
            {"body": {"p:hasRootProduct": product.group(0) if product else ""}},
        )
    case = CASE.search("\n".join(tool_results))
    case_id = case.group(1) if case else ""
    if turn == 2:
        return ("pfefferminzia__createRiskObject", {"caseId": case_id, "body": SKODA})
    if turn == 3:
        return ("pfefferminzia__calculatePremium", {"caseId": case_id})
    premium = PREMIUM.search(last)
    amount = premium.group(1) if premium else "?"
    # the last answer that lists them (a later one of the same case says "as before")
    listed = [m.group(1) for r in tool_results for m in DEFAULTS.finditer(r)]
    listed = [x for x in listed if not x.startswith("as ")]
    assumed = listed[-1] if listed else "Zulassungsbezirk W und Bonus-Malus-Stufe 9"
    return (
        f"Die Kfz-Versicherung kostet {amount} EUR im Jahr. Angenommen habe ich die Standardwerte: "
        f"{assumed}."
    )


def apply_move(tool_results: list[str]) -> tuple[str, dict[str, Any]] | str:
    """The seed's example on to an offer and the application for it, then the answer."""
    turn = len(tool_results)
    if turn < 4:
        return next_move(tool_results)
    every = "\n".join(tool_results)
    case = CASE.search(every)
    if turn == 4:
        return ("pfefferminzia__createOffer", {"caseId": case.group(1) if case else ""})
    offer = OFFER.search(every)
    today = TODAY.search(every)  # a model knows no date of its own: the insurer's answer says it
    if turn == 5:
        from tests.mcp.applications import PAYMENT, PERSON

        body = {
            "bc:policyholder": PERSON, "bc:payment": PAYMENT,
            "bc:startDate": today.group(1) if today else "",
            # what the task told it of the consent, nothing more: the person states it
            "bc:consent": {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person"},
        }  # fmt: skip
        return (
            "pfefferminzia__createApplication",
            {"offerId": offer.group(1) if offer else "", "body": body, "idempotencyKey": "chat-1"},
        )
    return f"Erledigt: {tool_results[-1].splitlines()[1] if len(tool_results[-1].splitlines()) > 1 else ''}"


def usage_of(turn: int) -> tuple[int, int]:
    return USAGE["input"] + USAGE["step"] * turn, USAGE["output"]


def _streamed(
    payload: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any]
) -> StreamingResponse:
    """The same answer as a stream of chunks (server-sent events), the way the API streams: the
    text word by word, a tool call's arguments in two pieces, the usage last."""
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": payload["model"]}  # fmt: skip
    chunks: list[dict[str, Any]] = []
    content = message.get("content") or ""
    for word in re.findall(r"\S+\s*", content):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": word}}]})
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {
                                        "name": call["function"]["name"],
                                        "arguments": arguments[:half],
                                    },
                                }
                            ]
                        },
                    }
                ],
            }
        )
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": arguments[half:]}}
                            ]
                        },
                    }
                ],
            }
        )
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": usage})  # fmt: skip

    async def events() -> Any:
        for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n"
            await asyncio.sleep(0.02)  # as a model writes: piece after piece
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def _completions(request: Request) -> Response:
    payload = await request.json()
    results = [m["content"] for m in payload["messages"] if m["role"] == "tool"]
    assert payload.get("temperature") == 0
    assert payload["tools"], "the adapter must offer the MCP tools"
    asked = [str(m["content"]) for m in payload["messages"] if m["role"] == "user"]
    # a model that never stops calling tools: only its budget ends its turn
    if NEVER_DONE in asked[-1]:
        move: tuple[str, dict[str, Any]] | str = ("pfefferminzia__listProducts", {})
    else:
        move = apply_move(results) if APPLY in asked[-1] else next_move(results)
    prompt, completion = usage_of(len(results))
    if isinstance(move, str):
        message: dict[str, Any] = {"role": "assistant", "content": move}
        finish = "stop"
    else:
        name, arguments = move
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{len(results)}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}],
        }  # fmt: skip
        finish = "tool_calls"
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": 200}}  # fmt: skip
    if payload.get("stream"):
        return _streamed(payload, message, finish, usage)
    return JSONResponse(
        {
            "id": f"chatcmpl-{len(results)}", "object": "chat.completion", "created": int(time.time()),
            "model": payload["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    )  # fmt: skip


@contextmanager
def openai_stub() -> Iterator[str]:
    """A real HTTP server speaking the chat completions API; yields its base URL (…/v1)."""
    app = Starlette(routes=[Route("/v1/chat/completions", _completions, methods=["POST"])])
    with in_thread(app) as url:
        yield url + "/v1"


class FakeAnthropic:
    """Stands in for AsyncAnthropic: ``messages.create`` answers with real Message objects, and
    ``messages.stream`` streams the same message's text word by word."""

    def __init__(self) -> None:
        self.messages = self
        self.requests: list[dict[str, Any]] = []

    def stream(self, **request: Any) -> Any:
        return _Deferred(self, request)

    async def create(self, **request: Any) -> Message:
        self.requests.append(request)
        results = [
            block["content"]
            for message in request["messages"] if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"
        ]  # fmt: skip
        move = next_move(results)
        prompt, completion = usage_of(len(results))
        if isinstance(move, str):
            content: list[dict[str, Any]] = [{"type": "text", "text": move}]
            stop = "end_turn"
        else:
            name, arguments = move
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{len(results)}",
                    "name": name,
                    "input": arguments,
                }
            ]
            stop = "tool_use"
        return Message.model_validate(
            {
                "id": f"msg_{len(results)}", "type": "message", "role": "assistant", "model": request["model"],
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion,
                          "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
            }
        )  # fmt: skip


class _FakeStream:
    """What ``messages.stream`` gives: the text as it comes, then the whole message."""

    def __init__(self, message: Message) -> None:
        self.message = message

    async def __aenter__(self) -> _FakeStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    @property
    async def text_stream(self) -> Any:
        for block in self.message.content:
            if block.type == "text":
                for word in re.findall(r"\S+\s*", block.text):
                    yield word

    async def get_final_message(self) -> Message:
        return self.message


class _Deferred:
    """``async with fake.stream(...)``: the message is made when the stream is entered."""

    def __init__(self, fake: FakeAnthropic, request: dict[str, Any]) -> None:
        self.fake, self.request = fake, request

    async def __aenter__(self) -> _FakeStream:
        return _FakeStream(await self.fake.create(**self.request))

    async def __aexit__(self, *exc: object) -> None:
        return None
