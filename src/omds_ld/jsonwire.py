"""JSON as it travels: compact UTF-8 bytes, written and read by orjson where it can (several
times faster than the standard library on the norm's answers, which every tool call reads and
writes a few times), by the standard library where orjson refuses or would read otherwise: an
integer beyond 64 bits (orjson writes none and reads it as a float), a lone surrogate, NaN
written as a literal, nesting beyond orjson's limit, a body not in UTF-8.
So what is read, and every error a caller is shown, is the standard library's.

Written, a value differs from ``json.dumps`` only in form: no spaces, non-ASCII characters as
they are (UTF-8), NaN and the infinities as ``null`` (the standard library writes ``NaN``, which
is no JSON); a value orjson cannot write comes out as the standard library writes it, in ASCII
escapes, so that any string encodes."""

from __future__ import annotations

import json
from typing import Any

import orjson

# orjson reads an integer beyond 64 bits as a float, silently: a text with a run of 19 digits
# or more (anywhere, strings too) is read by the standard library. Found by mapping every digit
# to "0" and everything else to " " and looking for nineteen "0" in a row (bytes' own search:
# some ten times faster than a regular expression, a quarter of orjson's own parse)
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_NUMBER = b"0" * 19


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """The value of a JSON text; the standard library's ``ValueError`` (or ``RecursionError``,
    ``UnicodeDecodeError``) where it is none."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)
