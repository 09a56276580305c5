"""A session's memory carried by the client: for a client without a session (the 2026-07-28
era is sessionless), what an answer showed goes out as a short token, ``seen``, among the
arguments its next steps share, and comes back with the next call. The answer to that call
then names what it showed the same before ("unchanged", "as before", a shape's fields) as a
session's would, and the server keeps nothing of the client.

The token holds digests only, never values: of the shapes the answers named, and of each part
of a case's answer (its draft, its defaults, its risk objects) as it was shown. A token that is
no token of ours, or another case's, matches nothing: the answer is whole; one sent again after
the case changed gets whole what changed since, as a session would. Next steps are not carried:
a digest per step costs a model more to read and send back than naming them "as before" saves.

Layout (base64url, unpadded; a model reads and writes about a token per byte): one byte of
version (high 3 bits) and number of shapes (low 5 bits), 3 bytes per shape (a digest of its
IRI: a shape taken for seen by chance would not show its fields), then per part 2 bytes of its
key's digest and the 4-byte digest of what was shown (both must match)."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

VERSION = 1
MAX_SHAPES = 24  # the latest named (at most 31 fit the first byte)
MAX_PARTS = 9  # the latest shown: a case's answer has three
STEPS = " next steps"  # the key of a case's next steps: not carried
MAX_TOKEN_LENGTH = 1024  # what the tools' input schema admits
_SHAPE = 3
_PART = 2 + 4


@functools.lru_cache(maxsize=2048)  # of IRIs and parts' keys: the same ones call after call
def _digest(text: str, size: int = 2) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:size]


@dataclass(frozen=True)
class Carried:
    """What a client without a session was shown, as its last answer's ``seen`` said."""

    shapes: tuple[bytes, ...] = ()  # digests of the shapes' IRIs, the latest last
    parts: dict[bytes, bytes] = field(default_factory=dict)  # key digest → digest shown

    @classmethod
    def read(cls, token: object) -> Carried:
        """The memory of ``token``; an empty one where it is none of ours."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            return cls()
        try:
            data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            return cls()
        if not data or data[0] >> 5 != VERSION:
            return cls()
        end = 1 + _SHAPE * (data[0] & 0x1F)
        if end > len(data) or (len(data) - end) % _PART:
            return cls()
        shapes = tuple(data[i : i + _SHAPE] for i in range(1, end, _SHAPE))
        parts = {data[i : i + 2]: data[i + 2 : i + _PART] for i in range(end, len(data), _PART)}
        return cls(shapes, parts)

    @property
    def shapes_seen(self) -> _Shapes:
        return _Shapes(frozenset(self.shapes))

    @property
    def drafts_seen(self) -> _Parts:
        return _Parts(self.parts)

    def after(self, shown: Mapping[str, str], shapes: Iterable[str]) -> Carried:
        """This memory, and what an answer showed (its parts by key, the shapes it named)."""
        named = [_digest(iri, _SHAPE) for iri in shapes]
        kept = [s for s in self.shapes if s not in named] + list(dict.fromkeys(named))
        parts = dict(self.parts)
        for key, value in shown.items():
            if not key.endswith(STEPS):
                parts.pop(_digest(key), None)
                parts[_digest(key)] = bytes.fromhex(value)
        latest = dict(list(parts.items())[-MAX_PARTS:])
        return Carried(tuple(kept[-MAX_SHAPES:]), latest)

    def token(self) -> str:
        data = bytearray([VERSION << 5 | len(self.shapes)])
        for shape in self.shapes:
            data += shape
        for key, value in self.parts.items():
            data += key + value
        return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode()


@dataclass(frozen=True)
class _Shapes:
    """The shapes a token names, asked by IRI."""

    digests: frozenset[bytes]

    def __contains__(self, iri: object) -> bool:
        return isinstance(iri, str) and _digest(iri, _SHAPE) in self.digests

    def __iter__(self) -> Iterator[str]:
        return iter(())  # the IRIs themselves are not in the token

    def __len__(self) -> int:
        return len(self.digests)


class _Parts(Mapping[str, str]):
    """The parts a token names, asked by key, each as the session's memory writes it."""

    def __init__(self, parts: Mapping[bytes, bytes]) -> None:
        self._parts = parts

    def __getitem__(self, key: str) -> str:
        if key.endswith(STEPS):
            raise KeyError(key)
        return self._parts[_digest(key)].hex()

    def get(self, key: str, default: Any = None) -> Any:  # Mapping's goes by KeyError: slower
        shown = None if key.endswith(STEPS) else self._parts.get(_digest(key))
        return default if shown is None else shown.hex()

    def __iter__(self) -> Iterator[str]:
        return iter(())  # the keys themselves are not in the token

    def __len__(self) -> int:
        return len(self._parts)
