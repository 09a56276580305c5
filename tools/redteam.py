"""Fuzz the example server's MCP endpoints as an attacker would, and count what must stay zero.

Random tool calls in both protocol eras (a 2025-11-25 session, and 2026-07-28 requests of their
own): every tool of every insurer, and names no server lists, with arguments of random shape
(missing, wrong types, huge strings, hostile characters, deep nesting, other cases' ids).
Against ``omds-ld serve`` as a process on its own SQLite file. Prints, per era: calls, HTTP 5xx,
answers that are no JSON-RPC, tool errors, and calls that changed the store although they were
refused (a row of the store that changed under a refused call). Run from the repository:
``.venv/bin/python tools/redteam.py [--calls N] [--seed S]``. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.servers import ExampleServer  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "redteam", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
NASTY = ["", " ", "\u0000", "\ud800", "a" * 70_000, "../../etc/passwd", "<script>1</script>",
         "' OR 1=1 --", "%00", "\n", "https://evil.example/x", "urn:x", "@context", "{}"]  # fmt: skip


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice(NASTY)
    if kind == 1:
        return rng.randint(-(2**63), 2**63)
    if kind == 2:
        return rng.random() * 10 ** rng.randint(-5, 300)
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 40)))
    if kind == 5:
        return rng.choice(["kraftfahrt-2025", "haushalt-2025", "VehicleShape", "c1", "0" * 20])
    if kind == 6:
        return [value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if kind == 7:
        return {rng.choice(["@type", "p:make", "p:powerKw", "@id", "x"]): value(rng, depth + 1)}
    return {"p:hasRootProduct": rng.choice(["https://pfefferminzia.example/products/kraftfahrt-2025",
                                           value(rng, depth + 1)])}  # fmt: skip


def arguments(rng: random.Random, known: list[str]) -> Any:
    if rng.random() < 0.05:
        return value(rng)  # not even an object
    names = ["caseId", "productId", "shapeId", "offerId", "riskObjectId", "componentId", "body",
             "idempotencyKey", "full", "offset", "limit", rng.choice(known)]  # fmt: skip
    return {rng.choice(names): value(rng) for _ in range(rng.randrange(0, 5))}


def snapshot(server: ExampleServer) -> dict[str, Any]:
    return server.snapshot()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per era")
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(Path(folder) / "fuzz.sqlite3")
        server.start()
        try:
            with httpx.Client(timeout=60) as client:
                for era in ("2025-11-25", "2026-07-28"):
                    counts = {"calls": 0, "5xx": 0, "no JSON-RPC": 0, "tool errors": 0,
                              "refused calls that changed the store": 0}  # fmt: skip
                    for insurer in ("pfefferminzia", "disrupto", "angloamerican"):
                        url = server.mcp(insurer)
                        headers = dict(HEADERS)
                        if era == "2025-11-25":
                            opened = client.post(url, headers=headers, json={
                                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                                "params": {"protocolVersion": era, "capabilities": {},
                                           "clientInfo": {"name": "redteam", "version": "1"}}})  # fmt: skip
                            headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"],
                                        "MCP-Protocol-Version": era}  # fmt: skip
                        listed = client.post(url, headers={**headers, **(
                            {"MCP-Protocol-Version": era, "Mcp-Method": "tools/list"}
                            if era != "2025-11-25" else {})}, json={
                            "jsonrpc": "2.0", "id": 1, "method": "tools/list",
                            "params": {"_meta": META} if era != "2025-11-25" else {}})  # fmt: skip
                        tools = [t["name"] for t in listed.json()["result"]["tools"]]
                        for n in range(args.calls // 3):
                            name = rng.choice([*tools, "noSuchTool", "x" * rng.randrange(1, 300)])
                            params: dict[str, Any] = {
                                "name": name,
                                "arguments": arguments(rng, tools),
                            }
                            call_headers = dict(headers)
                            if era != "2025-11-25":
                                params["_meta"] = META
                                call_headers |= {
                                    "MCP-Protocol-Version": era,
                                    "Mcp-Method": "tools/call",
                                    "Mcp-Name": name,
                                }
                            body = json.dumps(
                                {
                                    "jsonrpc": "2.0",
                                    "id": n + 2,
                                    "method": "tools/call",
                                    "params": params,
                                }
                            )
                            before = snapshot(server)
                            answer = client.post(
                                url,
                                headers=call_headers,
                                content=body.encode("utf-8", "surrogatepass"),
                            )
                            counts["calls"] += 1
                            if answer.status_code >= 500:
                                counts["5xx"] += 1
                                continue
                            try:
                                message = answer.json()
                            except ValueError:
                                counts["no JSON-RPC"] += 1
                                continue
                            result = message.get("result") or {}
                            refused = "error" in message or result.get("isError")
                            if refused:
                                counts["tool errors"] += 1
                                if snapshot(server) != before:
                                    counts["refused calls that changed the store"] += 1
                    print(f"{era}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
