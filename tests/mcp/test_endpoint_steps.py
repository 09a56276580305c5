"""Each step of a request's way through an MCP endpoint (``SessionBinding``), in order, tested
through the endpoint of an example server built in process: admission, the session it names,
its body, the binding of a new session. See docs/architecture.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from omds_ld.example import ExampleApp, ExampleConfig
from omds_ld.insurer.config import ServerConfig
from omds_ld.mcp.config import HttpConfig

BASE = "http://127.0.0.1:9092"
URL = "/omds-ld/insurers/pfefferminzia/mcp"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "steps", "version": "1"}},
}  # fmt: skip
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "steps", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ExampleApp, TestClient]]:
    folder = Path(tmp_path_factory.mktemp("steps"))
    http = HttpConfig(port=9092, max_sessions_per_client=2, max_body_bytes=64 * 1024)
    app = ExampleApp(
        ExampleConfig(server=ServerConfig(database=folder / "s.sqlite3", port=9092), http=http)
    )
    with TestClient(app, base_url=BASE) as client:
        yield app, client


def _open(client: TestClient) -> str:
    opened = client.post(URL, json=INITIALIZE, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    client.post(URL, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=_in(session))  # fmt: skip
    return str(session)


def _in(session: str) -> dict[str, str]:
    return {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}


def _close(client: TestClient, session: str) -> None:
    client.delete(URL, headers=_in(session))


def _sessionless(client: TestClient, tool: str, arguments: Any, capabilities: Any = None) -> Any:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
    return client.post(
        URL,
        content=json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                            "params": {"name": tool, "arguments": arguments, "_meta": meta}}),
        headers={**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                 "Mcp-Name": tool},
    )  # fmt: skip


def test_admission_refuses_a_foreign_host_origin_or_token(example: Any) -> None:
    _, client = example
    assert (
        client.post(URL, json=INITIALIZE, headers={**HEADERS, "Host": "evil.example"}).status_code
        == 421
    )
    refused = client.post(
        URL, json=INITIALIZE, headers={**HEADERS, "Origin": "https://evil.example"}
    )
    # the example server's own guard answers first, with the norm's problem type
    assert refused.status_code == 403 and "origin" in refused.text.lower()
    bad = client.post(URL, json=INITIALIZE, headers={**HEADERS, "Authorization": "Bearer junk"})
    assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["www-authenticate"]


def test_the_session_must_be_known_and_this_connectors(example: Any) -> None:
    _, client = example
    unknown = client.post(URL, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                          headers=_in("no-such-session"))  # fmt: skip
    assert unknown.status_code == 404 and "unknown or expired" in unknown.json()["error"]["message"]
    session = _open(client)
    elsewhere = client.post(
        "/omds-ld/insurers/disrupto/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=_in(session),
    )  # fmt: skip
    assert elsewhere.status_code == 404
    assert "belongs to the connector 'pfefferminzia'" in elsewhere.json()["error"]["message"]
    _close(client, session)


def test_a_hibernated_session_is_revived_by_its_next_request(example: Any) -> None:
    app, client = example
    binding = app.hosting.bindings["pfefferminzia"]
    session = _open(client)
    binding.open[session] = (binding.open[session][0], 0.0)  # idle since long ago
    assert client.portal.call(binding.hibernate_idle) >= 1  # type: ignore[union-attr]
    assert session not in app.hosting.managers["pfefferminzia"]._server_instances
    listed = client.post(URL, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                         headers=_in(session))  # fmt: skip
    assert listed.status_code == 200 and listed.json()["result"]["tools"]
    _close(client, session)


def test_the_cap_counts_initialize_only(example: Any) -> None:
    _, client = example
    sessions = [_open(client), _open(client)]
    try:
        full = client.post(URL, json=INITIALIZE, headers=HEADERS)
        assert full.status_code == 429 and int(full.headers["Retry-After"]) >= 1
        answered = _sessionless(client, "listProducts", {})
        assert answered.status_code == 200 and not answered.json()["result"]["isError"]
    finally:
        for session in sessions:
            _close(client, session)
    assert client.post(URL, json=INITIALIZE, headers=HEADERS).status_code == 200


def test_the_body_is_read_within_its_size_and_hostile_arguments_are_answered_here(
    example: Any,
) -> None:
    app, client = example
    big = _sessionless(client, "listProducts", {"x": "a" * 70_000})
    assert big.status_code == 413
    calls: list[Any] = []
    binding = app.hosting.bindings["pfefferminzia"]
    sdk = binding.app

    async def watched(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        await sdk(scope, receive, send)

    binding.app = watched
    try:
        hostile = _sessionless(client, "readCalculation", {"caseId": "abc\u0000"})
    finally:
        binding.app = sdk
    result = hostile.json()["result"]
    assert result["isError"] and result["structuredContent"]["problem"]["kind"] == "invalid input"
    assert calls == [], "the SDK never saw it"


def test_a_new_session_is_bound_to_its_connector_and_caller(example: Any) -> None:
    app, client = example
    session = _open(client)
    kept = client.portal.call(app.hosting.state.get, f"session:{session}")  # type: ignore[union-attr]
    connector, subject, initialize = kept.decode().split("\n", 2)
    assert connector == "pfefferminzia" and subject == ""
    assert json.loads(initialize)["clientInfo"]["name"] == "steps"
    _close(client, session)


def test_a_plain_tool_call_is_answered_beside_the_sdk_anything_else_by_it(example: Any) -> None:
    """Step 4: a tools/call of a tool that binds no customer never reaches the SDK's app, its
    client able to be asked or not (only a binding call asks), and a hibernated session is not
    made again for it; a binding tool, another method or malformed params do."""
    app, client = example
    binding = app.hosting.bindings["pfefferminzia"]
    sdk = binding.app
    reached: list[str] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await sdk(scope, receive, send)

    plain = _open(client)
    for session in list(binding.open):  # idle: hibernated, they leave room for one more live
        binding.open[session] = (binding.open[session][0], 0.0)
    client.portal.call(binding.hibernate_idle)  # type: ignore[union-attr]
    asking = _open_asking(client)

    def call(session: str | None, tool: str, arguments: Any = None, **extra: Any) -> Any:
        if session is None:
            return _sessionless(client, tool, arguments or {}, **extra).json()
        message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments or {}}}  # fmt: skip
        answer = client.post(URL, content=json.dumps(message), headers=_in(session))
        if answer.headers["content-type"].startswith("text/event-stream"):  # a stream
            return json.loads(answer.text.split("data: ")[-1])
        return answer.json()

    binding.app = recording
    try:
        beside = [call(plain, "listProducts"), call(None, "listProducts")]
        beside.append(call(plain, "readProduct", {"productId": "kraftfahrt-2025"}))
        beside.append(call(asking, "listProducts"))  # its client can be asked: not for this
        beside.append(call(None, "listProducts", capabilities={"elicitation": {"form": {}}}))
        assert reached == [], "a plain tool call reached the SDK"
        assert plain not in app.hosting.managers["pfefferminzia"]._server_instances
        assert all("Kraftfahrt" in beside[i]["result"]["content"][0]["text"] for i in (0, 1, 3, 4))
        assert beside[1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        by_sdk = [
            call(plain, "createApplication", {"offerId": "o-1", "body": {}}),  # binds
            call(asking, "createApplication", {"offerId": "o-1", "body": {}}),
            call(plain, "listProducts", 5),  # params the SDK refuses
        ]
        assert len(reached) == 3
        assert by_sdk[0]["result"]["isError"] and by_sdk[1]["result"]["isError"]
        assert by_sdk[2]["error"]["code"] == -32602
    finally:
        binding.app = sdk
        _close(client, plain), _close(client, asking)


def _open_asking(client: TestClient) -> str:
    """A 2025 session whose client declares elicitation (form mode): it can be asked."""
    opening = json.loads(json.dumps(INITIALIZE))
    opening["params"]["capabilities"] = {"elicitation": {"form": {}}}
    opened = client.post(URL, json=opening, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    return str(opened.headers["mcp-session-id"])
