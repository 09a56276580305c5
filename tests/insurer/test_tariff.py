"""The tariff as a pure function: bands, exact values, rates, taxes and rounding."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omds_ld.insurer.tariff import Tariff, TariffError, TariffInput, calculate, money

TARIFF = Tariff.parse(
    {
        "currency": "EUR",
        "period": "P1Y",
        "components": {
            "liability": {
                "base": 100,
                "insuranceTax": 0.11,
                "factors": [
                    {"riskObject": "powerKw", "bands": [[50, 0.5], [100, 1.0], [None, 2.0]]},
                    {"attribute": "district", "values": {"W": 1.105, "T": 1.0}},
                ],
            },
            "cover": {"base": {"rate": 0.01, "riskObject": "listPrice"}, "insuranceTax": 0.04},
        },
        "taxes": [
            {"id": "motor", "label": {"en": "motor"}, "riskObject": "powerKw",
             "offset": 24, "minimum": 10, "rate": 8.28},
        ],
    }
)  # fmt: skip


def priced(kw: int, district: str = "T", included: tuple[str, ...] = ("liability",)) -> Decimal:
    data = TariffInput(included, {"": {"district": district}}, {"powerKw": kw, "listPrice": 20000})
    return calculate(TARIFF, data).gross


def test_band_bounds_are_inclusive() -> None:
    assert priced(50) == Decimal("50.00") + Decimal("5.50") + Decimal("215.28")
    assert priced(51) == Decimal("100.00") + Decimal("11.00") + Decimal("223.56")
    assert priced(101) == Decimal("200.00") + Decimal("22.00") + Decimal("637.56")


def test_unit_tax_has_a_minimum() -> None:
    assert priced(20) == Decimal("50.00") + Decimal("5.50") + Decimal("82.80")


def test_amounts_round_half_up_to_cents() -> None:
    # 100 x 1.0 x 1.105 = 110.50; insurance tax 110.50 x 0.11 = 12.155 -> 12.16
    premium = calculate(
        TARIFF, TariffInput(("liability",), {"": {"district": "W"}}, {"powerKw": 60})
    )
    assert premium.components[0].net == Decimal("110.50")
    assert premium.components[0].insurance_tax == Decimal("12.16")


def test_rate_of_an_input_and_only_included_components_count() -> None:
    both = priced(60, included=("liability", "cover"))
    assert both - priced(60) == Decimal("200.00") + Decimal("8.00")


def test_missing_rate_is_an_error_not_a_zero() -> None:
    with pytest.raises(TariffError):
        priced(60, district="X")


@given(st.integers(min_value=1, max_value=600), st.sampled_from(["W", "T"]))
def test_gross_is_the_sum_of_its_parts(kw: int, district: str) -> None:
    premium = calculate(
        TARIFF,
        TariffInput(
            ("liability", "cover"), {"": {"district": district}}, {"powerKw": kw, "listPrice": 5000}
        ),
    )
    parts = premium.net + premium.insurance_tax + sum(t.amount for t in premium.unit_taxes)
    assert premium.gross == parts
    assert all(money(c.net) == c.net for c in premium.components)
