"""What a server process does before it loads its parts, and once it has started."""

from __future__ import annotations

import gc
import importlib.util
import sys

# the MCP SDK's packages whose ``__init__`` loads more than a stdio server uses: ``mcp`` its
# client side (``from mcp import Client``, which loads the server's HTTP stack again), ``mcp.server``
# the high-level MCPServer; their modules are imported as they are, by their full names
_SDK_PACKAGES = ("mcp", "mcp.server")
# an HTTP server a stdio process never runs: sse-starlette (which the SDK's server module loads
# for Streamable HTTP) patches uvicorn's shutdown when it can import it, and goes without
_NOT_IN_A_STDIO_PROCESS = ("uvicorn",)


def stdio_imports_only() -> None:
    """For a stdio server's process, before it loads its parts: the MCP SDK's modules are
    imported without running its packages' ``__init__`` (the server uses
    ``mcp.server.lowlevel``, ``mcp.server.stdio`` and ``mcp_types``, never the client the
    package's ``__init__`` loads for convenience), and uvicorn not at all. Each package is made
    its module as the import system would, only not executed (``from mcp import Client`` then
    fails by name in this process); uvicorn is marked as not importable (``None`` in
    ``sys.modules``). A no-op where the SDK was imported already."""
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


def freeze_startup_heap() -> None:
    """Take everything loaded at start (norm, shapes, compiled validators) out of the garbage
    collector's scans.

    Those objects live as long as the process; without this, every full collection walks them
    all again (one full collection of the example server's start-up heap: ~80 ms on the development
    machine), and a call that triggers it waits that long. Call it once, when the server is ready.
    """
    gc.collect()
    gc.freeze()
