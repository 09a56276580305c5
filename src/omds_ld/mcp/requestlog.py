"""The request log: one JSON line per tool call, written before the answer leaves, failures too.

It records field names, never the values a caller sent (they may be personal data).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import orjson

from omds_ld import metrics

log = logging.getLogger("omds_ld.requests")
MAX_LINE = 8 * 1024


class RequestLog:
    """Appends entries to a JSONL file, or to the ``omds_ld.requests`` logger (stderr)."""

    def __init__(self, path: Path | None = None, labels: metrics.Labels | None = None) -> None:
        self.path = path
        self.labels = labels or metrics.Labels.of((), (), ())
        self._lock = threading.Lock()
        self._out: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._out = path.open("a", encoding="utf-8")

    def write(self, entry: Mapping[str, Any]) -> None:
        metrics.observe_call(entry, self.labels)
        try:
            line = orjson.dumps(entry, default=str).decode()
        except TypeError:  # a lone surrogate a caller sent, say: written in ASCII escapes
            line = json.dumps(entry, separators=(",", ":"), default=str)
        if len(line) > MAX_LINE:  # names only, so never in practice: but no call floods the log
            cut = {k: entry.get(k) for k in ("time", "insurer", "tool", "outcome", "status")}
            line = json.dumps({**cut, "cut": len(line)}, ensure_ascii=False, default=str)
        if self._out is None:
            log.info(line)
            return
        with self._lock:
            # flushed at once: the entry is on disk before the answer leaves
            self._out.write(line + "\n")
            self._out.flush()


def field_names(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The names of the fields a call carried, nested one level into ``body``: no values."""
    names: dict[str, Any] = {"arguments": sorted(arguments)}
    body = arguments.get("body")
    if isinstance(body, Mapping):
        names["body"] = sorted(body)
    return names
