"""The real Claude Code CLI (pinned in tools/claude-code; no model is called, no account): it
adds the three MCP servers and lists them connected; with authorization required they need
authentication until ``claude mcp login`` is done, as a person does it in the browser."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.auth.flow import logged_in_at
from tests.servers import ExampleServer, running, started

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = ROOT / "tools" / "claude-code" / "node_modules" / ".bin" / "claude"
INSURERS = ("pfefferminzia", "disrupto", "angloamerican")
# what the operator of an authorization server without outbound access pins for Claude Code,
# which names itself by this URL (Client ID Metadata Document) where the server supports it
CLAUDE_CODE = {
    "client_id": "https://claude.ai/oauth/claude-code-client-metadata",
    "client_name": "Claude Code",
    "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
_ESCAPES = re.compile(r"\x1b\][^\x07]*\x07|\x1b\[[0-9;?]*[a-zA-Z]")


def claude(home: Path, *args: str, timeout: float = 120) -> str:
    if not CLAUDE.exists():
        pytest.fail(f"{CLAUDE} is missing: run `npm install --prefix tools/claude-code`")
    done = subprocess.run(
        [str(CLAUDE), *args], capture_output=True, text=True, timeout=timeout,
        env=environment(home), cwd=home,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def environment(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
    return {**keep, "HOME": str(home), "TERM": "xterm", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "BROWSER": "true"}  # fmt: skip


def listed(home: Path) -> dict[str, str]:
    """``claude mcp list``: each server's name and state."""
    out = claude(home, "mcp", "list")
    return {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^(\w+): \S+ \(HTTP\) - (.+)$", out, re.MULTILINE)
    }


def log_in(home: Path, name: str, broker: str) -> str:
    """``claude mcp login NAME`` in a terminal, the login page done as a person does it in the
    browser it would open; what the CLI said."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 2000, 0, 0))
    process = started(subprocess.Popen(
        [str(CLAUDE), "mcp", "login", name], stdin=slave, stdout=slave, stderr=slave,
        env=environment(home), cwd=home, close_fds=True,
    ))  # fmt: skip
    os.close(slave)
    said, answered, deadline = b"", False, time.monotonic() + 90
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    said += os.read(master, 65536)
                except OSError:
                    break
            text = _ESCAPES.sub("", said.decode(errors="replace"))
            found = re.search(r"(http://127\.0\.0\.1:\d+/oauth/authorize\S+)", text)
            if found and not answered:
                answered = True
                back = asyncio.run(logged_in_at(found.group(1), broker))
                assert "iss=" in back
                httpx.get(back, timeout=30)  # the browser arrives at the CLI's callback
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return _ESCAPES.sub("", said.decode(errors="replace"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    folder = Path(tmp_path_factory.mktemp("claude-code"))
    document = folder / "claude-code.json"
    document.write_text(json.dumps(CLAUDE_CODE))
    with running(ExampleServer(folder / "s.sqlite3", extra_args=[
        "--require-token", "--client-document", str(document),
    ])) as started:  # fmt: skip
        yield started


def test_claude_code_adds_and_connects_the_three_servers(
    server: ExampleServer, tmp_path: Path
) -> None:
    for name in INSURERS:
        claude(tmp_path, "mcp", "add", "-s", "user", "--transport", "http", name, server.mcp(name))
    assert listed(tmp_path) == dict.fromkeys(INSURERS, "✔ Connected")


def test_with_authorization_claude_code_needs_one_login_per_server(
    secured: ExampleServer, tmp_path: Path
) -> None:
    for name in INSURERS:
        claude(tmp_path, "mcp", "add", "-s", "user", "--transport", "http", name, secured.mcp(name))
    assert listed(tmp_path) == dict.fromkeys(INSURERS, "! Needs authentication")
    said = log_in(tmp_path, "pfefferminzia", "alpha")
    assert 'Authenticated with "pfefferminzia"' in said, said[-2000:]
    assert listed(tmp_path) == {
        "pfefferminzia": "✔ Connected",
        "disrupto": "! Needs authentication",
        "angloamerican": "! Needs authentication",
    }


def test_the_operators_page_shows_the_document_these_tests_pin() -> None:
    """docs/insurer-operator.md shows the file ``--client-document`` takes for Claude Code: the
    one these tests give the server."""
    text = (ROOT / "docs" / "insurer-operator.md").read_text("utf-8")
    shown = text.split("`claude-code.json`:\n\n```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(shown) == CLAUDE_CODE


def test_claude_code_starts_the_stdio_server_with_the_client_secret_given_by_e(
    secured: ExampleServer, tmp_path: Path
) -> None:
    """docs/broker.md: a client that starts the MCP server passes it no environment of the
    shell; ``claude mcp add -e OMDS_LD_CLIENT_SECRET=…`` gives the secret to the server it
    starts, which then gets its tokens by client credentials and connects. Without ``-e`` it
    does not start (the secret is missing)."""
    import sys

    added = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "auth", "add-client", "--database",
         str(secured.database), "--name", "a software house", "--broker", "alpha"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    client = json.loads(added.stdout)
    server = [sys.executable, "-m", "omds_ld.cli", "mcp", "--stdio",
              "--api", secured.api("pfefferminzia"), "--name", "pfefferminzia",
              "--upstream-token-url", f"{secured.url}/oauth/token",
              "--upstream-client-id", client["client_id"], "--log-level", "warning"]  # fmt: skip
    secret = f"OMDS_LD_CLIENT_SECRET={client['client_secret']}"
    claude(tmp_path, "mcp", "add", "-s", "user", "with-secret", "-e", secret, "--", *server)
    claude(tmp_path, "mcp", "add", "-s", "user", "without-secret", "--", *server)
    out = claude(tmp_path, "mcp", "list")
    states = {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^([\w-]+): .+ - (.+)$", out, re.MULTILINE)
    }
    assert states["with-secret"] == "✔ Connected", out
    assert states["without-secret"] != "✔ Connected", out
