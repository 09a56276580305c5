"""The demo's login keeps a model out: the brokers' password is printed on the terminal where
``omds-ld serve`` runs, never on a page a model could fetch; and two processes on one store
share their own clients' secrets, so a second ``serve`` locks none of the first's logins out."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.person import PagePerson
from tests.mcp.applications import application, make_offer
from tests.mcp.clients import Client
from tests.servers import ExampleServer, running

PAGE = re.compile(r"(http://\S+/omds-ld/confirmations/[\w-]+)")


def _asked(server: ExampleServer) -> str:
    """A binding call of a client that cannot ask: the confirmation page's address."""
    found: dict[str, Any] = {}

    async def go() -> None:
        async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
            offer = await make_offer(client)
            asked = await client.call_tool(
                "createApplication",
                {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer),
                 "idempotencyKey": "login-1"},
            )  # fmt: skip
            page = PAGE.search(asked.content[0].text)
            assert page, asked.content[0].text
            found["page"] = page.group(1)

    asyncio.run(go())
    return str(found["page"])


def test_the_demo_password_is_on_the_terminal_only_and_logs_in(tmp_path: Path) -> None:
    """Without OMDS_LD_DEMO_PASSWORD, serve makes a password and prints it on its terminal; no
    page shows it (the login page says where it is); it logs in, "demo" does not."""
    server = ExampleServer(tmp_path / "s.sqlite3", environment={"OMDS_LD_DEMO_PASSWORD": ""})
    with running(server):
        assert server.log is not None
        said = re.search(r"Brokers' login \(([^)]*)\): password (\S+) ", server.log.read_text())
        assert said, server.log.read_text()[-2000:]
        password = said.group(2)
        assert len(password) >= 12 and password != "demo"
        page = _asked(server)
        with httpx.Client(timeout=30, follow_redirects=True) as browser:
            login = browser.get(page)
        assert 'name="password"' in login.text
        assert password not in login.text and "demo</code>" not in login.text
        assert "printed on the terminal where" in login.text
        refused = asyncio.run(PagePerson(password="demo").answer(page, "confirm"))
        assert refused.shown == "" and "unknown broker or wrong password" in refused.page
        confirmed = asyncio.run(PagePerson(password=password).answer(page, "confirm"))
        assert confirmed.status == 200 and "Confirmed by" in confirmed.page, confirmed.page[-500:]


def test_a_second_serve_on_the_same_store_locks_none_of_the_first_ones_logins_out(
    tmp_path: Path,
) -> None:
    """Two processes on one store (replicas, or a second serve by mistake): the page's and the
    MCP servers' own clients keep one secret in the store, so a person logs in at the first
    one's confirmation page after the second started, and the first's MCP calls still work."""
    database = tmp_path / "shared.sqlite3"
    first = ExampleServer(database)
    with running(first):
        page = _asked(first)
        with running(ExampleServer(database)):
            answered = asyncio.run(PagePerson().answer(page, "confirm"))
            assert answered.status == 200 and "Confirmed by" in answered.page, answered.page[-600:]
            again = _asked(first)  # the first one's MCP server still calls as before
            assert again != page
