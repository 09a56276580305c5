"""Model agents: a short fixed instruction, the MCP servers' tools, a loop until a final answer.

The loop is ours and small, so that the model sees exactly the tool results the protocol records.
``anthropic:MODEL`` uses the Anthropic SDK; ``openai:MODEL`` any OpenAI-compatible endpoint.
Keys come from the environment the command line hands over; temperature is 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from omds_ld import yamlfile
from omds_ld.scenarios.scenario import Scenario
from omds_ld.scenarios.session import AgentGaveUp, RunSession, result_text

INSTRUCTION = (
    "You have tools of one or more MCP servers; a tool's name begins with its server's name. "
    "Complete the user's task with them. When you are done, answer in the user's language with "
    "the result, and name every value you assumed that the task did not state."
)
SEPARATOR = "__"
TextSink = Callable[[str], None]  # takes the model's text piece by piece, as it is streamed


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Mapping[str, int]) -> float:
        return (
            usage.get("input_tokens", 0) * self.input
            + usage.get("output_tokens", 0) * self.output
            + usage.get("cache_read_input_tokens", 0) * self.cache_read
            + usage.get("cache_creation_input_tokens", 0) * self.cache_write
        ) / 1_000_000


def prices() -> tuple[str, dict[str, Price]]:
    """The dated price table shipped with the package."""
    raw = yamlfile.load(
        resources.files("omds_ld.scenarios").joinpath("prices.yaml").read_text("utf-8")
    )
    return str(raw["date"]), {name: Price(**p) for name, p in raw["models"].items()}


def tool_specs(session: RunSession) -> list[dict[str, Any]]:
    """Every server's tools, named ``<server>__<tool>`` so the model can tell servers apart."""
    specs = []
    for server, tools in session.tools.items():
        for tool in tools:
            specs.append(
                {
                    "name": f"{server}{SEPARATOR}{tool['name']}",
                    "description": tool.get("description", ""),
                    "input_schema": tool.get("inputSchema", {"type": "object"}),
                }
            )
    return specs


def split_name(name: str) -> tuple[str, str]:
    server, _, tool = name.partition(SEPARATOR)
    if not tool:
        raise AgentGaveUp(f"the model called {name!r}, which names no server")
    return server, tool


class ModelAgent:
    """What the Anthropic and OpenAI agents share: pricing, the turn limit, recording usage."""

    provider = ""

    def __init__(self, model: str, client: Any) -> None:
        self.model = model
        self.name = f"{self.provider}:{model}"
        self.client = client
        date, table = prices()
        self.price = table.get(self.name)
        self.settings = {"temperature": 0, "instruction": INSTRUCTION, "prices": date}

    def record(
        self,
        session: RunSession,
        usage: Mapping[str, int],
        raw: Mapping[str, Any],
        started: float,
        said: str,
        calls: list[dict[str, Any]],
    ) -> None:
        session.model_call(
            model=self.name,
            usage=usage,
            raw_usage={**raw, "priced": self.price is not None},
            cost=self.price.cost(usage) if self.price else 0.0,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
            said=said,
            calls=calls,
        )

    def max_turns(self, scenario: Scenario) -> int:
        return scenario.budget.tool_calls + 5

    def history(self) -> list[dict[str, Any]]:
        """A new conversation's messages before the user's first (the provider's own format)."""
        return []

    def add_user(self, history: list[dict[str, Any]], text: str) -> None:
        history.append({"role": "user", "content": text})

    async def run(self, scenario: Scenario, session: RunSession) -> str:
        """A scenario's task as a conversation of one message."""
        history = self.history()
        self.add_user(history, scenario.task)
        return await self.converse(history, session, self.max_turns(scenario))

    async def converse(
        self,
        history: list[dict[str, Any]],
        session: RunSession,
        max_turns: int,
        on_text: TextSink | None = None,
    ) -> str:
        """Work on the conversation's last user message until a final answer (appended to
        ``history``), calling the session's tools as the model asks. With ``on_text`` the model's
        text is streamed to it as it comes (the recorded calls are the same)."""
        raise NotImplementedError


class AnthropicAgent(ModelAgent):
    """Claude through the Anthropic SDK's Messages API."""

    provider = "anthropic"

    async def converse(
        self,
        history: list[dict[str, Any]],
        session: RunSession,
        max_turns: int,
        on_text: TextSink | None = None,
    ) -> str:
        tools = tool_specs(session)
        messages = history
        for _ in range(max_turns):
            started = time.perf_counter()
            request = {"model": self.model, "system": INSTRUCTION, "messages": messages,
                       "tools": tools, "max_tokens": 4096, "temperature": 0}  # fmt: skip
            if on_text is None:
                response = await self.client.messages.create(**request)
            else:  # the SDK's stream helper: text as it comes, then the whole message
                async with self.client.messages.stream(**request) as stream:
                    async for piece in stream.text_stream:
                        on_text(piece)
                    response = await stream.get_final_message()
            usage = response.usage
            self.record(
                session,
                {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cache_read_input_tokens": getattr(usage, "cache_read_input_tokens", 0) or 0,
                    "cache_creation_input_tokens": getattr(usage, "cache_creation_input_tokens", 0)
                    or 0,
                },
                usage.model_dump(),
                started,
                "\n".join(b.text for b in response.content if b.type == "text"),
                [{"name": b.name, "arguments": b.input}
                 for b in response.content if b.type == "tool_use"],
            )  # fmt: skip
            blocks = [b.model_dump(exclude_none=True) for b in response.content]
            messages.append({"role": "assistant", "content": blocks})
            calls = [b for b in response.content if b.type == "tool_use"]
            if not calls:
                return "\n".join(b.text for b in response.content if b.type == "text")
            results = []
            for call in calls:
                server, tool = split_name(call.name)
                result = await session.call(server, tool, dict(call.input or {}))
                results.append(
                    {"type": "tool_result", "tool_use_id": call.id, "content": result_text(result),
                     "is_error": bool(result.is_error)}
                )  # fmt: skip
            messages.append({"role": "user", "content": results})
        raise AgentGaveUp(f"no final answer after {max_turns} turns")


class OpenAIAgent(ModelAgent):
    """Any OpenAI-compatible chat completions endpoint (the OpenAI API or a local server)."""

    provider = "openai"

    def history(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": INSTRUCTION}]

    async def converse(
        self,
        history: list[dict[str, Any]],
        session: RunSession,
        max_turns: int,
        on_text: TextSink | None = None,
    ) -> str:
        tools = [
            {"type": "function", "function": {"name": s["name"], "description": s["description"],
                                              "parameters": s["input_schema"]}}
            for s in tool_specs(session)
        ]  # fmt: skip
        messages = history
        for _ in range(max_turns):
            started = time.perf_counter()
            said, calls, usage = await self._complete(messages, tools, on_text)
            details = getattr(usage, "prompt_tokens_details", None)
            cached = (getattr(details, "cached_tokens", 0) or 0) if details else 0
            self.record(
                session,
                {
                    "input_tokens": usage.prompt_tokens - cached,
                    "output_tokens": usage.completion_tokens,
                    "cache_read_input_tokens": cached,
                },
                usage.model_dump(),
                started,
                said,
                [{"name": c["name"], "arguments": _arguments(c["arguments"])} for c in calls],
            )
            message: dict[str, Any] = {"role": "assistant", "content": said or None}
            if calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]  # fmt: skip
            messages.append(message)
            if not calls:
                return said
            for call in calls:
                server, tool = split_name(call["name"])
                arguments = _arguments(call["arguments"])
                if not isinstance(arguments, dict):  # told like any refused call, not called
                    text = "Refused: the arguments must be one JSON object."
                else:
                    text = result_text(await session.call(server, tool, arguments))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        raise AgentGaveUp(f"no final answer after {max_turns} turns")

    async def _complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: TextSink | None
    ) -> tuple[str, list[dict[str, str]], Any]:
        """One completion: its text, its tool calls (id, name, arguments as JSON text), its usage;
        streamed (the text to ``on_text`` as it comes, the calls put together from their pieces)
        when ``on_text`` is given."""
        request = {"model": self.model, "messages": messages, "tools": tools, "temperature": 0}
        if on_text is None:
            response = await self.client.chat.completions.create(**request)
            message = response.choices[0].message
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments or ""}
                for c in message.tool_calls or []
            ]
            return str(message.content or ""), calls, response.usage
        stream = await self.client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        pieces: dict[int, dict[str, str]] = {}
        usage = None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    on_text(delta.content)
                for piece in delta.tool_calls or []:
                    call = pieces.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    if piece.function is not None:
                        call["name"] += piece.function.name or ""
                        call["arguments"] += piece.function.arguments or ""
        if usage is None:
            raise AgentGaveUp("the model's stream said nothing of its usage")
        return "".join(text), [pieces[i] for i in sorted(pieces)], usage


def _arguments(text: str | None) -> Any:
    """A tool call's arguments as the model wrote them (JSON text), or the text if it is none."""
    try:
        return json.loads(text or "{}")
    except json.JSONDecodeError:
        return text


def make_agent(
    spec: str, environment: Mapping[str, str], base_url: str | None = None
) -> ModelAgent:
    """``anthropic:MODEL`` or ``openai:MODEL``; keys from the environment given."""
    provider, _, model = spec.partition(":")
    if provider in ("anthropic", "openai") and not model:
        raise ValueError(f"name the model: {provider}:MODEL")
    if provider == "anthropic":
        from anthropic import AsyncAnthropic

        key = environment.get("ANTHROPIC_API_KEY")
        if not key:  # said now, not as the SDK's TypeError at the first message
            raise ValueError(f"{spec} needs its key in the environment variable ANTHROPIC_API_KEY")
        return AnthropicAgent(model, AsyncAnthropic(api_key=key))
    if provider == "openai":
        if not (
            base_url or environment.get("OPENAI_BASE_URL") or environment.get("OPENAI_API_KEY")
        ):
            raise ValueError(
                f"{spec} needs its key in the environment variable OPENAI_API_KEY (or a "
                "--chat-model-base-url / OPENAI_BASE_URL of a server that needs none)"
            )
        from openai import AsyncOpenAI

        client = AsyncOpenAI(
            api_key=environment.get("OPENAI_API_KEY", "not-needed-for-a-local-server"),
            base_url=base_url or environment.get("OPENAI_BASE_URL"),
        )
        return OpenAIAgent(model, client)
    raise ValueError(f"unknown agent {spec!r}: use reference, anthropic:MODEL or openai:MODEL")
