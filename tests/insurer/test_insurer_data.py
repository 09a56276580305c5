"""Insurers as data are checked when loaded: each class of mistake stops the start, naming the
file, the key and what is wrong; ``omds-ld insurer check`` says the same to an insurer's author."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from omds_ld.insurer.checks import InsurerDataError
from omds_ld.insurer.data import builtin_insurers_folder, load_insurers
from tests.servers import free_port


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


PFEFFERMINZIA = "pfefferminzia/kraftfahrt-2025.yaml"
TABLE = "registration-districts-at.yaml"


def _own_table(folder: Path) -> Path:
    """The package's district table, copied into Pfefferminzia's folder (where it is read
    first), to be edited there."""
    own = folder / "pfefferminzia" / TABLE
    shutil.copy(Path(str(builtin_insurers_folder().parent / "tables" / TABLE)), own)
    return own


MISTAKES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "a misspelt attribute": (
        lambda f: _edit(f / PFEFFERMINZIA, "attribute: bonusMalusStufe", "attribute: bonusMalus"),
        "tariff.components.kfz-haftpflicht.factors[1]",
        "'bonusMalus' is no attribute field of its shapes",
    ),
    "a misspelt risk object field": (
        lambda f: _edit(f / PFEFFERMINZIA, "riskObject: yearOfConstruction", "riskObject: baujahr"),
        "tariff.components.teilkasko.factors[1]",
        "'baujahr' is no risk object field",
    ),
    "an enumeration value without a factor": (
        lambda f: _edit(f / PFEFFERMINZIA, 'values: { "0": 1.15, "150": 1.00,', 'values: { "150": 1.00,'),
        "tariff.components.teilkasko.factors[0]",
        "selbstbehaltTeilkasko may be 0 (its shape's sh:in), but the tariff has no factor for it",
    ),
    "a component without a price": (
        lambda f: _edit(f / PFEFFERMINZIA, "    rechtsschutz:\n      base: 89.00\n      insuranceTax: 0.11\n", ""),
        "tariff.components.rechtsschutz",
        "the component has no tariff entry",
    ),
    "a tariff for a component that does not exist": (
        lambda f: _edit(f / PFEFFERMINZIA, "    rechtsschutz:\n", "    rechtschutz:\n"),
        "tariff.components.rechtschutz",
        "no component 'rechtschutz'",
    ),
    "a warning about a field the shapes do not have": (
        lambda f: _edit(f / PFEFFERMINZIA, "    riskObject: licensePlate\n", "    riskObject: plate\n"),
        "warnings[0]",
        "'plate' is no risk object field",
    ),
    "an exemption by a field the shapes do not have": (
        lambda f: _edit(f / PFEFFERMINZIA, "exempt: { driveType:", "exempt: { antrieb:"),
        "tariff.taxes[0].exempt",
        "'antrieb' is no risk object field",
    ),
    "a coded value without its meaning": (
        lambda f: _edit(
            f / "pfefferminzia/shapes.ttl",
            '[ p:value "St" ; rdfs:label "Steiermark"@de, "Styria"@en ] ,',
            "",
        ),
        "shapes: zulassungsbezirk",
        "the value 'St' has no p:valueLabel in German and English",
    ),
    "a key the format does not know": (
        lambda f: _edit(f / PFEFFERMINZIA, "lineOfBusiness:", "lineOfBussiness:"),
        "/",
        "lineOfBusiness",
    ),
    "a district table that lists a code twice": (
        lambda f: _edit(_own_table(f), "W: [W]", "W: [W, G]"),
        "warnings",
        "the table registration-districts-at.yaml: the code G is listed for W and St",
    ),
    "a district table with a value the attribute cannot have": (
        lambda f: _edit(_own_table(f), "St: [G,", "ST: [G,"),
        "warnings[0]",
        "its table names 'ST', no value zulassungsbezirk may have",
    ),
    "a district table that is not there": (
        lambda f: _edit(f / PFEFFERMINZIA, "table: registration-districts-at.yaml", "table: at.yaml"),
        "warnings",
        "the table at.yaml:",
    ),
    "a product class no shape targets": (
        lambda f: _edit(f / PFEFFERMINZIA, "vocab#Kraftfahrt2025\n", "vocab#Kraftfahrt2026\n"),
        "class",
        "no shape targets https://pfefferminzia.example/vocab#Kraftfahrt2026",
    ),
}  # fmt: skip


def test_the_example_insurers_have_no_mistakes() -> None:
    assert set(load_insurers()) >= {"pfefferminzia", "disrupto", "angloamerican"}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_stops_the_load_naming_file_and_key(mistake: str, tmp_path: Path) -> None:
    make, key, detail = MISTAKES[mistake]
    folder = _copy(tmp_path)
    make(folder)
    with pytest.raises(InsurerDataError) as raised:
        load_insurers(folder)
    findings = raised.value.findings
    assert any(
        f.file.endswith(PFEFFERMINZIA) and f.key == key and detail in f.detail for f in findings
    ), [str(f) for f in findings]


def test_an_insurers_time_zone_is_read_and_an_unknown_one_stops_the_load(tmp_path: Path) -> None:
    """``timeZone`` in insurer.yaml (docs/norm-maintainer.md): where the insurer's today is
    measured; a name that is no IANA time zone names the file and the key."""
    folder = _copy(tmp_path)
    described = folder / "pfefferminzia" / "insurer.yaml"
    text = described.read_text()
    described.write_text(text + "timeZone: Pacific/Kiritimati\n")
    assert load_insurers(folder)["pfefferminzia"].time_zone == "Pacific/Kiritimati"
    assert load_insurers(folder)["disrupto"].time_zone == "Europe/Vienna"  # the default
    described.write_text(text + "timeZone: Europe/Wein\n")
    with pytest.raises(InsurerDataError) as raised:
        load_insurers(folder)
    assert [(Path(f.file).name, f.key) for f in raised.value.findings] == [
        ("insurer.yaml", "/timeZone")
    ]
    assert "'Europe/Wein' is no IANA time zone" in raised.value.findings[0].detail


def test_serve_refuses_to_start_with_a_broken_insurer_and_says_why(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    MISTAKES["a misspelt attribute"][0](folder)
    result = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "serve", "--insurers", str(folder),
         "--port", str(free_port()), "--database", str(tmp_path / "s.sqlite3")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert re.search(r"kraftfahrt-2025\.yaml: tariff\.components\.kfz-haftpflicht", result.stderr)
    assert "Traceback" not in result.stderr


def test_insurer_check_reports_each_insurer(tmp_path: Path) -> None:
    def check(folder: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "omds_ld.cli", "insurer", "check", str(folder)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    good = check(builtin_insurers_folder())
    assert good.returncode == 0, good.stdout + good.stderr
    assert "pfefferminzia: ok" in good.stdout
    folder = _copy(tmp_path)
    MISTAKES["an enumeration value without a factor"][0](folder)
    bad = check(folder / "pfefferminzia")
    assert bad.returncode == 1
    assert "tariff.components.teilkasko.factors[0]" in bad.stdout


# the plate-versus-district warning, on every code of Austria's table


def _warnings(plate: str, district: str) -> list[str]:
    """The warnings of a Pfefferminzia draft with this plate and this registration district."""
    from omds_ld.insurer.draft import Draft, RiskObject
    from omds_ld.insurer.validation import validate_draft
    from omds_ld.norm.jsonld import expand_curie
    from tests.insurer.test_flows import SKODA

    product = load_insurers()["pfefferminzia"].products["kraftfahrt-2025"]
    values = {expand_curie(k): v for k, v in SKODA.items() if k != "@type"}
    values[expand_curie("p:licensePlate")] = plate
    draft = Draft.default(product).with_attributes({("", "zulassungsbezirk"): district})
    draft = draft.with_risk_object(RiskObject("1", expand_curie("p:Vehicle"), values))
    report = validate_draft(product, draft, "https://pfefferminzia.example/cases/x/draft")
    return [r.messages["en"] for r in report.results if r.severity.endswith("Warning")]


def _table() -> dict[str, list[str]]:
    import yaml

    path = builtin_insurers_folder().parent / "tables" / TABLE
    return dict(yaml.safe_load(path.read_text("utf-8")))


# district codes and their Bundesland as the Kennzeichenverordnung has them, written down here
# apart from the table the insurers read (its capitals, and districts from every Land): the
# expectations of the test below, never taken from the table it tests
KNOWN = {
    "W": ["W"],
    "N": ["P", "KS", "BN", "MD", "WN", "AM", "ZT", "HL", "GF", "TU"],
    "B": ["E", "ND", "OW", "GS", "JE"],
    "O": ["L", "LL", "WE", "VB", "SR", "BR", "FR", "GM", "RI", "PE"],
    "S": ["S", "SL", "HA", "JO", "TA", "ZE"],
    "St": ["G", "GU", "LE", "LB", "BM", "HF", "WZ", "MT", "VO", "LI"],
    "K": ["K", "KL", "VI", "VL", "SP", "FE", "WO", "SV"],
    "T": ["I", "IL", "KU", "KB", "LZ", "RE", "SZ", "IM", "LA"],
    "V": ["B", "BZ", "DO", "FK"],
}


def test_the_table_has_every_district_code_once() -> None:
    table = _table()
    codes = [c for listed in table.values() for c in listed]
    assert len(codes) == len(set(codes)) == 106, len(codes)
    assert set(table) == set(KNOWN)
    for state, known in KNOWN.items():
        assert set(known) <= set(table[state]), (state, set(known) - set(table[state]))


@pytest.mark.parametrize(("state", "code"), [(s, c) for s, codes in KNOWN.items() for c in codes])
def test_every_district_code_goes_with_its_state_and_no_other(state: str, code: str) -> None:
    assert _warnings(f"{code}-12345A", state) == [], "a right pair is never a contradiction"
    other = "W" if state != "W" else "T"
    said = _warnings(f"{code}-12345A", other)
    assert said == [
        f"The number plate {code}-12345A is of {state}, not of the registration district "
        f"{other}: is the district right?"
    ]


def test_graz_in_styria_and_eisenstadt_in_burgenland_are_right() -> None:
    """The two pairs real runs were told contradicted each other (G is not St, E is not B)."""
    assert _warnings("G-12345A", "St") == []
    assert _warnings("E-12345A", "B") == []
    assert _warnings("W-12345A", "W") == []


def test_a_plate_of_no_district_in_the_table_is_never_said_to_contradict() -> None:
    assert _warnings("BP-12345", "W") == [], "a federal authority's plate (Bundespolizei)"
