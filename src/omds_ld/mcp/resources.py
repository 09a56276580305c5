"""The norm's files as MCP resources: what a client (or a person) may read beside the tools.

Every MCP server of the norm serves the same five files of the version it was started with: the
OpenAPI file, the JSON-LD context, the vocabulary, the SHACL shapes of the norm's own bodies and
the problem types. They change only with the norm, so their list carries a cache hint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from omds_ld.norm import Norm

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
    """The norm's files of one version, read once: the package's, or those beside the OpenAPI
    file a server was started with (a kept release has all five; a file alone, its own)."""

    def __init__(self, openapi: Path | None = None) -> None:
        data = resources.files("omds_ld.norm") / "data"
        self.texts = {}
        for f in FILES:
            beside = openapi.parent / f.name if openapi is not None else None
            if f.name == "openapi.yaml" and openapi is not None:
                text = openapi.read_text(encoding="utf-8")
            elif beside is not None and beside.is_file():
                text = beside.read_text(encoding="utf-8")
            else:
                text = (data / f.name).read_text(encoding="utf-8")
            self.texts[f.uri] = (f, text)

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
            raise not_found(uri, f"no resource {uri}; resources: {', '.join(self.texts)}")
        norm_file, text = found
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=norm_file.mime_type, text=text)]
        )


NORM_FILES = NormResources()  # the same at every MCP server of the norm


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    """``resources/list`` of every MCP server of the norm."""
    return NORM_FILES.listed()


async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    """``resources/templates/list`` of a server whose resources are the norm's files alone (the
    broker endpoint): no templates, for as long as its listing may be kept."""
    return types.ListResourceTemplatesResult(
        resource_templates=[], ttl_ms=LIST_TTL_MS, cache_scope="public"
    )


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """``resources/read`` of every MCP server of the norm."""
    return NORM_FILES.read(str(params.uri))


# The insurer's reads as resources: what an insurer answers to a read without a body, named by
# the MCP server's own URIs (omds-ld://<insurer><path>), read through the same call as the tool
# (its checks, rate limit, cache and log) and given as the insurer's whole JSON-LD. Reads of
# personal data (applications) are never resources: a host may keep or show them.


@dataclass(frozen=True)
class ReadTemplate:
    """One read operation of the insurer as a resource (template)."""

    operation: str
    template: str  # omds-ld://pfefferminzia/offers/{offerId}
    parameters: tuple[str, ...]
    title: str
    description: str

    def match(self, uri: str) -> dict[str, str] | None:
        """The path parameters a URI gives this template, or None."""
        pattern = re.escape(self.template)
        for name in self.parameters:
            pattern = pattern.replace(re.escape("{" + name + "}"), f"(?P<{name}>[^/?#]+)")
        found = re.fullmatch(pattern, uri)
        return None if found is None else {k: unquote(v) for k, v in found.groupdict().items()}

    def uri(self, **parameters: str) -> str:
        uri = self.template
        for name, value in parameters.items():
            uri = uri.replace("{" + name + "}", quote(value, safe=""))
        return uri


def read_templates(norm: Norm, insurer: str) -> list[ReadTemplate]:
    """The norm's reads an insurer's MCP server serves as resources: GET, kind read, no body,
    no query parameter it needs, no personal data."""
    found = []
    for operation in norm.operations.values():
        if operation.method != "GET" or operation.kind != "read" or operation.personal:
            continue
        if operation.request_schema is not None or any(p.required for p in operation.query_parameters):  # fmt: skip
            continue
        found.append(
            ReadTemplate(
                operation=operation.operation_id,
                template=f"omds-ld://{insurer}{operation.path}",
                parameters=tuple(p.name for p in operation.path_parameters),
                title=operation.summary or operation.operation_id,
                description=f"the insurer's answer to {operation.operation_id}, its whole JSON-LD",
            )
        )
    return found


def not_found(uri: str, message: str) -> MCPError:
    """A resource nobody serves: Invalid Params with the URI in ``data`` (SEP-2164), never an
    empty result."""
    return MCPError(INVALID_PARAMS, message, {"uri": uri})
