"""Nothing acknowledged is lost, nothing is left stuck: writes with idempotency keys against server
processes killed with SIGKILL at random moments and started again.

After every round: a write that was acknowledged is there, a retry with the same key gets it (or,
if nothing was acknowledged, acts once), no write was applied twice, and no key stays in progress
past its lease. Once against the insurer's interface (SQLite), once against two MCP replicas
sharing Redis. The seed is printed, so a failing round can be replayed.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from tests.conftest import start_redis
from tests.insurer.test_bad_input import PRODUCT
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer, McpServer, free_port

ROUNDS = 30
REPLICA_ROUNDS = 12
# a run proves something only if enough kills landed mid-write: rounds go on (up to the most)
# until they did, and the test fails if they never do
MID_WRITE = 3
MOST_ROUNDS = 90
LEASE = 1.0  # the interface's idempotency lease in these tests (default 15 s)


def _in_background(send: Any) -> tuple[threading.Thread, list[Any]]:
    """Send a request in a thread; what it got (an answer, or the error of a killed server)."""
    got: list[Any] = []

    def run() -> None:
        try:
            got.append(send())
        except Exception as error:  # the server was killed under it
            got.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def _retry_until_done(send: Any, deadline: float) -> httpx.Response:
    """A retry with the same key: 409 (in progress) until the dead request's lease lapsed."""
    while True:
        response: httpx.Response = send()
        if response.status_code != 409 or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_killed_interface_loses_no_acknowledged_write_and_acts_once(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    server = ExampleServer(
        tmp_path / "crash.sqlite3", extra_args=["--idempotency-lease-seconds", str(LEASE)]
    )
    server.start()
    api = server.api("pfefferminzia")
    acknowledged: dict[str, int] = {}
    seen = {"acknowledged before the kill": 0, "killed holding the key, write not committed": 0}
    client = httpx.Client(timeout=10)
    cases = []
    try:
        for round_ in range(MOST_ROUNDS):
            if (
                round_ >= ROUNDS
                and seen["killed holding the key, write not committed"] >= MID_WRITE
            ):
                break
            key = f"crash-{seed}-{round_}"
            case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT})
            case_id = case.json()["bc:caseId"]
            cases.append(case_id)

            def add_vehicle(key: str = key, case_id: str = case_id) -> httpx.Response:
                return client.post(
                    f"{api}/calculations/{case_id}/risk-objects",
                    json=SKODA,
                    headers={"Idempotency-Key": key},
                )

            thread, got = _in_background(add_vehicle)
            # the write takes a few ms (its SHACL validation among them): kill within it
            time.sleep(rng.uniform(0.0, 0.012))
            server.kill()
            thread.join(timeout=10)
            first = got[0] if got else None
            if isinstance(first, httpx.Response) and first.status_code == 201:
                acknowledged[key] = round_
                seen["acknowledged before the kill"] += 1
            with sqlite3.connect(server.database) as db:  # what the crash left behind
                held = db.execute(
                    "SELECT count(*) FROM idempotency WHERE key=? AND state='in-progress'", (key,)
                ).fetchone()[0]
            seen["killed holding the key, write not committed"] += held
            server.start()
            retry = _retry_until_done(add_vehicle, time.monotonic() + LEASE + 5)
            assert retry.status_code in (200, 201), (round_, retry.text)
            if key in acknowledged:
                assert retry.headers.get("Idempotency-Replayed") == "true", round_
            vehicles = client.get(f"{api}/calculations/{case_id}").json()["bc:draft"]
            assert len(vehicles["p:hasRiskObject"]) == 1, f"round {round_}: applied twice"
    finally:
        server.stop()
        client.close()
    print(f"{len(cases)} rounds: {seen}")
    assert seen["killed holding the key, write not committed"] >= MID_WRITE, (
        f"only {seen} in {len(cases)} rounds: the kills did not land mid-write"
    )
    with sqlite3.connect(server.database) as db:
        stored = {row[0]: row[1] for row in db.execute("SELECT case_id, draft FROM cases")}
        stuck = db.execute(
            "SELECT count(*) FROM idempotency WHERE state='in-progress' AND lease_until<?",
            (time.time(),),
        ).fetchone()[0]
    assert set(cases) == set(stored), "an acknowledged case was lost"
    for case_id in cases:  # every write present once, after the last restart too
        assert len(json.loads(stored[case_id])["riskObjects"]) == 1
    assert stuck == 0, "a key was left in progress past its lease"


def test_killed_replica_leaves_no_key_stuck_and_acts_once(
    server: ExampleServer, tmp_path: Path
) -> None:
    """Two MCP replicas share Redis; one is killed mid-call, the retry goes to the other."""
    redis = start_redis(tmp_path)
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    config = tmp_path / "mcp.toml"
    config.write_text(
        f'timeout_seconds = 1\n[state]\nredis = "{redis.url}"\n'
        f'[[instance]]\nname = "pfefferminzia"\napi = "{server.api("pfefferminzia")}"\n'
    )
    replicas = [McpServer(config, free_port()), McpServer(config, free_port())]
    cases_before = len(server.snapshot()["cases"])
    for replica in replicas:
        replica.start()
    created: dict[str, str] = {}
    unanswered = 0  # rounds whose call the kill cut off before its answer

    async def create(replica: McpServer, key: str) -> Any:
        async with Client(replica.mcp("pfefferminzia"), mode="2026-07-28") as client:
            return await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}
            )

    try:
        for round_ in range(3 * REPLICA_ROUNDS):
            if round_ >= REPLICA_ROUNDS and unanswered >= 2:
                break
            victim, other = replicas[round_ % 2], replicas[(round_ + 1) % 2]
            key = f"replica-crash-{seed}-{round_}"
            thread, got = _in_background(lambda v=victim, k=key: asyncio.run(create(v, k)))
            time.sleep(rng.uniform(0.0, 0.03))
            victim.kill()
            thread.join(timeout=10)
            first = got[0] if got else None
            acknowledged = None
            if first is not None and not isinstance(first, Exception) and not first.is_error:
                acknowledged = first.structured_content["case"]["caseId"]
            else:
                unanswered += 1
            deadline = time.monotonic() + 1 + 2 + 5  # the timeout, the lease margin, and slack
            while True:
                retry = asyncio.run(create(other, key))
                problem = (retry.structured_content or {}).get("problem") or {}
                in_progress = str(problem.get("type", "")).endswith("request-in-progress")
                if not (retry.is_error and in_progress) or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert not retry.is_error, (round_, retry.content[0].text)
            case_id = retry.structured_content["case"]["caseId"]
            if acknowledged:
                assert case_id == acknowledged, f"round {round_}: the retry acted again"
            created[key] = case_id
            victim.start()
        import redis as redis_client

        keys = redis_client.Redis.from_url(redis.url)
        try:
            ttls = {k: keys.ttl(k) for k in keys.scan_iter()}
        finally:
            keys.close()
    finally:
        for replica in replicas:
            replica.stop()
        redis.stop()
    rounds = len(created)
    print(f"{rounds} rounds, {unanswered} calls cut off by the kill")
    assert unanswered >= 2, f"only {unanswered} of {rounds} calls were cut off by the kill"
    assert len(set(created.values())) == rounds
    cases = server.snapshot()["cases"]
    assert len(cases) - cases_before == rounds, "one case per key: none made twice"
    assert set(created.values()) <= {row[1] for row in cases}
    assert ttls and all(ttl > 0 for ttl in ttls.values()), "every key in Redis has a TTL"
