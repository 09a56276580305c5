"""The process's log lines: one format, each line capped, so no request can flood the log."""

from __future__ import annotations

import logging
import sys

MAX_LINE = 8 * 1024


class CappedFormatter(logging.Formatter):
    """Formats a record as usual, then cuts it (traceback included) to ``MAX_LINE`` characters."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if len(text) <= MAX_LINE:
            return text
        return text[:MAX_LINE] + f" … [{len(text) - MAX_LINE} more characters cut]"


def configure(level: str) -> None:
    """Log to stderr (stdout may carry a protocol), every line capped."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(CappedFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])
    logging.getLogger("httpx").setLevel(logging.WARNING)
