"""The writer every part of a condensed answer is written through: the text a model reads and
the structured form a program reads, side by side, with IRIs below the answer's own written as
``~/…``; and the small ways values read in the text."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "s")


# a value as the text shows it (JSON): json.dumps with these options makes an encoder per call
_AS_JSON = json.JSONEncoder(ensure_ascii=False).encode
as_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def as_json(value: Any) -> str:
    """``value`` in JSON as the standard library writes it (``ensure_ascii=False``); a whole
    number or a boolean at once (the encoder builds an iterator for every value not a string)."""
    kind = value.__class__
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    return _AS_JSON(value)


@dataclass(frozen=True)
class Condensed:
    """What the model sees (text) and what a program reads (structured)."""

    text: str
    structured: dict[str, Any]
    # each draft the text showed whole: its IRI and a digest of what was shown
    drafts: dict[str, str] = dataclasses.field(default_factory=dict)


def label(value: Any, language: str) -> str:
    """A label in the wanted language, else English, else any."""
    if value.__class__ is str:  # the most common, first
        return value
    if isinstance(value, dict) or (not isinstance(value, str) and isinstance(value, Mapping)):
        for key in (language, "en", "de"):
            if key in value:
                return str(value[key])
        return str(next(iter(value.values()), ""))
    return "" if value is None else str(value)


def many(value: Any) -> list[Any]:
    """A value that JSON-LD may write single or as an array, always as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def local(iri: str) -> str:
    return iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Effects:
    """What the norm says of the call answered (x-omds-ld kind, about, keeps): its operation
    and kind, the parts of the business case it keeps as they were, and the part each
    operation acts on."""

    operation: str = ""
    kind: str = "read"
    keeps: frozenset[str] = frozenset()
    about: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def keeps_part_of(self, operation: str) -> bool:
        """Whether a step to ``operation`` acts on a part this call kept (so it was offered
        before the call, the same)."""
        return self.about.get(operation, "") in self.keeps


@dataclass
class Shared:
    """What one session of the broker endpoint was shown at any of its insurers, by content: a
    draft (its lines, IRIs below the answer's ~) or a shape's fields shown the same before, at
    another insurer, is named, not repeated."""

    drafts: dict[str, str] = dataclasses.field(default_factory=dict)  # digest → where shown
    shapes: dict[str, str] = dataclasses.field(default_factory=dict)  # digest → where shown


class Writer:
    """Collects the text and the structured form side by side; what the session was shown
    before comes in with it (``omds_ld.mcp.condense.memory``)."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.lines: list[str] = []
        self.data: dict[str, Any] = {}
        self.base: str | None = None
        self._below = "\0"  # base + "/": what an IRI below it starts with (none before one)
        self._declared_at = 0
        self._abbreviated: list[str] = []
        # in an inquiry's instance, attributes are named by property and nodes by what they are
        self.by_property = False
        self.inquired: str | None = None  # the product an inquiry's instance is of
        self.shown_properties: set[str] = set()
        self.absent: list[str] = []
        # the drafts this session was shown (IRI → digest) and whether an unchanged one is only
        # named (in the answer of an edit; a read shows it whole)
        self.drafts_before: Mapping[str, str] = {}
        self.name_unchanged = False
        self.drafts: dict[str, str] = {}
        self.shared: Shared | None = None  # a broker session's memory across its insurers
        # the risk objects the call sent (its body, or an inquiry's instance's): one stored
        # with the same fields is not written out again
        self.sent: list[dict[str, Any]] = []
        self.insurer = ""
        # the norm's deprecated operations, each with the one to use instead ("" if none)
        self.deprecated: Mapping[str, str] = {}
        # the shape of each operation's body part that the person using the client states
        # (the model sends only what it was told of it)
        self.stated: Mapping[str, str] = {}
        # what the call could not change, as the norm says
        self.effects = Effects()
        # a client without a session: a draft shown whole says its version, which a later
        # answer that keeps it names
        self.versioned = False

    def abbreviate_below(self, base: str) -> None:
        """Write IRIs below ``base`` as ``~/...`` in the text (the structured form keeps them whole)."""
        self.base = base.rstrip("/")
        self._below = self.base + "/"
        self._declared_at = len(self.lines)
        self._abbreviated = []
        self.line(f"~ = {self.base}")

    def iri(self, iri: Any) -> str:
        text = iri if iri.__class__ is str else str(iri)
        if self.base and (text.startswith(self._below) or text == self.base):
            short = "~" + text[len(self.base) :]
            self._abbreviated.append(short)
            return short
        return text

    def settle_abbreviation(self) -> None:
        """An abbreviation used once costs more than it saves: the IRI is written whole. Uses
        are counted in the lines as they end up (a draft's lines replaced by one that names it
        unchanged leave one use, not the dozen once written)."""
        if self.base is None:
            return
        if len(self._abbreviated) > 1:
            uses = 0
            for line in self.lines[self._declared_at + 1 :]:
                uses += line.count("~")
                if uses > 1:
                    return
        del self.lines[self._declared_at]
        # the one use left (where a short is the start of it, "~/draft" of "~/draft/x", it is
        # written whole all the same)
        for short in self._abbreviated:
            for index in range(self._declared_at, len(self.lines)):
                if short in self.lines[index]:
                    whole = self.base + short[1:]
                    self.lines[index] = self.lines[index].replace(short, whole, 1)
                    self.base = None
                    return
        self.base = None

    def line(self, text: str = "", indent: int = 0) -> None:
        self.lines.append("  " * indent + text)

    def missing(self, what: str) -> None:
        """Something the norm's answer profile asks for is not in the insurer's answer."""
        if what not in self.absent:
            self.absent.append(what)

    def report_missing(self) -> None:
        if self.absent:
            self.line("Not in the insurer's answer: " + "; ".join(self.absent))
            self.data["missing"] = list(self.absent)
