"""The norm's YAML files are read at a start by their JSON renderings (``omds_ld.yamlfile``):
the shipped ones are made of the files as they are, and a rendering not made of the text read
is never used: an edited file is read as YAML until it is rendered anew."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from omds_ld import yamlfile
from omds_ld.norm import load_norm

DATA = Path(str(resources.files("omds_ld.norm") / "data"))


@pytest.mark.parametrize("name", ["openapi.yaml", "problems.yaml"])
def test_the_shipped_rendering_is_made_of_the_file_as_it_is(name: str) -> None:
    text = (DATA / name).read_text("utf-8")
    assert (DATA / f"{name}.json").read_text("utf-8") == yamlfile.rendering_of(text), (
        f"{name} changed since it was rendered: run "
        f".venv/bin/python -m omds_ld.yamlfile src/omds_ld/norm/data/{name}"
    )
    assert yamlfile.load_file(DATA, name) == yamlfile.load(text)


def test_an_edit_not_rendered_yet_is_read_as_yaml(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("title: before\n")
    subprocess.run(
        [sys.executable, "-m", "omds_ld.yamlfile", str(tmp_path / "a.yaml")],
        check=True, capture_output=True,
    )  # fmt: skip
    assert yamlfile.load_file(tmp_path, "a.yaml") == {"title": "before"}
    (tmp_path / "a.yaml").write_text("title: after\n")  # edited, the rendering is of before
    assert yamlfile.load_file(tmp_path, "a.yaml") == {"title": "after"}
    (tmp_path / "a.yaml.json").write_text("{not json")  # a broken rendering is none
    assert yamlfile.load_file(tmp_path, "a.yaml") == {"title": "after"}


def test_a_document_json_would_change_is_not_rendered(tmp_path: Path) -> None:
    (tmp_path / "dated.yaml").write_text("released: 2026-12-07\n200: ok\n")
    done = subprocess.run(
        [sys.executable, "-m", "omds_ld.yamlfile", str(tmp_path / "dated.yaml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert "not rendered" in done.stderr
    assert not (tmp_path / "dated.yaml.json").exists()
    assert yamlfile.load_file(tmp_path, "dated.yaml")["released"].year == 2026


def test_the_norm_read_by_its_rendering_is_the_norm_read_from_yaml(tmp_path: Path) -> None:
    copy = tmp_path / "openapi.yaml"
    copy.write_text((DATA / "openapi.yaml").read_text("utf-8"))
    assert load_norm().openapi == load_norm(copy).openapi
