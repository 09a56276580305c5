"""The norm's files as MCP resources, at every endpoint, in both eras, with a cache hint."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path

import pytest

from tests.mcp.clients import Client
from tests.servers import ExampleServer

FILES = {"openapi.yaml", "context.jsonld", "vocab.ttl", "shapes.ttl", "problems.yaml"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_every_endpoint_serves_the_norms_files_as_resources(
    server: ExampleServer, mode: str
) -> None:
    data = resources.files("omds_ld.norm") / "data"

    async def run(url: str) -> None:
        async with Client(url, mode=mode) as client:
            listed = await client.list_resources()
            assert {r.name for r in listed.resources} >= FILES
            if mode != "legacy":  # cache hints are of 2026-07-28
                assert listed.ttl_ms and listed.ttl_ms > 0, "the list changes only with the norm"
                assert listed.cache_scope == "public"
            for resource in listed.resources:
                if not str(resource.uri).startswith("omds-ld://norm/"):
                    continue
                read = await client.read_resource(str(resource.uri))
                [content] = read.contents
                assert content.text == (data / resource.name).read_text(encoding="utf-8")
                assert content.mime_type == resource.mime_type
            with pytest.raises(Exception, match="no resource omds-ld://norm/nothing"):
                await client.read_resource("omds-ld://norm/nothing")

    for url in (server.mcp("pfefferminzia"), server.mcp("disrupto"),
                server.url + "/omds-ld/insurers/mcp"):  # fmt: skip
        asyncio.run(run(url))


def test_the_tool_list_says_how_long_it_may_be_kept_and_stays_the_same(
    server: ExampleServer,
) -> None:
    async def run(url: str) -> None:
        async with Client(url, mode="2026-07-28") as client:
            first, again = await client.list_tools(), await client.list_tools()
            assert first.ttl_ms == 60_000, "until the process knowledge is read again"
            assert first.model_dump_json() == again.model_dump_json()  # order and bytes

    for url in (server.mcp("pfefferminzia"), server.url + "/omds-ld/insurers/mcp"):
        asyncio.run(run(url))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_insurers_reads_are_resources_and_an_offer_links_to_its_own(
    server: ExampleServer, mode: str
) -> None:
    """Products, shapes, the process knowledge and the product list listed; the reads with an id
    as templates (never an application's personal data); an offer's answer carries a
    resource_link that reads the offer as readOffer does."""
    from omds_ld.mcp.condense import answer_of
    from tests.mcp.applications import make_offer

    async def run() -> None:
        async with Client(server.mcp("pfefferminzia"), mode=mode) as client:
            listed = {str(r.uri): r for r in (await client.list_resources()).resources}
            base = "omds-ld://pfefferminzia"
            assert {f"{base}/process-knowledge", f"{base}/products",
                    f"{base}/products/kraftfahrt-2025", f"{base}/shapes/VehicleShape"} <= set(listed)  # fmt: skip
            assert listed[f"{base}/products/kraftfahrt-2025"].title == "Kraftfahrt 2025"
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}  # fmt: skip
            assert f"{base}/offers/{{offerId}}" in templates
            assert f"{base}/calculations/{{caseId}}" in templates
            assert not any("applications/{applicationId}" in t for t in templates)
            product = await client.read_resource(f"{base}/products/kraftfahrt-2025")
            [content] = product.contents
            assert content.mime_type == "application/ld+json"
            assert json.loads(content.text)["bc:productId"] == "kraftfahrt-2025"

            offer = await make_offer(client)
            offer_id = answer_of(offer)["offer"]["offerId"]
            [link] = [c for c in offer.content if c.type == "resource_link"]
            assert str(link.uri) == f"{base}/offers/{offer_id}"
            read = await client.read_resource(str(link.uri))
            assert json.loads(read.contents[0].text)["bc:offerId"] == offer_id
            with pytest.raises(Exception, match="there is no offer 'no-such-offer' for you"):
                await client.read_resource(f"{base}/offers/no-such-offer")
            with pytest.raises(Exception, match=r"no resource omds-ld://pfefferminzia/applications/x"):  # fmt: skip
                await client.read_resource(f"{base}/applications/x")

    asyncio.run(run())


def test_an_insurer_without_a_draft_serves_no_reads_of_drafts(server: ExampleServer) -> None:
    async def run() -> None:
        async with Client(server.mcp("disrupto")) as client:
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}  # fmt: skip
            assert "omds-ld://disrupto/products/{productId}/default-instance" in templates
            assert not any("offers" in t or "calculations" in t for t in templates)

    asyncio.run(run())


def test_a_server_pinned_to_a_release_serves_that_releases_files(
    server: ExampleServer, tmp_path: Path
) -> None:
    from tests.mcp.clients import stdio_parameters

    release = resources.files("omds_ld.norm") / "releases" / "0.1.0"
    parameters = stdio_parameters(
        server, "pfefferminzia", tmp_path / "log.jsonl", ["--norm-version", "0.1.0"]
    )

    async def run() -> None:
        async with Client(parameters, mode="legacy") as client:
            for name in ("openapi.yaml", "vocab.ttl"):
                read = await client.read_resource(f"omds-ld://norm/{name}")
                assert read.contents[0].text == (release / name).read_text(encoding="utf-8")

    asyncio.run(run())
