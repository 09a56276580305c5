"""Several replicas of one MCP server share their state through Redis, and keep it over a restart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omds_ld.mcp.condense import answer_of
from tests.conftest import start_redis
from tests.mcp.clients import Client
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.mcp.test_http import in_session, open_session
from tests.servers import ExampleServer, McpServer, RedisServer, free_port


@pytest.fixture
def replicas(
    server: ExampleServer, redis_server: RedisServer, tmp_path: Path
) -> Iterator[tuple[McpServer, McpServer]]:
    """Two replicas of one standalone MCP server for Pfefferminzia and Disrupto, one Redis."""
    config = tmp_path / "mcp.toml"
    config.write_text(
        f"""
[state]
redis = "{redis_server.url}"
[[instance]]
name = "pfefferminzia"
api = "{server.api("pfefferminzia")}"
[[instance]]
name = "disrupto"
api = "{server.api("disrupto")}"
"""
    )
    started = []
    try:
        for name in ("a", "b"):
            replica = McpServer(
                config, free_port(), ["--request-log", str(tmp_path / f"requests-{name}.jsonl")]
            )
            replica.start()
            started.append(replica)
        yield started[0], started[1]
    finally:
        for replica in started:
            replica.stop()


def calculation_posts(server: ExampleServer) -> int:
    return sum(
        1
        for e in insurer_calls(server)
        if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
    )


async def create(url: str, key: str) -> dict[str, Any]:
    async with Client(url, mode="legacy") as client:
        result = await client.call_tool(
            "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}
        )
        assert not result.is_error, result.content[0].text
        case: dict[str, Any] = answer_of(result)["case"]
        return case


def test_a_retry_at_another_replica_or_after_a_restart_acts_once(
    server: ExampleServer, replicas: tuple[McpServer, McpServer]
) -> None:
    first, second = replicas
    key = f"replicas-{uuid.uuid4().hex}"
    before = calculation_posts(server)
    case = asyncio.run(create(first.mcp("pfefferminzia"), key))
    assert asyncio.run(create(second.mcp("pfefferminzia"), key)) == case
    first.stop()
    first.start()
    assert asyncio.run(create(first.mcp("pfefferminzia"), key)) == case
    assert calculation_posts(server) - before == 1, "the insurer was asked more than once"


def test_a_session_is_served_by_any_replica_and_refused_at_another_insurer(
    client: httpx.Client, replicas: tuple[McpServer, McpServer]
) -> None:
    first, second = replicas
    session = open_session(client, first.mcp("pfefferminzia"))
    foreign = in_session(client, second.mcp("disrupto"), session)
    assert foreign.status_code == 404
    assert "'pfefferminzia'" in foreign.json()["error"]["message"]
    # the session is in the shared binding: another replica takes it up (no sticky routing)
    assert in_session(client, second.mcp("pfefferminzia"), session).status_code == 200
    assert in_session(client, first.mcp("pfefferminzia"), session).status_code == 200


def test_a_replica_whose_redis_is_unreachable_does_not_start(tmp_path: Path) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(
        f"""
[state]
redis = "redis://127.0.0.1:{free_port()}/0"
[[instance]]
name = "pfefferminzia"
api = "http://127.0.0.1:9/api"
"""
    )
    with pytest.raises(RuntimeError, match="Redis for shared state is not reachable"):
        McpServer(config, free_port()).start()


def test_a_redis_outage_is_a_temporary_error_and_the_replica_recovers(
    server: ExampleServer, client: httpx.Client, tmp_path: Path
) -> None:
    redis = start_redis(tmp_path)
    config = tmp_path / "mcp.toml"
    config.write_text(
        f'[state]\nredis = "{redis.url}"\n'
        f'[[instance]]\nname = "pfefferminzia"\napi = "{server.api("pfefferminzia")}"\n'
    )
    replica = McpServer(config, free_port(), ["--request-log", str(tmp_path / "r.jsonl")])
    replica.start()
    url = replica.mcp("pfefferminzia")

    async def read_products() -> Any:
        async with Client(url, mode="2026-07-28") as mcp:
            return await mcp.call_tool("listProducts", {})

    try:
        assert not asyncio.run(read_products()).is_error
        session = open_session(client, url)
        redis.stop()
        down = asyncio.run(read_products())
        assert down.is_error
        problem = answer_of(down)["problem"]
        assert problem["type"].endswith("/service-unavailable") and problem["kind"] == "temporary"
        assert in_session(client, url, session).status_code == 503
        redis.start()  # the same port, empty: the replica carries on without a restart
        assert not asyncio.run(read_products()).is_error
    finally:
        replica.stop()
        redis.stop()
