"""The norm's files as MCP resources, at every endpoint, in both eras, with a cache hint."""

from __future__ import annotations

import asyncio
from importlib import resources

import pytest
from mcp import Client

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
            assert {r.name for r in listed.resources} == FILES
            if mode != "legacy":  # cache hints are of 2026-07-28
                assert listed.ttl_ms and listed.ttl_ms > 0, "the list changes only with the norm"
                assert listed.cache_scope == "public"
            for resource in listed.resources:
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
