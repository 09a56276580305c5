"""The request log: one JSON line per tool call, written before the answer leaves, failures too.

It records field names, never the values a caller sent (they may be personal data).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("omds_ld.requests")


class RequestLog:
    """Appends entries to a JSONL file, or to the ``omds_ld.requests`` logger (stderr)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
        if self.path is None:
            log.info(line)
            return
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


def field_names(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The names of the fields a call carried, nested one level into ``body``: no values."""
    names: dict[str, Any] = {"arguments": sorted(arguments)}
    body = arguments.get("body")
    if isinstance(body, Mapping):
        names["body"] = sorted(body)
    return names
