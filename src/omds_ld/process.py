"""What a server process does before it loads its parts, and once it has started."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterable

# the MCP SDK's packages whose ``__init__`` loads more than a stdio server uses: ``mcp`` its
# client side (``from mcp import Client``, which loads the server's HTTP stack again), ``mcp.server``
# the high-level MCPServer; their modules are imported as they are, by their full names
_SDK_PACKAGES = ("mcp", "mcp.server")
# an HTTP server a stdio process never runs: sse-starlette (which the SDK's server module loads
# for Streamable HTTP) patches uvicorn's shutdown when it can import it, and goes without
_NOT_IN_A_STDIO_PROCESS = ("uvicorn",)
# what the SDK's low-level server module imports for its Streamable HTTP app and authorization
# only (``Server.streamable_http_app``, which a stdio server never calls): Starlette, the
# authorization server's routes and middleware, the HTTP session manager
_LOW_LEVEL_SERVER = "mcp.server.lowlevel.server"
_HTTP_ONLY = (
    "starlette.applications", "starlette.middleware", "starlette.middleware.authentication",
    "starlette.routing", "mcp.server.auth.middleware.auth_context",
    "mcp.server.auth.middleware.bearer_auth", "mcp.server.auth.provider",
    "mcp.server.auth.routes", "mcp.server.auth.settings", "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager", "mcp.server.transport_security",
)  # fmt: skip


_PYDANTIC_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def stdio_imports_only() -> None:
    """For a stdio server's process, before it loads its parts: the MCP SDK's modules are
    imported without running its packages' ``__init__`` (the server uses
    ``mcp.server.lowlevel``, ``mcp.server.stdio`` and ``mcp_types``, never the client the
    package's ``__init__`` loads for convenience), and uvicorn not at all. Each package is made
    its module as the import system would, only not executed (``from mcp import Client`` then
    fails by name in this process); uvicorn is marked as not importable (``None`` in
    ``sys.modules``); the low-level server is imported without Starlette and the authorization
    server it loads for its HTTP app only (``import_without``); the garbage collector waits
    until the server is ready (``freeze_startup_heap``); pydantic's plugins are not looked for
    unless ``PYDANTIC_DISABLE_PLUGINS`` is set. Nothing of the SDK's is done again
    where it was imported already."""
    # no collection while it loads: its start allocates some 90,000 objects that live as long
    # as the process, and collecting as they come walks them again and again (~30 ms);
    # freeze_startup_heap(collect=False) takes them out of the collector's scans and collects on
    gc.disable()
    # pydantic looks for its plugins (observability hooks) in the entry points of every
    # installed distribution as it builds its first model: some 35 ms of reading metadata
    # files, before the SDK's first model. A stdio server goes without them, unless the
    # variable is set (to anything, empty too: then pydantic does as it always does)
    os.environ.setdefault(_PYDANTIC_PLUGINS, "__all__")
    for name in _NOT_IN_A_STDIO_PROCESS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    for name in _SDK_PACKAGES:
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            return
        module = importlib.util.module_from_spec(spec)  # __path__ set, the code not run
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    import_without(_LOW_LEVEL_SERVER, _HTTP_ONLY)


class NotLoaded:
    """A name a module imported from a module this process did not load: using it says so."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError(f"{self.name} is not loaded in this process (a stdio server's)")

    def __repr__(self) -> str:
        return f"<not loaded: {self.name}>"


class _StandIn(types.ModuleType):
    """A module not loaded: each name imported from it is a ``NotLoaded``."""

    def __getattr__(self, name: str) -> NotLoaded:
        if name.startswith("__"):
            raise AttributeError(name)
        return NotLoaded(f"{self.__name__}.{name}")


def import_without(module: str, absent: Iterable[str]) -> bool:
    """Import ``module`` with the modules named in ``absent`` not loaded: while it imports,
    each stands in as a module whose names say they are not loaded when used, afterwards they
    import as themselves again. For a module that uses them only in functions this process
    never calls (the SDK's low-level server, whose HTTP app a stdio server never builds).

    Where the module (or what it imports meanwhile) uses one as it loads (a future version,
    say), nothing of the attempt stays: the modules that took a stand-in's names are forgotten,
    the next import loads the module whole, as usual. True if it was imported without them."""
    absent = [name for name in absent if name not in sys.modules]
    if module in sys.modules:
        return False
    before = set(sys.modules)
    stand_ins = {name: _StandIn(name) for name in absent}
    sys.modules.update(stand_ins)
    try:
        importlib.import_module(module)
        return True
    except Exception:
        for name in set(sys.modules) - before - set(stand_ins):
            if _took_stand_in(sys.modules[name]):
                del sys.modules[name]
        return False
    finally:
        for name in stand_ins:
            if sys.modules.get(name) is stand_ins[name]:
                del sys.modules[name]


def _took_stand_in(module: types.ModuleType | None) -> bool:
    return module is not None and any(
        isinstance(value, (NotLoaded, _StandIn)) for value in vars(module).values()
    )


def freeze_startup_heap(collect: bool = True) -> None:
    """Take everything loaded at start (norm, shapes, compiled validators) out of the garbage
    collector's scans, and let it collect from here on.

    Those objects live as long as the process; without this, every full collection walks them
    all again (one full collection of the example server's start-up heap: ~80 ms on the development
    machine), and a call that triggers it waits that long. Call it once, when the server is ready.
    ``collect=False`` (a stdio server, whose start a desktop client waits for): what the start
    left as garbage is frozen with the rest rather than collected first (a few hundred objects;
    the collection took ~40 ms before ``initialize`` could be answered).
    """
    if collect:
        gc.collect()
    gc.freeze()
    gc.enable()
