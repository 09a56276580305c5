"""Configuration is checked where it is read: an unknown key, a value of the wrong type, options
that contradict each other or the file, a model without its key, a port in use. Each is refused
before anything starts, in one line naming the file (or option) and the key, exit 2. And the
example server is a library value: built from one configuration, without the command line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from omds_ld.cli import main
from omds_ld.example import ExampleApp, ExampleConfig
from omds_ld.insurer.config import ServerConfig
from omds_ld.mcp.config import HttpConfig, load_config
from omds_ld.settings import ConfigError

API = "http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/api"
INSTANCE = f'[[instance]]\nname = "pfefferminzia"\napi = "{API}"\n'


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What the command says when it refuses: one line on stderr, exit 2, nothing on stdout."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = [line for line in err.splitlines() if line.startswith("omds-ld:")]
    assert len(lines) == 1, err
    return lines[0]


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("timeout_secs = 3\n" + INSTANCE, "unknown key 'timeout_secs'"),
        ("[http]\nmax_session = 3\n" + INSTANCE, "[http]: unknown key 'max_session'"),
        (INSTANCE + 'langauge = "de"\n', "[[instance]] #1: unknown key 'langauge'"),
        ('[auth]\nmode = "required"\nissuer = "https://x.example"\nissuer_url = "y"\n' + INSTANCE,
         "[auth]: unknown key 'issuer_url'"),
        ("[state]\nredis_url = 'redis://x'\n" + INSTANCE, "[state]: unknown key 'redis_url'"),
        ('[http]\nmax_sessions = "many"\n' + INSTANCE, "max_sessions: a whole number is expected"),
        ("[http]\nhibernate_seconds = -1\n" + INSTANCE, "hibernate_seconds must be at least 0"),
        ('[auth]\nmode = "sometimes"\nissuer = "https://x.example"\n' + INSTANCE, "mode is required, optional or off"),
        ("[auth]\nmode = 'required'\n" + INSTANCE, "needs the issuer"),
        ('[[instance]]\nname = "a b"\napi = "' + API + '"\n', "letters, digits"),
        ("timeout_seconds = 3\n", "no [[instance]] tables"),
        ("[http\n", "not TOML"),
    ],
)  # fmt: skip
def test_a_config_file_with_a_mistake_is_refused_naming_file_and_key(
    text: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _file(tmp_path, text)
    said = _refused(["mcp", "--http", "--no-auth", "--config", config], capsys)
    assert words in said, said
    assert str(tmp_path) in said or "at least" in said or "letters" in said or "mode" in said


def test_a_config_file_sets_every_field_it_names_and_keeps_the_defaults(tmp_path: Path) -> None:
    config = load_config(
        Path(
            _file(tmp_path, "timeout_seconds = 3\n[http]\nsession_binding_minutes = 2\n" + INSTANCE)
        )
    )
    assert config.timeout_seconds == 3.0
    assert config.http.session_binding_seconds == 120.0
    assert config.http.max_sessions == HttpConfig().max_sessions  # the dataclass's default
    assert config.instances[0].display_name == "pfefferminzia"


def test_the_confirmation_page_is_a_client_of_the_authorization_server_or_there_is_none(
    tmp_path: Path,
) -> None:
    """[auth] page_client_id with its secret from the environment makes the page log people in
    at the issuer; without them there is no page (nothing to confirm on by address alone)."""
    from omds_ld.mcp.service import page_address

    table = '[auth]\nissuer = "https://as.example"\npublic_url = "https://mcp.example"\n'
    without = load_config(Path(_file(tmp_path, table + INSTANCE)), {})
    assert without.auth.page_login is None
    assert page_address(without.http, without.auth) is None
    page = table + 'page_client_id = "confirmation-page"\npage_client_secret_env = "PAGE"\n'
    config = load_config(Path(_file(tmp_path, page + INSTANCE)), {"PAGE": "s3cret"})
    login = config.auth.page_login
    assert login is not None and login.client_secret == "s3cret"
    assert login.authorize_url == "https://as.example/authorize"
    assert login.token_url == "https://as.example/token"
    assert page_address(config.http, config.auth) == "https://mcp.example/omds-ld/confirmations"
    assert "s3cret" not in repr(config)


def test_options_that_describe_an_instance_are_refused_beside_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _file(tmp_path, INSTANCE)
    said = _refused(
        ["mcp", "--stdio", "--config", config, "--language", "de", "--token", "t"], capsys
    )
    assert "--language, --token describe an instance" in said


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["mcp", "--stdio"], "give --config FILE, or --api URL and --name NAME"),
        (["mcp", "--stdio", "--api", "ftp://x", "--name", "x"], "api is an http(s) URL"),
        (["mcp", "--stdio", "--api", "https://u:p@insurer.example/api", "--name", "x"],
         "api names no user or password"),
        (["mcp", "--stdio", "--api", API, "--name", "p", "--header", "novalue"], "not NAME=VALUE"),
        (["mcp", "--http", "--api", API, "--name", "p"], "say who may call"),
        (["mcp", "--http", "--no-auth", "--api", API, "--name", "p", "--max-sessions", "0"],
         "max_sessions must be at least 1"),
        (["mcp", "--stdio", "--api", API, "--name", "p", "--upstream-token-url", "http://x/token"],
         "need --upstream-token-url, --upstream-client-id and OMDS_LD_CLIENT_SECRET"),
    ],
)  # fmt: skip
def test_options_that_cannot_run_are_refused(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMDS_LD_CLIENT_SECRET", raising=False)
    assert words in _refused(argv, capsys)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--chat-model", "anthropic:claude-sonnet-4-5"], "ANTHROPIC_API_KEY"),
        (["--chat-model", "openai:gpt-4.1-mini"], "OPENAI_API_KEY"),
        (["--chat-model", "mistral:large"], "unknown agent"),
        (["--chat-model-base-url", "http://127.0.0.1:1/v1"], "is for --chat-model openai:MODEL"),
        (["--access-token-seconds", "0"], "access-token-seconds must be at least 1"),
        (["--max-sessions-per-client", "0"], "max_sessions_per_client must be at least 1"),
    ],
)
def test_serve_refuses_at_start_what_would_fail_later(
    argv: list[str],
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    database = str(tmp_path / "s.sqlite3")
    said = _refused(["serve", "--port", "0", "--database", database, *argv], capsys)
    assert words in said, said


def test_serve_on_a_port_in_use_says_so_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = _refused(["serve", "--port", str(port), "--database", str(tmp_path / "s")], capsys)
    assert f"cannot listen on 127.0.0.1:{port}" in said


def test_auth_add_client_refuses_a_broker_no_insurer_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = str(tmp_path / "s.sqlite3")
    said = _refused(["auth", "add-client", "--database", database, "--name", "x",
                     "--broker", "gamma"], capsys)  # fmt: skip
    assert "no insurer knows the broker 'gamma'" in said and "alpha" in said
    assert (
        main(["auth", "add-client", "--database", database, "--name", "x", "--broker", "alpha"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["broker"] == "alpha"


def test_a_config_value_is_checked_when_it_is_made() -> None:
    with pytest.raises(ConfigError, match="port 70000 is no TCP port"):
        HttpConfig(port=70000)
    with pytest.raises(ConfigError, match="on the example server's host and port"):
        ExampleConfig(server=ServerConfig(port=1), http=HttpConfig(port=2))


def test_the_example_server_is_built_from_one_value_without_the_command_line(
    tmp_path: Path,
) -> None:
    """Every part in one app, in process: an interface, the authorization server's metadata,
    an MCP server's tool call that reaches its insurer through the same app, the chat page,
    metrics."""
    server = ServerConfig(database=tmp_path / "s.sqlite3", port=9092)
    app = ExampleApp(ExampleConfig(server=server, http=HttpConfig(port=9092)))
    with TestClient(app, base_url="http://127.0.0.1:9092") as client:
        assert client.get("/omds-ld/insurers/pfefferminzia/api/products").status_code == 200
        metadata = client.get("/.well-known/oauth-authorization-server/oauth").json()
        assert metadata["issuer"] == "http://127.0.0.1:9092/oauth"
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
        called = client.post(
            "/omds-ld/insurers/disrupto/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "listProducts", "arguments": {}, "_meta": meta}},
            headers={"Accept": "application/json, text/event-stream",
                     "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                     "Mcp-Name": "listProducts"},
        )  # fmt: skip
        assert called.status_code == 200, called.text
        result = called.json()["result"]
        assert not result["isError"] and "Kraftfahrt 2022" in result["content"][0]["text"]
        assert client.get("/chat").status_code == 200
        assert "omds_ld_mcp_tool_calls_total" in client.get("/metrics").text


def test_serve_writes_its_banner_and_every_log_line_to_stderr(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    import httpx

    from tests.servers import free_port, started

    port = free_port()
    process = started(subprocess.Popen(
        [sys.executable, "-m", "omds_ld.cli", "serve", "--port", str(port),
         "--database", str(tmp_path / "s.sqlite3")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ))  # fmt: skip
    try:
        for _ in range(150):
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.1)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert out == "", "stdout carries nothing (uvicorn's access lines went there)"
    assert "claude mcp add --transport http pfefferminzia" in err and "GET /healthz" in err, err


def test_stopping_serve_with_a_chat_conversation_open_leaves_no_half_response(
    tmp_path: Path,
) -> None:
    """The chat page's MCP sessions hold an event stream to the server's own MCP endpoints; a
    stop ends each stream as a complete response (uvicorn said "ASGI callable returned without
    completing response" before)."""
    import subprocess
    import sys
    import time

    import httpx

    from tests.servers import free_port, started

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = started(subprocess.Popen(
        [sys.executable, "-m", "omds_ld.cli", "serve", "--port", str(port),
         "--database", str(tmp_path / "s.sqlite3")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ))  # fmt: skip
    try:
        for _ in range(150):
            try:
                assert httpx.get(f"{base}/healthz").status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=30, headers={"Origin": base}) as page:
            page.get("/chat")
            cid = page.post("/chat/api/conversations", json={}).json()["id"]
            called = page.post(f"/chat/api/conversations/{cid}/calls",
                               json={"server": "pfefferminzia", "tool": "listProducts",
                                     "arguments": {}})  # fmt: skip
            assert called.status_code == 200, called.text
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert process.returncode in (0, -15), err[-2000:]  # uvicorn re-raises the signal it ended by
    assert "Application shutdown complete" in err
    assert "ASGI callable returned without completing response" not in err, err[-3000:]


LOADED = "import sys, runpy; sys.argv = ['omds-ld', *sys.argv[1:]]\n" + (
    "try:\n    runpy.run_module('omds_ld.cli', run_name='__main__')\n"
    "except SystemExit as end:\n"
    "    print(sorted(m for m in sys.modules if m in ('omds_ld.example', 'omds_ld.mcp.service', "
    "'omds_ld.insurer.app', 'mcp', 'rdflib', 'pyld', 'starlette')))\n"
    "    raise\n"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["mcp", "--stdio", "--api", API],
        ["mcp", "--http", "--no-auth", "--api", API, "--name", "p", "--max-sessions", "0"],
        ["serve", "--port", "0", "--access-token-seconds", "0"],
    ],
)
def test_a_version_or_a_configuration_error_is_answered_without_loading_the_server(
    argv: list[str],
) -> None:
    """A desktop client that starts the server with a typo hears of it at once: the answer
    comes before the MCP SDK, the interfaces or the norm's RDF libraries are imported."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == (0 if argv == ["--version"] else 2), done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


def test_a_redis_nobody_listens_at_is_one_line_naming_it_and_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """omds-ld mcp with --redis at an address where nothing listens: refused before the server
    starts, in one line naming the address and what to do; no traceback."""
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    said = _refused(
        ["mcp", "--http", "--no-auth", "--port", "0", "--redis", url,
         "--api", "http://127.0.0.1:9/omds-ld/insurers/x/api", "--name", "x"],
        capsys,
    )  # fmt: skip
    assert said.startswith(f"omds-ld: Redis for shared state is not reachable at {url} (")
    assert "leave --redis out for state in memory" in said
    assert "Traceback" not in capsys.readouterr().err


def test_serve_help_names_the_store_where_serve_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default store's path is worked out when the help is shown (a stdio start never
    loads what finds it), and it is the one serve uses."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at hyphens too: one line each
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert f"(default {tmp_path / 'data' / 'omds-ld' / 'omds-ld.sqlite3'})" in shown
