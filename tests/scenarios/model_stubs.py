"""Scripted models for testing the adapters end to end: an OpenAI-compatible HTTP server on a
free loopback port, and a fake Anthropic client. Both play the seed's Pfefferminzia example,
reading what they need (IRIs, the case id, the premium) from the tool results they are sent."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from anthropic.types import Message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.insurer.test_flows import SKODA
from tests.servers import free_port

PRODUCT = re.compile(r"https://pfefferminzia\.example/products/[a-z0-9-]+")
CASE = re.compile(r"Business case ([0-9a-f]+)")
PREMIUM = re.compile(r"Premium: ([0-9.]+) EUR")
DEFAULTS = re.compile(r"Still at the insurer's default: (.+)")
USAGE = {"input": 1000, "step": 100, "output": 50}


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
    defaults = DEFAULTS.search(last)
    assumed = defaults.group(1) if defaults else "Zulassungsbezirk W und Bonus-Malus-Stufe 9"
    return (
        f"Die Kfz-Versicherung kostet {amount} EUR im Jahr. Angenommen habe ich die Standardwerte: "
        f"{assumed}."
    )


def usage_of(turn: int) -> tuple[int, int]:
    return USAGE["input"] + USAGE["step"] * turn, USAGE["output"]


async def _completions(request: Request) -> JSONResponse:
    payload = await request.json()
    results = [m["content"] for m in payload["messages"] if m["role"] == "tool"]
    assert payload.get("temperature") == 0
    assert payload["tools"], "the adapter must offer the MCP tools"
    move = next_move(results)
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
    return JSONResponse(
        {
            "id": f"chatcmpl-{len(results)}", "object": "chat.completion", "created": int(time.time()),
            "model": payload["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": 200}},
        }
    )  # fmt: skip


@contextmanager
def openai_stub() -> Iterator[str]:
    """A real HTTP server speaking the chat completions API; yields its base URL (…/v1)."""
    port = free_port()
    app = Starlette(routes=[Route("/v1/chat/completions", _completions, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class FakeAnthropic:
    """Stands in for AsyncAnthropic: ``messages.create`` answers with real Message objects."""

    def __init__(self) -> None:
        self.messages = self
        self.requests: list[dict[str, Any]] = []

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
