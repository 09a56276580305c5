"""The events a client may resume a broken SSE stream with: replayed after the last one it saw,
bounded in number and time, and never across streams."""

from __future__ import annotations

import asyncio
import time

import mcp_types as types

from omds_ld.mcp import events
from omds_ld.mcp.events import StreamEvents


def _message(number: int) -> types.JSONRPCMessage:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress",
                                     params={"n": number})  # fmt: skip


def _replayed(store: StreamEvents, after: str) -> tuple[str | None, list[int]]:
    seen: list[int] = []

    async def send(event: object) -> None:
        seen.append(event.message.params["n"])  # type: ignore[attr-defined]

    stream = asyncio.run(store.replay_events_after(after, send))
    return stream, seen


def test_a_resumed_stream_gets_what_came_after_its_last_event_and_nothing_of_another() -> None:
    store = StreamEvents()
    priming = asyncio.run(store.store_event("a", None))
    ids = [asyncio.run(store.store_event("a", _message(n))) for n in range(3)]
    asyncio.run(store.store_event("b", _message(99)))
    assert _replayed(store, priming) == ("a", [0, 1, 2])
    assert _replayed(store, ids[1]) == ("a", [2])
    assert _replayed(store, "made-up") == (None, [])


def test_a_stream_keeps_its_last_events_and_quiet_streams_go() -> None:
    store = StreamEvents(keep_seconds=60)
    first = asyncio.run(store.store_event("a", _message(0)))
    for n in range(1, events.MAX_EVENTS + 5):
        asyncio.run(store.store_event("a", _message(n)))
    assert _replayed(store, first) == (None, []), "the first event is gone: bounded per stream"
    quiet = StreamEvents(keep_seconds=0.01)
    gone = asyncio.run(quiet.store_event("q", _message(0)))
    asyncio.run(quiet.store_event("q", _message(1)))
    time.sleep(0.05)
    asyncio.run(quiet.store_event("other", _message(2)))
    assert _replayed(quiet, gone) == (None, []), "a stream quiet past its time is forgotten"
    assert len(quiet._streams) == 1
