"""The docs' commands are true: every ``omds-ld`` command line in a shell block of README.md and
docs/*.md is read by the command's own parser (a flag no command has fails here, not in a
reader's terminal), and every block marked ``<!-- runnable -->`` is run as written, in a home of
its own where the example server's store exists."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omds_ld.commands import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- runnable -->\s*\n)?[ \t]*```(?:sh|bash|console)\n(.*?)\n[ \t]*```", re.S)


def _blocks() -> list[tuple[str, bool, str]]:
    """Every shell block: where it is, whether it is marked runnable, its text."""
    found = []
    for path in DOCS:
        text = path.read_text("utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.name}:{line}", bool(match.group(1)), match.group(2)))
    return found


def _commands(block: str) -> list[list[str]]:
    """The omds-ld command lines of a block (continued lines joined), as argument lists: what
    follows ``omds-ld`` up to the end of its command (a pipe, ``&&``, ``;``, a redirect)."""
    commands = []
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        # a placeholder a reader fills in (<your token>, …) stands for one value
        line = re.sub(r"<[^<>\n]+>|…|\.\.\.", "PLACEHOLDER", line)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # a quote a reader's shell would not close either: not a command
            continue
        current: list[str] | None = None
        starts = True  # the next word is a command (the line's first, or after an operator)
        for word in words:
            operator = bool(word) and set(word) <= set("|&;<>()")
            if current is not None and operator:
                commands.append(current)
                current = None
            elif current is not None:
                current.append(word)
            elif starts and not operator and (word == "omds-ld" or word.endswith("/omds-ld")):
                current = []
            if current is None:
                starts = operator or (starts and "=" in word)  # VAR=value before a command
        if current is not None:
            commands.append(current)
    return commands


BLOCKS = _blocks()


def test_the_docs_have_shell_blocks_and_some_are_runnable() -> None:
    assert sum(1 for _, _, b in BLOCKS if _commands(b)) >= 15
    assert any(runnable for _, runnable, _ in BLOCKS)


@pytest.mark.parametrize(("where", "block"), [(w, b) for w, _, b in BLOCKS if _commands(b)])
def test_every_omds_ld_command_in_the_docs_is_one_the_command_takes(where: str, block: str) -> None:
    parser = build_parser()
    for argv in _commands(block):
        try:
            parser.parse_args(argv)
        except SystemExit as refused:
            assert refused.code == 0, f"{where}: omds-ld {' '.join(argv)} is refused by its parser"


@pytest.mark.parametrize(("where", "block"), [(w, b) for w, r, b in BLOCKS if r])
def test_every_runnable_block_runs_as_written(where: str, block: str, tmp_path: Path) -> None:
    """In a home of its own (the store where serve keeps it, made), from a folder where the
    repository's .venv is at hand."""
    for tool in ("sqlite3",):
        if re.search(rf"(^|\s){tool}\s", block) and shutil.which(tool) is None:
            if os.environ.get("CI") == "true":
                raise AssertionError(f"{tool} is not installed, and CI runs every block")
            pytest.skip(f"{tool} is not installed (apt-get install {tool})")
    home = tmp_path / "home"
    environment = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share")}
    made = subprocess.run(
        [sys.executable, "-c", "from omds_ld.insurer.config import default_database as d;"
         "from omds_ld.insurer.store import Store; p=d(); p.parent.mkdir(parents=True);"
         "Store(p).close()"],
        env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], cwd=work, env=environment,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, f"{where}:\n{block}\n{ran.stdout[-1500:]}{ran.stderr[-1500:]}"
