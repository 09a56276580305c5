"""Bounded scope: no list in an answer grows without limit; what is left out is said, and how to get it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

PRECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["returned", "total", "more_to_find"],
    "properties": {
        "returned": {"type": "integer"},
        "total": {"type": "integer"},
        "more_to_find": {"type": "integer"},
        "how_to_get_more": {"type": "string"},
    },
}


@dataclass(frozen=True)
class Precision:
    """How much of a list an answer carries: returned, total, how many more, how to get them."""

    returned: int
    total: int
    more_to_find: int
    how_to_get_more: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "returned": self.returned,
            "total": self.total,
            "more_to_find": self.more_to_find,
        }
        if self.more_to_find and self.how_to_get_more:
            out["how_to_get_more"] = self.how_to_get_more
        return out

    def line(self) -> str:
        if not self.more_to_find:
            return f"{self.returned} of {self.total}"
        return f"{self.returned} of {self.total}; {self.more_to_find} more: {self.how_to_get_more}"


def bound(items: Sequence[T], limit: int, how_to_get_more: str) -> tuple[list[T], Precision]:
    """At most ``limit`` items, with the precision block that says what was left out."""
    kept = list(items[:limit])
    return kept, Precision(len(kept), len(items), len(items) - len(kept), how_to_get_more)


def window(returned: int, total: int, more_to_find: int, how_to_get_more: str | None) -> Precision:
    """The precision block of a window the insurer already cut (``bc:window``)."""
    return Precision(returned, total, more_to_find, how_to_get_more)
