"""Latency and throughput of the example insurer's interface, against a baseline in the same run.

Starts ``omds-ld serve`` (one uvicorn worker) on a free loopback port with a fresh SQLite file and
measures, over real HTTP with keep-alive:

- p50/p95/max of calculatePremium (Pfefferminzia, SHACL validation of the whole draft included),
- p50/p95/max of inquireTariff (Disrupto, SHACL included),
- the same for GET /healthz, the baseline: what the HTTP stack alone costs on this machine,
- one validation of the draft in process: pySHACL (the old path, the baseline arm) against the
  compiled constraints that replaced it, with the same report,
- a draft built and checked in process, as a request does: as an rdflib graph (before) against
  the plain triple index the compiled checks read now (``omds_ld.insurer.triples``),
- one check of an application's body in process (policyholder, payment, consent against the
  norm's shapes): pySHACL on the same graph (the baseline arm) against the compiled checks,
- requests per second on the one worker, sequentially and with 8 concurrent clients.

Run: ``.venv/bin/python benchmarks/insurer.py [--requests N]``. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
# the repository first, this folder not at all: its mcp.py would stand for the MCP SDK
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks")]

from tests.insurer.test_flows import SKODA  # noqa: E402
from tests.servers import ExampleServer  # noqa: E402


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(label: str, send: Callable[[], httpx.Response], count: int) -> dict[str, float]:
    for _ in range(20):
        send().raise_for_status()
    samples = []
    started = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        send().raise_for_status()
        samples.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    row = {
        "p50": statistics.median(samples),
        "p95": percentile(samples, 0.95),
        "max": max(samples),
        "rps": count / elapsed,
    }
    print(
        f"  {label:<34} p50 {row['p50']:7.2f} ms   p95 {row['p95']:7.2f} ms   "
        f"max {row['max']:7.2f} ms   {row['rps']:7.0f} req/s"
    )
    return row


async def concurrent_rps(
    method: str, url: str, body: object, clients: int, seconds: float
) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            (await http.request(method, url, json=body)).raise_for_status()
            done += 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(clients)))
        return done / (time.perf_counter() - started)


def shacl_in_process(count: int) -> tuple[float, float]:
    """The p50 of one validation of a whole draft: pySHACL (the old path, kept as the baseline)
    and the compiled constraints, interleaved on the same graph; their reports are the same."""
    from omds_ld.insurer.constraints import compile_shapes
    from omds_ld.insurer.data import load_insurers
    from omds_ld.insurer.draft import Draft, RiskObject
    from omds_ld.insurer.shacl import PyShaclValidator
    from omds_ld.insurer.validation import draft_graph
    from omds_ld.norm.jsonld import expand_curie

    product = load_insurers()["pfefferminzia"].products["kraftfahrt-2025"]
    values = {expand_curie(k): v for k, v in SKODA.items() if k != "@type"}
    draft = Draft.default(product).with_risk_object(
        RiskObject("1", expand_curie("p:Vehicle"), values)
    )
    base = "https://pfefferminzia.example/cases/x/draft"
    arms = [PyShaclValidator(product.validator.shapes), compile_shapes(product.validator.shapes)]
    assert arms[1] is not None
    graph = draft_graph(product, draft, base)
    assert arms[0].validate(graph) == arms[1].validate(graph)
    samples: list[list[float]] = [[], []]
    for round_ in range(count + 20):
        for index, arm in enumerate(arms):
            graph = draft_graph(product, draft, base)  # built each time, as a request does
            t0 = time.perf_counter()
            arm.validate(graph)
            if round_ >= 20:
                samples[index].append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def build_and_check_in_process(count: int) -> tuple[float, float]:
    """The p50 of a draft built and checked by the compiled constraints, as a request does it:
    as an rdflib graph (before) and as the plain triple index (now), interleaved; the same
    report."""
    from omds_ld.insurer.data import load_insurers
    from omds_ld.insurer.draft import Draft, RiskObject
    from omds_ld.insurer.validation import draft_graph, draft_triples
    from omds_ld.norm.jsonld import expand_curie

    product = load_insurers()["pfefferminzia"].products["kraftfahrt-2025"]
    values = {expand_curie(k): v for k, v in SKODA.items() if k != "@type"}
    draft = Draft.default(product).with_risk_object(
        RiskObject("1", expand_curie("p:Vehicle"), values)
    )
    base = "https://pfefferminzia.example/cases/x/draft"
    check = product.validator.validate
    builders = [draft_graph, draft_triples]
    assert check(draft_graph(product, draft, base)) == check(draft_triples(product, draft, base))
    samples: list[list[float]] = [[], []]
    for round_ in range(count + 20):
        for index, build in enumerate(builders):
            t0 = time.perf_counter()
            check(build(product, draft, base))
            if round_ >= 20:
                samples[index].append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def application_in_process(count: int) -> tuple[float, float]:
    """The p50 of one check of an application's body against the norm's shapes: pySHACL on the
    body's graph (the baseline) and the compiled checks the desk uses, interleaved; the graph is
    built each time, as a request does."""
    import datetime as dt

    from omds_ld.insurer.applications import ApplicationCheck
    from omds_ld.insurer.shacl import PyShaclValidator
    from omds_ld.norm import load_norm
    from tests.mcp.applications import PAYMENT, PERSON

    norm = load_norm()
    check = ApplicationCheck(norm)
    reference = PyShaclValidator(norm.shapes_graph)
    today = dt.date.today()
    body = {
        "bc:policyholder": PERSON, "bc:payment": PAYMENT, "bc:startDate": today.isoformat(),
        "bc:consent": {"bc:consentedBy": "Anna Berger", "bc:consentMethod": "in-person",
                       "bc:consentedAt": f"{today.isoformat()}T08:00:00+00:00",
                       "bc:offerDigest": "sha256:" + "a" * 64},
    }  # fmt: skip
    samples: list[list[float]] = [[], []]
    for round_ in range(count + 20):
        for index in range(2):
            t0 = time.perf_counter()
            graph, _ = check._graph(body)
            if index == 0:  # pySHACL reads an rdflib graph
                reference.validate(graph.graph())
            else:
                check.validator.validate(graph, today)
            if round_ >= 20:
                samples[index].append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per measurement")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the concurrent run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        server = ExampleServer(Path(folder) / "bench.sqlite3")
        server.start()
        try:
            with httpx.Client(timeout=30) as http:
                pf = server.api("pfefferminzia")
                case = http.post(
                    f"{pf}/calculations",
                    json={
                        "p:hasRootProduct": "https://pfefferminzia.example/products/kraftfahrt-2025"
                    },
                ).json()
                premium_url = f"{pf}/calculations/{case['bc:caseId']}/premium"
                http.post(f"{pf}/calculations/{case['bc:caseId']}/risk-objects", json=SKODA)
                dis = server.api("disrupto")
                body = http.get(f"{dis}/products/kraftfahrt-2022/default-instance").json()[
                    "bc:body"
                ]
                body["p:instance"]["p:hasRiskObject"] = [SKODA]
                inquiry_url = f"{dis}/tariff-inquiries"

                print(
                    f"omds-ld example server, one worker, {args.requests} sequential requests each"
                )
                base = measure(
                    "GET /healthz (baseline)",
                    lambda: http.get(server.url + "/healthz"),
                    args.requests,
                )
                read = measure("listProducts", lambda: http.get(f"{pf}/products"), args.requests)
                calc = measure(
                    "calculatePremium (SHACL incl.)", lambda: http.post(premium_url), args.requests
                )
                inq = measure(
                    "inquireTariff (SHACL incl.)",
                    lambda: http.post(inquiry_url, json=body),
                    args.requests,
                )
            before, after = shacl_in_process(args.requests)
            print(
                f"validation of a whole draft in process, p50 of {args.requests}, the same report:"
            )
            print(f"  {'pySHACL (before)':<34} p50 {before:7.3f} ms")
            print(
                f"  {'compiled constraints (now)':<34} p50 {after:7.3f} ms   "
                f"x{before / after:5.1f} faster"
            )
            graph, triples = build_and_check_in_process(args.requests)
            print(f"a draft built and checked, as a request does, p50 of {args.requests}:")
            print(f"  {'as an rdflib graph (before)':<34} p50 {graph:7.3f} ms")
            print(
                f"  {'as a triple index (now)':<34} p50 {triples:7.3f} ms   "
                f"x{graph / triples:5.1f} faster"
            )
            print(f"concurrent, 8 clients, {args.seconds:.0f} s each")
            for label, method, url, payload in (
                ("calculatePremium", "POST", premium_url, None),
                ("inquireTariff", "POST", inquiry_url, body),
            ):
                rps = asyncio.run(concurrent_rps(method, url, payload, 8, args.seconds))
                print(f"  {label:<34} {rps:7.0f} req/s")
            print("over the baseline (p50):")
            for label, row in (
                ("listProducts", read),
                ("calculatePremium", calc),
                ("inquireTariff", inq),
            ):
                print(
                    f"  {label:<34} +{row['p50'] - base['p50']:6.2f} ms   x{row['p50'] / base['p50']:5.1f}"
                )
            target = "met" if calc["p50"] < 10 else "missed"
            print(f"target calculatePremium p50 < 10 ms: {target} ({calc['p50']:.2f} ms)")
            before, after = application_in_process(args.requests)
            print(f"an application's body against the norm's shapes, p50 of {args.requests}:")
            print(f"  {'pySHACL':<34} p50 {before:7.3f} ms")
            print(
                f"  {'compiled checks (the desk)':<34} p50 {after:7.3f} ms   "
                f"x{before / after:5.1f} faster"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
