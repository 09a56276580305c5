"""A task template per product, made from the insurer's own answers, for the person using the
client: its arguments are the fields the product's risk object shape requires."""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_each_product_is_a_prompt_with_its_risk_objects_fields(
    server: ExampleServer, mode: str
) -> None:
    async def run() -> None:
        async with Client(server.mcp("angloamerican"), mode=mode) as client:
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert set(prompts) == {"premium-motor-select-2024", "premium-home-2024"}
            home = prompts["premium-home-2024"]
            assert home.title == "Premium: Home 2024 (AngloAmerican Insurance plc)"
            required = {a.name for a in home.arguments if a.required}
            assert required == {"livingArea", "constructionType", "yearOfConstruction", "postalCode"}  # fmt: skip
        async with Client(server.mcp("pfefferminzia"), mode=mode) as client:
            [motor] = (await client.list_prompts()).prompts
            arguments = {a.name: a for a in motor.arguments}
            assert {n for n, a in arguments.items() if a.required} == {
                k.removeprefix("p:") for k in SKODA if k != "@type"
            }
            assert arguments["driveType"].description == "Antrieb: one of combustion, hybrid, electric"  # fmt: skip
            given = {k.removeprefix("p:"): str(v) for k, v in SKODA.items() if k != "@type"}
            got = await client.get_prompt(motor.name, {**given, "notes": "mit Vollkasko"})
            [message] = got.messages
            text = message.content.text
            assert message.role == "user"
            assert text.startswith("At Pfefferminzia Versicherung AG, calculate the premium of Kraftfahrt 2025")  # fmt: skip
            assert "p:powerKw (Leistung (kW): 1 to 600) = 110" in text
            assert "Also: mit Vollkasko." in text and "Start with listProducts" in text
            with pytest.raises(Exception, match="premium-kraftfahrt-2025 needs make"):
                await client.get_prompt(motor.name, {k: v for k, v in given.items() if k != "make"})
            with pytest.raises(Exception, match="no prompt premium-nothing; prompts: premium-kraftfahrt-2025"):  # fmt: skip
                await client.get_prompt("premium-nothing", {})

    asyncio.run(run())
