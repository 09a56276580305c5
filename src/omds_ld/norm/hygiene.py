"""What any value a client sends may contain, before its schema is even looked at.

The norm's bodies and arguments carry identifiers, IRIs, numbers and short values, never free
text. So a string with a control character (a newline included) or a lone surrogate (which no
UTF-8 can encode) is refused, never cleaned: a value that was changed silently is a value the
client did not send. Nesting is bounded, keys count as strings. A pure function; the interface
and the MCP server both use it, so both refuse the same input with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from omds_ld.norm.schemas import Violation, pointer

MAX_DEPTH = 32
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _problem_of(text: str) -> str | None:
    if _SURROGATE.search(text):
        return "contains a lone surrogate (\\ud800-\\udfff), which is not Unicode text"
    match = _CONTROL.search(text)
    if match:
        return (
            f"contains the control character U+{ord(match.group()):04X}; "
            "values carry no control characters (no newline, no tab)"
        )
    return None


def _walk(value: Any) -> Iterator[tuple[tuple[str, ...], str]]:
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        parts, item = stack.pop()
        if len(parts) > MAX_DEPTH:
            yield parts, f"nested deeper than {MAX_DEPTH} levels"
            continue
        if isinstance(item, str):
            problem = _problem_of(item)
            if problem:
                yield parts, problem
        elif isinstance(item, dict):
            for key, child in item.items():
                name = str(key)
                problem = _problem_of(name)
                if problem:
                    yield (*parts, _printable(name)), f"the name {problem}"
                    continue
                stack.append(((*parts, name), child))
        elif isinstance(item, list):
            stack.extend(((*parts, str(i)), child) for i, child in enumerate(item))


def _printable(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")


def violations(value: Any, limit: int = 10) -> list[Violation]:
    """Every string (key or value) that no request may carry, each with its JSON pointer."""
    found = []
    for parts, detail in _walk(value):
        found.append(Violation(pointer(parts), detail))
        if len(found) >= limit:
            break
    found.sort(key=lambda v: v.pointer)
    return found
