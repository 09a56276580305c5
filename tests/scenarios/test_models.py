"""The model adapters end to end against scripted models: tools, usage, cost and the budget."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from omds_ld.scenarios.agents.models import AnthropicAgent, make_agent
from omds_ld.scenarios.protocol import MODEL_CALL, TOOL_CALL, read_protocol
from omds_ld.scenarios.runner import run_once
from omds_ld.scenarios.scenario import Budget, builtin_scenarios, load_scenario
from tests.scenarios.model_stubs import USAGE, FakeAnthropic, openai_stub, usage_of
from tests.servers import ExampleServer

SCENARIO = load_scenario(next(p for p in builtin_scenarios() if p.stem == "pfefferminzia-skoda"))


def test_openai_compatible_endpoint_completes_the_seed_example(
    server: ExampleServer, tmp_path: Path
) -> None:
    with openai_stub() as base_url:
        agent = make_agent("openai:gpt-4.1-mini", {}, base_url)
        record = asyncio.run(run_once(SCENARIO, agent, server.url, tmp_path, 1))
    protocol = read_protocol(record.protocol)
    assert record.grade.passed, [(c.name, c.reason) for c in record.grade.criteria if not c.passed]
    models = [e for e in protocol if e["event"] == MODEL_CALL]
    assert len(models) == 5
    # usage: cached prompt tokens are counted apart from the other input tokens
    assert [m["gen_ai.usage.input_tokens"] for m in models] == [
        usage_of(t)[0] - 200 for t in range(5)
    ]
    assert all(m["gen_ai.usage.cache_read_input_tokens"] == 200 for m in models)
    expected_cost = sum(
        ((usage_of(t)[0] - 200) * 0.40 + USAGE["output"] * 1.60 + 200 * 0.10) / 1_000_000
        for t in range(5)
    )
    assert sum(m["cost_usd"] for m in models) == __import__("pytest").approx(expected_cost)
    calls = [e for e in protocol if e["event"] == TOOL_CALL]
    assert [c["gen_ai.tool.name"] for c in calls] == [
        "listProducts",
        "createCalculation",
        "createRiskObject",
        "calculatePremium",
    ]


def test_anthropic_adapter_completes_the_seed_example(
    server: ExampleServer, tmp_path: Path
) -> None:
    fake = FakeAnthropic()
    agent = AnthropicAgent("claude-haiku-4-5", fake)
    record = asyncio.run(run_once(SCENARIO, agent, server.url, tmp_path, 1))
    assert record.grade.passed, [(c.name, c.reason) for c in record.grade.criteria if not c.passed]
    assert all(r["temperature"] == 0 and r["tools"] for r in fake.requests)
    assert "process" not in fake.requests[0]["system"].lower()
    models = [e for e in read_protocol(record.protocol) if e["event"] == MODEL_CALL]
    assert [m["gen_ai.usage.cache_read_input_tokens"] for m in models] == [300] * 5
    assert models[0]["raw_usage"]["input_tokens"] == usage_of(0)[0]


def test_a_run_over_its_token_budget_is_stopped(server: ExampleServer, tmp_path: Path) -> None:
    tight = dataclasses.replace(
        SCENARIO, budget=Budget(tool_calls=12, tokens=2500, cost=1.0, seconds=60)
    )
    record = asyncio.run(
        run_once(
            tight, AnthropicAgent("claude-haiku-4-5", FakeAnthropic()), server.url, tmp_path, 1
        )
    )
    assert record.grade.end_reason == "budget"
    budget = next(c for c in record.grade.criteria if c.name == "budget")
    assert not budget.passed and "tokens" in budget.reason
    calls = [e for e in read_protocol(record.protocol) if e["event"] == TOOL_CALL]
    assert len(calls) < 4, "the run went on after its budget was spent"


class _Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def write(self, event: str, **fields: object) -> dict[str, object]:
        entry = {"event": event, **fields}
        self.events.append(entry)
        return entry


async def _streamed_turn(agent: object, url: str) -> tuple[str, list[str], _Recorder]:
    """One turn of ``agent`` on the seed's task with its text streamed."""
    from mcp import Client

    from omds_ld.scenarios.session import RunSession

    recorder = _Recorder()
    pieces: list[str] = []
    async with Client(url, mode="legacy") as client:
        session = RunSession({"pfefferminzia": client}, recorder, SCENARIO.budget)
        listed = await client.list_tools()
        session.tools["pfefferminzia"] = [
            t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools
        ]
        history = agent.history()  # type: ignore[attr-defined]
        agent.add_user(history, SCENARIO.task)  # type: ignore[attr-defined]
        final = await agent.converse(history, session, 20, on_text=pieces.append)  # type: ignore[attr-defined]
    return final, pieces, recorder


def test_both_adapters_stream_the_models_text_and_still_call_the_same_tools(
    server: ExampleServer,
) -> None:
    with openai_stub() as base_url:
        openai = make_agent("openai:gpt-4.1-mini", {}, base_url)
        streamed = asyncio.run(_streamed_turn(openai, server.mcp("pfefferminzia")))
    anthropic = asyncio.run(
        _streamed_turn(
            AnthropicAgent("claude-haiku-4-5", FakeAnthropic()), server.mcp("pfefferminzia")
        )
    )
    for final, pieces, recorder in (streamed, anthropic):
        assert "1684.88 EUR" in final
        assert len(pieces) > 5 and "".join(pieces) == final  # word by word, nothing lost
        calls = [e["gen_ai.tool.name"] for e in recorder.events if e["event"] == TOOL_CALL]
        assert calls == [
            "listProducts",
            "createCalculation",
            "createRiskObject",
            "calculatePremium",
        ]
        models = [e for e in recorder.events if e["event"] == MODEL_CALL]
        assert len(models) == 5 and all(m["gen_ai.usage.output_tokens"] == 50 for m in models)


def test_a_models_calls_are_measured_against_the_reference_agents_minimum(
    server: ExampleServer, tmp_path: Path
) -> None:
    from omds_ld.scenarios.report import metrics, summarize
    from omds_ld.scenarios.runner import run_all

    fake = FakeAnthropic()
    [record] = asyncio.run(
        run_all([SCENARIO], lambda: AnthropicAgent("claude-haiku-4-5", fake), 1, server.url,
                tmp_path)
    )  # fmt: skip
    baseline = read_protocol(tmp_path / "pfefferminzia-skoda.baseline.reference.0.jsonl")
    minimum = sum(1 for e in baseline if e["event"] == TOOL_CALL)
    protocol = read_protocol(record.protocol)
    assert protocol[0]["scenario"]["minimum_calls"] == minimum == 4
    measured = metrics(protocol)
    assert measured.minimum_calls == minimum
    [row] = summarize([(record.grade, measured)])
    assert row.calls_per_minimum == measured.tool_calls / minimum
