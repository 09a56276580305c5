"""The three insurers' flows, through real HTTP, following only the next steps of each answer."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

import httpx

from tests.servers import ExampleServer, call, step

SKODA = {
    "@type": "p:Vehicle",
    "p:make": "Skoda",
    "p:yearOfConstruction": 2021,
    "p:powerKw": 110,
    "p:listPrice": 32000,
    "p:licensePlate": "W-12345A",
}
FLAT = {
    "@type": "p:Dwelling",
    "p:livingArea": 85,
    "p:constructionType": "solid",
    "p:yearOfConstruction": 1998,
    "p:postalCode": "1010",
}


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def motor_tax(kw: int) -> Decimal:
    """Motor-related insurance tax as docs/tariffs.md states it: (kW - 24, at least 10) x 8.28."""
    return cents(max(Decimal(kw - 24), Decimal(10)) * Decimal("8.28"))


def gross(nets_and_rates: list[tuple[Decimal, Decimal]], extra: Decimal = Decimal(0)) -> Decimal:
    nets = [cents(n) for n, _ in nets_and_rates]
    taxes = [cents(n * r) for n, (_, r) in zip(nets, nets_and_rates, strict=True)]
    return sum(nets, Decimal(0)) + sum(taxes, Decimal(0)) + extra


def entry(client: httpx.Client, server: ExampleServer, insurer: str) -> dict:
    """The one address a client knows: the insurer's product list."""
    response = client.get(server.api(insurer) + "/products")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/ld+json")
    return response.json()


def test_pfefferminzia_skoda_premium_follows_next_steps(
    client: httpx.Client, server: ExampleServer
) -> None:
    products = entry(client, server, "pfefferminzia")
    assert [p["rdfs:label"]["de"] for p in products["p:product"]] == ["Kraftfahrt 2025"]
    start = step(products, "createCalculation")
    created = call(client, server, start, {"p:hasRootProduct": start["bc:target"]})
    assert created.status_code == 201, created.text
    case = created.json()
    assert case["bc:status"] == "draft"
    assert case["bc:validationReport"]["sh:conforms"] is False
    add_vehicle = step(case, "createRiskObject")
    assert add_vehicle["bc:expects"] == ["https://pfefferminzia.example/shapes/VehicleShape"]
    shape = next(s for s in case["bc:shape"] if s["@id"] == add_vehicle["bc:expects"][0])
    required = {f["sh:path"] for f in shape["sh:property"] if f["sh:minCount"] > 0}
    assert required == {k for k in SKODA if k != "@type"}
    assert "p:model" in {f["sh:path"] for f in shape["sh:property"]} - required

    with_vehicle = call(client, server, add_vehicle, SKODA)
    assert with_vehicle.status_code == 201, with_vehicle.text
    case = with_vehicle.json()
    assert case["bc:validationReport"]["sh:conforms"] is True
    assert case["bc:draft"]["p:hasRiskObject"][0]["p:make"] == "Skoda"

    priced = call(client, server, step(case, "calculatePremium"))
    assert priced.status_code == 200, priced.text
    case = priced.json()
    assert case["bc:status"] == "calculated"
    assert case["bc:validationReport"]["sh:conforms"] is True
    premium = case["bc:premium"]

    liability = Decimal("380.00") * Decimal("1.20") * Decimal("1.00") * Decimal("1.15")
    partial_cover = Decimal("0.0110") * 32000 * Decimal("1.00") * Decimal("1.00")
    expected = gross(
        [(liability, Decimal("0.11")), (partial_cover, Decimal("0.11"))], motor_tax(110)
    )
    assert Decimal(str(premium["bc:gross"])) == expected == Decimal("1684.88")
    assert premium["bc:currency"] == "EUR"
    taxes = {t["bc:taxType"]: Decimal(str(t["bc:amount"])) for t in premium["bc:tax"]}
    assert taxes["motorbezogene-versicherungssteuer"] == motor_tax(110)
    assert taxes["insurance-tax"] == cents(cents(liability) * Decimal("0.11")) + cents(
        cents(partial_cover) * Decimal("0.11")
    )

    offered = call(client, server, step(case, "createOffer"))
    assert offered.status_code == 201, offered.text
    offer = offered.json()
    assert offer["bc:premium"] == premium
    read_back = call(client, server, step(offer, "readCalculation"))
    assert read_back.json()["bc:status"] == "offered"
    assert [s["bc:operation"] for s in read_back.json()["bc:nextStep"]] == [
        "readOffer",
        "readCalculation",
    ]
    assert call(client, server, step(read_back.json(), "readOffer")).json() == offer


def test_disrupto_tariff_inquiry_follows_next_steps(
    client: httpx.Client, server: ExampleServer
) -> None:
    products = entry(client, server, "disrupto")
    assert [p["rdfs:label"]["de"] for p in products["p:product"]] == ["Kraftfahrt 2022"]
    instance = call(client, server, step(products, "readDefaultInstance"))
    assert instance.status_code == 200, instance.text
    answer = instance.json()
    inquire = step(answer, "inquireTariff")
    assert "https://disrupto.example/shapes/VehicleShape" in inquire["bc:expects"]

    body = answer["bc:body"]
    body["p:instance"]["p:hasRiskObject"].append(SKODA)
    priced = call(client, server, inquire, body)
    assert priced.status_code == 200, priced.text
    result = priced.json()
    assert result["bc:validationReport"]["sh:conforms"] is True
    liability = Decimal("342.00") * Decimal("1.35") * Decimal("1.00") * Decimal("1.20")
    expected = gross([(liability, Decimal("0.11"))], motor_tax(110))
    assert Decimal(str(result["bc:premium"]["bc:gross"])) == expected == Decimal("1327.06")


def test_disrupto_offers_no_draft(client: httpx.Client, server: ExampleServer) -> None:
    knowledge = client.get(server.api("disrupto") + "/process-knowledge").json()
    assert knowledge["pk:draftAtServer"] is False
    refused = client.post(
        server.api("disrupto") + "/calculations",
        json={"p:hasRootProduct": "https://disrupto.example/products/kraftfahrt-2022"},
    )
    assert refused.status_code == 409
    assert refused.json()["type"].endswith("/operation-not-admissible")
    assert {s["bc:operation"] for s in refused.json()["bc:nextStep"]} == {
        "listProducts",
        "readProcessKnowledge",
    }


def test_angloamerican_household_premium_follows_next_steps(
    client: httpx.Client, server: ExampleServer
) -> None:
    products = entry(client, server, "angloamerican")
    labels = {p["rdfs:label"]["en"]: p["@id"] for p in products["p:product"]}
    assert set(labels) == {"Motor Select 2024", "Home 2024"}
    start = step(products, "createCalculation")
    starts = [s for s in products["bc:nextStep"] if s["bc:operation"] == "createCalculation"]
    start = next(s for s in starts if s["bc:target"] == labels["Home 2024"])
    case = call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json()
    add_dwelling = step(case, "createRiskObject")
    assert add_dwelling["bc:expects"] == ["https://angloamerican.example/shapes/DwellingShape"]
    case = call(client, server, add_dwelling, FLAT).json()
    assert case["bc:validationReport"]["sh:conforms"] is True
    priced = call(client, server, step(case, "calculatePremium"))
    assert priced.status_code == 200, priced.text
    assert priced.json()["bc:validationReport"]["sh:conforms"] is True
    buildings = Decimal("0.0009") * 300000 * Decimal("1.00") * Decimal("1.00")
    contents = Decimal("0.0021") * 50000 * Decimal("1.00")
    expected = gross([(buildings, Decimal("0.11")), (contents, Decimal("0.11"))])
    assert Decimal(str(priced.json()["bc:premium"]["bc:gross"])) == expected == Decimal("416.25")


def test_edits_change_the_premium_as_documented(
    client: httpx.Client, server: ExampleServer
) -> None:
    products = entry(client, server, "pfefferminzia")
    start = step(products, "createCalculation")
    case = call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json()
    case = call(client, server, step(case, "createRiskObject"), SKODA).json()
    # Vollkasko and Teilkasko form a group: including Vollkasko replaces Teilkasko in one request.
    swap = step(case, "includeComponent", componentId="vollkasko")
    assert swap["rdfs:label"] == "Vollkasko (replaces Teilkasko)"
    case = call(client, server, swap).json()
    assert case["bc:replaced"] == [case["bc:draft"]["@id"] + "/components/teilkasko"]
    district = next(
        a["@id"]
        for a in case["bc:draft"]["p:attribute"]
        if a["p:property"].endswith("#zulassungsbezirk")
    )
    level = next(
        a["@id"]
        for a in case["bc:draft"]["p:attribute"]
        if a["p:property"].endswith("#bonusMalusStufe")
    )
    values = {
        "bc:values": [
            {"bc:attribute": district, "p:value": "T"},
            {"bc:attribute": level, "p:value": 4},
        ]
    }
    changed = call(client, server, step(case, "setAttributes"), values)
    assert changed.status_code == 200, changed.text
    priced = call(client, server, step(changed.json(), "calculatePremium")).json()
    liability = Decimal("380.00") * Decimal("1.20") * Decimal("0.75") * Decimal("0.95")
    comprehensive = Decimal("0.0290") * 32000 * Decimal("1.00") * Decimal("1.00")
    expected = gross(
        [(liability, Decimal("0.11")), (comprehensive, Decimal("0.11"))], motor_tax(110)
    )
    assert Decimal(str(priced["bc:premium"]["bc:gross"])) == expected


def test_product_list_comes_in_windows(client: httpx.Client, server: ExampleServer) -> None:
    first = client.get(server.api("angloamerican") + "/products", params={"limit": 1}).json()
    window = first["bc:window"]
    assert (window["bc:returned"], window["bc:total"], window["bc:moreToFind"]) == (1, 2, 1)
    more = step(first, "listProducts", offset="1")
    second = call(client, server, more).json()
    assert second["bc:window"]["bc:moreToFind"] == 0
    ids = {p["@id"] for p in first["p:product"]} | {p["@id"] for p in second["p:product"]}
    assert len(ids) == 2


def test_a_risk_object_is_replaced_and_removed_by_its_offered_steps(
    client: httpx.Client, server: ExampleServer
) -> None:
    """updateRiskObject changes what the premium is calculated from; deleteRiskObject takes the
    risk object out of the draft, which then no longer conforms."""
    products = entry(client, server, "pfefferminzia")
    start = step(products, "createCalculation")
    case = call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json()
    case = call(client, server, step(case, "createRiskObject"), SKODA).json()
    first = call(client, server, step(case, "calculatePremium")).json()["bc:premium"]["bc:gross"]
    stronger = {**SKODA, "p:powerKw": 150}
    replaced = call(client, server, step(case, "updateRiskObject"), stronger)
    assert replaced.status_code == 200, replaced.text
    case = replaced.json()
    assert case["bc:draft"]["p:hasRiskObject"][0]["p:powerKw"] == 150
    second = call(client, server, step(case, "calculatePremium")).json()["bc:premium"]["bc:gross"]
    fresh = call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json()
    fresh = call(client, server, step(fresh, "createRiskObject"), stronger).json()
    direct = call(client, server, step(fresh, "calculatePremium")).json()["bc:premium"]["bc:gross"]
    assert second == direct != first  # priced as if the stronger car had been sent at first
    removed = call(client, server, step(case, "deleteRiskObject"))
    assert removed.status_code == 200, removed.text
    case = removed.json()
    assert case["bc:draft"].get("p:hasRiskObject", []) == []
    assert case["bc:validationReport"]["sh:conforms"] is False
    assert "createRiskObject" in [s["bc:operation"] for s in case["bc:nextStep"]]


def test_the_insurers_today_in_answers_and_no_contract_that_starts_in_the_past(
    client: httpx.Client, server: ExampleServer
) -> None:
    """Answers say the insurer's today (an agent knows no date); "today" is a start an agent can
    give without knowing it; a start before it is refused with the range admissible today, before
    anything is priced or offered, and changes nothing."""
    products = entry(client, server, "pfefferminzia")
    start = step(products, "createCalculation")
    case = call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json()
    vienna = dt.datetime.now(ZoneInfo("Europe/Vienna")).date()
    assert case["bc:insurerToday"] == vienna.isoformat()
    assert case["bc:timeZone"] == "Europe/Vienna"
    case = call(client, server, step(case, "createRiskObject"), SKODA).json()
    begin = next(
        a["@id"] for a in case["bc:draft"]["p:attribute"]
        if a["p:property"].endswith("#vertragsbeginn")
    )  # fmt: skip
    past = (vienna - dt.timedelta(days=330)).isoformat()
    if past < "2026-01-01":  # the product's own range begins there
        past = "2026-01-01"
    if past < vienna.isoformat():
        moved = call(client, server, step(case, "setAttributes"),
                     {"bc:values": [{"bc:attribute": begin, "p:value": past}]})  # fmt: skip
        assert moved.status_code == 200, moved.text
        refused = call(client, server, step(moved.json(), "calculatePremium"))
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"].endswith("/start-in-the-past")
        assert (
            past in problem["detail"]
            and f"admissible: {vienna.isoformat()} to" in (problem["detail"])
        )
        assert {s["bc:operation"] for s in problem["bc:nextStep"]} >= {"setAttributes"}
        unchanged = call(client, server, step(moved.json(), "readCalculation")).json()
        assert unchanged["bc:status"] == "draft" and "bc:premium" not in unchanged
    # the day before the insurer's today is in the past too, by one day
    yesterday = (vienna - dt.timedelta(days=1)).isoformat()
    if yesterday >= "2026-01-01":
        moved = call(client, server, step(case, "setAttributes"),
                     {"bc:values": [{"bc:attribute": begin, "p:value": yesterday}]})  # fmt: skip
        assert moved.status_code == 200, moved.text
        refused = call(client, server, step(moved.json(), "calculatePremium"))
        assert refused.status_code == 422 and yesterday in refused.json()["detail"], refused.text
    today = call(client, server, step(case, "setAttributes"),
                 {"bc:values": [{"bc:attribute": begin, "p:value": "today"}]})  # fmt: skip
    assert today.status_code == 200, today.text
    [value] = [a["p:value"] for a in today.json()["bc:draft"]["p:attribute"] if a["@id"] == begin]
    assert value == vienna.isoformat()
    priced = call(client, server, step(today.json(), "calculatePremium"))
    assert priced.status_code == 200, priced.text
    offered = call(client, server, step(priced.json(), "createOffer"))
    assert offered.status_code == 201 and offered.json()["bc:insurerToday"] == vienna.isoformat()
