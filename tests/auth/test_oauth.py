"""Every broker is who they say they are, end to end: the example server with --require-token is
the insurers' authorization server, its MCP endpoints are resource servers, and the MCP servers
call the insurers as the calling broker by token exchange. Through the real SDK client over
Streamable HTTP (its own OAuth client where the flow is the point), and plain HTTP where the
refusal itself is the point."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from omds_ld.auth.store import AuthStore
from omds_ld.auth.tokens import issue
from omds_ld.mcp.condense import answer_of
from tests.auth.flow import Storage, bearer_client, oauth_client, register, tokens_by_hand
from tests.servers import ExampleServer, started

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# a tools/list of its own (2026-07-28: no session), answered 200 to a token the endpoint accepts
SESSIONLESS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
SESSIONLESS_LIST = {
    **LIST,
    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                         "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                         "io.modelcontextprotocol/clientCapabilities": {}}},
}  # fmt: skip


def _tokens(server: ExampleServer, broker: str, insurer: str = "pfefferminzia", **kw: Any) -> str:
    token: str = tokens_by_hand(server.url, broker, server.mcp(insurer), **kw)["access_token"]
    return token


def _forged(server: ExampleServer, key: ECKey | None = None, **claims: Any) -> str:
    """A token made with the authorization server's own key (read from its store, as only the
    operator could), or with another key, with claims as given over a valid token's."""
    store = AuthStore(server.database.with_name(server.database.stem + "-auth.sqlite3"))
    try:
        signing = key or store.signing_key()
    finally:
        store.close()
    now = int(time.time())
    valid = {"iss": f"{server.url}/oauth", "sub": "alpha", "aud": server.mcp("pfefferminzia"),
             "client_id": "x", "scope": "omds-ld.read omds-ld.write", "iat": now,
             "exp": now + 600, "jti": "t"}  # fmt: skip
    return issue(signing, {**valid, **claims})


def _added_client(server: ExampleServer, *how: str) -> dict[str, Any]:
    """``omds-ld auth add-client`` on the server's store: its id and secret, shown once."""
    added = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "auth", "add-client",
         "--database", str(server.database), *how],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    client: dict[str, Any] = json.loads(added.stdout)
    return client


def _stdio_with(server: ExampleServer, client: dict[str, Any]) -> Any:
    """``omds-ld mcp --stdio`` in front of Pfefferminzia, with its tokens by this client's
    credentials (the secret from the environment)."""
    import os

    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "omds_ld.cli", "mcp", "--stdio", "--api", server.api("pfefferminzia"),
              "--name", "pfefferminzia", "--upstream-token-url", f"{server.url}/oauth/token",
              "--upstream-client-id", client["client_id"], "--log-level", "warning"],
        env={**os.environ, "OMDS_LD_CLIENT_SECRET": client["client_secret"]},
    )  # fmt: skip


def _post(server: ExampleServer, token: str | None, body: Any = LIST, **headers: str) -> Any:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        server.mcp("pfefferminzia"), json=body, headers={**ACCEPT, **auth, **headers}, timeout=30
    )


def _created_case(result: Any) -> str:
    assert not result.is_error, result.content[0].text
    case: str = answer_of(result)["case"]["caseId"]
    return case


def test_the_sdk_oauth_client_logs_in_and_works_on_a_case_as_alpha(
    secured: ExampleServer,
) -> None:
    storage = Storage()
    logged_before = len(secured.request_entries())  # the server is shared with other files

    async def work() -> tuple[str, Any]:
        async with oauth_client(secured.mcp("pfefferminzia"), "alpha", storage) as client:
            created = await client.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )
            case = _created_case(created)
            return case, await client.call_tool("readCalculation", {"caseId": case})

    case, read = asyncio.run(work())
    assert not read.is_error, read.content[0].text
    assert storage.tokens is not None and storage.client is not None  # registered, logged in
    mcp_token = storage.tokens.access_token
    claims = jwt.decode(mcp_token, _public(secured)).claims
    assert claims["aud"] == secured.mcp("pfefferminzia") and claims["sub"] == "alpha"
    # the insurer was asked as alpha, with a token of its own for its interface
    created = next(
        e for e in reversed(secured.access_entries())
        if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
    )  # fmt: skip
    assert created["broker"] == "maklerbuero-alpha"
    assert created["token"] == {
        "subject": "alpha", "audience": secured.api("pfefferminzia"),
        "client": "omds-ld-mcp", "actor": "omds-ld-mcp",
    }  # fmt: skip
    # the case is alpha's at the insurer: alpha's own demo token reads it, beta's does not
    url = f"{secured.api('pfefferminzia')}/calculations/{case}"
    assert (
        httpx.get(url, headers={"Authorization": "Bearer pf-demo-alpha-7b1e4c"}).status_code == 200
    )
    assert (
        httpx.get(url, headers={"Authorization": "Bearer pf-demo-beta-92d0aa"}).status_code == 404
    )
    # the MCP token went nowhere: not to the insurer, not into a log
    for log in (secured.access_log, secured.request_log, secured.log):
        assert log is not None and mcp_token not in log.read_text()
    mcp_lines = [
        e for e in secured.request_entries()[logged_before:] if e.get("tool") == "createCalculation"
    ]
    assert mcp_lines and all(e["broker"] == "alpha" for e in mcp_lines)


def _public(server: ExampleServer) -> Any:
    from joserfc.jwk import KeySet

    return KeySet.import_key_set(httpx.get(f"{server.url}/oauth/jwks").json())


def test_refused_identities_each_with_its_status_and_problem(secured: ExampleServer) -> None:
    metadata = (
        f"{secured.url}/.well-known/oauth-protected-resource/omds-ld/insurers/pfefferminzia/mcp"
    )
    # no token
    answer = _post(secured, None)
    assert answer.status_code == 401
    assert f'resource_metadata="{metadata}"' in answer.headers["www-authenticate"]
    assert "problems/unauthorized" in answer.json()["error"]["message"]
    # the metadata says who issues tokens for the endpoint
    prm = httpx.get(metadata).json()
    assert prm["resource"] == secured.mcp("pfefferminzia")
    assert prm["authorization_servers"] == [f"{secured.url}/oauth"]
    cases = {
        "expired": (_forged(secured, exp=int(time.time()) - 120), "expired"),
        "wrong audience": (_tokens(secured, "alpha", "disrupto"), "not for this resource"),
        "wrong issuer": (_forged(secured, iss="https://elsewhere.example/oauth"), "not issued by"),
        "bad signature": (
            _forged(secured, key=ECKey.generate_key("P-256", parameters={"kid": "k"})),
            "signature",
        ),
        "not a JWT": ("pf-demo-alpha-7b1e4c", "signature"),
    }
    for name, (token, words) in cases.items():
        answer = _post(secured, token)
        assert answer.status_code == 401, name
        challenge = answer.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge and words in challenge, (name, challenge)
        assert words in answer.json()["error"]["message"], name
    # a valid token without the write scope reads, and is refused a change with 403
    reader = _tokens(secured, "alpha", scope="omds-ld.read")
    create = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "createCalculation",
                         "arguments": {"body": {"p:hasRootProduct": PRODUCT}}}}  # fmt: skip
    refused = _post(secured, reader, create, **{"MCP-Protocol-Version": "2026-07-28"})
    assert refused.status_code == 403
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert "problems/insufficient-scope" in refused.json()["error"]["message"]

    async def read() -> Any:
        async with bearer_client(secured.mcp("pfefferminzia"), reader) as client:
            return await client.call_tool("listProducts", {})

    assert not asyncio.run(read()).is_error


def test_another_brokers_case_key_and_session_are_not_theirs(secured: ExampleServer) -> None:
    alpha, beta = _tokens(secured, "alpha"), _tokens(secured, "beta")
    url = secured.mcp("pfefferminzia")
    body = {"body": {"p:hasRootProduct": PRODUCT}, "idempotencyKey": "same-key-1"}

    async def work() -> tuple[Any, Any, Any, Any]:
        async with bearer_client(url, alpha) as as_alpha, bearer_client(url, beta) as as_beta:
            first = await as_alpha.call_tool("createCalculation", body)
            case = _created_case(first)
            foreign = await as_beta.call_tool("readCalculation", {"caseId": case})
            same_key = await as_beta.call_tool("createCalculation", body)
            again = await as_alpha.call_tool("createCalculation", body)
            return first, foreign, same_key, again

    first, foreign, same_key, again = asyncio.run(work())
    # beta's read of alpha's case: not found, as if it never was
    assert foreign.is_error and "not-found" in foreign.content[0].text
    # beta's same key is beta's own: a new case, not alpha's replayed
    assert _created_case(same_key) != _created_case(first)
    assert "Replayed" not in same_key.content[0].text
    # alpha's retry with the key is the replay of alpha's first call
    assert _created_case(again) == _created_case(first) and "Replayed" in again.content[0].text
    # alpha's session: beta's token on it is refused
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    opened = _post(secured, alpha, init)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    versioned = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    refused = _post(secured, beta, LIST, **versioned)
    assert refused.status_code == 404 and "not yours" in refused.json()["error"]["message"]
    assert _post(secured, alpha, LIST, **versioned).status_code == 200


def test_the_demo_without_require_token_still_knows_a_broker_who_sends_a_token(
    server: ExampleServer,
) -> None:
    alpha = _tokens(server, "alpha")

    async def create(token: str | None) -> str:
        if token is None:
            from tests.mcp.clients import Client

            async with Client(server.mcp("pfefferminzia"), mode="legacy") as client:
                result = await client.call_tool(
                    "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
                )
        else:
            async with bearer_client(server.mcp("pfefferminzia"), token) as client:
                result = await client.call_tool(
                    "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
                )
        return _created_case(result)

    mine, anonymous = asyncio.run(create(alpha)), asyncio.run(create(None))
    api = server.api("pfefferminzia")
    as_alpha = {"Authorization": "Bearer pf-demo-alpha-7b1e4c"}
    assert httpx.get(f"{api}/calculations/{mine}", headers=as_alpha).status_code == 200
    assert httpx.get(f"{api}/calculations/{mine}").status_code == 404  # not the anonymous one's
    assert httpx.get(f"{api}/calculations/{anonymous}").status_code == 200
    # a bad token is refused even in the demo
    assert _post(server, "not-a-token").status_code == 401


def test_the_authorization_server_keeps_its_rules(secured: ExampleServer) -> None:
    base = secured.url
    metadata = httpx.get(f"{base}/.well-known/oauth-authorization-server/oauth").json()
    assert metadata["issuer"] == f"{base}/oauth"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "urn:ietf:params:oauth:grant-type:token-exchange" in metadata["grant_types_supported"]
    # a refresh token is used once: its use brings a new one, and the old one is dead
    tokens = tokens_by_hand(base, "alpha", secured.mcp("pfefferminzia"))
    client = tokens["client"]
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
               "client_id": client["client_id"], "client_secret": client["client_secret"]}  # fmt: skip
    renewed = httpx.post(f"{base}/oauth/token", data=refresh)
    assert renewed.status_code == 200 and renewed.json()["refresh_token"] != tokens["refresh_token"]
    assert (
        _post(secured, renewed.json()["access_token"], SESSIONLESS_LIST, **SESSIONLESS).status_code
        == 200
    )
    reused = httpx.post(f"{base}/oauth/token", data=refresh)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    # a registered client may not exchange tokens, nor register for it
    assert httpx.post(f"{base}/oauth/register", json={
        "redirect_uris": ["http://127.0.0.1:1/cb"],
        "grant_types": ["urn:ietf:params:oauth:grant-type:token-exchange"],
    }).status_code == 400  # fmt: skip
    exchange = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token": tokens["access_token"],
                "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "resource": secured.api("pfefferminzia"),
                "client_id": client["client_id"], "client_secret": client["client_secret"]}  # fmt: skip
    assert httpx.post(f"{base}/oauth/token", data=exchange).json()["error"] in (
        "unauthorized_client",
        "invalid_client",
    )
    # no token for a resource it does not issue for; PKCE is required; a wrong password is no login
    other = register(base)
    denied = httpx.get(f"{base}/oauth/authorize", params={
        "response_type": "code", "client_id": other["client_id"],
        "redirect_uri": "http://127.0.0.1:1/callback", "resource": "https://evil.example/mcp",
        "code_challenge": "x" * 43, "code_challenge_method": "S256",
    })  # fmt: skip
    assert denied.status_code == 400 and "no tokens are issued" in denied.text
    no_pkce = httpx.get(f"{base}/oauth/authorize", params={
        "response_type": "code", "client_id": other["client_id"],
        "redirect_uri": "http://127.0.0.1:1/callback", "resource": secured.mcp("pfefferminzia"),
    })  # fmt: skip
    assert no_pkce.status_code == 400 and "PKCE" in no_pkce.text
    with pytest.raises(PermissionError, match="401"):
        from tests.auth.flow import log_in

        asyncio.run(log_in(f"{base}/oauth/authorize?" + str(httpx.QueryParams({
            "response_type": "code", "client_id": other["client_id"],
            "redirect_uri": "http://127.0.0.1:1/callback", "resource": secured.mcp("pfefferminzia"),
            "code_challenge": "x" * 43, "code_challenge_method": "S256",
        })), "alpha", password="wrong"))  # fmt: skip


def test_a_rotated_key_signs_new_tokens_and_the_old_ones_still_verify(
    secured: ExampleServer,
) -> None:
    before = _tokens(secured, "alpha")
    rotated = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "auth", "rotate-key",
         "--database", str(secured.database)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "signing with key" in rotated.stdout
    after = _tokens(secured, "alpha")
    kids = {k["kid"] for k in httpx.get(f"{secured.url}/oauth/jwks").json()["keys"]}
    assert len(kids) >= 2
    assert (
        jwt.decode(before, _public(secured)).header["kid"]
        != jwt.decode(after, _public(secured)).header["kid"]
    )
    for token in (before, after):
        assert _post(secured, token, SESSIONLESS_LIST, **SESSIONLESS).status_code == 200


def test_a_software_house_runs_the_mcp_server_with_its_own_client(
    secured: ExampleServer, tmp_path: Path
) -> None:
    """stdio, in front of the insurer: its tokens by client credentials, as the broker its client
    was registered for."""
    from tests.mcp.clients import Client

    client = _added_client(secured, "--name", "Alpha's software house", "--broker", "alpha")
    parameters = _stdio_with(secured, client)

    async def work() -> Any:
        async with Client(parameters) as session:
            return await session.call_tool(
                "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
            )

    case = _created_case(asyncio.run(work()))
    entry = next(
        e for e in reversed(secured.access_entries())
        if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
    )  # fmt: skip
    assert entry["broker"] == "maklerbuero-alpha"
    assert entry["token"]["subject"] == "alpha" and entry["token"]["client"] == client["client_id"]
    url = f"{secured.api('pfefferminzia')}/calculations/{case}"
    assert (
        httpx.get(url, headers={"Authorization": "Bearer pf-demo-alpha-7b1e4c"}).status_code == 200
    )


def test_an_mcp_server_run_apart_checks_tokens_by_the_published_keys_and_exchanges_them(
    tmp_path: Path,
) -> None:
    """``omds-ld mcp --http --auth-issuer``: a resource server of its own, reading the
    authorization server's JWKS over HTTP, calling the insurer by token exchange as the caller."""
    import os

    from tests.servers import McpServer, free_port

    port, strict_port = free_port(), free_port()
    apart = f"http://127.0.0.1:{port}/omds-ld/insurers/pfefferminzia/mcp"
    strict = f"http://127.0.0.1:{strict_port}/omds-ld/insurers/pfefferminzia/mcp"
    insurer = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--require-token", "--auth-resource", apart, "--auth-resource", strict,
                    "--access-log", str(tmp_path / "access.jsonl")],
    )  # fmt: skip
    insurer.start()
    try:
        client = _added_client(
            insurer, "--name", "an MCP server run apart",
            "--exchange-for", apart, "--exchange-for", strict,
        )  # fmt: skip

        def replica_of(at: int, settings: str = "") -> McpServer:
            config = tmp_path / f"mcp-{at}.toml"
            config.write_text(
                f'[auth]\nmode = "required"\nissuer = "{insurer.url}/oauth"\n'
                f'token_url = "{insurer.url}/oauth/token"\nclient_id = "{client["client_id"]}"\n'
                f'{settings}[[instance]]\nname = "pfefferminzia"\n'
                f'api = "{insurer.api("pfefferminzia")}"\n'
            )
            os.environ["OMDS_LD_CLIENT_SECRET"] = client["client_secret"]
            try:
                started = McpServer(config, at)
                started.start()
            finally:
                del os.environ["OMDS_LD_CLIENT_SECRET"]
            return started

        replica = replica_of(port)
        # a deployment naming its own scope for changes: a token without it reads, and no more
        stricter = replica_of(strict_port, 'write_scope = "omds-ld.admin"\n')
        try:
            prm = httpx.get(
                f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource"
                "/omds-ld/insurers/pfefferminzia/mcp"
            ).json()
            assert prm == {
                **prm,
                "resource": apart,
                "authorization_servers": [f"{insurer.url}/oauth"],
            }
            beta = tokens_by_hand(insurer.url, "beta", apart)["access_token"]

            async def work(token: str) -> Any:
                async with bearer_client(apart, token) as session:
                    return await session.call_tool(
                        "createCalculation", {"body": {"p:hasRootProduct": PRODUCT}}
                    )

            case = _created_case(asyncio.run(work(beta)))
            entry = next(
                e for e in reversed(insurer.access_entries())
                if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
            )  # fmt: skip
            assert entry["broker"] == "makler-beta"
            assert entry["token"]["subject"] == "beta"
            assert entry["token"]["actor"] == client["client_id"]
            url = f"{insurer.api('pfefferminzia')}/calculations/{case}"
            as_beta = {"Authorization": "Bearer pf-demo-beta-92d0aa"}
            assert httpx.get(url, headers=as_beta).status_code == 200
            # a token for the example server's own endpoint is not one for this one
            other = tokens_by_hand(insurer.url, "beta", insurer.mcp("pfefferminzia"))
            refused = httpx.post(
                apart, json=LIST,
                headers={**ACCEPT, "Authorization": f"Bearer {other['access_token']}"},
            )  # fmt: skip
            assert refused.status_code == 401 and "not for this resource" in refused.text
            writer = tokens_by_hand(insurer.url, "beta", strict)["access_token"]
            create = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "createCalculation",
                                 "arguments": {"body": {"p:hasRootProduct": PRODUCT}}}}  # fmt: skip
            denied = httpx.post(
                strict, json=create,
                headers={**ACCEPT, "Authorization": f"Bearer {writer}",
                         "MCP-Protocol-Version": "2026-07-28"},
            )  # fmt: skip
            assert denied.status_code == 403, denied.text
            assert 'scope="omds-ld.read omds-ld.admin"' in denied.headers["www-authenticate"]

            async def read(token: str) -> Any:
                async with bearer_client(strict, token) as session:
                    return await session.call_tool("listProducts", {})

            assert not asyncio.run(read(writer)).is_error
        finally:
            replica.stop()
            stricter.stop()
    finally:
        insurer.stop()


def test_the_conformance_suite_passes_the_authorization_server(
    secured: ExampleServer, tmp_path: Path
) -> None:
    """The official MCP conformance suite's authorization-server scenarios (metadata, and the
    authorization code grant with PKCE and a resource), the login done as a browser would."""
    from tests.auth.flow import logged_in_at
    from tests.mcp.test_peers import node_tool
    from tests.servers import free_port

    port = free_port()
    client = httpx.post(
        f"{secured.url}/oauth/register",
        json={"redirect_uris": [f"http://127.0.0.1:{port}/callback"],
              "token_endpoint_auth_method": "none", "client_name": "conformance suite"},
    ).json()  # fmt: skip
    assert "client_secret" not in client  # a public client is issued none
    suite = started(subprocess.Popen(
        [*node_tool("conformance"), "authorization", "--url", f"{secured.url}/oauth",
         "--client-id", client["client_id"], "--resource", secured.mcp("pfefferminzia"),
         "--port", str(port), "--output-dir", str(tmp_path / "results")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    ))  # fmt: skip
    assert suite.stdout is not None
    output = []
    try:
        for line in suite.stdout:
            output.append(line)
            if line.startswith(f"{secured.url}/oauth/authorize?"):
                back = asyncio.run(logged_in_at(line.strip(), "alpha"))
                httpx.get(back, timeout=30)  # the browser arrives at the suite's callback
        suite.wait(timeout=60)
    finally:
        if suite.poll() is None:
            suite.kill()
    text = "".join(output)
    assert suite.returncode == 0, text
    # every check of both scenarios passes; the metadata's scenario checks one more since the
    # metadata says client_id_metadata_document_supported (the suite's CIMD check)
    assert "Total: 3 passed, 0 failed" in text, text
    assert "authorization-server-metadata-endpoint: 2 passed, 0 failed" in text, text


def test_the_mcp_servers_own_token_is_renewed_before_it_expires(tmp_path: Path) -> None:
    """Client credentials over stdio: with 35-second tokens (renewed 30 s before they expire) a
    call six seconds after the first gets a new token, and both calls work."""
    from tests.mcp.clients import Client

    insurer = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--require-token", "--access-token-seconds", "35",
                    "--access-log", str(tmp_path / "access.jsonl")],
    )  # fmt: skip
    insurer.start()
    try:
        client = _added_client(insurer, "--name", "a software house", "--broker", "alpha")
        parameters = _stdio_with(insurer, client)

        def tokens_asked() -> int:
            return sum(
                1 for e in insurer.access_entries()
                if e["path"] == "/oauth/token" and e["status"] == 200
            )  # fmt: skip

        async def work() -> tuple[int, int, bool]:
            before = tokens_asked()  # the example server's own MCP servers' tokens
            async with Client(parameters) as session:
                first = await session.call_tool("listProducts", {})
                once = tokens_asked() - before
                await asyncio.sleep(6)
                later = await session.call_tool("readProduct", {"productId": "kraftfahrt-2025"})
                return once, tokens_asked() - before, bool(first.is_error or later.is_error)

        once, twice, failed = asyncio.run(work())
        assert not failed
        assert once == 1 and twice == 2, (once, twice)
    finally:
        insurer.stop()


def test_the_broker_endpoint_calls_the_insurer_as_the_broker_whose_token_it_checked(
    secured: ExampleServer,
) -> None:
    url = secured.url + "/omds-ld/insurers/mcp"
    token = tokens_by_hand(secured.url, "alpha", url)["access_token"]
    other = tokens_by_hand(secured.url, "alpha", secured.mcp("pfefferminzia"))["access_token"]
    metadata = httpx.get(
        secured.url + "/.well-known/oauth-protected-resource/omds-ld/insurers/mcp"
    ).json()
    assert metadata["resource"] == url

    async def work() -> tuple[Any, Any]:
        async with bearer_client(url, token) as client:
            created = await client.call_tool(
                "createCalculation",
                {"insurer": "pfefferminzia", "body": {
                    "p:hasRootProduct": "https://pfefferminzia.example/products/kraftfahrt-2025"
                }},
            )  # fmt: skip
        try:  # a token for another endpoint: refused at initialize (the SDK raises on 401)
            async with bearer_client(url, other) as client:
                refused: Any = await client.list_tools()
        except Exception as error:
            refused = error
        return created, refused

    created, refused = asyncio.run(work())
    assert not created.is_error, created.content[0].text
    entry = next(
        e for e in reversed(secured.access_entries())
        if e["method"] == "POST" and e["path"].endswith("/pfefferminzia/api/calculations")
        and e.get("token", {}).get("subject") == "alpha"
    )  # fmt: skip
    assert entry["broker"] == "maklerbuero-alpha"
    assert "the token is not for this resource" in repr(refused), refused


def test_an_added_client_presents_its_secret_either_way_the_metadata_advertises(
    secured: ExampleServer,
) -> None:
    """``auth add-client``'s client: its secret by HTTP Basic or in the form
    (client_secret_basic, client_secret_post, both advertised); a wrong secret is refused."""
    client = _added_client(secured, "--name", "a software house", "--broker", "alpha")
    advertised = httpx.get(f"{secured.url}/.well-known/oauth-authorization-server/oauth").json()
    assert {"client_secret_basic", "client_secret_post"} <= set(
        advertised["token_endpoint_auth_methods_supported"]
    )
    token_url = f"{secured.url}/oauth/token"
    grant = {
        "grant_type": "client_credentials",
        "scope": "omds-ld.read",
        "resource": secured.api("pfefferminzia"),
    }
    basic = httpx.post(token_url, data=grant, auth=(client["client_id"], client["client_secret"]))
    posted = httpx.post(token_url, data={**grant, "client_id": client["client_id"],
                                         "client_secret": client["client_secret"]})  # fmt: skip
    wrong = httpx.post(token_url, data={**grant, "client_id": client["client_id"],
                                        "client_secret": "not-it"})  # fmt: skip
    assert basic.status_code == 200 and basic.json()["access_token"], basic.text
    assert posted.status_code == 200 and posted.json()["access_token"], posted.text
    assert wrong.status_code == 401, wrong.text


def test_without_required_tokens_no_login_is_advertised(
    server: ExampleServer, secured: ExampleServer
) -> None:
    """serve without --require-token: no protected-resource metadata (RFC 9728) for any
    endpoint, so a client that follows it (mcp-use) never waits for a login nobody needs, and a
    refused token's challenge names none; with --require-token it is published."""
    for path in ("/omds-ld/insurers/pfefferminzia/mcp", "/omds-ld/insurers/mcp"):
        assert (
            httpx.get(f"{server.url}/.well-known/oauth-protected-resource{path}").status_code == 404
        )
        assert (
            httpx.get(f"{secured.url}/.well-known/oauth-protected-resource{path}").status_code
            == 200
        )
    listed = _post(server, None, SESSIONLESS_LIST, **SESSIONLESS)
    assert listed.status_code == 200, "no token needed"
    refused = _post(server, "not-a-token", SESSIONLESS_LIST, **SESSIONLESS)
    if refused.status_code == 401:  # a token sent is checked; the challenge names no metadata
        assert "resource_metadata" not in refused.headers["www-authenticate"]
