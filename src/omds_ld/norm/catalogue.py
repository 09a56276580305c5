"""The operation catalogue: every operation of the norm's OpenAPI file, with compiled validators."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from omds_ld import yamlfile
from omds_ld.norm.jsonld import expand_curie
from omds_ld.norm.problems import ProblemType, load_problem_types
from omds_ld.norm.schemas import SchemaValidator, Violation

if TYPE_CHECKING:
    from rdflib import Graph

    from omds_ld.norm.shapes import NodeShape

Kind = Literal["read", "create", "edit", "inquiry"]
# the parts of a business case an operation may act on or keep (x-omds-ld about, keeps): the
# draft's components with their attributes (and what is still at the default), its risk
# objects, its premium
CASE_PARTS = frozenset({"components", "riskObjects", "premium"})
_REF = re.compile(r"^#/components/schemas/(?P<name>[^/]+)$")


@dataclass(frozen=True)
class Parameter:
    """A path, query or header parameter of an operation."""

    name: str
    location: Literal["path", "query", "header"]
    required: bool
    schema: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Operation:
    """One operation of the norm: how it is called and what kind of act it is."""

    operation_id: str
    method: str
    path: str
    summary: str
    description: str
    kind: Kind
    draft: bool
    destructive: bool
    parameters: tuple[Parameter, ...]
    request_schema: Mapping[str, Any] | None
    body_required: bool
    # it binds a customer (x-omds-ld binds): an MCP server runs it only after the person using
    # the client confirmed what it binds to
    binds: bool = False
    # its request or answer carries personal data (x-omds-ld personal): never cached, never kept
    # by an MCP server (a retry is replayed by the insurer), never logged
    personal: bool = False
    # part of the tariff inquiry (x-omds-ld inquiry), the way of an insurer that keeps no draft:
    # an MCP server lists it only there
    inquiry: bool = False
    # what the request body holds, in a line (the requestBody's description)
    body_description: str = ""
    # deprecated (OpenAPI ``deprecated``): still served, removed only by a major version of the
    # norm; ``replaced_by`` (x-omds-ld replacedBy) names the operation to use instead
    deprecated: bool = False
    replaced_by: str = ""
    # the request's fields marked deprecated: parameter names, body fields as ``body.name``
    deprecated_fields: tuple[str, ...] = ()
    # the operation as an MCP server offers it to a model (x-omds-ld-mcp), where it differs from
    # the interface's: ``person_states`` names the body's part the person using the client
    # states (the model sends only what it was told of it), with the description and the body's
    # line a model reads
    person_states: str = ""
    person_states_shape: str = ""  # the shape of that part (an IRI)
    mcp_description: str = ""
    mcp_body_description: str = ""
    # of an operation on a business case (x-omds-ld about, keeps): the part of the case it acts
    # on, and the parts its answer has as they were before the call (the norm promises it):
    # an answer says those are "unchanged by this call" instead of repeating them
    about: str = ""
    keeps: frozenset[str] = frozenset()
    _validator: SchemaValidator | None = field(default=None, repr=False, compare=False)

    @property
    def takes_idempotency_key(self) -> bool:
        """Whether the operation accepts an Idempotency-Key header."""
        return any(p.name == "Idempotency-Key" for p in self.parameters)

    @property
    def path_parameters(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.location == "path")

    @property
    def query_parameters(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.location == "query")

    def href(self, base: str, **params: str) -> str:
        """The URL of this operation below ``base`` with its path parameters filled in."""
        path = self.path
        for name, value in params.items():
            path = path.replace("{" + name + "}", value)
        return base.rstrip("/") + path

    def body_violations(self, body: Any) -> list[Violation]:
        """Every violation of the request schema, each with its JSON pointer; empty if valid."""
        if self._validator is None:
            return []
        return self._validator.violations(body, redact=self.personal)


def bundle_schema(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A component schema in canonical form: self-contained, every reference bundled in ``$defs``.

    References between component schemas become ``#/$defs/<name>``; a schema that refers to itself
    (directly or through others) is bundled once, so cycles stay finite.
    """
    schemas: Mapping[str, Any] = document["components"]["schemas"]
    needed: list[str] = []

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                match = _REF.match(value) if key == "$ref" and isinstance(value, str) else None
                if match:
                    ref = match.group("name")
                    if ref not in needed:
                        needed.append(ref)
                    out[key] = f"#/$defs/{ref}"
                else:
                    out[key] = rewrite(value)
            return out
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    needed.append(name)
    defs: dict[str, Any] = {}
    index = 0
    while index < len(needed):
        current = needed[index]
        defs[current] = rewrite(copy.deepcopy(schemas[current]))
        index += 1
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"#/$defs/{name}",
        "$defs": defs,
    }


def _resolve_parameter(document: Mapping[str, Any], raw: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = raw.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/parameters/"):
        resolved: Mapping[str, Any] = document["components"]["parameters"][ref.rsplit("/", 1)[1]]
        return resolved
    return raw


def _parameter_schema(document: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        match = _REF.match(ref)
        if match:
            return dict(document["components"]["schemas"][match.group("name")])
    return dict(schema)


def _deprecated_fields(
    document: Mapping[str, Any],
    raw: Mapping[str, Any],
    parameters: list[Parameter],
    request_schema: Mapping[str, Any] | None,
) -> tuple[str, ...]:
    """The parameters and body fields (top level and nested) the norm marks deprecated."""
    found = [
        p.name
        for raw_param, p in zip(raw.get("parameters", []), parameters, strict=True)
        if _resolve_parameter(document, raw_param).get("deprecated") or p.schema.get("deprecated")
    ]
    if request_schema is None:
        return tuple(found)
    defs: Mapping[str, Any] = request_schema.get("$defs", {})
    seen: set[str] = set()

    def walk(node: Any, where: str) -> None:
        if not isinstance(node, Mapping):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[1]
            if name in seen:
                return
            seen.add(name)
            walk(defs.get(name), where)
        for name, sub in (node.get("properties") or {}).items():
            place = f"{where}.{name}"
            if isinstance(sub, Mapping) and sub.get("deprecated"):
                found.append(place)
            walk(sub, place)
        for key in ("items", "additionalProperties"):
            walk(node.get(key), where)
        for key in ("allOf", "anyOf", "oneOf"):
            for member in node.get(key) or []:
                walk(member, where)

    walk(request_schema, "body")
    return tuple(found)


def _operations(document: Mapping[str, Any]) -> Iterator[Operation]:
    for path, item in document["paths"].items():
        for method, raw in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            extension = raw.get("x-omds-ld", {})
            parameters = []
            for raw_param in raw.get("parameters", []):
                param = _resolve_parameter(document, raw_param)
                parameters.append(
                    Parameter(
                        name=param["name"],
                        location=param["in"],
                        required=bool(param.get("required", False)),
                        schema=_parameter_schema(document, param.get("schema", {})),
                        description=param.get("description", ""),
                    )
                )
            request_schema: dict[str, Any] | None = None
            body_required = False
            validator = None
            request_body = raw.get("requestBody")
            body_description = ""
            if request_body:
                body_description = str(request_body.get("description", "")).strip()
                body_required = bool(request_body.get("required", False))
                content = request_body["content"]
                media = content.get("application/ld+json") or next(iter(content.values()))
                match = _REF.match(media["schema"]["$ref"])
                if match is None:
                    raise ValueError(f"{raw['operationId']}: request body must refer to a schema")
                request_schema = bundle_schema(document, match.group("name"))
                validator = SchemaValidator(request_schema)
            at_mcp = raw.get("x-omds-ld-mcp") or {}
            about, keeps = str(extension.get("about", "")), frozenset(extension.get("keeps", ()))
            if (keeps | ({about} - {""})) - CASE_PARTS:
                raise ValueError(
                    f"{raw['operationId']}: about and keeps name parts of a case, one of "
                    + ", ".join(sorted(CASE_PARTS))
                )
            yield Operation(
                operation_id=raw["operationId"],
                method=method.upper(),
                path=path,
                summary=raw.get("summary", ""),
                description=raw.get("description", "").strip(),
                kind=extension["kind"],
                draft=bool(extension.get("draft", False)),
                destructive=bool(extension.get("destructive", False)),
                parameters=tuple(parameters),
                request_schema=request_schema,
                body_required=body_required,
                binds=bool(extension.get("binds", False)),
                personal=bool(extension.get("personal", False)),
                inquiry=bool(extension.get("inquiry", False)),
                body_description=body_description,
                deprecated=bool(raw.get("deprecated", False)),
                replaced_by=str(extension.get("replacedBy", "")),
                deprecated_fields=_deprecated_fields(document, raw, parameters, request_schema),
                person_states=str(at_mcp.get("personStates", "")),
                person_states_shape=str(at_mcp.get("personStatesShape", "")),
                mcp_description=str(at_mcp.get("description", "")).strip(),
                mcp_body_description=str(at_mcp.get("body", "")).strip(),
                about=about,
                keeps=keeps,
                _validator=validator,
            )


class Norm:
    """Everything the norm defines, loaded once: operations, validators, shapes, problem types."""

    def __init__(self, openapi: Mapping[str, Any], source: Path | None = None) -> None:
        self.openapi = openapi
        self.source = source  # the OpenAPI file it was read from; None: the package's
        self.operations: dict[str, Operation] = {}
        for operation in _operations(openapi):
            if operation.operation_id in self.operations:
                raise ValueError(f"operationId {operation.operation_id} is not unique")
            self.operations[operation.operation_id] = operation
        self.problem_types: dict[str, ProblemType] = load_problem_types()

    def operation(self, operation_id: str) -> Operation:
        """The operation with this operationId; KeyError names the known ones."""
        try:
            return self.operations[operation_id]
        except KeyError:
            known = ", ".join(sorted(self.operations))
            raise KeyError(f"unknown operation {operation_id!r}; known: {known}") from None

    @cached_property
    def shapes_graph(self) -> Graph:
        """The norm's own shapes (of request bodies) as RDF, for the checks compiled from them."""
        from rdflib import Graph  # only where shapes are read: a start never pays for it

        return Graph().parse(data=_data_text("shapes.ttl"), format="turtle")

    @cached_property
    def shapes(self) -> dict[str, NodeShape]:
        """The norm's own shapes (of request bodies), by IRI."""
        from omds_ld.norm.shapes import shapes_from_graph

        return shapes_from_graph(self.shapes_graph)

    @cached_property
    def vocabulary(self) -> dict[str, dict[str, str]]:
        """Every term of the norm's vocabulary (full IRI) with its labels by language."""
        from rdflib import RDFS, Graph
        from rdflib import Literal as RdfLiteral

        graph = Graph().parse(data=_data_text("vocab.ttl"), format="turtle")
        labels: dict[str, dict[str, str]] = {}
        for subject, label in graph.subject_objects(RDFS.label):
            if isinstance(label, RdfLiteral):
                labels.setdefault(str(subject), {})[label.language or "en"] = str(label)
        return labels

    def term(self, name: str) -> tuple[str, dict[str, str]]:
        """A term of the norm (CURIE or IRI) resolved to its IRI and labels; KeyError if unknown."""
        iri = expand_curie(name)
        if iri not in self.vocabulary:
            raise KeyError(f"{name} is no term of the norm's vocabulary")
        return iri, self.vocabulary[iri]


def _data_text(name: str) -> str:
    return resources.files("omds_ld.norm").joinpath("data", name).read_text("utf-8")


def load_norm(openapi_path: Path | None = None) -> Norm:
    """Load the norm from package data, or from another version of the OpenAPI file."""
    if openapi_path is None:  # by its JSON rendering (yamlfile): no YAML parser at a start
        document = yamlfile.load_file(resources.files("omds_ld.norm") / "data", "openapi.yaml")
    else:
        text = openapi_path.read_text("utf-8")
        document = json.loads(text) if text.lstrip().startswith("{") else yamlfile.load(text)
    norm = Norm(document, openapi_path)
    if openapi_path is not None:  # a file given at start: its schemas are judged at once
        for operation in norm.operations.values():
            if operation._validator is not None:
                try:
                    operation._validator.check()
                except ValueError as error:
                    raise ValueError(f"{operation.operation_id}: {error}") from None
    return norm
