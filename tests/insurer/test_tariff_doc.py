"""docs/tariffs.md shows exactly the tariffs the example insurers' data files hold."""

from __future__ import annotations

from pathlib import Path

from omds_ld.insurer.data import load_insurers
from tests.insurer.tariff_tables import product_tables

DOC = Path(__file__).resolve().parents[2] / "docs" / "tariffs.md"


def test_every_tariff_table_is_documented_as_it_is() -> None:
    text = DOC.read_text("utf-8")
    for insurer in load_insurers().values():
        for product in insurer.products.values():
            assert product_tables(insurer, product) in text, (
                f"{product.id}: docs/tariffs.md is stale"
            )
