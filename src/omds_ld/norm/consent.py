"""The customer's consent to an offer, as the norm admits it: one set of rules, one set of words.

The insurer's interface, the MCP server (what the model was told, what the person states) and
the confirmation page each check a consent with these functions, so that a value refused at one
is refused at every one with the same words: who consented (a name), how (one of ``METHODS``) and
when (a date and time with its offset, not before the offer was made, not in the future).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

METHODS = ("in-person", "phone", "video", "written", "electronic")
METHOD_LABELS = {
    "in-person": ("persönlich", "in person"),
    "phone": ("telefonisch", "by phone"),
    "video": ("per Video", "by video"),
    "written": ("schriftlich", "in writing"),
    "electronic": ("elektronisch", "electronically"),
}
FIELDS = ("bc:consentedBy", "bc:consentMethod", "bc:consentedAt")
MAX_WHO = 200
MAX_MOMENT = 40  # the norm's bound on bc:consentedAt
CLOCK_SKEW = dt.timedelta(minutes=5)  # a consent "from the future" within this is a clock's drift


def moment(text: Any) -> dt.datetime | None:
    """A date and time with its offset (ISO 8601), else None."""
    if not isinstance(text, str) or not text or len(text) > MAX_MOMENT:
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else None


def time_error(
    text: Any, offered_at: dt.datetime | None, now: dt.datetime, language: str = "en"
) -> str | None:
    """Which rule a consent's time breaks, in words naming it; None where it is admissible.

    The rules, in this order: a date and time (ISO 8601) at all; with its offset (a time without
    one is no moment: 17:30 in Vienna and in London are an hour apart); not in the future (beyond
    a clock's drift); not before the offer was made (consent is to this offer, never carried
    over from another's conditions)."""
    de = language == "de"
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_MOMENT:
        return (
            "zugestimmt am: Datum und Uhrzeit mit Zeitzone (ISO 8601), etwa "
            "2026-12-06T17:30:00+01:00"
            if de
            else "consented at: a date and time with its offset (ISO 8601), such as "
            "2026-12-06T17:30:00+01:00"
        )
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return (
            f"zugestimmt am: {text!r} ist kein Datum mit Uhrzeit (ISO 8601), etwa "
            "2026-12-06T17:30:00+01:00"
            if de
            else f"consented at: {text!r} is no date and time (ISO 8601), such as "
            "2026-12-06T17:30:00+01:00"
        )
    if value.tzinfo is None:
        return (
            f"zugestimmt am: {text} hat keine Zeitzone (+01:00, Z); ohne sie ist die Uhrzeit "
            "kein Zeitpunkt"
            if de
            else f"consented at: {text} has no offset (+01:00, Z); without one the time is no "
            "moment"
        )
    if value > now + CLOCK_SKEW:
        shown = now.astimezone(value.tzinfo).isoformat(timespec="minutes")
        return (
            f"zugestimmt am: {text} liegt in der Zukunft (jetzt ist {shown})"
            if de
            else f"consented at: {text} is in the future (it is {shown} now)"
        )
    if offered_at is not None and value < offered_at - CLOCK_SKEW:
        made = offered_at.astimezone(value.tzinfo).isoformat(timespec="minutes")
        return (
            f"zugestimmt am: {text} liegt vor der Erstellung dieses Angebots ({made}); die "
            "Zustimmung des Kunden muss diesem Angebot gelten"
            if de
            else f"consented at: {text} is before this offer was made ({made}); the customer's "
            "consent must be to this offer"
        )
    return None


def before_offer(text: Any, offered_at: dt.datetime | None) -> bool:
    """Whether a time is admissible in every way but one: it is before the offer was made."""
    value = moment(text)
    return value is not None and offered_at is not None and value < offered_at - CLOCK_SKEW


def who_error(text: Any, language: str = "en") -> str | None:
    who = " ".join(str(text or "").split()) if isinstance(text, str) else ""
    if 0 < len(who) <= MAX_WHO and not any(c < " " or "\x7f" <= c <= "\x9f" for c in who):
        return None
    if language == "de":
        return (
            "zugestimmt von: der Name der Person, die zugestimmt hat, höchstens 200 Zeichen, "
            "keine Steuerzeichen"
        )
    return (
        "consented by: the name of the person who consented, at most 200 characters, no "
        "control characters"
    )


def method_error(text: Any, language: str = "en") -> str | None:
    if text in METHODS:
        return None
    shown = ", ".join(METHODS)
    if language == "de":
        return f"Art der Zustimmung: eine von {shown}"
    return f"how consent was given: one of {shown}"


def errors(
    consent: Mapping[str, Any],
    offered_at: dt.datetime | None,
    now: dt.datetime,
    language: str = "en",
    fields: tuple[str, ...] = FIELDS,
) -> dict[str, str]:
    """Each field of ``fields`` the consent does not admit, with the rule it breaks (a field not
    given breaks its rule too)."""
    found = {
        "bc:consentedBy": who_error(consent.get("bc:consentedBy"), language),
        "bc:consentMethod": method_error(consent.get("bc:consentMethod"), language),
        "bc:consentedAt": time_error(consent.get("bc:consentedAt"), offered_at, now, language),
    }
    return {name: error for name, error in found.items() if error and name in fields}


def method_label(method: str, language: str = "en") -> str:
    de, en = METHOD_LABELS.get(method, (method, method))
    return de if language == "de" else en
