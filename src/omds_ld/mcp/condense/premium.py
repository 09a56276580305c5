"""A premium condensed: gross, net, taxes and each component's share, per period in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omds_ld.mcp.condense.writer import Writer, label, many

# how a premium's period (ISO 8601) reads: "per year", not "per P1Y"
PERIODS = {
    "P1Y": ("per year", "pro Jahr"),
    "P6M": ("per half-year", "pro Halbjahr"),
    "P3M": ("per quarter", "pro Quartal"),
    "P1M": ("per month", "pro Monat"),
}


def per_period(period: Any) -> dict[str, str]:
    """A period as words in both languages (an unknown one as it came: "per P2Y")."""
    en, de = PERIODS.get(str(period), (f"per {period}", f"pro {period}"))
    return {"en": en, "de": de}


def write_premium(w: Writer, premium: Mapping[str, Any] | None) -> None:
    if not premium:
        return
    currency = premium.get("bc:currency", "")
    taxes = [
        {"type": t.get("bc:taxType"), "label": label(t.get("rdfs:label"), w.language),
         "amount": t.get("bc:amount")}
        for t in many(premium.get("bc:tax"))
    ]  # fmt: skip
    components = [
        {"component": c.get("bc:component"), "label": label(c.get("rdfs:label"), w.language),
         "net": c.get("bc:net"), "insuranceTax": c.get("bc:insuranceTax")}
        for c in many(premium.get("bc:component"))
    ]  # fmt: skip
    tax_text = "; ".join(f"{t['label']} {t['amount']}" for t in taxes)
    per = per_period(premium.get("bc:period"))
    w.line(
        f"Premium: {premium.get('bc:gross')} {currency} gross {per['en']} "
        f"(net {premium.get('bc:net')}; {tax_text})"
    )
    for component in components:
        w.line(
            f"{component['label']}: net {component['net']}, "
            f"insurance tax {component['insuranceTax']}",
            1,
        )
    w.data["premium"] = {
        "gross": premium.get("bc:gross"),
        "net": premium.get("bc:net"),
        "currency": currency,
        "period": premium.get("bc:period"),
        "per": per,
        "taxes": taxes,
        "components": components,
    }
