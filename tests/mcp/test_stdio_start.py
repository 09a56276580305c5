"""#50: the desktop start. ``omds-ld mcp --stdio`` answers ``initialize`` without reaching the
insurer, and loads neither the SDK's client side nor an HTTP server, the authorization server's
or the HTTP client's libraries before they are needed: through the real command, its modules
read from ``python -X importtime``."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ExampleServer, started

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}},
}  # fmt: skip
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
# what a stdio server has no use for before a call needs it
NOT_LOADED = (
    "mcp.client", "uvicorn", "httpx", "joserfc", "authlib", "rdflib", "pyld", "pyshacl",
    "prometheus_client",  # a stdio process has no /metrics
    "jsonschema_rs",  # compiled at the first body it checks
    "yaml",  # the norm's files read by their JSON renderings
    "platformdirs",  # where serve keeps its store: no store here
    # what the SDK's low-level server loads for its HTTP app: Starlette, the authorization
    # server's routes, the HTTP session manager
    "starlette", "mcp.server.auth", "mcp.server.streamable_http_manager",
)  # fmt: skip


@pytest.fixture
def silent_insurer() -> Iterator[tuple[str, list[socket.socket]]]:
    """An address that accepts connections and never answers (an insurer that hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api", accepted
    finally:
        stop.set()
        thread.join(5)
        for connection in accepted:
            connection.close()
        listener.close()


def _stdio(api: str, log: Path, *python: str) -> subprocess.Popen[bytes]:
    """The command, its stderr to ``log`` (a pipe nobody reads would fill and stop it)."""
    with log.open("wb") as errors:
        return started(subprocess.Popen(
            [sys.executable, *python, "-m", "omds_ld.cli", "mcp", "--stdio", "--api", api,
             "--name", "pfefferminzia", "--timeout-seconds", "300"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
        ))  # fmt: skip


def _answer(process: subprocess.Popen[bytes], request: dict[str, object], within: float) -> dict:
    """The answer to ``request``; fails if none came ``within`` seconds (a bound far above a
    start, far below the insurer's timeout: it tells waiting for the insurer from not)."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(request) + "\n").encode())
    process.stdin.flush()
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(within), f"no answer to {request['method']} in {within} s"
    answer: dict = json.loads(process.stdout.readline())
    return answer


def _end(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_initialize_is_answered_while_the_insurer_does_not_answer(
    silent_insurer: tuple[str, list[socket.socket]], tmp_path: Path
) -> None:
    """The handshake never waits for the insurer: with one that hangs (and a timeout of five
    minutes), initialize is answered; before #50 it waited for the process knowledge."""
    api, _ = silent_insurer
    process = _stdio(api, tmp_path / "stderr.log")
    try:
        answer = _answer(process, INITIALIZE, within=60)
        assert answer["result"]["serverInfo"]["name"], answer
    finally:
        _end(process)


def test_the_stdio_server_loads_no_client_side_and_no_http_server(
    server: ExampleServer, tmp_path: Path
) -> None:
    """Through the real command, to its first tools/list: the modules it imported (python -X
    importtime on stderr) hold the SDK's server, not its client, no uvicorn, no httpx, none of
    the authorization server's or the insurer's libraries; aiohttp only once it called the
    insurer (the first tools/list reads the process knowledge)."""
    log = tmp_path / "stderr.log"
    process = _stdio(server.api("pfefferminzia"), log, "-X", "importtime")
    try:
        assert _answer(process, INITIALIZE, within=60)["result"]
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        # the answer itself, no list_changed before it: the list it gets is the one it asked
        tools = _answer(process, LIST_TOOLS, within=60)["result"]["tools"]
        assert {t["name"] for t in tools} >= {"createCalculation", "calculatePremium"}
    finally:
        _end(process)
    loaded = {
        line.rsplit("|", 1)[-1].strip()
        for line in log.read_text().splitlines()
        if line.startswith("import time:")
    }
    assert "mcp.server.lowlevel.server" in loaded and "aiohttp" in loaded, sorted(loaded)[:50]
    # a package loaded is in the list by its own name (an import tried and refused, like
    # sse-starlette's of uvicorn.main, is listed by what was asked for, not the package)
    assert not set(NOT_LOADED) & loaded, sorted(set(NOT_LOADED) & loaded)


def test_a_desktop_clients_version_question_loads_nothing(tmp_path: Path) -> None:
    """``omds-ld --version`` answers from the package's version alone: no configuration, no
    argument parser for the commands."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "omds_ld.cli", "--version"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.stdout.strip().startswith("omds-ld ")
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "omds_ld" in loaded  # the package, for its version
    assert not {"omds_ld.commands", "argparse", "omds_ld.mcp.config"} & loaded, sorted(loaded)


@pytest.mark.parametrize(("setting", "looked_for"), [(None, False), ("", True)])
def test_a_stdio_start_looks_for_pydantic_plugins_only_where_asked_to(
    setting: str | None,
    looked_for: bool,
    silent_insurer: tuple[str, list[socket.socket]],
    tmp_path: Path,
) -> None:
    """pydantic reads every installed distribution's entry points for its plugins as it builds
    its first model; a stdio start goes without (``PYDANTIC_DISABLE_PLUGINS`` unset), and one
    where the variable is set, empty too, leaves it to pydantic. The plugin here is a real one,
    installed as a distribution on the path, that leaves a mark when pydantic loads it."""
    installed = tmp_path / "site"
    (installed / "marking_plugin-1.0.dist-info").mkdir(parents=True)
    (installed / "marking_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: marking-plugin\nVersion: 1.0\n"
    )
    (installed / "marking_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[pydantic]\nmarking = marking_plugin:plugin\n"
    )
    mark = tmp_path / "loaded"
    (installed / "marking_plugin.py").write_text(
        f"import pathlib\npathlib.Path({str(mark)!r}).touch()\n"
        "class Plugin:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\n"
        "plugin = Plugin()\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    environment["PYTHONPATH"] = str(installed)
    if setting is not None:
        environment["PYDANTIC_DISABLE_PLUGINS"] = setting
    api, _ = silent_insurer
    with (tmp_path / "stderr.log").open("wb") as errors:
        process = started(subprocess.Popen(
            [sys.executable, "-m", "omds_ld.cli", "mcp", "--stdio", "--api", api,
             "--name", "pfefferminzia"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=environment,
        ))  # fmt: skip
    try:
        assert _answer(process, INITIALIZE, within=60)["result"]["serverInfo"]["name"]
    finally:
        _end(process)
    assert mark.exists() is looked_for, (tmp_path / "stderr.log").read_text()[-2000:]
