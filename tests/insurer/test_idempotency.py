"""Idempotency-Key: a retry acts once, another body is refused, a concurrent duplicate waits its turn."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx

from tests.insurer.test_bad_input import PRODUCT
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer


def cases_count(server: ExampleServer) -> int:
    return len(server.snapshot()["cases"])


def test_retry_with_the_same_key_replays_and_acts_once(
    client: httpx.Client, server: ExampleServer
) -> None:
    api = server.api("pfefferminzia")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    before = cases_count(server)
    first = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=key)
    second = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=key)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["Idempotency-Replayed"] == "true"
    assert cases_count(server) == before + 1


def test_retried_edit_acts_once(client: httpx.Client, server: ExampleServer) -> None:
    api = server.api("pfefferminzia")
    case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()
    key = {"Idempotency-Key": str(uuid.uuid4())}
    url = f"{api}/calculations/{case['bc:caseId']}/risk-objects"
    first = client.post(url, json=SKODA, headers=key)
    second = client.post(url, json=SKODA, headers=key)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    stored = client.get(f"{api}/calculations/{case['bc:caseId']}").json()
    assert len(stored["bc:draft"]["p:hasRiskObject"]) == 1


def test_same_key_with_another_body_is_refused(client: httpx.Client, server: ExampleServer) -> None:
    api = server.api("angloamerican")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    home = "https://angloamerican.example/products/home-2024"
    motor = "https://angloamerican.example/products/motor-select-2024"
    client.post(f"{api}/calculations", json={"p:hasRootProduct": home}, headers=key)
    before = server.snapshot()
    other = client.post(f"{api}/calculations", json={"p:hasRootProduct": motor}, headers=key)
    assert other.status_code == 422
    assert other.json()["type"].endswith("/idempotency-key-reused")
    assert server.snapshot() == before


def test_rejected_request_frees_its_key(client: httpx.Client, server: ExampleServer) -> None:
    api = server.api("pfefferminzia")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    wrong = client.post(
        f"{api}/calculations", json={"p:hasRootProduct": PRODUCT + "x"}, headers=key
    )
    assert wrong.status_code == 404
    right = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=key)
    assert right.status_code == 201


def test_create_without_key_acts_once_per_request(
    client: httpx.Client, server: ExampleServer
) -> None:
    api = server.api("pfefferminzia")
    before = cases_count(server)
    ids = {
        client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()["bc:caseId"]
        for _ in range(3)
    }
    assert len(ids) == 3
    assert cases_count(server) == before + 3


async def _burst(
    server: ExampleServer, key: str, size: int, sent: list[float], answered: list[float]
) -> list[httpx.Response]:
    """``size`` requests with one key at once; ``sent`` and ``answered`` get when each request
    went out and when each answer came."""
    api = server.api("pfefferminzia")

    async def out(request: httpx.Request) -> None:
        sent.append(time.monotonic())

    async def back(response: httpx.Response) -> None:
        answered.append(time.monotonic())

    hooks = {"request": [out], "response": [back]}
    async with httpx.AsyncClient(timeout=30, event_hooks=hooks) as http:
        return await asyncio.gather(
            *(
                http.post(
                    f"{api}/calculations",
                    json={"p:hasRootProduct": PRODUCT},
                    headers={"Idempotency-Key": key},
                )
                for _ in range(size)
            )
        )


def test_concurrent_duplicates_act_once_and_the_rest_are_replayed_or_get_409(
    server: ExampleServer,
) -> None:
    """Requests with one key at once: one acts, every other gets its answer replayed or is
    refused as in progress (the store's claim; one process carries its requests out one after
    the other, so here they are replays; tests/insurer/test_store.py overlaps claims in threads
    and tests/test_crash.py leaves them to a lease)."""
    for _ in range(3):
        before = cases_count(server)
        sent: list[float] = []
        answered: list[float] = []
        responses = asyncio.run(_burst(server, str(uuid.uuid4()), 16, sent, answered))
        # they were at once: more than one request was out before the first answer came
        assert sum(t < min(answered) for t in sent) > 1, "the requests did not overlap"
        created = [r for r in responses if r.status_code == 201]
        refused = [r for r in responses if r.status_code == 409]
        assert len(created) + len(refused) == len(responses)
        assert all(r.json()["type"].endswith("/idempotency-request-in-progress") for r in refused)
        assert all(r.headers["Retry-After"] == "1" for r in refused)
        assert len({r.json()["bc:caseId"] for r in created}) == 1
        replayed = [r for r in created if r.headers.get("Idempotency-Replayed") == "true"]
        assert len(replayed) == len(created) - 1, "one acted, the others had its answer"
        assert cases_count(server) == before + 1
