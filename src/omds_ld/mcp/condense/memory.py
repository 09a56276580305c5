"""What a session was shown before, so that an answer names it instead of repeating it: the
case's last answer in this session (an edit's answer says "unchanged", "as before"), and in a
broker endpoint's session what was shown at another insurer ("as for Disrupto"). Pure: the
memory comes in with the call (``drafts_seen``, ``Shared``) and goes out with the answer
(``Condensed.drafts``); a client without a session carries it
(``omds_ld.mcp.seen``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from omds_ld.mcp.condense.writer import Writer

DEFAULTS_AS_BEFORE = "Still at the insurer's default: as before"


def digest_of(lines: Sequence[str]) -> str:
    """What stands for lines shown (32 bits: a client without a session carries it)."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:8]


def step_digest(text: str) -> str:
    """What stands for a next step's line (24 bits: an answer lists up to 30)."""
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def same_as_last(
    w: Writer, key: str, start: int, instead: str, whole: Sequence[str] | None = None
) -> bool:
    """The lines from ``start`` stay unless this session's last answer of the case showed
    them the same (``whole``: what they stand for) and this is an edit's answer: then
    ``instead`` stands for them."""
    digest = digest_of(w.lines[start:] if whole is None else whole)
    w.drafts[key] = digest
    if w.name_unchanged and w.drafts_before.get(key) == digest:
        del w.lines[start:]
        w.line(instead)
        return True
    return False


def as_elsewhere(w: Writer, kind: str, start: int, instead: str) -> None:
    """In a broker session, lines from ``start`` shown the same for another insurer before
    stand as ``instead`` (its ``{where}`` naming that insurer)."""
    if w.shared is None or not w.name_unchanged:
        return
    shown = w.shared.drafts
    digest = f"{kind} " + digest_of(w.lines[start:])
    where = shown.get(digest)
    if where is None:
        shown[digest] = w.insurer
    elif where != w.insurer:
        del w.lines[start:]
        w.line(instead.format(where=where))


UNCHANGED_BY_THIS_CALL = "unchanged by this call"


def unless_unchanged(w: Writer, iri: str, start: int, name: str) -> bool:
    """The draft's tree from ``start`` stays unless this session was shown the same tree
    before (of this case, or in a broker session of another insurer's) and this is an edit's
    answer, or the call keeps it (the norm says it cannot change it): then one line says so.
    True where the case's last answer showed it the same or the call kept it. Without a
    session, the draft's head says its version, which the line of a kept one repeats."""
    if w.versioned:
        w.lines[start - 1] += f" (version {digest_of(w.lines[start:])})"
    head = w.lines[start - 1]
    unchanged = f"{head}: unchanged since the last answer"
    if same_as_last(w, iri, start, unchanged):
        del w.lines[start - 1]
        return True
    if "components" in w.effects.keeps:
        del w.lines[start - 1 :]
        w.line(f"{head}: {UNCHANGED_BY_THIS_CALL}")
        return True
    digest = w.drafts[iri]
    if w.name_unchanged and w.shared is not None:
        where = w.shared.drafts.get(digest)
        if where is not None:
            del w.lines[start - 1 :]
            w.line(f"Draft of {name} {w.iri(iri)}: as shown for {where}, below this ~")
        else:
            w.shared.drafts[digest] = w.insurer
    return False
