"""``omds_ld.process.import_without``: a module imported with some of its imports not loaded
(how a stdio server loads the SDK's low-level server without Starlette), and nothing of the
attempt left where the module needs them as it loads. Real modules written to a folder on the
path, imported by the import system."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from omds_ld.process import NotLoaded, import_without

HEAVY = """
LOADED = True
class App:
    def __init__(self, name):
        self.name = name
"""
# uses the heavy module only inside a function, as the SDK's server uses Starlette
LIGHT = """
from {prefix}_heavy import App
def http_app():
    return App("http")
def answer():
    return 42
"""
# uses it as it loads (a class based on it): it cannot do without
NEEDS = """
from {prefix}_heavy import App
class Mine(App):
    pass
"""
# imported meanwhile by the module that needs the heavy one: a module that took nothing of it
PLAIN = "VALUE = 7\n"
NEEDS_AFTER_PLAIN = "import {prefix}_plain\n" + NEEDS


@pytest.fixture
def folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[tuple[Path, str]]:
    prefix = f"probe_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, prefix
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]


def _write(folder: Path, prefix: str, **modules: str) -> None:
    for name, text in modules.items():
        (folder / f"{prefix}_{name}.py").write_text(text.format(prefix=prefix))


def test_a_module_that_uses_a_name_only_when_called_is_imported_without_it(
    folder: tuple[Path, str],
) -> None:
    path, prefix = folder
    _write(path, prefix, heavy=HEAVY, light=LIGHT)

    assert import_without(f"{prefix}_light", [f"{prefix}_heavy"])

    light = sys.modules[f"{prefix}_light"]
    assert f"{prefix}_heavy" not in sys.modules  # not loaded, and no stand-in left behind
    assert light.answer() == 42
    with pytest.raises(RuntimeError, match=f"{prefix}_heavy.App is not loaded"):
        light.http_app()
    assert isinstance(light.App, NotLoaded)
    # anyone importing it later gets the real module
    heavy = __import__(f"{prefix}_heavy")
    assert heavy.LOADED and heavy.App("x").name == "x"


def test_a_module_that_needs_it_as_it_loads_leaves_nothing_behind_and_imports_whole(
    folder: tuple[Path, str],
) -> None:
    path, prefix = folder
    _write(path, prefix, heavy=HEAVY, plain=PLAIN, needs=NEEDS_AFTER_PLAIN)

    assert not import_without(f"{prefix}_needs", [f"{prefix}_heavy"])

    assert f"{prefix}_needs" not in sys.modules
    assert f"{prefix}_heavy" not in sys.modules
    assert sys.modules[f"{prefix}_plain"].VALUE == 7  # took no stand-in: kept as imported
    needs = __import__(f"{prefix}_needs")  # the usual import: whole, with the real module
    assert issubclass(needs.Mine, sys.modules[f"{prefix}_heavy"].App)


def test_a_module_loaded_already_is_left_as_it_is(folder: tuple[Path, str]) -> None:
    path, prefix = folder
    _write(path, prefix, heavy=HEAVY, light=LIGHT)
    light = __import__(f"{prefix}_light")

    assert not import_without(f"{prefix}_light", [f"{prefix}_heavy"])
    assert sys.modules[f"{prefix}_light"] is light
    assert light.http_app().name == "http"


def test_a_start_without_collections_collects_once_it_is_ready() -> None:
    """A stdio start holds the collector back while it loads; once ready, what it loaded is
    frozen (out of every later scan) and collections run again."""
    import gc

    from omds_ld.process import freeze_startup_heap

    gc.disable()
    try:
        loaded = [[n] for n in range(1000)]  # objects of the start, tracked by the collector
        freeze_startup_heap(collect=False)
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(loaded)
    finally:
        gc.unfreeze()
        gc.enable()
