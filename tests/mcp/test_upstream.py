"""Reads go through one cache shared by all tools; writes make sure no stale read is served."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from omds_ld.mcp.condense import answer_of
from omds_ld.mcp.state import MemoryStateStore
from omds_ld.mcp.transport import AsgiTransport
from omds_ld.mcp.upstream import CALLER, Caller, Upstream
from omds_ld.norm import load_norm
from omds_ld.norm.catalogue import _data_text
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, connect, stdio_parameters
from tests.mcp.test_errors import PRODUCT, insurer_calls
from tests.servers import ExampleServer


def test_a_repeated_read_comes_from_the_cache(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> tuple[bool, bool]:
        async with connect("stdio", server, "pfefferminzia", tmp_path / "l") as client:
            first = await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
            before = len(insurer_calls(server))
            second = await client.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
            assert len(insurer_calls(server)) == before, "a fresh cached read asked the insurer"
            return (
                answer_of(first)["provenance"]["fromCache"],
                answer_of(second)["provenance"]["fromCache"],
            )

    assert asyncio.run(run()) == (False, True)


def test_a_read_after_a_write_is_never_stale(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> list[int]:
        async with connect("stdio", server, "pfefferminzia", tmp_path / "l") as client:
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case_id = answer_of(case)["case"]["caseId"]
            counts = []
            for _ in range(2):
                read = await client.call_tool("readCalculation", {"caseId": case_id})
                counts.append(len(answer_of(read)["riskObjects"]))
            await client.call_tool("createRiskObject", {"caseId": case_id, "body": SKODA})
            read = await client.call_tool("readCalculation", {"caseId": case_id})
            counts.append(len(answer_of(read)["riskObjects"]))
            return counts

    assert asyncio.run(run()) == [0, 0, 1]


def test_tools_follow_another_version_of_the_norm(server: ExampleServer, tmp_path: Path) -> None:
    norm = yaml.safe_load(_data_text("openapi.yaml"))
    del norm["paths"]["/shapes/{shapeId}"]
    norm["paths"]["/products"]["get"]["description"] = "List the products (version 2 of the norm)."
    openapi = tmp_path / "openapi-v2.yaml"
    openapi.write_text(yaml.safe_dump(norm))

    async def run() -> dict[str, str]:
        parameters = stdio_parameters(
            server, "disrupto", tmp_path / "l", ["--openapi", str(openapi)]
        )
        async with Client(parameters, mode="legacy") as client:
            return {t.name: t.description or "" for t in (await client.list_tools()).tools}

    listed = asyncio.run(run())
    assert "readShape" not in listed
    assert listed["listProducts"] == "List the products (version 2 of the norm)."


def test_a_write_makes_reads_below_its_resource_ask_again_and_no_others() -> None:
    asked: list[str] = []

    async def insurer(scope: Any, receive: Any, send: Any) -> None:
        """Answers every read as fresh for a minute, and counts what it is asked."""
        await receive()
        asked.append(f"{scope['method']} {scope['path']}")
        body = json.dumps({"@type": "bc:BusinessCase", "answer": len(asked)}).encode()
        headers = [(b"cache-control", b"max-age=60"), (b"content-type", b"application/ld+json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    norm = load_norm()
    read, write = norm.operation("readCalculation"), norm.operation("createRiskObject")
    upstream = Upstream(
        name="t", api_url="http://insurer.test/api",
        transport=AsgiTransport(insurer, timeout=5), state=MemoryStateStore(),
    )  # fmt: skip

    async def run() -> list[bool]:
        def read_case(case: str) -> Any:
            return upstream.send(read, {"caseId": case}, {}, None, None)

        first, again, other = await read_case("c1"), await read_case("c1"), await read_case("c2")
        await upstream.send(write, {"caseId": "c1"}, {}, {"p:make": "Skoda"}, "key-1")
        after, other_after = await read_case("c1"), await read_case("c2")
        return [r.from_cache for r in (first, again, other, after, other_after)]

    assert asyncio.run(run()) == [False, True, False, False, True]
    assert asked == [
        "GET /api/calculations/c1", "GET /api/calculations/c2",
        "POST /api/calculations/c1/risk-objects", "GET /api/calculations/c1",
    ]  # fmt: skip


def test_a_read_of_personal_data_is_never_kept_whatever_the_insurer_says() -> None:
    """readApplication carries personal data (x-omds-ld personal): an insurer that forgets
    no-store and lets it be kept a minute still has it asked for every time, and nothing of it
    is in the state store."""
    asked: list[str] = []

    async def insurer(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        asked.append(scope["path"])
        body = json.dumps({"@type": "bc:Application", "p:familyName": "Berger"}).encode()
        headers = [(b"cache-control", b"max-age=60"), (b"content-type", b"application/ld+json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    state = MemoryStateStore()
    upstream = Upstream(
        name="t", api_url="http://insurer.test/api",
        transport=AsgiTransport(insurer, timeout=5), state=state,
    )  # fmt: skip
    read = load_norm().operation("readApplication")
    assert read.personal

    async def run() -> list[bool]:
        answers = [await upstream.send(read, {"applicationId": "a1"}, {}, None, None)
                   for _ in range(2)]  # fmt: skip
        return [a.from_cache for a in answers]

    assert asyncio.run(run()) == [False, False]
    assert asked == ["/api/applications/a1", "/api/applications/a1"]
    assert not [key for key in state._values if key.startswith("cache:")]


def test_one_brokers_cached_read_is_never_served_to_another() -> None:
    """An insurer that lets each broker keep its own answer a minute: alpha's kept read serves
    alpha again, and beta is asked for at the insurer as beta, never given alpha's."""
    asked: list[str] = []

    async def insurer(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        who = dict(scope["headers"]).get(b"authorization", b"").decode()
        asked.append(who)
        body = json.dumps({"@type": "bc:BusinessCase", "for": who}).encode()
        headers = [(b"cache-control", b"private, max-age=60"),
                   (b"content-type", b"application/ld+json")]  # fmt: skip
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    read = load_norm().operation("readCalculation")
    upstream = Upstream(
        name="t", api_url="http://insurer.test/api",
        transport=AsgiTransport(insurer, timeout=5), state=MemoryStateStore(),
    )  # fmt: skip

    def as_broker(subject: str) -> Caller:
        async def credentials() -> dict[str, str]:
            return {"Authorization": f"Bearer {subject}"}

        return Caller(subject, credentials)

    async def read_as(subject: str) -> Any:
        token = CALLER.set(as_broker(subject))
        try:
            return await upstream.send(read, {"caseId": "c1"}, {}, None, None)
        finally:
            CALLER.reset(token)

    async def run() -> list[Any]:
        return [await read_as("alpha"), await read_as("alpha"), await read_as("beta")]

    alpha, again, beta = asyncio.run(run())
    assert not alpha.from_cache and alpha.body["for"] == "Bearer alpha"
    assert again.from_cache and again.body["for"] == "Bearer alpha"
    assert not beta.from_cache and beta.body["for"] == "Bearer beta"
    assert asked == ["Bearer alpha", "Bearer beta"]
