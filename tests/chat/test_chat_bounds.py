"""The chat page keeps to its own: a browser session is a cookie the server issued, a link from
elsewhere keeps it, the page never runs in a frame or runs foreign code, a long conversation
costs no more per call than a new one, a full one refuses more, and a broker who logs out is
no longer used for anything. Over HTTP against the example server as a process."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omds_ld.chat.conversations import MAX_EVENTS, Conversations, owner_of
from tests.auth.flow import logged_in_at
from tests.servers import ExampleServer, running

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


@contextlib.contextmanager
def _browser(server: ExampleServer) -> Iterator[httpx.Client]:
    """A browser's HTTP client that opened the page (and so holds its session cookie)."""
    with httpx.Client(base_url=server.url, timeout=60, headers={"Origin": server.url}) as client:
        assert client.get("/chat").status_code == 200
        yield client


def _call(client: httpx.Client, cid: str, tool: str, **arguments: Any) -> httpx.Response:
    return client.post(
        f"/chat/api/conversations/{cid}/calls",
        json={"server": "pfefferminzia", "tool": tool, "arguments": arguments},
    )


def test_a_cookie_the_server_never_issued_is_no_session(server: ExampleServer) -> None:
    with _browser(server) as browser:
        cid = browser.post("/chat/api/conversations", json={}).json()["id"]
        issued = browser.cookies["omds_ld_chat"]
    forged = httpx.Client(base_url=server.url, headers={"Origin": server.url})
    for value in ("anything", issued.split(".")[0], issued.split(".")[0] + ".00ff"):
        forged.cookies.set("omds_ld_chat", value, path="/chat")
        assert forged.post("/chat/api/conversations", json={}).status_code == 403
        assert forged.get(f"/chat/api/conversations/{cid}").status_code == 404
        page = forged.get("/chat")
        assert "omds_ld_chat=" in page.headers.get("set-cookie", ""), "a new session is issued"
        forged.cookies.clear()
    forged.close()


def test_a_link_from_another_site_keeps_the_session_and_the_page_stays_out_of_frames(
    server: ExampleServer,
) -> None:
    first = httpx.get(f"{server.url}/chat")
    cookie = first.headers["set-cookie"]
    assert "samesite=lax" in cookie.lower() and "httponly" in cookie.lower()
    value = first.cookies["omds_ld_chat"]
    again = httpx.get(
        f"{server.url}/chat",
        headers={"Referer": "https://elsewhere.example/", "Sec-Fetch-Site": "cross-site"},
        cookies={"omds_ld_chat": value},
    )
    assert "set-cookie" not in again.headers, "the session it brought is kept, not replaced"
    policy = again.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert again.headers["x-frame-options"] == "DENY"


def _seeded(database: Path, events: int) -> tuple[str, str]:
    """A browser session's cookie and a conversation of ``events`` recorded calls, written into
    the chat store before the server starts (as a long day of work would leave it)."""
    conversations = Conversations(database.with_name(database.stem + "-chat.sqlite3"))
    try:
        token = "long-day"
        cookie = f"{token}.{hmac.new(conversations.key(), token.encode(), hashlib.sha256).hexdigest()[:32]}"
        owner = owner_of(cookie)
        cid = conversations.start(owner, {"event": "run.start", "servers": ["pfefferminzia"]})
        answer = {"content": [{"type": "text", "text": "premium 1684.88 EUR " * 100}]}
        for n in range(events - 1):
            conversations.append(
                cid, owner,
                {"event": "gen_ai.tool.call", "mcp.server": "pfefferminzia",
                 "gen_ai.tool.name": "readCalculation", "gen_ai.tool.call.arguments": {"n": n},
                 "mcp.tool.result": answer, "text": "…", "is_error": False},
            )  # fmt: skip
    finally:
        conversations.close()
    return cookie, cid


@contextlib.contextmanager
def _long_day(tmp_path: Path, events: int) -> Iterator[tuple[httpx.Client, str]]:
    """A server over a store with a conversation of ``events`` events, and the browser (its
    cookie set) that owns it."""
    database = tmp_path / "s.sqlite3"
    cookie, cid = _seeded(database, events)
    with (
        running(ExampleServer(database)) as server,
        httpx.Client(base_url=server.url, timeout=60, headers={"Origin": server.url}) as web,
    ):
        web.cookies.set("omds_ld_chat", cookie, path="/chat")
        yield web, cid


def test_a_long_conversation_costs_no_more_per_call_than_a_new_one(tmp_path: Path) -> None:
    with _long_day(tmp_path, MAX_EVENTS - 200) as (web, long_one):
        new_one = web.post("/chat/api/conversations", json={}).json()["id"]

        def p50(cid: str) -> float:
            took = []
            for _ in range(15):
                started = time.perf_counter()
                assert _call(web, cid, "listProducts").status_code == 200
                took.append(time.perf_counter() - started)
            return statistics.median(took)

        p50(new_one)  # warm
        fresh, long = p50(new_one), p50(long_one)
        read = web.get(f"/chat/api/conversations/{long_one}")
        assert read.status_code == 200 and len(read.json()["events"]) == MAX_EVENTS - 200 + 15
    # before one row per event, a call at 750 events took 50 times one at the start
    assert long < 3 * fresh, (long, fresh)


def test_a_full_conversation_refuses_another_call(tmp_path: Path) -> None:
    with _long_day(tmp_path, MAX_EVENTS - 10) as (web, full):
        refused = _call(web, full, "listProducts")
        assert refused.status_code == 409 and "start a new one" in refused.json()["detail"]
        events = web.get(f"/chat/api/conversations/{full}").json()["events"]
        assert len(events) == MAX_EVENTS - 10, "nothing was added"


@pytest.fixture
def secured(tmp_path: Path) -> Any:
    running = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--require-token", "--access-log", str(tmp_path / "access.jsonl")],
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _log_in(web: httpx.Client, server: ExampleServer, broker: str) -> None:
    """The page's login as a browser does it: to the authorization server, log in, back."""
    started = web.get("/chat/login")
    assert started.status_code == 303
    back = asyncio.run(logged_in_at(started.headers["location"], broker))
    assert web.get(back.removeprefix(server.url)).status_code == 303


def test_after_logout_the_conversation_works_as_whoever_logs_in_next(secured: Any) -> None:
    server: ExampleServer = secured
    with _browser(server) as web:
        _log_in(web, server, "alpha")
        cid = web.post("/chat/api/conversations", json={}).json()["id"]
        first = _call(web, cid, "createCalculation", body={"p:hasRootProduct": PRODUCT})
        assert first.status_code == 200 and not first.json()["is_error"], first.text
        assert web.post("/chat/api/logout", json={}).status_code == 204
        assert _call(web, cid, "listProducts").status_code == 401, "logged out: no broker"
        _log_in(web, server, "beta")
        second = _call(web, cid, "createCalculation", body={"p:hasRootProduct": PRODUCT})
        assert second.status_code == 200 and not second.json()["is_error"], second.text
    created = [
        e for e in server.access_entries()
        if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
    ]  # fmt: skip
    assert [e["token"]["subject"] for e in created] == ["alpha", "beta"]
    # alpha's grant was revoked at the authorization server when alpha logged out
    revoked = [e for e in server.access_entries() if e["path"] == "/oauth/revoke"]
    assert revoked and revoked[0]["status"] == 200


def _apply(web: httpx.Client, cid: str) -> httpx.Response:
    """An application by hand with a person's data (for an offer that does not exist: the
    insurer refuses it, the call and its arguments are in the conversation all the same)."""
    from tests.mcp.applications import PAYMENT, PERSON

    return _call(
        web, cid, "createApplication", offerId="no-such-offer",
        body={"bc:policyholder": PERSON, "bc:payment": PAYMENT},
    )  # fmt: skip


def test_personal_data_are_masked_in_what_a_conversation_keeps_unless_the_person_asks(
    server: ExampleServer,
) -> None:
    from tests.mcp.applications import PAYMENT, PERSON

    with _browser(server) as web:
        kept: dict[bool, str] = {}
        for keep in (False, True):
            cid = web.post("/chat/api/conversations", json={}).json()["id"]
            if keep:
                asked = web.post(f"/chat/api/conversations/{cid}/personal", json={"keep": True})
                assert asked.status_code == 200, asked.text
                assert web.get(f"/chat/api/conversations/{cid}").json()["keepPersonal"] is True
            answer = _apply(web, cid)
            assert answer.status_code == 200, answer.text
            # the call's own answer carries what was sent: the person sees what they did
            assert answer.json()["gen_ai.tool.call.arguments"]["body"]["bc:payment"] == PAYMENT
            shown = web.get(f"/chat/api/conversations/{cid}").text
            download = web.get(f"/chat/api/conversations/{cid}/protocol.jsonl").text
            assert shown.count("createApplication") and download.count("createApplication")
            kept[keep] = shown + download
        elsewhere = httpx.post(
            f"{server.url}/chat/api/conversations/{cid}/personal", json={"keep": False},
            headers={"Origin": "https://elsewhere.example"},
        )  # fmt: skip
        assert elsewhere.status_code == 403
    for value in (PAYMENT["bc:iban"], PERSON["p:birthDate"], PERSON["p:email"], "Berger"):
        assert value not in kept[False], value
        assert value in kept[True], value
    assert "•••" + PAYMENT["bc:iban"][-4:] in kept[False], "the IBAN's last four, as answers show"


def test_a_conversation_is_deleted_once_the_operators_retention_has_passed(
    tmp_path: Path,
) -> None:
    """``--chat-keep-hours``: a conversation goes, with its events, that long after its last
    event; one with a later event stays until its own time."""
    database = tmp_path / "s.sqlite3"
    keep = 0.0015  # hours: 5.4 s
    with (
        running(ExampleServer(database, extra_args=["--chat-keep-hours", str(keep)])) as server,
        _browser(server) as web,
    ):
        old = web.post("/chat/api/conversations", json={}).json()["id"]
        assert _call(web, old, "listProducts").status_code == 200
        time.sleep(keep * 3600 / 2)
        recent = web.post("/chat/api/conversations", json={}).json()["id"]
        assert _call(web, recent, "listProducts").status_code == 200
        deadline = time.monotonic() + 30
        while web.get(f"/chat/api/conversations/{old}").status_code == 200:
            assert time.monotonic() < deadline, "the old conversation is deleted"
            time.sleep(0.2)
        assert web.get(f"/chat/api/conversations/{recent}").status_code == 200
    chat = Conversations(database.with_name(database.stem + "-chat.sqlite3"), keep_seconds=1e9)
    try:
        assert chat.rows(old, "anyone") is None
        left = chat._db.execute("SELECT count(*) FROM chat_events WHERE conversation=?", (old,))
        assert left.fetchone()[0] == 0, "its events went with it"
    finally:
        chat.close()
