"""The confirmation page answers only the broker a binding call was made for, logged in at the
authorization server: its address alone confirms nothing (a model holding it, a second client
without the login, another broker, a replayed or moved form each change nothing)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.person import PagePerson, consent_form
from tests.auth.flow import bearer_client, tokens_by_hand
from tests.mcp.applications import IBAN, application, make_offer
from tests.servers import ExampleServer

PAGE = re.compile(r"(http://\S+/omds-ld/confirmations/[\w-]+)")


def _applications(server: ExampleServer, offer_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(server.database) as db:
        return db.execute(
            "SELECT application_id, record FROM applications WHERE offer_id=?", (offer_id,)
        ).fetchall()


def _asked(server: ExampleServer, token: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """Alpha's client without elicitation: an offer, and one confirmation page per key."""
    asked: dict[str, Any] = {"pages": {}}

    async def go() -> None:
        async with bearer_client(server.mcp("pfefferminzia"), token, whole_answers=True) as client:
            offer = await make_offer(client)
            asked["offer"] = answer_of(offer)["offer"]["offerId"]
            asked["body"] = application(offer)
            for key in keys:
                arguments = {"offerId": asked["offer"], "body": asked["body"],
                             "idempotencyKey": key}  # fmt: skip
                refused = await client.call_tool("createApplication", arguments)
                found = PAGE.search(refused.content[0].text)
                assert refused.is_error and found, refused.content[0].text
                asked["pages"][key] = found.group(1)

    asyncio.run(go())
    return asked


def _retry(server: ExampleServer, token: str, asked: dict[str, Any], key: str) -> Any:
    async def go() -> Any:
        async with bearer_client(server.mcp("pfefferminzia"), token, whole_answers=True) as client:
            return await client.call_tool(
                "createApplication",
                {"offerId": asked["offer"], "body": asked["body"], "idempotencyKey": key},
            )

    return asyncio.run(go())


def test_only_the_logged_in_broker_the_call_was_made_for_confirms(secured: ExampleServer) -> None:
    alpha = tokens_by_hand(secured.url, "alpha", secured.mcp("pfefferminzia"))["access_token"]
    asked = _asked(secured, alpha, ("one", "two"))
    page, other = asked["pages"]["one"], asked["pages"]["two"]

    async def attempts() -> None:
        async with httpx.AsyncClient(timeout=30) as bare:
            # the address alone: a bare POST with a typed name, no login
            posted = await bare.post(page, data={"answer": "confirm", "name": "Mallory"})
            assert posted.status_code == 401 and IBAN not in posted.text
            # opened without a login: sent to the authorization server, nothing shown
            opened = await bare.get(page)
            assert opened.status_code == 303 and "/oauth/authorize?" in opened.headers["location"]
        async with httpx.AsyncClient(
            timeout=30, cookies={"omds_ld_confirmation_login": "made-up"}
        ) as forger:  # a login cookie the page never gave (or one whose login expired)
            forged = await forger.post(page, data={"answer": "confirm", "csrf": "0" * 64})
            assert forged.status_code == 401
        # broker beta, logged in: sees nothing of it and cannot answer it
        beta = PagePerson("beta")
        seen = await beta.read(page)
        assert seen.status == 403 and IBAN not in seen.page and "Anna" not in seen.page
        assert "Log in as alpha" in seen.page  # whom to log in as, said
        async with httpx.AsyncClient(timeout=30) as german:  # the browser's language
            gone = await german.get(
                page.rsplit("/", 1)[0] + "/no-such-question",
                headers={"Accept-Language": "de-AT,de"},
            )
            assert gone.status_code == 404 and "Nicht gefunden" in gone.text
            assert '<html lang="de">' in gone.text
            # the rarer pages too: a POST without a login, a login nobody started here
            unlogged = await german.post(
                page, data={"answer": "confirm"}, headers={"Accept-Language": "de"}
            )
            assert unlogged.status_code == 401 and "Zuerst anmelden" in unlogged.text
            assert "Log in" not in unlogged.text
            stray = await german.get(
                page.split("/omds-ld/")[0] + "/omds-ld/confirmations/callback?state=x&code=y",
                headers={"Accept-Language": "de"},
            )
            assert stray.status_code == 400 and "Erneut anmelden" in stray.text, stray.text
        assert (await beta.answer(page, "confirm")).status == 403
        # alpha, logged in: a form shown for one question does not answer another
        person = PagePerson("alpha")
        async with httpx.AsyncClient(timeout=30, follow_redirects=True) as browser:
            reading = await person.open(browser, page)
            assert reading.status == 200 and IBAN in reading.shown
            token = re.search(r'name="csrf" value="([0-9a-f]+)"', reading.page)
            assert token is not None
            moved = await browser.post(other, data={"csrf": token.group(1), "answer": "confirm"})
            assert moved.status_code == 403
            sent = await browser.post(
                page, data={"csrf": token.group(1), "answer": "confirm"},
                headers={"Origin": "http://elsewhere.example"},
            )  # fmt: skip
            assert sent.status_code == 403  # from another page's form
            german = await browser.post(
                other, data={"csrf": token.group(1), "answer": "confirm", "language": "de"},
                headers={"Accept-Language": "de"},
            )  # fmt: skip
            assert german.status_code == 403 and "Abgelehnt" in german.text
            assert "nicht für diese Bestätigung gezeigt" in german.text
            filled = consent_form(reading.page, {})  # the form as the page filled it in
            confirmed = await browser.post(
                page, data={"csrf": token.group(1), "answer": "confirm", **filled}
            )
            assert confirmed.status_code == 200 and "Confirmed by" in confirmed.text
            replayed = await browser.post(page, data={"csrf": token.group(1), "answer": "decline"})
            assert replayed.status_code == 409  # answered once

    asyncio.run(attempts())
    assert _applications(secured, asked["offer"]) == []  # nothing before the retry
    unconfirmed = _retry(secured, alpha, asked, "two")  # the other question was never answered
    assert unconfirmed.is_error and "confirmation-required" in unconfirmed.content[0].text
    made = _retry(secured, alpha, asked, "one")
    assert not made.is_error, made.content[0].text
    [(_, record)] = _applications(secured, asked["offer"])
    confirmation = json.loads(record)["consent"]["bc:confirmation"]
    assert confirmation["bc:confirmedBy"] == "alpha"
    assert confirmation["bc:confirmedByName"] == "Maklerbüro Alpha"
    assert confirmation["bc:confirmedVia"] == "confirmation page"


def test_in_the_demo_the_anonymous_calls_page_wants_the_demo_brokers_login(
    server: ExampleServer,
) -> None:
    """Without --require-token every MCP caller is the anonymous demo broker: its page is
    answered by the demo broker's login, not by alpha's, not without one."""
    asked: dict[str, Any] = {}

    async def go() -> None:
        from tests.mcp.clients import Client

        async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
            offer = await make_offer(client)
            refused = await client.call_tool(
                "createApplication",
                {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
            )
            found = PAGE.search(refused.content[0].text)
            assert found is not None
            asked["page"] = found.group(1)
        async with httpx.AsyncClient(timeout=30) as bare:
            assert (await bare.post(asked["page"], data={"answer": "confirm"})).status_code == 401
        assert (await PagePerson("alpha").answer(asked["page"], "confirm")).status == 403
        answered = await PagePerson().answer(asked["page"], "confirm")
        assert answered.status == 200 and "Confirmed by" in answered.page

    asyncio.run(go())


def test_a_pages_id_and_its_logins_code_are_never_logged(tmp_path: Path) -> None:
    """The access log (--access-log) and uvicorn's access lines on stderr keep the route of a
    confirmation page, never its id, and no query (the login's code and state)."""
    from tests.servers import running

    example = ExampleServer(
        tmp_path / "omds-ld.sqlite3",
        extra_args=["--access-log", str(tmp_path / "access.jsonl"), "--log-level", "info"],
    )
    with running(example):
        asked: dict[str, Any] = {}

        async def go() -> None:
            from tests.mcp.clients import Client

            async with Client(example.mcp("pfefferminzia"), mode="legacy") as client:
                offer = await make_offer(client)
                refused = await client.call_tool(
                    "createApplication",
                    {"offerId": answer_of(offer)["offer"]["offerId"], "body": application(offer)},
                )
                found = PAGE.search(refused.content[0].text)
                assert found is not None
                asked["page"] = found.group(1)
            answered = await PagePerson().answer(asked["page"], "confirm")
            assert answered.status == 200

        asyncio.run(go())
    pending = asked["page"].rsplit("/", 1)[-1]
    logged = (tmp_path / "access.jsonl").read_text() + (example.log or tmp_path).read_text()
    assert "/omds-ld/confirmations/{id}" in logged and "/omds-ld/confirmations/callback" in logged
    assert pending not in logged
    assert "code=" not in logged and "state=" not in logged


def test_the_page_reads_a_post_no_further_than_its_bound(server: ExampleServer) -> None:
    """A form that says it has a megabyte and sends a little over the page's bound of 4 KiB is
    answered at once (here: no such question), not after the rest the page would wait for
    until its read deadline cuts the connection."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=60) as raw:
        raw.sendall(
            b"POST /omds-ld/confirmations/no-such-question HTTP/1.1\r\n"
            b"Host: " + address.netloc.encode() + b"\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: 1000000\r\n\r\n" + b"answer=confirm&x=" + b"a" * 5000
        )
        answered = raw.recv(65536)
    assert answered.startswith(b"HTTP/1.1 404"), answered[:200]
