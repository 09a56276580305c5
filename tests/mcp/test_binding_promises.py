"""The binding step's promises, each through the real interface, each able to fail: a yes on the
page for a call without an idempotency key is spent by that call; a person's answer in a
2026-07-28 round trip confirms one call once; the page takes a form only from its own origin,
even one the server's Host guard admits."""

from __future__ import annotations

import asyncio
import html
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import mcp_types as types

from omds_ld.mcp.condense import answer_of
from omds_ld.mcp.confirm import INPUT_KEY
from omds_ld.scenarios.person import PagePerson, consent_form
from tests.mcp.applications import Person, application, make_offer
from tests.mcp.clients import Client
from tests.mcp.test_applications import applications_of, problem_type
from tests.servers import ExampleServer

PAGE = re.compile(r"(http://\S+/omds-ld/confirmations/[\w-]+)")


def test_a_page_yes_for_a_call_without_a_key_is_spent_by_that_call(server: ExampleServer) -> None:
    """Confirmed on the page, the call without an idempotencyKey applies once; the same call
    made again is asked anew (it is another act), never sent on the spent yes."""
    state: dict[str, Any] = {}

    async def go() -> None:
        async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
            offer = await make_offer(client)
            arguments = {
                "offerId": answer_of(offer)["offer"]["offerId"],
                "body": application(offer),
            }
            asked = await client.call_tool("createApplication", arguments)
            assert problem_type(asked) == "confirmation-required"
            page = PAGE.search(asked.content[0].text)
            assert page, asked.content[0].text
            answered = await PagePerson().answer(page.group(1), "confirm")
            assert answered.status == 200, answered.page
            made = await client.call_tool("createApplication", arguments)
            assert not made.is_error, made.content[0].text
            again = await client.call_tool("createApplication", arguments)
            state.update(offer=arguments["offerId"], again=again)

    asyncio.run(go())
    assert state["again"].is_error and problem_type(state["again"]) == "confirmation-required"
    assert len(applications_of(server, state["offer"])) == 1


def test_a_round_trip_answer_confirms_one_call_once(server: ExampleServer) -> None:
    """2026-07-28: the person's answer, with the request state naming the question, confirms the
    call it was asked for; sent again with the same call, it confirms nothing (the question is
    gone with its answer): the person is asked anew."""
    seen: dict[str, Any] = {}

    async def go() -> None:
        # a client that can ask its user (the person's answer is sent here by hand)
        async with Client(
            server.mcp("pfefferminzia"), mode="2026-07-28", elicitation_callback=Person(),
            elicitation_modes=("form",),
        ) as client:  # fmt: skip
            offer = await make_offer(client)
            arguments = {
                "offerId": answer_of(offer)["offer"]["offerId"],
                "body": application(offer),
            }
            asked = await client.session.call_tool(
                "createApplication", arguments, allow_input_required=True
            )
            assert isinstance(asked, types.InputRequiredResult), asked
            answer = types.ElicitResult(action="accept", content={"confirm": True})
            responses = {INPUT_KEY: answer}
            made = await client.session.call_tool(
                "createApplication", arguments, input_responses=responses,
                request_state=asked.request_state, allow_input_required=True,
            )  # fmt: skip
            assert isinstance(made, types.CallToolResult) and not made.is_error, made.content[
                0
            ].text
            replayed = await client.session.call_tool(
                "createApplication", arguments, input_responses=responses,
                request_state=asked.request_state, allow_input_required=True,
            )  # fmt: skip
            seen.update(offer=arguments["offerId"], replayed=replayed)

    asyncio.run(go())
    assert isinstance(seen["replayed"], types.InputRequiredResult), seen["replayed"]
    assert len(applications_of(server, seen["offer"])) == 1


def test_the_page_takes_a_form_only_from_its_own_origin(server: ExampleServer) -> None:
    """Another page on this machine (another loopback port: the server's Host and Origin guard
    admits loopback origins) cannot send the page's form for the logged-in person; the page's
    own origin can."""
    state: dict[str, Any] = {}

    async def first() -> None:
        async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
            offer = await make_offer(client)
            arguments = {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer),
                         "idempotencyKey": "origin-1"}  # fmt: skip
            asked = await client.call_tool("createApplication", arguments)
            page = PAGE.search(asked.content[0].text)
            assert page, asked.content[0].text
            state.update(page=page.group(1), offer=arguments["offerId"])

    asyncio.run(first())
    page = state["page"]
    own = "{0.scheme}://{0.netloc}".format(urlsplit(page))
    elsewhere = f"http://127.0.0.1:{urlsplit(page).port + 1}"

    async def attempts() -> None:
        async with httpx.AsyncClient(timeout=30, follow_redirects=True) as browser:
            reading = await PagePerson().open(browser, page)
            token = re.search(r'name="csrf" value="([0-9a-f]+)"', reading.page)
            assert reading.status == 200 and token is not None
            form = {"csrf": html.unescape(token.group(1)), "answer": "confirm",
                    **consent_form(reading.page, {})}  # fmt: skip
            refused = await browser.post(page, data=form, headers={"Origin": elsewhere})
            assert refused.status_code == 403, refused.text[-300:]
            assert "sent from its own page only" in refused.text
            confirmed = await browser.post(page, data=form, headers={"Origin": own})
            assert confirmed.status_code == 200 and "Confirmed by" in confirmed.text

    asyncio.run(attempts())
    assert applications_of(server, state["offer"]) == []  # confirmed, not yet applied
