"""The indexed router tries fewer routes and reaches the route Starlette's own scan reaches, for
every route of the example server and the paths near them (404s and 405s included); the
answers through the real server are the interfaces' tests (tests/insurer/test_bad_input.py:
an unknown path and a wrong method are problems of the norm)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import BaseRoute, Match, Mount, Route

from omds_ld.example import ExampleApp
from omds_ld.example_config import ExampleConfig
from omds_ld.insurer.config import ServerConfig
from omds_ld.mcp.config import HttpConfig
from omds_ld.routing import IndexedRouter

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


def scanned(routes: list[BaseRoute], path: str, method: str) -> BaseRoute | None:
    """The route Starlette's router takes: the first that matches whole, else the first that
    matches the path but not the method."""
    partial = None
    for route in routes:
        match, _ = route.matches({"type": "http", "path": path, "method": method})
        if match is Match.FULL:
            return route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return partial


def near(path: str) -> list[str]:
    """Paths a request may have near a route's: its parameters filled, with and without a
    trailing slash, one segment more or less, another first segment."""
    filled = re.sub(r"\{[^}]+\}", "x1", path)
    shorter = filled.rsplit("/", 1)[0] or "/"
    return [filled, filled + "/", filled + "/more", shorter, "/other" + filled, filled.upper()]


def test_the_indexed_router_reaches_the_route_the_scan_reaches(tmp_path: Path) -> None:
    server = ServerConfig(database=tmp_path / "s.sqlite3", port=9092)
    app = ExampleApp(ExampleConfig(server=server, http=HttpConfig(port=9092)))
    router = app.app.router
    assert isinstance(router, IndexedRouter)
    routes = list(router.routes)
    paths = {p for r in routes if isinstance(r, Route | Mount) for p in near(r.path)}
    paths |= {"/", "", "/omds-ld", "/omds-ld/insurers/nobody/api/products", "//healthz"}
    tried = 0
    for path in sorted(paths):
        candidates = router.candidates(path)
        tried += len(candidates)
        for method in METHODS:
            assert scanned(candidates, path, method) is scanned(routes, path, method), (
                path,
                method,
            )
    # an insurer's operation is looked for among its insurer's routes, not every route
    reading = router.candidates("/omds-ld/insurers/pfefferminzia/api/calculations/abc")
    assert len(reading) < len(routes) / 4
    assert tried < len(paths) * len(routes) / 4


def test_a_route_added_later_is_reached(tmp_path: Path) -> None:
    async def endpoint(scope: object, receive: object, send: object) -> None: ...

    router = IndexedRouter([Route("/a/b/c", endpoint)])
    assert [r.path for r in router.candidates("/a/b/c")] == ["/a/b/c"]  # type: ignore[attr-defined]
    router.routes.append(Route("/a/b/{x}", endpoint))
    assert [r.path for r in router.candidates("/a/b/d")] == ["/a/b/{x}"]  # type: ignore[attr-defined]
