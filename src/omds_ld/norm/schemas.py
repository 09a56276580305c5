"""JSON Schema validation, compiled once per schema: every violation with its JSON pointer.

Validation runs on every request and every tool call, so it uses jsonschema-rs (compiled, about
two hundred times faster than the pure-Python validator on the norm's nested bodies). A schema
is checked against its meta-schema and compiled at its first use, or at once where asked
(``check``: a norm file given at start); a process that validates nothing (a stdio server until
its first call) never loads jsonschema-rs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One violation of a JSON schema, located by a JSON pointer into the instance."""

    pointer: str
    detail: str
    # the detail without the value that violated the schema: for personal data, whose values
    # are never repeated in an answer or a log
    redacted: str = ""


def pointer(path: Sequence[str | int]) -> str:
    """A JSON pointer (RFC 6901) from the parts of a path."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


class SchemaValidator:
    """A Draft 2020-12 schema, checked against its meta-schema and compiled once, at its first
    use (``check`` does it at once: ValueError where it is no such schema)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None

    def check(self) -> SchemaValidator:
        """Check and compile now; ValueError naming why where it is no Draft 2020-12 schema."""
        if self._validator is None:
            import jsonschema_rs

            try:
                jsonschema_rs.meta.validate(dict(self.schema))
            except jsonschema_rs.ValidationError as error:
                raise ValueError(f"not a Draft 2020-12 schema: {error}") from None
            self._validator = jsonschema_rs.Draft202012Validator(dict(self.schema))
        return self

    @property
    def _compiled(self) -> Any:
        return self.check()._validator

    def is_valid(self, instance: Any) -> bool:
        return bool(self._compiled.is_valid(instance))

    def violations(self, instance: Any, *, redact: bool = False) -> list[Violation]:
        """Every violation, ordered by where it is; empty if the instance is valid. ``redact``:
        each detail without the value that violated (``redacted``) as its detail."""
        found = []
        for error in self._compiled.iter_errors(instance):
            message = str(error.message)
            hidden = _without_value(message, error.instance)
            found.append(
                Violation(pointer(list(error.instance_path)), hidden if redact else message, hidden)
            )
        return sorted(found, key=lambda v: v.pointer)


def _without_value(message: str, value: Any) -> str:
    """A validator's message with the instance it quotes replaced: "the value is longer than
    3 characters". Where the value is a container, only its shape is said."""
    if isinstance(value, dict | list):
        return (
            message
            if message.startswith("Additional properties")
            else (
                f"the {'object' if isinstance(value, dict) else 'array'} "
                + message.split(" ", 1)[-1].split(" ", 1)[-1]
            )
        )
    quoted = json.dumps(value, ensure_ascii=False)
    if message.startswith(quoted):
        return "the value" + message[len(quoted) :]
    return message.replace(quoted, "the value") if quoted in message else message
