"""A tool call refused before (or instead of) asking the insurer."""

from __future__ import annotations

from typing import Any


class Refusal(Exception):
    """A call refused before the insurer was asked, as a problem of the norm."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem.get("detail"))
        self.problem = problem
