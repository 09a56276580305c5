"""State that must outlive a request: session bindings, idempotency records, the upstream cache.

One small interface; kept in memory for one process (stdio, one HTTP server). Several replicas of
one insurer's MCP server would share it through Redis behind the same interface.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class StateStore(Protocol):
    """Keys with values and a time to live."""

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...

    async def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        """Set the key only if it is absent; whether it was set."""
        ...

    async def touch(self, key: str, ttl: float) -> bool:
        """Give an existing key a new time to live; whether it existed."""
        ...

    async def delete(self, key: str) -> None: ...

    async def incr(self, key: str) -> int: ...


class MemoryStateStore:
    """The state store of one process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[bytes, float | None]] = {}

    def _live(self, key: str) -> tuple[bytes, float | None] | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] is not None and entry[1] <= self._clock():
            del self._values[key]
            return None
        return entry

    def _expiry(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    async def get(self, key: str) -> bytes | None:
        entry = self._live(key)
        return None if entry is None else entry[0]

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self._values[key] = (value, self._expiry(ttl))
        if len(self._values) > 50_000:
            self._sweep()

    async def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        if self._live(key) is not None:
            return False
        await self.set(key, value, ttl)
        return True

    async def touch(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        self._values[key] = (entry[0], self._expiry(ttl))
        return True

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def incr(self, key: str) -> int:
        entry = self._live(key)
        value = int(entry[0]) + 1 if entry else 1
        self._values[key] = (str(value).encode(), entry[1] if entry else None)
        return value

    def _sweep(self) -> None:
        now = self._clock()
        for key in [
            k for k, (_, expiry) in self._values.items() if expiry is not None and expiry <= now
        ]:
            del self._values[key]
