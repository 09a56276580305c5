"""Every kind of bad input gets its problem type of the norm, admissible next steps, and no change."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omds_ld.norm import load_norm
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
RAW_VEHICLE = json.dumps(SKODA).encode()
OPERATIONS = set(load_norm().operations)


def new_case(
    client: httpx.Client, server: ExampleServer, *, vehicle: bool = False
) -> dict[str, Any]:
    api = server.api("pfefferminzia")
    case = client.post(f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}).json()
    if vehicle:
        case = client.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects", json=SKODA
        ).json()
    return case


def attribute(case: dict[str, Any], name: str) -> str:
    return next(
        a["@id"] for a in case["bc:draft"]["p:attribute"] if a["p:property"].endswith("#" + name)
    )


Request = Callable[[httpx.Client, str, dict[str, Any]], httpx.Response]

CASES: dict[str, tuple[str, int, bool, Request]] = {
    "malformed JSON": (
        "malformed-request", 400, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", content=b'{"p:hasRootProduct": ',
            headers={"Content-Type": "application/ld+json"},
        ),
    ),
    "wrong media type": (
        "unsupported-media-type", 415, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", content=b"p:hasRootProduct=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        ),
    ),
    "body too large": (
        "payload-too-large", 413, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects",
            json={**SKODA, "p:make": "x" * 300_000},
        ),
    ),
    "wrong type in the body": (
        "invalid-body", 422, False,
        lambda c, api, case: c.patch(
            f"{api}/calculations/{case['bc:caseId']}/attributes", json={"bc:values": "W"}
        ),
    ),
    "missing field in the body": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(f"{api}/calculations", json={"p:product": PRODUCT}),
    ),
    "value of the wrong type for its shape": (
        "shape-violation", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects",
            json={**SKODA, "p:powerKw": "110 kW"},
        ),
    ),
    "value outside its range": (
        "shape-violation", 422, False,
        lambda c, api, case: c.patch(
            f"{api}/calculations/{case['bc:caseId']}/attributes",
            json={"bc:values": [{"bc:attribute": attribute(case, "bonusMalusStufe"), "p:value": 99}]},
        ),
    ),
    "unknown field of a risk object": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects", json={**SKODA, "p:colour": "red"}
        ),
    ),
    "unknown attribute": (
        "invalid-body", 422, False,
        lambda c, api, case: c.patch(
            f"{api}/calculations/{case['bc:caseId']}/attributes",
            json={"bc:values": [{"bc:attribute": "https://pfefferminzia.example/x", "p:value": 1}]},
        ),
    ),
    "unknown product": (
        "unknown-product", 404, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", json={"p:hasRootProduct": "https://pfefferminzia.example/products/x"}
        ),
    ),
    "unknown case": (
        "not-found", 404, False,
        lambda c, api, case: c.post(f"{api}/calculations/0000000000/risk-objects", json=SKODA),
    ),
    "foreign case": (
        "not-found", 404, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects", json=SKODA,
            headers={"Authorization": "Bearer pf-demo-beta-92d0aa"},
        ),
    ),
    "unknown component": (
        "not-found", 404, False,
        lambda c, api, case: c.put(f"{api}/calculations/{case['bc:caseId']}/components/glas"),
    ),
    "excluding a mandatory component": (
        "operation-not-admissible", 409, False,
        lambda c, api, case: c.delete(
            f"{api}/calculations/{case['bc:caseId']}/components/kfz-haftpflicht"
        ),
    ),
    "a second vehicle": (
        "operation-not-admissible", 409, True,
        lambda c, api, case: c.post(f"{api}/calculations/{case['bc:caseId']}/risk-objects", json=SKODA),
    ),
    "premium of an incomplete draft": (
        "draft-not-conforming", 409, False,
        lambda c, api, case: c.post(f"{api}/calculations/{case['bc:caseId']}/premium"),
    ),
    "offer from a draft that does not conform": (
        "draft-not-conforming", 409, False,
        lambda c, api, case: c.post(f"{api}/calculations/{case['bc:caseId']}/offers"),
    ),
    "offer before the premium": (
        "operation-not-admissible", 409, True,
        lambda c, api, case: c.post(f"{api}/calculations/{case['bc:caseId']}/offers"),
    ),
    "unknown bearer token": (
        "unauthorized", 401, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", json={"p:hasRootProduct": PRODUCT},
            headers={"Authorization": "Bearer nobody"},
        ),
    ),
    "window outside its range": (
        "invalid-parameter", 422, False,
        lambda c, api, case: c.get(f"{api}/products", params={"limit": 1000}),
    ),
    # hostile input is invalid input: refused, never cleaned, never a 500
    "a lone surrogate in a value": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects",
            content=RAW_VEHICLE.replace(b'"Skoda"', b'"Sko\\ud800da"'),
            headers={"Content-Type": "application/json", "Idempotency-Key": "surrogate"},
        ),
    ),
    "a control character in a value": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations/{case['bc:caseId']}/risk-objects",
            json={**SKODA, "p:licensePlate": "W-12345A\n"},
        ),
    ),
    "a NUL in a name": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", json={"p:hasRootProduct": PRODUCT, "x\u0000": 1},
        ),
    ),
    "nesting beyond any schema": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations", content=b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
            headers={"Content-Type": "application/json"},
        ),
    ),
    "a remote @context": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations",
            json={"@context": "https://evil.example/context.jsonld", "p:hasRootProduct": PRODUCT},
        ),
    ),
    "an @context that remaps the prefixes": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            f"{api}/calculations",
            json={"@context": {"@vocab": "https://evil.example/", "p": "https://evil.example/p#"},
                  "p:hasRootProduct": PRODUCT},
        ),
    ),
    "an unknown property of an inquiry": (
        "invalid-body", 422, False,
        lambda c, api, case: c.post(
            api.replace("pfefferminzia", "disrupto") + "/tariff-inquiries",
            json={"p:instance": {"p:instanceOf": "https://disrupto.example/products/kraftfahrt-2022"},
                  "p:discount": 50},
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_rejected_request_names_its_problem_and_changes_nothing(
    name: str, client: httpx.Client, server: ExampleServer
) -> None:
    slug, status, with_vehicle, send = CASES[name]
    case = new_case(client, server, vehicle=with_vehicle)
    before = server.snapshot()
    response = send(client, server.api("pfefferminzia"), case)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"] == f"https://w3id.org/omds-ld/problems/{slug}"
    assert problem["status"] == status
    assert problem["detail"]
    assert problem["bc:nextStep"], "a problem lists the operations still admissible"
    assert {s["bc:operation"] for s in problem["bc:nextStep"]} <= OPERATIONS
    assert server.snapshot() == before


def test_violations_carry_their_json_pointer(client: httpx.Client, server: ExampleServer) -> None:
    response = client.post(
        server.api("pfefferminzia") + "/calculations",
        json={"p:hasRootProduct": 7, "@type": "bc:Wrong"},
    )
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert pointers == {"/p:hasRootProduct", "/@type"}


def test_shape_violation_says_what_is_admissible(
    client: httpx.Client, server: ExampleServer
) -> None:
    case = new_case(client, server)
    response = client.post(
        server.api("pfefferminzia") + f"/calculations/{case['bc:caseId']}/risk-objects",
        json={**SKODA, "p:powerKw": 150 * 1.36},
    )
    report = response.json()["bc:validationReport"]
    assert report["sh:conforms"] is False
    [result] = report["sh:result"]
    assert result["sh:resultPath"] == "p:powerKw"
    assert "kW" in result["sh:resultMessage"]["de"] and "kW" in result["sh:resultMessage"]["en"]


def test_unknown_product_lists_the_products(client: httpx.Client, server: ExampleServer) -> None:
    response = client.get(server.api("angloamerican") + "/products/motor-2023")
    assert response.status_code == 404
    assert set(response.json()["known"]) == {"motor-select-2024", "home-2024"}


def test_edits_after_an_offer_are_refused(client: httpx.Client, server: ExampleServer) -> None:
    api = server.api("pfefferminzia")
    case = new_case(client, server, vehicle=True)
    case_id = case["bc:caseId"]
    client.post(f"{api}/calculations/{case_id}/premium").raise_for_status()
    client.post(f"{api}/calculations/{case_id}/offers").raise_for_status()
    before = server.snapshot()
    refused = client.put(f"{api}/calculations/{case_id}/components/rechtsschutz")
    assert refused.status_code == 409
    assert {s["bc:operation"] for s in refused.json()["bc:nextStep"]} == {
        "readOffer",
        "readCalculation",
    }
    assert server.snapshot() == before


def test_unknown_address_is_a_problem(client: httpx.Client, server: ExampleServer) -> None:
    response = client.get(server.url + "/omds-ld/insurers/pfefferminzia/api/nothing")
    assert response.status_code == 404
    assert response.json()["type"].endswith("/not-found")
    assert response.json()["bc:nextStep"]
    wrong_method = client.delete(server.api("pfefferminzia") + "/products")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["type"].endswith("/method-not-allowed")


def test_a_refused_write_leaves_its_key_free_and_the_case_readable(
    client: httpx.Client, server: ExampleServer
) -> None:
    """A write whose input cannot be encoded is refused before anything is written: the case
    keeps its version and stays readable, and the same key then acts once with a good body."""
    api = server.api("pfefferminzia")
    case = new_case(client, server)
    url = f"{api}/calculations/{case['bc:caseId']}/risk-objects"
    headers = {"Content-Type": "application/json", "Idempotency-Key": "s1"}
    bad = client.post(
        url, content=RAW_VEHICLE.replace(b'"Skoda"', b'"Sko\\ud800da"'), headers=headers
    )
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["pointer"] == "/p:make"
    read = client.get(f"{api}/calculations/{case['bc:caseId']}")
    assert read.status_code == 200 and read.json()["bc:draft"]["p:hasRiskObject"] == []
    good = client.post(url, content=RAW_VEHICLE, headers=headers)
    assert good.status_code == 201, good.text
    again = client.post(url, content=RAW_VEHICLE, headers=headers)
    assert again.headers["Idempotency-Replayed"] == "true"
    assert len(again.json()["bc:draft"]["p:hasRiskObject"]) == 1


def test_the_interface_answers_only_its_own_hosts(
    client: httpx.Client, server: ExampleServer
) -> None:
    products = server.api("pfefferminzia") + "/products"
    port = server.url.rsplit(":", 1)[1]
    assert client.get(products).status_code == 200
    assert client.get(products, headers={"Host": f"localhost:{port}"}).status_code == 200
    for host in ("evil.example", f"127.0.0.1:{port}.evil.example", "127.0.0.1:*"):
        refused = client.get(products, headers={"Host": host})
        assert refused.status_code == 421, host
        assert refused.json()["type"].endswith("/misdirected-request")
    foreign = client.get(products, headers={"Origin": f"http://127.0.0.1:{port}.evil.example"})
    assert foreign.status_code == 403
    assert foreign.json()["type"].endswith("/forbidden-origin")
