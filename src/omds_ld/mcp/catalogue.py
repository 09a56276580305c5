"""Tools from the norm's operations: names, descriptions, input schemas and annotations."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from omds_ld.mcp.seen import MAX_TOKEN_LENGTH
from omds_ld.norm import Norm, Operation

IDEMPOTENCY_HEADER = "Idempotency-Key"
# in a tool's _meta (never shown to a model): the operation it calls, whether it is deprecated;
# in the tools/list result's: the version of the norm the tools are made of
OPERATION_META = "omds-ld/operation"
DEPRECATED_META = "omds-ld/deprecated"
NORM_META = "omds-ld/norm"


@dataclass(frozen=True)
class Annotations:
    """The MCP tool annotations an operation's kind implies."""

    read_only: bool
    destructive: bool
    idempotent: bool


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the operation it calls, the schema its arguments are checked against, and the
    lean schema a client is shown (``shown_schema``, which admits all the first admits)."""

    operation: Operation
    input_schema: Mapping[str, Any]
    annotations: Annotations
    shown_schema: Mapping[str, Any]
    strict_schema: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    gemini_schema: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def schema(self, variant: str) -> Mapping[str, Any]:
        """The input schema a client is shown in a variant (``VARIANTS``)."""
        if variant == "strict":
            return self.strict_schema
        return self.gemini_schema if variant == "gemini" else self.shown_schema

    @property
    def name(self) -> str:
        return self.operation.operation_id

    @property
    def title(self) -> str:
        title = self.operation.summary or self.name
        return f"{title} (deprecated)" if self.operation.deprecated else title

    @property
    def description(self) -> str:
        """What a model reads of the tool: the norm's words for it at an MCP server, where they
        differ from the interface's (a binding call whose consent the person states)."""
        operation = self.operation
        return deprecation_note(operation) + (operation.mcp_description or operation.description)


def deprecation_note(operation: Operation) -> str:
    """What a model is told first of a deprecated operation or of its deprecated fields: that it
    still works, until when, and what to use instead; empty where nothing is deprecated."""
    lines = []
    if operation.deprecated:
        instead = f" Use {operation.replaced_by} instead." if operation.replaced_by else ""
        lines.append(
            "DEPRECATED: still served, removed by the norm's next major version." + instead
        )
    if operation.deprecated_fields:
        lines.append("Deprecated fields (still admitted): " + ", ".join(operation.deprecated_fields) + ".")  # fmt: skip
    return "".join(line + "\n" for line in lines)


def annotations_for(operation: Operation) -> Annotations:
    """Hints from the norm: GETs and inquiries outside a draft keep no state; PUT, PATCH,
    DELETE and inquiries may be repeated; destructive where ``x-omds-ld`` says so."""
    read_only = operation.method == "GET" or (operation.kind == "inquiry" and not operation.draft)
    idempotent = (
        read_only or operation.kind == "inquiry" or operation.method in {"PUT", "PATCH", "DELETE"}
    )
    return Annotations(
        read_only=read_only,
        destructive=operation.destructive or operation.binds,  # binding a customer is final
        idempotent=idempotent,
    )


def input_schema(operation: Operation) -> dict[str, Any]:
    """The tool's arguments: path and query parameters, ``body``, ``idempotencyKey``, ``full``,
    ``seen`` (what a client without a session was shown: ``omds_ld.mcp.seen``).

    The request schema keeps its canonical form; its ``$defs`` move to the root of the input
    schema so that every ``#/$defs/...`` reference resolves there.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for parameter in (*operation.path_parameters, *operation.query_parameters):
        described = copy.deepcopy(dict(parameter.schema))
        if parameter.description:
            described["description"] = parameter.description
        properties[parameter.name] = described
        if parameter.required:
            required.append(parameter.name)
    if operation.request_schema is not None:
        bundled = copy.deepcopy(dict(operation.request_schema))
        defs = bundled.get("$defs", {})
        properties["body"] = {
            "$ref": bundled["$ref"],
            "description": "JSON-LD; @context and @type are added when missing",
        }
        if operation.body_required:
            required.append("body")
        _stated_by_person(operation, bundled, defs)
    if operation.takes_idempotency_key:
        properties["idempotencyKey"] = {
            "type": "string",
            "maxLength": 255,
            "pattern": "^[!-~]+$",
            "description": "a retry with the same key acts once",
        }
    properties["full"] = {"type": "boolean", "description": "add the insurer's whole JSON-LD"}
    properties["seen"] = {
        "type": "string",
        "maxLength": MAX_TOKEN_LENGTH,
        "pattern": "^[A-Za-z0-9_-]*$",
        "description": "the seen of the last structured answer (optional: a shorter answer)",
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = defs
    return schema


def _stated_by_person(
    operation: Operation, bundled: Mapping[str, Any], defs: dict[str, Any]
) -> None:
    """The body's part the person using the client states (``x-omds-ld-mcp personStates``) as
    the model may send it: any of its fields, or none (what it was told); the person completes
    it before anything is sent, and the insurer still receives it whole."""
    if not operation.person_states:
        return
    root = defs.get(str(bundled["$ref"]).rsplit("/", 1)[-1], {})
    part = root.get("properties", {}).get(operation.person_states, {})
    name = str(part.get("$ref", "")).rsplit("/", 1)[-1]
    if name in defs:
        defs[name] = {**defs[name], "required": []}
    root["required"] = [r for r in root.get("required", []) if r != operation.person_states]


_SHOWN_KEYWORDS = ("type", "enum")


def shown_schema(operation: Operation) -> dict[str, Any]:
    """What a model is shown of the tool's arguments: each one's name and type, and the body in a
    line.

    The full input schema is what the server checks before it calls the insurer, and a refusal
    says what is admissible; a model needs no copy of patterns, bounds and body definitions in
    every tool: the answers' next steps give ids and ready bodies, and name the shapes a body
    must fill, with their fields. This schema admits everything the full one admits; it is
    loaded as it is by google-genai's MCP tool conversion and the MCP Inspector.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in (*operation.path_parameters, *operation.query_parameters):
        properties[parameter.name] = {
            k: parameter.schema[k] for k in _SHOWN_KEYWORDS if k in parameter.schema
        }
        if parameter.required:
            required.append(parameter.name)
    if operation.request_schema is not None:
        body: dict[str, Any] = {"type": "object"}
        described = operation.mcp_body_description or operation.body_description
        if described:
            body["description"] = described
        properties["body"] = body
        if operation.body_required:
            required.append("body")
    if operation.takes_idempotency_key:
        properties["idempotencyKey"] = {"type": "string"}
    properties["full"] = {"type": "boolean"}
    properties["seen"] = {"type": "string"}  # a client without a session: what it was shown
    # no "additionalProperties": false: google-genai's MCP conversion crashes on a boolean there
    # (it loads none of the tools), and the server refuses an argument the tool has not anyway
    return {"type": "object", "properties": properties, "required": required}


def strict_schema(operation: Operation) -> dict[str, Any]:
    """The shown schema as OpenAI's strict function calling takes it (the strict variant of an
    endpoint, ``?schemas=strict``): every object closed, every property required, an optional
    one nullable, the body as its JSON text (strict mode admits no open object, and a body's
    fields are the insurer's shapes). The server reads the text back and checks it as always."""
    shown = shown_schema(operation)
    properties: dict[str, Any] = {}
    for name, schema in shown["properties"].items():
        schema = dict(schema)
        if name == "body":
            described = (
                operation.mcp_body_description or operation.body_description or "the request body"
            )
            schema = {"type": "string", "description": f"{described}; as its JSON text"}
        if name not in shown["required"]:
            schema["type"] = [schema["type"], "null"]
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        properties[name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def gemini_schema(operation: Operation) -> dict[str, Any]:
    """The shown schema as Google's Gemini takes it (the ``?schemas=gemini`` variant): the body
    as its JSON text, as in the strict variant (Gemini's schemas admit no object without
    properties, and a body's fields are the insurer's shapes), the rest as shown (optional
    arguments optional; no ``additionalProperties``, which google-genai's conversion cannot
    read). The server reads the text back and checks it as always."""
    shown = shown_schema(operation)
    body = strict_schema(operation)["properties"].get("body")
    if body is None:
        return shown
    return {**shown, "properties": {**shown["properties"], "body": body}}


# the variants of the tools' input schemas, by the name an endpoint's URL asks for them
# (``?schemas=strict``): lean (the default), strict (OpenAI's strict function calling), gemini
VARIANTS = ("lean", "strict", "gemini")


def in_process(operation: Operation, draft_at_server: bool | None) -> bool:
    """Whether the insurer's process uses the operation: the draft's operations where it keeps
    the draft, the tariff inquiry's where it keeps none; ``None`` (not known yet): every one."""
    if draft_at_server is None:
        return True
    if operation.draft:
        return draft_at_server
    return not (operation.inquiry and draft_at_server)


def tools(norm: Norm, draft_at_server: bool | None) -> list[ToolSpec]:
    """The tools of the norm the insurer's process uses (every one while it is not known)."""
    return [
        ToolSpec(
            op,
            input_schema(op),
            annotations_for(op),
            shown_schema(op),
            strict_schema(op),
            gemini_schema(op),
        )
        for op in norm.operations.values()
        if in_process(op, draft_at_server)
    ]


def stated_shapes(norm: Norm) -> dict[str, str]:
    """For each operation whose body has a part the person using the client states, the shape
    of that part (x-omds-ld-mcp personStatesShape): a next step names it as the person's."""
    return {
        name: operation.person_states_shape
        for name, operation in norm.operations.items()
        if operation.person_states and operation.person_states_shape
    }


def by_name(specs: Iterable[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in specs}
