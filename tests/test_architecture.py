"""The house's shape, read from its source: no import runs in a circle, no function is too long
to read at once."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
MAX_FUNCTION_LINES = 70


def _modules(folder: Path, package: str) -> dict[str, Path]:
    """Every module under ``folder`` by its dotted name (below ``package``; "": scripts that
    import each other by bare name)."""
    found = {}
    for path in folder.rglob("*.py"):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts]) if package else ".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules a module imports, wherever the import stands (at the top, under
    TYPE_CHECKING, inside a function): a circle through any of them is a circle of concepts."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    return found


def circles(modules: dict[str, Path]) -> list[list[str]]:
    """The groups of modules that import each other round (Tarjan's strongly connected
    components of more than one module, or a module importing itself)."""
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize(("folder", "package"), [("src/omds_ld", "omds_ld"), ("benchmarks", "")])
def test_no_import_runs_in_a_circle(folder: str, package: str) -> None:
    modules = _modules(ROOT / folder, package)
    if not package:  # scripts take their folder off the path first: `mcp` is the MCP SDK there
        modules = {n: p for n, p in modules.items() if importlib.util.find_spec(n) is None}
    assert circles(modules) == []


def test_the_circle_finder_finds_a_circle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from pkg.a import x\n")  # fmt: skip
    (tmp_path / "c.py").write_text("def f():\n    from pkg import a\n")
    assert circles(_modules(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]


def _functions(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield (
                f"{path.relative_to(ROOT)}:{node.lineno} {node.name}",
                (node.end_lineno - node.lineno + 1),
            )


def test_no_function_in_src_is_longer_than_70_lines() -> None:
    too_long = [
        f"{where} ({lines} lines)"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for where, lines in _functions(path)
        if lines > MAX_FUNCTION_LINES
    ]
    assert too_long == []
