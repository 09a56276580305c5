"""docs/tariffs.md shows exactly the tariffs the insurers' data files hold: its tables are written
by `omds-ld insurer tariffs`, for every insurer in the folder (a fourth one too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from omds_ld.insurer.data import builtin_insurers_folder, load_insurers
from omds_ld.insurer.tariff_doc import product_tables, with_tables

DOC = Path(__file__).resolve().parents[2] / "docs" / "tariffs.md"


def test_the_documented_tables_are_the_data_as_it_is() -> None:
    text = DOC.read_text("utf-8")
    assert with_tables(text, load_insurers()) == text, (
        "docs/tariffs.md is stale: omds-ld insurer tariffs --write docs/tariffs.md"
    )


def test_the_tariff_doc_says_which_drive_type_is_exempt_from_the_motor_tax() -> None:
    """Every motor product's motor-related insurance tax, written from its data, names the
    exemption of electric cars."""
    insurers = load_insurers()
    motor = [
        (insurer, product)
        for insurer in insurers.values()
        for product in insurer.products.values()
        if product.tariff.taxes
    ]
    assert len(motor) == 3
    for insurer, product in motor:
        assert all(t.exempt == {"driveType": ("electric",)} for t in product.tariff.taxes)
        assert "not charged where the risk object's `driveType` is `electric`" in product_tables(
            insurer, product
        )
    assert "p:driveType" in DOC.read_text("utf-8")


def test_a_fourth_insurer_gets_its_tables_from_its_data(tmp_path: Path) -> None:
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    fourth = folder / "vierte"
    shutil.copytree(folder / "disrupto", fourth)
    settings = fourth / "insurer.yaml"
    settings.write_text(
        settings.read_text()
        .replace("name: disrupto", "name: vierte")
        .replace("displayName: Disrupto Insurance Tech", "displayName: Vierte Versicherung")
    )
    doc = tmp_path / "tariffs.md"
    shutil.copy(DOC, doc)
    written = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "insurer", "tariffs", str(folder), "--write", str(doc)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    insurers = load_insurers(folder)
    text = doc.read_text()
    for product in insurers["vierte"].products.values():
        assert product_tables(insurers["vierte"], product) in text
    assert text.count("### Vierte Versicherung") == 1
