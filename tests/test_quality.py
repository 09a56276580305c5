"""The code's own bar: ruff clean on everything, mypy --strict clean on src/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=3600
    )


def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "src", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing_in_src() -> None:
    result = run("mypy", "--strict", "src")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wheel_built_from_the_clone_carries_every_data_file(tmp_path: Path) -> None:
    """What an insurer installs from a wheel it built (omds-ld is not on PyPI) has every file
    the repository ships beside the code: the norm, its releases, the insurers, the scenarios,
    the chat page."""
    import zipfile

    result = run("pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT))
    assert result.returncode == 0, result.stdout + result.stderr
    [wheel] = tmp_path.glob("omds_ld-*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    shipped = subprocess.run(
        ["git", "ls-files", "src/omds_ld"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    wanted = {path.removeprefix("src/") for path in shipped}
    assert wanted <= inside, sorted(wanted - inside)
