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

from omds_ld.mcp.condense import answer_of
from tests.conftest import start_redis
from tests.insurer.test_bad_input import PRODUCT
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client
from tests.servers import ExampleServer, McpServer, free_port

ROUNDS = 15
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


def _kill_during_writes(
    server: ExampleServer,
    prepare: Any,
    write: Any,
    count: Any,
    window: float,
    rounds: int = ROUNDS,
) -> tuple[list[Any], dict[str, int]]:
    """Rounds of one write each, the interface killed within it (SIGKILL) and started again:
    ``prepare(client)`` makes what the write needs, ``write(client, it, key)`` sends it,
    ``count(client, it)`` says how often it acted. An acknowledged write is replayed by the
    retry, every write acts once. Rounds go on until enough kills landed mid-write."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    seen = {"acknowledged before the kill": 0, "killed holding the key, write not committed": 0}
    client = httpx.Client(timeout=10)
    prepared = []
    server.start()
    try:
        for round_ in range(MOST_ROUNDS):
            if (
                round_ >= rounds
                and seen["killed holding the key, write not committed"] >= MID_WRITE
            ):
                break
            key = f"crash-{seed}-{round_}"
            it = prepare(client)
            prepared.append(it)
            thread, got = _in_background(lambda it=it, key=key: write(client, it, key))
            time.sleep(rng.uniform(0.0, window))  # the write takes a few ms: kill within it
            server.kill()
            thread.join(timeout=10)
            first = got[0] if got else None
            acknowledged = isinstance(first, httpx.Response) and first.status_code == 201
            seen["acknowledged before the kill"] += acknowledged
            with sqlite3.connect(server.database) as db:  # what the crash left behind
                held = db.execute(
                    "SELECT count(*) FROM idempotency WHERE key=? AND state='in-progress'", (key,)
                ).fetchone()[0]
            seen["killed holding the key, write not committed"] += held
            server.start()
            retry = _retry_until_done(
                lambda it=it, key=key: write(client, it, key), time.monotonic() + LEASE + 5
            )
            assert retry.status_code in (200, 201), (round_, retry.text)
            if acknowledged:
                assert retry.headers.get("Idempotency-Replayed") == "true", round_
            assert count(client, it) == 1, f"round {round_}: applied twice"
    finally:
        server.stop()
        client.close()
    print(f"{len(prepared)} rounds: {seen}")
    assert seen["killed holding the key, write not committed"] >= MID_WRITE, (
        f"only {seen} in {len(prepared)} rounds: the kills did not land mid-write"
    )
    with sqlite3.connect(server.database) as db:
        stuck = db.execute(
            "SELECT count(*) FROM idempotency WHERE state='in-progress' AND lease_until<?",
            (time.time(),),
        ).fetchone()[0]
    assert stuck == 0, "a key was left in progress past its lease"
    return prepared, seen


def _crash_server(tmp_path: Path) -> ExampleServer:
    return ExampleServer(
        tmp_path / "crash.sqlite3", extra_args=["--idempotency-lease-seconds", str(LEASE)]
    )


def test_killed_interface_loses_no_acknowledged_write_and_acts_once(tmp_path: Path) -> None:
    server = _crash_server(tmp_path)
    api = server.api("pfefferminzia")

    def new_case(client: httpx.Client) -> str:
        case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT})
        return str(case.json()["bc:caseId"])

    def add_vehicle(client: httpx.Client, case_id: str, key: str) -> httpx.Response:
        return client.post(
            f"{api}/calculations/{case_id}/risk-objects", json=SKODA,
            headers={"Idempotency-Key": key},
        )  # fmt: skip

    def vehicles(client: httpx.Client, case_id: str) -> int:
        draft = client.get(f"{api}/calculations/{case_id}").json()["bc:draft"]
        return len(draft["p:hasRiskObject"])

    # the write takes a few ms (its SHACL validation among them): kill within it
    cases, _ = _kill_during_writes(server, new_case, add_vehicle, vehicles, window=0.012)
    with sqlite3.connect(server.database) as db:
        stored = {row[0]: row[1] for row in db.execute("SELECT case_id, draft FROM cases")}
    assert set(cases) == set(stored), "an acknowledged case was lost"
    for case_id in cases:  # every write present once, after the last restart too
        assert len(json.loads(stored[case_id])["riskObjects"]) == 1


def test_killed_interface_applies_for_an_offer_once_and_loses_no_application(
    tmp_path: Path,
) -> None:
    """createApplication: kill -9 mid-write; nothing acknowledged is lost, none is made twice,
    no key is left stuck."""
    from tests.mcp.applications import PAYMENT, PERSON, with_receipt

    server = _crash_server(tmp_path)
    api = server.api("pfefferminzia")

    def new_offer(client: httpx.Client) -> dict[str, Any]:
        case_id = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()[
            "bc:caseId"
        ]
        client.post(f"{api}/calculations/{case_id}/risk-objects", json=SKODA)
        client.post(f"{api}/calculations/{case_id}/premium")
        offer = client.post(f"{api}/calculations/{case_id}/offers").json()
        return {"id": offer["bc:offerId"], "body": with_receipt(server, {
            "bc:policyholder": PERSON, "bc:payment": PAYMENT,
            "bc:startDate": offer["bc:insurerToday"],
            "bc:consent": {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person",
                           "bc:consentedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "bc:offerDigest": offer["bc:offerDigest"]},
        })}  # fmt: skip

    def apply(client: httpx.Client, offer: dict[str, Any], key: str) -> httpx.Response:
        return client.post(
            f"{api}/offers/{offer['id']}/applications", json=offer["body"],
            headers={"Idempotency-Key": key},
        )  # fmt: skip

    def applications(client: httpx.Client, offer: dict[str, Any]) -> int:
        return len(client.get(f"{api}/offers/{offer['id']}/applications").json()["bc:application"])

    offers, _ = _kill_during_writes(server, new_offer, apply, applications, window=0.008, rounds=12)
    with sqlite3.connect(server.database) as db:
        made = dict(db.execute("SELECT offer_id, count(*) FROM applications GROUP BY offer_id"))
    assert made == {offer["id"]: 1 for offer in offers}, "an application was lost or made twice"


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
                acknowledged = answer_of(first)["case"]["caseId"]
            else:
                unanswered += 1
            deadline = time.monotonic() + 1 + 2 + 5  # the timeout, the lease margin, and slack
            while True:
                retry = asyncio.run(create(other, key))
                problem = answer_of(retry).get("problem") or {}
                in_progress = str(problem.get("type", "")).endswith("request-in-progress")
                if not (retry.is_error and in_progress) or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert not retry.is_error, (round_, retry.content[0].text)
            case_id = answer_of(retry)["case"]["caseId"]
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
