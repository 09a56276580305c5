"""The test suite cleans up after itself: no process a test started outlives the run, however
the test ended (a server that never became ready, a server a test left running)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INNER = """
from pathlib import Path

from tests.servers import ExampleServer


def test_a_server_that_does_not_start_in_time() -> None:
    ExampleServer(Path({folder!r}) / "late.sqlite3").start()


def test_a_server_left_running() -> None:
    ExampleServer(Path({folder!r}) / "left.sqlite3").start()  # never stopped
"""


def _running_with(marker: str) -> list[int]:
    """The processes whose command line names ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in line and "omds_ld.cli" in line:
                found.append(int(entry.name))
    return found


def test_no_server_outlives_a_run_whose_start_ups_time_out_or_were_left_running(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "inner-run-servers"
    folder.mkdir()
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER.format(folder=str(folder)))
    for deadline in ("0.01", "300"):  # a start made to time out; a start that succeeds
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
             str(inner)],
            capture_output=True, text=True, timeout=600, cwd=ROOT,
            env={**os.environ, "OMDS_LD_START_SECONDS": deadline},
        )  # fmt: skip
        said = ran.stdout[-2000:]
        if deadline == "0.01":
            assert "2 failed" in said and "did not start" in said, said
        else:
            assert "2 passed" in said, said
        assert _running_with(str(folder)) == [], f"left running after the run ({deadline} s)"
