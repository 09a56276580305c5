"""Small protocol points, through the SDK's client (or as a client speaks on the wire): a resource
nobody serves names its URI, 2025-11-25 streams are primed for resumption, the servers say who
they are (website, icons), and the tools' hints say what a call does."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.mcp.clients import Client
from tests.mcp.test_http import HEADERS, INITIALIZE
from tests.servers import ExampleServer

BROKER = "/omds-ld/insurers/mcp"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("endpoint", ["pfefferminzia", "insurers"])
def test_a_resource_nobody_serves_is_invalid_params_naming_its_uri(
    server: ExampleServer, endpoint: str, mode: str
) -> None:
    """SEP-2164: -32602, the requested URI in the error's data, never an empty result."""
    url = server.mcp(endpoint) if endpoint != "insurers" else server.url + BROKER

    async def read() -> MCPError:
        async with Client(url, mode=mode) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource("omds-ld://nobody/serves-this")
            return raised.value

    error = asyncio.run(read())
    assert error.code == INVALID_PARAMS
    assert error.error.data == {"uri": "omds-ld://nobody/serves-this"}


def test_a_2025_stream_is_primed_with_an_event_id_and_a_retry_interval(
    server: ExampleServer,
) -> None:
    """SEP-1699: a session that can be asked (it declared elicitation) is answered by the SDK as
    SSE; its stream begins with an event that has an id and no data, and says how long to wait
    before resuming; the answer's own event has an id too."""
    url = server.mcp("pfefferminzia")
    asking = {**INITIALIZE["params"], "capabilities": {"elicitation": {"form": {}}}}  # type: ignore[dict-item]
    with httpx.Client(timeout=30) as http:
        opened = http.post(url, json={**INITIALIZE, "params": asking}, headers=HEADERS)
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"],
                   "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=session)  # fmt: skip
        # what the SDK answers (a tool call that binds nobody is answered beside it, in JSON)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
        answered = http.post(url, json=call, headers=session)
    assert answered.headers["content-type"].startswith("text/event-stream")
    events = [e for e in answered.text.replace("\r\n", "\n").split("\n\n") if e.strip()]
    priming = dict(line.split(":", 1) for line in events[0].splitlines())
    assert priming["id"].strip() and priming.get("data", "").strip() == ""
    assert int(priming["retry"]) > 0
    answer = dict(line.split(":", 1) for line in events[-1].splitlines())
    assert answer["id"].strip() and '"id":7' in answer["data"].replace(" ", "")


def test_the_servers_say_whose_they_are_with_a_website_and_icons(server: ExampleServer) -> None:
    """serverInfo names the insurer's website and icon (the norm's mark at the broker endpoint);
    the insurer's tools carry its icon, which the example server serves beside its interface."""

    async def listed(url: str) -> tuple[object, list[object]]:
        async with Client(url, mode="legacy") as client:
            return client.server_info, list((await client.list_tools()).tools)

    info, tools = asyncio.run(listed(server.mcp("disrupto")))
    assert info.website_url == "https://disrupto.example/"  # type: ignore[attr-defined]
    icon = info.icons[0]  # type: ignore[attr-defined]
    assert icon.mime_type == "image/svg+xml" and icon.src.endswith("/disrupto/api/icon.svg")
    assert all(t.icons and t.icons[0].src == icon.src for t in tools)  # type: ignore[attr-defined]
    image = httpx.get(icon.src)
    assert image.status_code == 200 and image.headers["content-type"] == "image/svg+xml"
    assert b"<svg" in image.content
    broker, broker_tools = asyncio.run(listed(server.url + BROKER))
    assert broker.icons[0].src.startswith("data:image/svg+xml;base64,")  # type: ignore[attr-defined]
    assert all(not t.icons for t in broker_tools)  # type: ignore[attr-defined]


def test_a_binding_offer_is_no_destructive_call_an_application_is(server: ExampleServer) -> None:
    """createOffer adds an offer that binds the insurer for its validity and overwrites
    nothing: not destructive (a host need not warn before it; the person's yes belongs to the
    application). createApplication binds the customer: destructive, and never repeated."""

    async def listed() -> dict[str, object]:
        async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
            return {t.name: t.annotations for t in (await client.list_tools()).tools}

    hints = asyncio.run(listed())
    offer, application = hints["createOffer"], hints["createApplication"]
    assert (offer.read_only_hint, offer.destructive_hint) == (False, False)  # type: ignore[attr-defined]
    assert (application.destructive_hint, application.idempotent_hint) == (True, False)  # type: ignore[attr-defined]
