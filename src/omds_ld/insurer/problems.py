"""Problems of the norm raised by the insurer's interface; one place turns them into responses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """What was wrong with one part of a request, located by a JSON pointer."""

    pointer: str
    detail: str


class Problem(Exception):
    """A rejected request: a problem type of the norm, an explanation and what is still admissible.

    ``next_steps`` of None means "the operations admissible in the current context": the app fills
    them in where it knows that context.
    """

    def __init__(
        self,
        slug: str,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        next_steps: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.slug = slug
        self.detail = detail
        self.errors = tuple(errors)
        self.next_steps = next_steps
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})
