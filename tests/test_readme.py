"""The README's walk-through over plain HTTP is run as written, and its output blocks are what
the commands print (case ids aside), against a real example server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.servers import ExampleServer

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = re.compile(r"### Over plain HTTP\n(.*?)\n## ", re.S)
BLOCK = re.compile(r"```(sh|text)\n(.*?)```", re.S)
CASE_ID = re.compile(r"\b[0-9a-f]{20}\b")


def test_the_readme_walk_through_prints_what_the_readme_shows(server: ExampleServer) -> None:
    if shutil.which("curl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is missing: .ci/run installs it")
        pytest.skip("curl is not installed")
    found = SECTION.search(README.read_text())
    assert found, "README.md has the section 'Over plain HTTP'"
    blocks = BLOCK.findall(found.group(1))
    pairs = [(blocks[i][1], blocks[i + 1][1]) for i in range(0, len(blocks), 2)]
    assert len(pairs) >= 4 and all(b[0] == "sh" for b in blocks[::2]), blocks
    script = "".join(f"{command}echo '<<<{n}>>>'\n" for n, (command, _) in enumerate(pairs))
    script = script.replace("http://127.0.0.1:9092", server.url)
    ran = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    printed = re.split(r"<<<\d+>>>\n", ran.stdout)[: len(pairs)]
    for (command, shown), said in zip(pairs, printed, strict=True):
        assert CASE_ID.sub("<id>", said) == CASE_ID.sub("<id>", shown), command
