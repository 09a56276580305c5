"""The events of a session's SSE streams, kept a short while so that a client whose stream broke
can resume it (``Last-Event-ID``): what lets the MCP server prime every 2025-11-25 SSE stream with
an event id and a retry interval (SEP-1699).

Kept in this process's memory only, bounded by construction: at most ``MAX_STREAMS`` streams of
at most ``MAX_EVENTS`` events each, an event dropped after ``KEEP_SECONDS``. A stream's events can
hold what the client was shown (a confirmation's text names the customer): they never leave the
process, are never written to a store or a log, and are gone within the minute. A client that
resumes at another replica, or after that, finds nothing to replay and asks again.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

MAX_STREAMS = 1000
MAX_EVENTS = 100
KEEP_SECONDS = 60.0
RETRY_MILLISECONDS = 1000  # what a client waits before it resumes a broken stream


@dataclass
class _Stream:
    events: list[tuple[EventId, float, JSONRPCMessage | None]] = field(default_factory=list)


class StreamEvents(EventStore):
    """The recent events of this process's SSE streams, for a client to resume one."""

    def __init__(self, keep_seconds: float = KEEP_SECONDS) -> None:
        self.keep_seconds = keep_seconds
        self._streams: OrderedDict[StreamId, _Stream] = OrderedDict()
        self._where: dict[EventId, StreamId] = {}
        # ids nobody can guess: a Last-Event-ID names only an event of a stream the client had
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        now = time.monotonic()
        self._expire(now)
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = _Stream()
            if len(self._streams) > MAX_STREAMS:
                _, oldest = self._streams.popitem(last=False)
                self._forget(oldest.events)
        self._streams.move_to_end(stream_id)
        event_id = f"{self._prefix}-{next(self._counter)}"
        stream.events.append((event_id, now, message))
        self._where[event_id] = stream_id
        if len(stream.events) > MAX_EVENTS:
            self._forget(stream.events[:-MAX_EVENTS])
            del stream.events[:-MAX_EVENTS]
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        self._expire(time.monotonic())
        stream_id = self._where.get(last_event_id)
        stream = self._streams.get(stream_id) if stream_id is not None else None
        if stream_id is None or stream is None:
            return None
        ids = [event_id for event_id, _, _ in stream.events]
        now = time.monotonic()
        for event_id, at, message in stream.events[ids.index(last_event_id) + 1 :]:
            if message is not None and now - at <= self.keep_seconds:  # priming: nothing to send
                await send_callback(EventMessage(message, event_id))
        return stream_id

    def _expire(self, now: float) -> None:
        """Streams quiet for longer than they are kept go, the quietest first (they are in the
        order of their last event); a live stream keeps its last ``MAX_EVENTS``."""
        while self._streams:
            stream_id, stream = next(iter(self._streams.items()))
            if stream.events and now - stream.events[-1][1] <= self.keep_seconds:
                return
            del self._streams[stream_id]
            self._forget(stream.events)

    def _forget(self, events: list[tuple[EventId, float, JSONRPCMessage | None]]) -> None:
        for event_id, _, _ in events:
            self._where.pop(event_id, None)
