"""A task template per product line, for the person using the client (a host shows prompts as
commands): "the premium of this product for this risk object", its arguments the fields the
product's risk object shape requires, made from the insurer's own answers (product list, shapes),
so an insurer's prompts are its products. The template says what the model is to do, not how:
the answers' next steps say that."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

NOTES = "notes"  # a further wish in the person's words ("with Vollkasko", "start in March")


@dataclass(frozen=True)
class Field:
    argument: str  # make
    path: str  # p:make
    label: str
    required: bool


@dataclass(frozen=True)
class ProductPrompt:
    name: str
    product: str  # its label
    line: str  # line of business
    object_class: str  # p:Vehicle
    fields: tuple[Field, ...]

    def prompt(self, insurer: str) -> types.Prompt:
        return types.Prompt(
            name=self.name,
            title=f"Premium: {self.product} ({insurer})",
            description=(
                f"Calculate the premium of {self.product} ({self.line}) at {insurer} for a "
                f"{self.object_class}: give its facts; the model follows the answers' next steps"
            ),
            arguments=[
                *(types.PromptArgument(name=f.argument, description=f.label, required=f.required)
                  for f in self.fields),
                types.PromptArgument(name=NOTES, description="anything else, in your words",
                                     required=False),
            ],
        )  # fmt: skip

    def task(self, insurer: str, arguments: Mapping[str, str]) -> str:
        missing = [f.argument for f in self.fields if f.required and not arguments.get(f.argument)]
        if missing:
            raise MCPError(INVALID_PARAMS, f"{self.name} needs {', '.join(missing)}")
        known = {f.argument for f in self.fields} | {NOTES}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise MCPError(INVALID_PARAMS, f"{self.name} takes no {', '.join(unknown)}; it takes {', '.join(sorted(known))}")  # fmt: skip
        facts = "; ".join(
            f"{f.path} ({f.label}) = {arguments[f.argument]}"
            for f in self.fields
            if arguments.get(f.argument)
        )
        notes = f" Also: {arguments[NOTES]}." if arguments.get(NOTES) else ""
        return (
            f"At {insurer}, calculate the premium of {self.product} for this {self.object_class}: "
            f"{facts}.{notes} Start with listProducts and follow each answer's next steps. Do not "
            "invent a value I did not give: ask me. Name the values left at the insurer's "
            "default as your assumptions. Nothing that binds a customer without my yes."
        )


def _argument(path: str) -> str:
    """A field's argument name: its local name (p:make → make), an identifier."""
    local = path.rsplit(":", 1)[-1].rsplit("/", 1)[-1].rsplit("#", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_]", "_", local) or "field"


def _described(field: Mapping[str, Any]) -> str:
    """A field's label with what it admits, in a few words."""
    label = str(field.get("label") or field["name"])
    if field.get("in"):
        return f"{label}: one of {', '.join(map(str, field['in']))}"
    if field.get("min") is not None and field.get("max") is not None:
        return f"{label}: {field['min']} to {field['max']}"
    return label


def product_prompts(
    products: Sequence[Mapping[str, Any]], shapes: Sequence[Mapping[str, Any]]
) -> list[ProductPrompt]:
    """One prompt per product whose risk object shape is known (by its target class)."""
    by_class = {str(s.get("targetClass")): s for s in shapes if s.get("targetClass")}
    found = []
    for product in products:
        shape = by_class.get(str(product.get("riskObjectClass")))
        if shape is None or not product.get("productId"):
            continue
        fields = tuple(
            Field(_argument(str(f["name"])), str(f["name"]), _described(f), bool(f.get("required")))
            for f in shape.get("fields", [])
            if f.get("name")
        )
        found.append(
            ProductPrompt(
                name=f"premium-{product['productId']}",
                product=str(product.get("label") or product["productId"]),
                line=str(product.get("lineOfBusiness") or ""),
                object_class=str(product.get("riskObjectClass")),
                fields=fields,
            )
        )
    return found
