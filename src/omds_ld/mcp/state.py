"""State that must outlive a request: session bindings, idempotency records, the upstream cache.

One small interface, two stores: in memory for one process (stdio, one HTTP server), and Redis,
shared by several replicas of an MCP server and kept across their restarts.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")


class StateUnavailable(Exception):
    """The shared state cannot be reached: temporary, retry later."""


class StateStore(Protocol):
    """Keys with values and a time to live. Each method is one round trip to a shared store."""

    async def get(self, key: str) -> bytes | None: ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values of several keys at once, in their order."""
        ...

    async def get_and_touch(self, key: str, ttl: float) -> bytes | None:
        """The value of a key, which then lives ``ttl`` seconds more (if it exists)."""
        ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...

    async def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        """Set the key only if it is absent; whether it was set."""
        ...

    async def touch(self, key: str, ttl: float) -> bool:
        """Give an existing key a new time to live; whether it existed."""
        ...

    async def delete(self, key: str) -> None: ...

    async def pop(self, key: str) -> bytes | None:
        """The value of a key, deleted in the same step: of callers racing for it, one gets it."""
        ...

    async def take(self, key: str, rate: float, burst: float) -> float:
        """Take one token from the bucket ``key`` (``rate`` tokens a second, at most ``burst``):
        0 if there was one, else the seconds until there is (and nothing was taken)."""
        ...


# A token bucket as one atomic step in Redis: tokens and the time they were counted, in a hash.
_TAKE = """
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
"""


def take_from(
    tokens: float, at: float, now: float, rate: float, burst: float
) -> tuple[float, float]:
    """The bucket after one take at ``now``: (tokens left, seconds to wait; 0 if taken)."""
    tokens = min(burst, tokens + max(0.0, now - at) * rate)
    if tokens >= 1:
        return tokens - 1, 0.0
    return tokens, (1 - tokens) / rate


class MemoryStateStore:
    """The state store of one process, bounded by construction: an entry is gone once its time
    to live has passed (expired entries are dropped as time goes on, not at some count), and the
    entries together never take more than ``max_bytes``; past it the oldest written go first, as
    a Redis with ``maxmemory`` does."""

    # what one entry costs beyond its key and value: the dict slot, the tuple, the heap entry
    OVERHEAD = 160

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        self._clock = clock
        self.max_bytes = max_bytes
        self._values: dict[str, tuple[bytes, float | None]] = {}  # in the order written
        self._expiries: list[tuple[float, str]] = []  # a heap; an entry may be outdated
        self.bytes = 0

    def _size(self, key: str, value: bytes) -> int:
        return len(key) + len(value) + self.OVERHEAD

    def _live(self, key: str) -> tuple[bytes, float | None] | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] is not None and entry[1] <= self._clock():
            self._drop(key)
            return None
        return entry

    def _drop(self, key: str) -> None:
        entry = self._values.pop(key, None)
        if entry is not None:
            self.bytes -= self._size(key, entry[0])

    def _expiry(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    def _put(self, key: str, value: bytes, expiry: float | None) -> None:
        self._drop(key)  # written again: it is the newest now
        self._values[key] = (value, expiry)
        self.bytes += self._size(key, value)
        if expiry is not None:
            heapq.heappush(self._expiries, (expiry, key))
        self._expire()
        while self.bytes > self.max_bytes and self._values:
            self._drop(next(iter(self._values)))

    def _expire(self) -> None:
        """Drop what has expired by now; rebuild the heap when outdated entries pile up (keys
        touched again and again)."""
        now = self._clock()
        heap = self._expiries
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            entry = self._values.get(key)
            if entry is not None and entry[1] is not None and entry[1] <= now:
                self._drop(key)
        if len(heap) > 2 * len(self._values) + 1024:
            self._expiries = [(e, k) for k, (_, e) in self._values.items() if e is not None]
            heapq.heapify(self._expiries)

    async def get(self, key: str) -> bytes | None:
        entry = self._live(key)
        return None if entry is None else entry[0]

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [await self.get(key) for key in keys]

    async def get_and_touch(self, key: str, ttl: float) -> bytes | None:
        value = await self.get(key)
        if value is not None:
            await self.touch(key, ttl)
        return value

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self._put(key, value, self._expiry(ttl))

    async def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        if self._live(key) is not None:
            return False
        await self.set(key, value, ttl)
        return True

    async def touch(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        expiry = self._expiry(ttl)
        self._values[key] = (entry[0], expiry)
        if expiry is not None:
            heapq.heappush(self._expiries, (expiry, key))
            self._expire()
        return True

    async def delete(self, key: str) -> None:
        self._drop(key)

    async def pop(self, key: str) -> bytes | None:
        entry = self._live(key)
        self._drop(key)
        return None if entry is None else entry[0]

    async def take(self, key: str, rate: float, burst: float) -> float:
        now = self._clock()
        entry = self._live(key)
        tokens, at = (float(v) for v in entry[0].split(b" ")) if entry else (burst, now)
        left, wait = take_from(tokens, at, now, rate, burst)
        self._put(key, f"{left} {now}".encode(), now + burst / rate + 1)
        return wait

    def __len__(self) -> int:
        return len(self._values)


def make_state(redis_url: str | None) -> StateStore:
    """The configured store: Redis at ``redis_url``, else in memory (nothing connects yet)."""
    return MemoryStateStore() if redis_url is None else RedisStateStore.from_url(redis_url)


def unreachable(redis_url: str) -> str | None:
    """Why the Redis at ``redis_url`` cannot be used, in a line naming it and what to do; None
    where it answers. Asked before the server starts, so that a wrong address stops it with one
    line, not a traceback of its start."""
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        with Redis.from_url(redis_url, socket_connect_timeout=3, socket_timeout=3) as client:
            client.ping()
    except (RedisError, ValueError, OSError) as error:
        return (
            f"Redis for shared state is not reachable at {redis_url} ({error}): start it, give "
            "--redis the address it listens on, or leave --redis out for state in memory (one "
            "process)"
        )
    return None


@contextlib.asynccontextmanager
async def state_in_use(state: StateStore) -> AsyncIterator[None]:
    """While the server runs: a Redis store is reached at once (a wrong URL stops the start with
    a clear error, not the first call) and closed at the end."""
    if not isinstance(state, RedisStateStore):
        yield
        return
    try:
        await state.client.ping()
    except Exception as error:
        await state.close()
        raise SystemExit(f"omds-ld: Redis for shared state is not reachable: {error}") from None
    try:
        yield
    finally:
        await state.close()


class RedisStateStore:
    """The state store shared by every replica that names the same Redis (keys under a prefix).

    Every operation is one atomic Redis command: ``add`` is ``SET NX``, so of two replicas that
    claim one idempotency key at once exactly one wins.
    """

    def __init__(self, client: Redis, prefix: str = "omds-ld:") -> None:
        self.client = client
        self.prefix = prefix

    @classmethod
    def from_url(cls, url: str, prefix: str = "omds-ld:", timeout: float = 2.0) -> RedisStateStore:
        from redis.asyncio import Redis

        # a Redis that went away fails a call within the timeout instead of holding it
        return cls(
            Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout), prefix
        )

    async def close(self) -> None:
        await self.client.aclose()

    @staticmethod
    def _ms(ttl: float | None) -> int | None:
        return None if ttl is None else max(1, int(ttl * 1000))

    async def _run(self, command: Awaitable[T]) -> T:
        from redis.exceptions import RedisError

        try:
            return await command
        except RedisError as error:
            raise StateUnavailable(f"Redis: {type(error).__name__}: {error}") from None

    async def get(self, key: str) -> bytes | None:
        return _bytes(await self._run(self.client.get(self.prefix + key)))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        values = await self._run(self.client.mget([self.prefix + key for key in keys]))
        return [_bytes(value) for value in values]

    async def get_and_touch(self, key: str, ttl: float) -> bytes | None:
        return _bytes(await self._run(self.client.getex(self.prefix + key, px=self._ms(ttl))))

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        await self._run(self.client.set(self.prefix + key, value, px=self._ms(ttl)))

    async def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        command = self.client.set(self.prefix + key, value, px=self._ms(ttl), nx=True)
        return bool(await self._run(command))

    async def touch(self, key: str, ttl: float) -> bool:
        return bool(await self._run(self.client.pexpire(self.prefix + key, self._ms(ttl) or 1)))

    async def delete(self, key: str) -> None:
        await self._run(self.client.delete(self.prefix + key))

    async def pop(self, key: str) -> bytes | None:
        return _bytes(await self._run(self.client.getdel(self.prefix + key)))

    async def take(self, key: str, rate: float, burst: float) -> float:
        now = time.time()  # replicas share the bucket: wall-clock time, not a process's own
        command = self.client.eval(_TAKE, 1, self.prefix + key, rate, burst, now)
        return float(await self._run(command))


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
