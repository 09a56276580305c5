"""Both state stores keep the same promises: the pipeline cannot tell which one it runs on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from omds_ld.mcp.state import MemoryStateStore, RedisStateStore, StateStore
from tests.servers import RedisServer

Check = Callable[[StateStore], Awaitable[None]]


@pytest.fixture(params=["memory", "redis"])
def run_on(request: pytest.FixtureRequest) -> Callable[[Check], None]:
    """Runs a check against a fresh store of each kind (Redis: a real server, its own prefix)."""

    @asynccontextmanager
    async def store() -> AsyncIterator[StateStore]:
        if request.param == "memory":
            yield MemoryStateStore()
            return
        redis: RedisServer = request.getfixturevalue("redis_server")
        shared = RedisStateStore.from_url(redis.url, prefix=f"test-{uuid.uuid4().hex}:")
        try:
            yield shared
        finally:
            await shared.close()

    def run(check: Check) -> None:
        async def main() -> None:
            async with store() as state:
                await check(state)

        asyncio.run(main())

    return run


def test_a_value_lives_for_its_time_to_live(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        await state.set("a", b"1", ttl=0.3)
        await state.set("forever", b"2")
        assert await state.get("a") == b"1"
        await asyncio.sleep(0.45)
        assert await state.get("a") is None
        assert await state.get("forever") == b"2"

    run_on(check)


def test_of_concurrent_claims_exactly_one_wins(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        claims = await asyncio.gather(*(state.add("idem:k", b"%d" % i, 60) for i in range(20)))
        assert claims.count(True) == 1
        winner = claims.index(True)
        assert await state.get("idem:k") == b"%d" % winner

    run_on(check)


def test_touch_extends_a_live_key_only(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        await state.set("session:s", b"pfefferminzia", ttl=0.3)
        assert await state.touch("session:s", 5)
        await asyncio.sleep(0.45)
        assert await state.get("session:s") == b"pfefferminzia"
        assert not await state.touch("session:gone", 5)
        assert await state.get("session:gone") is None

    run_on(check)


def test_deleted_keys_are_gone(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        await state.set("gen:x", b"a1", 5)
        await state.delete("gen:x")
        assert await state.get("gen:x") is None

    run_on(check)


def test_of_callers_popping_one_key_exactly_one_gets_it(run_on: Callable[[Check], None]) -> None:
    """A yes kept for one call is taken by one call, however many race for it."""

    async def check(state: StateStore) -> None:
        await state.set("confirm:given:d", b"yes", 60)
        taken = await asyncio.gather(*(state.pop("confirm:given:d") for _ in range(20)))
        assert taken.count(b"yes") == 1 and taken.count(None) == 19
        assert await state.get("confirm:given:d") is None
        assert await state.pop("confirm:given:never") is None

    run_on(check)


def test_redis_stores_with_other_prefixes_share_nothing(redis_server: RedisServer) -> None:
    async def check() -> tuple[bytes | None, bytes | None]:
        first = RedisStateStore.from_url(redis_server.url, prefix="one:")
        second = RedisStateStore.from_url(redis_server.url, prefix="two:")
        try:
            await first.set("k", b"1")
            return await first.get("k"), await second.get("k")
        finally:
            await first.close()
            await second.close()

    assert asyncio.run(check()) == (b"1", None)


def test_several_keys_come_in_one_call_in_their_order(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        await state.set("gen:x", b"3")
        await state.set("cache:x", b"entry", ttl=60)
        assert await state.get_many(["gen:x", "missing", "cache:x"]) == [b"3", None, b"entry"]

    run_on(check)


def test_reading_a_binding_keeps_it_alive(run_on: Callable[[Check], None]) -> None:
    async def check(state: StateStore) -> None:
        await state.set("session:s", b"disrupto", ttl=0.3)
        assert await state.get_and_touch("session:s", 5) == b"disrupto"
        await asyncio.sleep(0.45)
        assert await state.get("session:s") == b"disrupto"
        assert await state.get_and_touch("session:gone", 5) is None
        assert await state.get("session:gone") is None

    run_on(check)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_memory_store_lets_go_of_what_expired_as_time_goes_on() -> None:
    """25 000 short-lived entries (one flow each of an agent that then left), well below any
    count that would trigger a sweep: once their time is up the store holds none of them."""
    clock = _Clock()
    state = MemoryStateStore(clock=clock)

    async def main() -> None:
        for n in range(25_000):
            await state.set(f"cache:x:{n}", b"v" * 200, ttl=30)
            clock.now += 0.01  # 250 s in all: the first ones expired long ago
        assert len(state) < 3_100, len(state)  # the last 30 s of them, no more
        clock.now += 31
        await state.set("one-more", b"v")
        assert len(state) == 1

    asyncio.run(main())


def test_the_memory_store_never_holds_more_than_its_bytes() -> None:
    """Entries without an end (or living long) still cannot grow the process without bound:
    past ``max_bytes`` the oldest written go first, the newest are kept."""
    state = MemoryStateStore(max_bytes=1_000_000)

    async def main() -> None:
        for n in range(10_000):
            await state.set(f"key:{n}", b"v" * 1000)
            assert state.bytes <= state.max_bytes
        assert await state.get("key:9999") == b"v" * 1000
        assert await state.get("key:0") is None
        # a key touched again and again leaves no pile of outdated expiries behind
        await state.set("session", b"s", ttl=60)
        for _ in range(50_000):
            await state.get_and_touch("session", 60)
        assert len(state._expiries) <= 2 * len(state) + 1024

    asyncio.run(main())
