"""One trace from the agent's host to the insurer: the caller's W3C trace context travels on."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from tests.mcp.clients import connect
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.servers import ExampleServer


@pytest.mark.parametrize("transport", ["stdio", "http-2025-11-25", "http-2026-07-28"])
def test_the_callers_trace_reaches_the_insurer_and_both_logs(
    transport: str, server: ExampleServer, tmp_path: Path
) -> None:
    trace_id = secrets.token_hex(16)
    traceparent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    request_log = tmp_path / "requests.jsonl"

    async def run() -> None:
        async with connect(transport, server, "pfefferminzia", request_log) as client:
            result = await client.call_tool(
                "createCalculation",
                {"body": {"p:hasRootProduct": PRODUCT}},
                meta={"traceparent": traceparent},
            )
            assert not result.is_error, result.content[0].text
            untraced = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            assert not untraced.is_error

    asyncio.run(run())
    created = [
        e for e in insurer_calls(server) if e["path"].endswith("/pfefferminzia/api/calculations")
    ]
    assert created[-2].get("traceId") == trace_id
    assert "traceId" not in created[-1]
    logged = server.request_entries() if transport != "stdio" else _read(request_log)
    tools = [e for e in logged if e["tool"] == "createCalculation"]
    assert tools[-2].get("traceId") == trace_id
    assert "traceId" not in tools[-1]


def _read(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
