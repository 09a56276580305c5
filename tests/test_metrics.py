"""Operators see who does what: /metrics of the example server, read as Prometheus reads it, moves
with the calls made through the MCP endpoints (deltas: the server is shared with other tests)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import ExampleServer


def _samples(server: ExampleServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{server.url}/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return sum(
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    )


def test_calls_outcomes_latency_cache_and_refusals_are_counted(server: ExampleServer) -> None:
    before = _samples(server)

    async def calls() -> None:
        async with Client(server.mcp("disrupto"), mode="2026-07-28") as client:
            # a window no other test reads: the first is the insurer's (tests share the server)
            await client.call_tool("listProducts", {"limit": 29})
            await client.call_tool("listProducts", {"limit": 29})  # from the read cache
            await client.call_tool("readProduct", {"productId": "no-such-product"})

    asyncio.run(calls())
    refused = httpx.post(
        server.mcp("disrupto"),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer not-a-token", "Accept": "application/json"},
    )
    assert refused.status_code == 401
    after = _samples(server)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    calls_total = "omds_ld_mcp_tool_calls_total"
    assert delta(calls_total, insurer="disrupto", tool="listProducts", outcome="ok") == 2
    failed = delta(calls_total, insurer="disrupto", tool="readProduct", problem="unknown-product")
    assert failed == 1
    assert delta("omds_ld_mcp_tool_call_seconds_count", insurer="disrupto") == 3
    assert delta("omds_ld_mcp_reads_total", insurer="disrupto", cache="hit") >= 1
    assert delta("omds_ld_insurer_request_seconds_count", insurer="disrupto") >= 1
    assert delta("omds_ld_mcp_refused_identities_total", insurer="disrupto") == 1
    assert ("omds_ld_mcp_sessions_open", (("insurer", "disrupto"),)) in after
