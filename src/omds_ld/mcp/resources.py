"""The norm's files as MCP resources: what a client (or a person) may read beside the tools.

Every MCP server of the norm serves the same five files of the version it was started with: the
OpenAPI file, the JSON-LD context, the vocabulary, the SHACL shapes of the norm's own bodies and
the problem types. They change only with the norm, so their list carries a cache hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

# how long a client may keep the list (it changes only when the server is started anew)
LIST_TTL_MS = 3_600_000


@dataclass(frozen=True)
class NormFile:
    name: str
    title: str
    mime_type: str
    description: str

    @property
    def uri(self) -> str:
        return f"omds-ld://norm/{self.name}"


FILES = (
    NormFile("openapi.yaml", "The norm's OpenAPI file", "application/yaml",
             "every operation, its parameters, bodies, answers and problem responses"),
    NormFile("context.jsonld", "The norm's JSON-LD context", "application/ld+json",
             "the short terms (p:, bc:, pk:) of every body and answer"),
    NormFile("vocab.ttl", "The norm's vocabulary", "text/turtle",
             "every term with its German and English label"),
    NormFile("shapes.ttl", "The norm's SHACL shapes", "text/turtle",
             "the shapes of the norm's own request bodies"),
    NormFile("problems.yaml", "The norm's problem types", "application/yaml",
             "every problem type with its status, title and meaning"),
)  # fmt: skip


class NormResources:
    """The norm's files, read once from the package."""

    def __init__(self) -> None:
        data = resources.files("omds_ld.norm") / "data"
        self.texts = {f.uri: (f, (data / f.name).read_text(encoding="utf-8")) for f in FILES}

    def listed(self) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=f.uri, name=f.name, title=f.title, description=f.description,
                    mime_type=f.mime_type, size=len(text.encode()),
                )
                for f, text in self.texts.values()
            ],
            ttl_ms=LIST_TTL_MS,
            cache_scope="public",
        )  # fmt: skip

    def read(self, uri: str) -> types.ReadResourceResult:
        found = self.texts.get(uri)
        if found is None:  # the SDK's way for an unknown resource: invalid params
            raise MCPError(INVALID_PARAMS, f"no resource {uri}; resources: {', '.join(self.texts)}")
        norm_file, text = found
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=norm_file.mime_type, text=text)]
        )


NORM_FILES = NormResources()  # the same at every MCP server of the norm


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    """``resources/list`` of every MCP server of the norm."""
    return NORM_FILES.listed()


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """``resources/read`` of every MCP server of the norm."""
    return NORM_FILES.read(str(params.uri))
