"""Streamable HTTP guards: sessions stay with their connector, bindings lapse, Origin and Host are checked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import ExampleServer

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "omds-ld-tests", "version": "1"},
    },
}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def open_session(client: httpx.Client, url: str) -> str:
    response = client.post(url, json=INITIALIZE, headers=HEADERS)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    sent = client.post(url, json=initialized, headers={**HEADERS, "Mcp-Session-Id": session})
    assert sent.status_code == 202, sent.text
    return session


def in_session(
    client: httpx.Client, url: str, session: str, message: dict[str, Any] = LIST_TOOLS
) -> httpx.Response:
    """A JSON-RPC message posted within a session."""
    return client.post(url, json=message, headers={**HEADERS, "Mcp-Session-Id": session})


def test_a_session_is_refused_at_another_insurer_naming_its_owner(
    client: httpx.Client, server: ExampleServer
) -> None:
    session = open_session(client, server.mcp("pfefferminzia"))
    assert in_session(client, server.mcp("pfefferminzia"), session).status_code == 200
    foreign = in_session(client, server.mcp("disrupto"), session)
    assert foreign.status_code == 404
    message = foreign.json()["error"]["message"]
    assert "'pfefferminzia'" in message and "/omds-ld/insurers/pfefferminzia/mcp" in message


def test_foreign_origin_is_refused(client: httpx.Client, server: ExampleServer) -> None:
    response = client.post(
        server.mcp("pfefferminzia"),
        json=INITIALIZE,
        headers={**HEADERS, "Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    allowed = client.post(
        server.mcp("pfefferminzia"), json=INITIALIZE, headers={**HEADERS, "Origin": server.url}
    )
    assert allowed.status_code == 200


def test_foreign_host_is_refused(client: httpx.Client, server: ExampleServer) -> None:
    response = client.post(
        server.mcp("pfefferminzia"), json=INITIALIZE, headers={**HEADERS, "Host": "evil.example"}
    )
    assert response.status_code == 421


def test_an_unknown_session_is_not_found(client: httpx.Client, server: ExampleServer) -> None:
    response = client.post(
        server.mcp("disrupto"), json=LIST_TOOLS, headers={**HEADERS, "Mcp-Session-Id": "f" * 32}
    )
    assert response.status_code == 404


@pytest.fixture
def short_sessions(tmp_path: Path) -> Iterator[ExampleServer]:
    running = ExampleServer(tmp_path / "store.sqlite3", extra_args=["--session-minutes", "0.02"])
    running.start()
    yield running
    running.stop()


def test_a_binding_lapses_after_the_last_request(
    client: httpx.Client, short_sessions: ExampleServer
) -> None:
    url = short_sessions.mcp("pfefferminzia")
    session = open_session(client, url)
    for _ in range(3):  # each request keeps the binding alive
        time.sleep(0.6)
        kept = client.post(url, json=LIST_TOOLS, headers={**HEADERS, "Mcp-Session-Id": session})
        assert kept.status_code == 200
    time.sleep(2.0)
    lapsed = client.post(url, json=LIST_TOOLS, headers={**HEADERS, "Mcp-Session-Id": session})
    assert lapsed.status_code == 404


def test_oversized_bodies_are_refused(client: httpx.Client, server: ExampleServer) -> None:
    big = {**LIST_TOOLS, "params": {"padding": "x" * (2 * 1024 * 1024)}}
    response = client.post(server.mcp("pfefferminzia"), json=big, headers=HEADERS)
    assert response.status_code == 413
