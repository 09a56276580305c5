"""Errors are tool errors with the norm's problem type, their kind and what is still admissible."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, connect, follow, stdio_parameters, step
from tests.servers import ExampleServer, free_port

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


def problem_of(result: Any) -> dict[str, Any]:
    assert result.is_error, "expected a tool error"
    problem: dict[str, Any] = answer_of(result)["problem"]
    assert problem["type"].startswith("https://w3id.org/omds-ld/problems/")
    assert answer_of(result)["nextSteps"], "an error lists what is still admissible"
    assert "Still admissible" in result.content[0].text
    return problem


# what the MCP servers read of an insurer by themselves, every minute: no tool call's request
BACKGROUND = ("/process-knowledge", "/openapi.json")


def insurer_calls(server: ExampleServer) -> list[dict[str, Any]]:
    """The requests the insurers' interfaces got for calls (not the MCP endpoints beside them,
    nor what the MCP servers read in the background at any moment)."""
    return [
        e for e in server.access_entries()
        if "/api/" in e["path"] and not e["path"].endswith(BACKGROUND)
    ]  # fmt: skip


def test_invalid_body_never_reaches_the_insurer(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> dict[str, Any]:
        async with connect("http-2025-11-25", server, "pfefferminzia", tmp_path / "l") as client:
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case_id = answer_of(case)["case"]["caseId"]
            before = insurer_calls(server)
            refused = await client.call_tool(
                "createRiskObject",
                {"caseId": case_id, "body": {**SKODA, "p:powerKw": {"value": 110}}},
            )
            assert insurer_calls(server) == before, "the insurer was called"
            return problem_of(refused)

    problem = asyncio.run(run())
    assert problem["type"].endswith("/invalid-body")
    assert problem["kind"] == "invalid input"
    assert [e["pointer"] for e in problem["errors"]] == ["/body/p:powerKw"]


def test_unknown_product_is_an_error_listing_the_products(
    server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> Any:
        async with connect("stdio", server, "angloamerican", tmp_path / "l") as client:
            return await client.call_tool("readProduct", {"productId": "motor-2023"})

    result = asyncio.run(run())
    problem = problem_of(result)
    assert problem["type"].endswith("/unknown-product")
    assert problem["kind"] == "not found"
    assert any("home-2024" in k for k in problem["known"])
    assert any("motor-select-2024" in k for k in problem["known"])


def test_unknown_case_is_an_error_listing_the_sessions_cases(
    server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> tuple[str, Any]:
        async with connect("http-2025-11-25", server, "pfefferminzia", tmp_path / "l") as client:
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case_id = answer_of(case)["case"]["caseId"]
            wrong = case_id[:-3] + ("000" if not case_id.endswith("000") else "111")
            return case_id, await client.call_tool("readCalculation", {"caseId": wrong})

    case_id, result = asyncio.run(run())
    problem = problem_of(result)
    assert problem["type"].endswith("/not-found")
    assert problem["known"] == [f"{case_id} <{PRODUCT}>"]
    assert f"Known: {case_id} <{PRODUCT}>" in result.content[0].text


@pytest.mark.parametrize(
    ("name", "slug", "kind"),
    [
        ("not found", "not-found", "not found"),
        ("conflict", "operation-not-admissible", "conflict"),
        ("shape", "shape-violation", "invalid input"),
        ("incomplete", "draft-not-conforming", "conflict"),
    ],
)
def test_insurer_problems_arrive_as_tool_errors(
    name: str, slug: str, kind: str, server: ExampleServer, tmp_path: Path
) -> None:
    async def run() -> Any:
        async with connect("http-2026-07-28", server, "pfefferminzia", tmp_path / "l") as client:
            case = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case_id = answer_of(case)["case"]["caseId"]
            if name == "not found":
                return await client.call_tool("readCalculation", {"caseId": "0000000000"})
            if name == "conflict":
                return await client.call_tool(
                    "excludeComponent", {"caseId": case_id, "componentId": "kfz-haftpflicht"}
                )
            if name == "shape":
                return await client.call_tool(
                    "createRiskObject", {"caseId": case_id, "body": {**SKODA, "p:powerKw": 9000}}
                )
            return await client.call_tool("calculatePremium", {"caseId": case_id})

    result = asyncio.run(run())
    problem = problem_of(result)
    assert problem["type"].endswith("/" + slug)
    assert problem["kind"] == kind


def test_unauthorized_is_its_own_kind(server: ExampleServer, tmp_path: Path) -> None:
    async def run() -> Any:
        parameters = stdio_parameters(server, "pfefferminzia", tmp_path / "l", ["--token", "wrong"])
        async with Client(parameters, mode="legacy") as client:
            return await client.call_tool("listProducts", {})

    problem = problem_of(asyncio.run(run()))
    assert problem["type"].endswith("/unauthorized")
    assert problem["kind"] == "unauthorized"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A real TCP listener that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


@pytest.mark.parametrize("failure", ["unreachable", "timeout"])
def test_unavailable_insurer_is_temporary(failure: str, silent_port: int, tmp_path: Path) -> None:
    port = free_port() if failure == "unreachable" else silent_port
    api = f"http://127.0.0.1:{port}/omds-ld/insurers/pfefferminzia/api"
    log = tmp_path / "requests.jsonl"

    async def run() -> Any:
        parameters = stdio_parameters(ExampleServer(tmp_path / "unused"), "pfefferminzia", log)
        parameters.args[parameters.args.index("--api") + 1] = api
        parameters.args.extend(["--timeout-seconds", "1"])
        async with Client(parameters, mode="legacy") as client:
            return await client.call_tool("listProducts", {})

    problem = problem_of(asyncio.run(run()))
    # never reached: the MCP server does not know the insurer's tools yet; it says why
    assert problem["type"].endswith("/service-unavailable")
    assert problem["kind"] == "temporary"
    why = "did not answer within 1.0 s" if failure == "timeout" else "cannot be reached"
    assert why in problem["detail"]
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["outcome"] == "temporary"


def test_retried_create_with_the_same_key_acts_once(server: ExampleServer, tmp_path: Path) -> None:
    key = str(uuid.uuid4())

    async def run() -> tuple[Any, Any]:
        async with connect("http-2025-11-25", server, "pfefferminzia", tmp_path / "l") as client:
            arguments = {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}
            first = await client.call_tool("createCalculation", arguments)
            second = await client.call_tool("createCalculation", arguments)
            return first, second

    before = len(server.snapshot()["cases"])
    first, second = asyncio.run(run())
    assert not first.is_error and not second.is_error
    assert answer_of(first)["case"] == answer_of(second)["case"]
    assert len(server.snapshot()["cases"]) == before + 1


def test_every_call_is_in_the_request_log_failures_too(
    server: ExampleServer, tmp_path: Path
) -> None:
    log = tmp_path / "requests.jsonl"

    async def run() -> None:
        async with connect("stdio", server, "pfefferminzia", log) as client:
            products = await client.call_tool("listProducts", {})
            await follow(client, step(products, "createCalculation"))
            await client.call_tool("readCalculation", {"caseId": "0000000000"})
            await client.call_tool("createRiskObject", {"caseId": "x", "body": {"@type": 7}})
            await client.call_tool("noSuchTool", {})

    asyncio.run(run())
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["tool"] for e in entries] == [
        "listProducts", "createCalculation", "readCalculation", "createRiskObject", "noSuchTool",
    ]  # fmt: skip
    assert [e["outcome"] for e in entries] == ["ok", "ok", "tool-error", "refused", "refused"]
    for entry in entries:
        assert {"time", "insurer", "session", "tool", "outcome", "durationMs", "provenance"} <= set(
            entry
        )
    assert entries[1]["body"] == ["p:hasRootProduct"]
    assert PRODUCT not in log.read_text(), "the log keeps field names, not values"
