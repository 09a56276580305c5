"""schemathesis against the norm's OpenAPI file on a live example server: no 5xx, answers conform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omds_ld.insurer.data import load_insurers
from tests.servers import ExampleServer

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "src" / "omds_ld" / "norm" / "data" / "openapi.yaml"
# every insurer the example server has (a fourth one in the folder too), with one of its products
PRODUCTS = {
    name: next(iter(insurer.products.values())).iri for name, insurer in load_insurers().items()
}


@pytest.mark.parametrize("insurer", list(PRODUCTS))
def test_schemathesis_finds_no_failure(insurer: str, server: ExampleServer, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "PYTHONPATH": str(ROOT),
        "OMDS_LD_PRODUCT": PRODUCTS[insurer],
    }
    command = [
        sys.executable, "-m", "schemathesis.cli",
        "--config-file", str(ROOT / "schemathesis.toml"),
        "run", str(SPEC),
        "--url", server.api(insurer),
        "--checks", "all",
        "--max-examples", os.environ.get("OMDS_LD_SCHEMATHESIS_EXAMPLES", "25"),
        "--seed", "20261130",
        "--no-color",
        "--generation-database", "none",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    summary = result.stdout[-6000:]
    assert result.returncode == 0, summary
    assert " passed" in summary and "failed" not in summary.split("SUMMARY")[-1], summary
