"""What one request to the insurer's interface costs the MCP server, by HTTP client, in one run.

``omds-ld mcp`` reaches the interface through aiohttp's client session
(``omds_ld.mcp.http_client``: its head and body bounds set, gzip decoded in bounded steps). Its
baselines in the same run, against the same ``omds-ld serve`` on a free loopback port:
httpcore's connection pool and httpx's client (what most Python MCP servers use, FastMCP's
OpenAPI server among them). docs/insurer-operator.md has the figures of the HTTP/1.1 client of
our own it replaced, measured in the same session. Each arm reads the
same product list (GET, ~2 KB of JSON-LD), the same case (~12 KB) and creates a case (POST)
with keep-alive; it prints p50 wall time and the client's own CPU per request.

Run: ``.venv/bin/python benchmarks/upstream.py [--requests N]``. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpcore
import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
# the repository first, this folder not at all: its mcp.py would stand for the MCP SDK
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

from omds_ld.mcp.http_client import HttpTransport  # noqa: E402
from tests.servers import ExampleServer  # noqa: E402

Send = Callable[[str, str, bytes | None], Awaitable[bytes]]
HEADERS = {"accept": "application/ld+json", "content-type": "application/ld+json"}


async def measure(send: Send, calls: list[tuple[str, str, bytes | None]], count: int) -> list[str]:
    cells = []
    for method, url, body in calls:
        for _ in range(30):
            await send(method, url, body)
        samples = []
        cpu = time.process_time()
        for _ in range(count):
            started = time.perf_counter()
            await send(method, url, body)
            samples.append((time.perf_counter() - started) * 1000)
        cpu_ms = (time.process_time() - cpu) / count * 1000
        cells.append(f"{statistics.median(samples):7.2f} {cpu_ms:7.2f}")
    return cells


async def ours(calls: list[tuple[str, str, bytes | None]], count: int) -> list[str]:
    async with HttpTransport(timeout=30) as transport:

        async def send(method: str, url: str, body: bytes | None) -> bytes:
            answer = await transport.request(method, url, HEADERS, body)
            assert answer.status < 300, answer
            return answer.content

        return await measure(send, calls, count)


async def pool(calls: list[tuple[str, str, bytes | None]], count: int) -> list[str]:
    headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    async with httpcore.AsyncConnectionPool() as connections:

        async def send(method: str, url: str, body: bytes | None) -> bytes:
            answer = await connections.request(method, url, headers=headers, content=body)
            assert answer.status < 300, answer
            return answer.content

        return await measure(send, calls, count)


async def client(calls: list[tuple[str, str, bytes | None]], count: int) -> list[str]:
    async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:

        async def send(method: str, url: str, body: bytes | None) -> bytes:
            answer = await http.request(method, url, content=body)
            answer.raise_for_status()
            return answer.content

        return await measure(send, calls, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(Path(folder) / "omds-ld.sqlite3")
        server.start()
        try:
            api = server.api("pfefferminzia")
            listed = httpx.get(f"{api}/products", headers=HEADERS)
            product = listed.json()["p:product"][0]["@id"]
            draft = orjson.dumps({"p:hasRootProduct": product})
            created = httpx.post(f"{api}/calculations", content=draft, headers=HEADERS)
            created.raise_for_status()
            calls = [
                ("GET", f"{api}/products", None),
                ("GET", str(created.url.join(created.headers["location"])), None),
                ("POST", f"{api}/calculations", draft),
            ]
            print(f"one request to the interface, {args.requests} each: p50 wall / client CPU (ms)")
            print(
                f"  {'client':<38} {'list products':>15} {'read a case':>15} {'create a case':>15}"
            )
            for label, arm in (
                ("ours (aiohttp, omds_ld.mcp.http_client)", ours),
                ("httpcore's pool", pool),
                ("httpx's client", client),
            ):
                cells = asyncio.run(arm(calls, args.requests))
                print(f"  {label:<38} " + " ".join(f"{cell:>15}" for cell in cells))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
