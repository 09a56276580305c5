"""Idle 2025-11-25 sessions let go of their SDK state and come back on their next request, as if
nothing happened (a tool call is answered without it); a session with its GET stream open is
never idle. Seen from outside: the
sessions' answers, and /metrics (sessions open against sessions whose state is held)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.servers import ExampleServer

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
               "clientInfo": {"name": "idle client", "version": "1"}},
}  # fmt: skip


@pytest.fixture(scope="module")
def sleepy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    folder = Path(tmp_path_factory.mktemp("sleepy"))
    running = ExampleServer(folder / "s.sqlite3", extra_args=["--hibernate-seconds", "0.5"])
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _gauge(server: ExampleServer, name: str, insurer: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(f'{name}{{insurer="{insurer}"}}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {insurer} not in /metrics")


def _wait_for(check: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)


def test_idle_sessions_hibernate_and_come_back_unnoticed(sleepy: ExampleServer) -> None:
    url = sleepy.mcp("disrupto")
    sessions = []
    with httpx.Client(timeout=30) as client:
        for _ in range(12):
            opened = client.post(url, json=INITIALIZE, headers=HEADERS)
            assert opened.status_code == 200
            session = opened.headers["mcp-session-id"]
            versioned = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            client.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=versioned,
            )
            sessions.append(versioned)
        assert _gauge(sleepy, "omds_ld_mcp_sessions_live", "disrupto") >= 12
        # idle: the SDK state goes, the sessions stay open
        _wait_for(lambda: _gauge(sleepy, "omds_ld_mcp_sessions_live", "disrupto") == 0)
        assert _gauge(sleepy, "omds_ld_mcp_sessions_open", "disrupto") >= 12
        # every one of them answers as before: a tool call in its session
        for index, versioned in enumerate(sessions):
            called = client.post(
                url,
                json={"jsonrpc": "2.0", "id": 2 + index, "method": "tools/call",
                      "params": {"name": "listProducts", "arguments": {}}},
                headers=versioned,
            )  # fmt: skip
            assert called.status_code == 200, called.text
            assert "Kraftfahrt" in called.json()["result"]["content"][0]["text"]
        # a tool call is answered beside the SDK: the sessions stay as light as they were
        assert _gauge(sleepy, "omds_ld_mcp_sessions_live", "disrupto") == 0
        # anything else the SDK answers, its state made again
        for index, versioned in enumerate(sessions):
            listed = client.post(
                url, json={"jsonrpc": "2.0", "id": 50 + index, "method": "tools/list"},
                headers=versioned,
            )  # fmt: skip
            assert listed.status_code == 200, listed.text
            assert "listProducts" in {t["name"] for t in listed.json()["result"]["tools"]}
        assert _gauge(sleepy, "omds_ld_mcp_sessions_live", "disrupto") >= 12
        # a hibernated session is ended like any other; then it is unknown
        _wait_for(lambda: _gauge(sleepy, "omds_ld_mcp_sessions_live", "disrupto") == 0)
        assert client.delete(url, headers=sessions[0]).status_code == 200
        gone = client.post(
            url, json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"}, headers=sessions[0]
        )
        assert gone.status_code == 404


def test_a_session_with_its_stream_open_is_never_idle(sleepy: ExampleServer) -> None:
    """The SDK client keeps a GET stream open: its session stays as it is, however long."""

    async def work() -> tuple[float, bool]:
        async with Client(sleepy.mcp("angloamerican"), mode="legacy") as client:
            await client.call_tool("listProducts", {})
            await asyncio.sleep(2.5)  # five times the hibernation time
            live = _gauge(sleepy, "omds_ld_mcp_sessions_live", "angloamerican")
            result = await client.call_tool("listProducts", {})
            return live, bool(result.is_error)

    live, failed = asyncio.run(work())
    assert live >= 1 and not failed
