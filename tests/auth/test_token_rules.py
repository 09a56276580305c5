"""Every token means what it says: scopes hold at the insurer's interface as at the MCP endpoints,
a code and a refresh token are redeemed once (a second use revokes what they brought), a client
revokes its grant (RFC 7009), and a client that registers itself may send the code only where a
browser may safely go. Against the example server with --require-token, as a process, with real
tokens of its authorization server."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.auth.flow import REDIRECT, log_in, pkce, redeem, register, tokens_by_hand
from tests.servers import ExampleServer, running

PRODUCT = "https://pfefferminzia.example/products/kraftfahrt-2025"
LD = {"Content-Type": "application/ld+json"}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **LD}


def test_the_interface_refuses_what_the_tokens_scope_does_not_allow(
    secured: ExampleServer,
) -> None:
    """A token the broker approved for reading only reads at the interface; creating a case (and
    every other create or edit) is 403 insufficient-scope, and nothing was created."""
    api = secured.api("pfefferminzia")
    reader = tokens_by_hand(secured.url, "alpha", api, scope="omds-ld.read")["access_token"]
    writer = tokens_by_hand(secured.url, "alpha", api)["access_token"]
    assert httpx.get(f"{api}/products", headers=_bearer(reader)).status_code == 200
    before = secured.snapshot()
    refused = httpx.post(
        f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=_bearer(reader)
    )
    assert refused.status_code == 403, refused.text
    problem = refused.json()
    assert problem["type"].endswith("/problems/insufficient-scope")
    assert "omds-ld.write" in problem["detail"]
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert secured.snapshot() == before
    # the same broker with the write scope creates it, and an edit needs the write scope too
    created = httpx.post(
        f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=_bearer(writer)
    )
    assert created.status_code == 201, created.text
    case = created.json()["bc:caseId"]
    edit = httpx.post(
        f"{api}/calculations/{case}/risk-objects",
        json={"@type": "p:Vehicle"},
        headers=_bearer(reader),
    )
    assert edit.status_code == 403 and "insufficient-scope" in edit.json()["type"]
    assert httpx.get(f"{api}/calculations/{case}", headers=_bearer(reader)).status_code == 200


def test_a_token_with_no_scope_is_refused_even_a_read(secured: ExampleServer) -> None:
    api = secured.api("pfefferminzia")
    client = register(secured.url, scope="omds-ld.read")  # it may ask for nothing more
    token = _code_flow(secured, client, api, scope="omds-ld.write")  # so it gets no scope
    assert token["scope"] == ""
    answer = httpx.get(f"{api}/products", headers=_bearer(token["access_token"]))
    assert answer.status_code == 403 and "omds-ld.read" in answer.json()["detail"]


def _code(
    server: ExampleServer, client: dict[str, Any], resource: str, scope: str, **extra: str
) -> tuple[str, str]:
    """A code for ``client`` (logged in as alpha), and its PKCE verifier."""
    verifier, challenge = pkce()
    query = urlencode({"response_type": "code", "client_id": client["client_id"],
                       "redirect_uri": extra.get("redirect_uri", REDIRECT), "state": "s",
                       "scope": scope, "resource": resource, "code_challenge": challenge,
                       "code_challenge_method": "S256"})  # fmt: skip
    code = asyncio.run(log_in(f"{server.url}/oauth/authorize?{query}", "alpha")).code
    return code, verifier


def _redeem(
    server: ExampleServer, client: dict[str, Any], code: str, verifier: str, resource: str
) -> httpx.Response:
    return redeem(server.url, client, code, verifier, resource)


def _code_flow(
    server: ExampleServer, client: dict[str, Any], resource: str, scope: str
) -> dict[str, Any]:
    code, verifier = _code(server, client, resource, scope)
    answer = _redeem(server, client, code, verifier, resource)
    assert answer.status_code == 200, answer.text
    tokens: dict[str, Any] = answer.json()
    return tokens


def _refresh(server: ExampleServer, client: dict[str, Any], token: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": token,
              "client_id": client["client_id"], "client_secret": client["client_secret"]},
        timeout=30,
    )  # fmt: skip


def test_concurrent_refreshes_of_one_token_give_one_new_token(secured: ExampleServer) -> None:
    """Eight refreshes of one refresh token at once: exactly one brings tokens. The others are
    a reuse, which revokes the whole family: the one new refresh token is dead too."""
    resource = secured.mcp("pfefferminzia")
    tokens = tokens_by_hand(secured.url, "alpha", resource)
    client, refresh = tokens["client"], tokens["refresh_token"]
    answers: list[httpx.Response] = []
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        answers.append(_refresh(secured, client, refresh))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [a for a in answers if a.status_code == 200]
    assert len(won) == 1, [a.status_code for a in answers]
    assert all(a.json()["error"] == "invalid_grant" for a in answers if a.status_code != 200)
    descendant = _refresh(secured, client, won[0].json()["refresh_token"])
    assert descendant.status_code == 400 and descendant.json()["error"] == "invalid_grant"


def test_a_rotated_refresh_token_used_again_revokes_its_descendants(
    secured: ExampleServer,
) -> None:
    tokens = tokens_by_hand(secured.url, "alpha", secured.mcp("pfefferminzia"))
    client, first = tokens["client"], tokens["refresh_token"]
    second = _refresh(secured, client, first)
    assert second.status_code == 200
    third = _refresh(secured, client, second.json()["refresh_token"])
    assert third.status_code == 200  # rotation goes on while nobody replays
    replayed = _refresh(secured, client, first)  # someone else held the first one
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
    latest = _refresh(secured, client, third.json()["refresh_token"])
    assert latest.status_code == 400, "the family's newest refresh token must be revoked too"


def _at_mcp(server: ExampleServer, token: str) -> httpx.Response:
    """An MCP initialize at Pfefferminzia's endpoint with ``token``."""
    from tests.mcp.test_http import HEADERS, INITIALIZE

    return httpx.post(
        server.mcp("pfefferminzia"), json=INITIALIZE,
        headers={**HEADERS, "Authorization": f"Bearer {token}"},
    )  # fmt: skip


def test_a_code_used_twice_revokes_what_its_first_use_brought(secured: ExampleServer) -> None:
    """RFC 6749 4.1.2: the refresh token and the access token of the code's first use."""
    resource = secured.mcp("pfefferminzia")
    client = register(secured.url)
    code, verifier = _code(secured, client, resource, "omds-ld.read omds-ld.write")
    first = _redeem(secured, client, code, verifier, resource)
    assert first.status_code == 200
    access = first.json()["access_token"]
    assert _at_mcp(secured, access).status_code == 200
    again = _redeem(secured, client, code, verifier, resource)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    refreshed = _refresh(secured, client, first.json()["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    refused = _at_mcp(secured, access)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and "revoked" in challenge


def test_a_failed_pkce_check_burns_the_code(secured: ExampleServer) -> None:
    resource = secured.mcp("pfefferminzia")
    client = register(secured.url)
    code, verifier = _code(secured, client, resource, "omds-ld.read")
    guessed = _redeem(secured, client, code, "x" * 43, resource)
    assert guessed.status_code == 400 and guessed.json()["error"] == "invalid_grant"
    right = _redeem(secured, client, code, verifier, resource)
    assert right.status_code == 400, "a code that failed once must not work with the right verifier"


def test_a_client_revokes_its_grant(secured: ExampleServer) -> None:
    """RFC 7009: revoking a refresh token ends its grant, its access tokens included; an access
    token alone is not revocable and says so; another client's token is not this client's to
    revoke."""
    metadata = httpx.get(f"{secured.url}/.well-known/oauth-authorization-server/oauth").json()
    assert metadata["revocation_endpoint"] == f"{secured.url}/oauth/revoke"
    tokens = tokens_by_hand(secured.url, "alpha", secured.mcp("pfefferminzia"))
    client = tokens["client"]
    other = register(secured.url)
    foreign = httpx.post(
        metadata["revocation_endpoint"],
        data={"token": tokens["refresh_token"], "client_id": other["client_id"],
              "client_secret": other["client_secret"]},
    )  # fmt: skip
    assert foreign.status_code == 400 and foreign.json()["error"] == "invalid_grant"
    assert _refresh(secured, client, tokens["refresh_token"]).status_code == 200
    renewed = _refresh(secured, client, tokens["refresh_token"])  # the reuse revoked it all
    assert renewed.status_code == 400
    fresh = tokens_by_hand(secured.url, "alpha", secured.mcp("pfefferminzia"))
    own = {"client_id": fresh["client"]["client_id"],
           "client_secret": fresh["client"]["client_secret"]}  # fmt: skip
    access = httpx.post(
        metadata["revocation_endpoint"],
        data={"token": fresh["access_token"], "token_type_hint": "access_token", **own},
    )
    assert access.status_code == 400, access.text
    assert access.json()["error"] == "unsupported_token_type"
    revoked = httpx.post(
        metadata["revocation_endpoint"],
        data={"token": fresh["refresh_token"], "token_type_hint": "refresh_token", **own},
    )
    assert revoked.status_code == 200
    after = _refresh(secured, fresh["client"], fresh["refresh_token"])
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant"
    # the grant's access tokens end with it at this server's resources (its MCP endpoints)
    assert _at_mcp(secured, fresh["access_token"]).status_code == 401


@pytest.mark.parametrize(
    "uri",
    [
        "http://evil.example/callback",
        "javascript:alert(1)",
        "data:text/html,hi",
        "file:///etc/passwd",
        "https://app.example/cb#fragment",
        "ftp://app.example/cb",
    ],
)
def test_registration_refuses_a_redirect_a_browser_must_not_be_sent_to(
    secured: ExampleServer, uri: str
) -> None:
    answer = httpx.post(
        f"{secured.url}/oauth/register",
        json={"client_name": "Claude Code", "redirect_uris": [uri]},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


def test_registration_takes_https_loopback_on_any_port_and_an_apps_own_scheme(
    secured: ExampleServer,
) -> None:
    resource = secured.mcp("pfefferminzia")
    for uri in ("https://app.example/cb", "com.example.broker:/oauth/callback"):
        answer = httpx.post(f"{secured.url}/oauth/register", json={"redirect_uris": [uri]})
        assert answer.status_code == 201, (uri, answer.text)
    # a native app registers its loopback redirect once and listens on any free port later
    client = register(secured.url, redirect_uris=["http://127.0.0.1/callback"])
    code, _ = _code(
        secured, client, resource, "omds-ld.read", redirect_uri="http://127.0.0.1:51234/callback"
    )
    assert code


def test_registration_bounds_a_clients_words(secured: ExampleServer) -> None:
    huge = httpx.post(
        f"{secured.url}/oauth/register",
        json={"client_name": "x" * 300, "redirect_uris": [REDIRECT]},
    )
    assert huge.status_code == 400 and huge.json()["error"] == "invalid_client_metadata"
    body = httpx.post(
        f"{secured.url}/oauth/register",
        content=b'{"client_name": "' + b"x" * (2 * 1024 * 1024) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert body.status_code == 413
    many = httpx.post(
        f"{secured.url}/oauth/register",
        json={"redirect_uris": [f"https://app.example/{n}" for n in range(11)]},
    )
    assert many.status_code == 400


def test_the_login_page_says_who_registered_itself_and_where_the_code_goes(
    secured: ExampleServer,
) -> None:
    client = register(
        secured.url, client_name="Claude Code", redirect_uris=["https://collector.example/cb"]
    )
    _, challenge = pkce()
    page = httpx.get(
        f"{secured.url}/oauth/authorize",
        params={"response_type": "code", "client_id": client["client_id"],
                "redirect_uri": "https://collector.example/cb", "state": "s",
                "resource": secured.mcp("pfefferminzia"), "code_challenge": challenge,
                "code_challenge_method": "S256"},
    )  # fmt: skip
    assert page.status_code == 200
    assert "registered itself" in page.text
    assert "https://collector.example" in page.text


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    folder = Path(tmp_path_factory.mktemp("capped"))
    with running(ExampleServer(
        folder / "c.sqlite3",
        extra_args=["--require-token", "--max-registrations-per-address", "3",
                    "--max-registrations", "5"],
    )) as started:  # fmt: skip
        yield started


def test_registrations_are_bounded_per_address_and_unused_ones_expire(
    capped: ExampleServer,
) -> None:
    def one() -> httpx.Response:
        return httpx.post(f"{capped.url}/oauth/register", json={"redirect_uris": [REDIRECT]})

    assert [one().status_code for _ in range(3)] == [201, 201, 201]
    refused = one()
    assert refused.status_code == 400 and "too many" in refused.json()["error_description"]
    # another client software behind the same address is not locked out by this one's burst
    named = httpx.post(
        f"{capped.url}/oauth/register",
        json={"redirect_uris": [REDIRECT], "client_name": "Another client"},
    )
    assert named.status_code == 201, named.text
    store = capped.database.with_name(capped.database.stem + "-auth.sqlite3")
    # an hour later the burst's window has passed (the clock moved by rewriting their birth)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE auth_clients SET created = created - 2 * 3600 WHERE self_registered=1")
    assert one().status_code == 201
    # a day later the unused ones are forgotten
    with sqlite3.connect(store) as db:
        db.execute("UPDATE auth_clients SET created = created - 2 * 86400 WHERE self_registered=1")
    assert one().status_code == 201
    with sqlite3.connect(store) as db:
        (left,) = db.execute("SELECT COUNT(*) FROM auth_clients WHERE self_registered=1").fetchone()
    assert left == 1


def test_a_registration_flood_from_one_address_leaves_others_able_to_register(
    tmp_path: Path,
) -> None:
    """One address varying the client name (each name within its own hourly bound) holds at
    most its share of the capacity, then is refused; a client from another address (another
    loopback address here) still registers."""
    shared = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--require-token", "--max-registrations", "12",
                    "--max-registrations-per-source", "4"],
    )  # fmt: skip
    with running(shared):
        _flood(shared)


def _flood(shared: ExampleServer) -> None:

    def register(name: str, source: str) -> httpx.Response:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=30) as client:
            return client.post(
                f"{shared.url}/oauth/register",
                json={"redirect_uris": [REDIRECT], "client_name": name},
            )

    flood = [register(f"Flood {n}", "127.0.0.1") for n in range(8)]
    assert [r.status_code for r in flood] == [201] * 4 + [400] * 4, [r.text for r in flood]
    assert "holds its share" in flood[-1].json()["error_description"]
    other = register("Another vendor's client", "127.0.0.2")
    assert other.status_code == 201, other.text
    store = shared.database.with_name(shared.database.stem + "-auth.sqlite3")
    with sqlite3.connect(store) as db:
        (held,) = db.execute(
            "SELECT COUNT(*) FROM auth_clients WHERE self_registered=1 AND address='127.0.0.1'"
        ).fetchone()
    assert held == 4


def test_a_read_only_token_may_edit_nothing_through_the_mcp_endpoint(
    secured: ExampleServer,
) -> None:
    """Every tool of kind create or edit needs omds-ld.write at the MCP endpoint, not only the
    ones that create: the check comes before any tool runs."""
    from omds_ld.norm import load_norm

    reader = tokens_by_hand(
        secured.url, "alpha", secured.mcp("pfefferminzia"), scope="omds-ld.read"
    )
    changing = [n for n, op in load_norm().operations.items() if op.kind in ("create", "edit")]
    assert "setAttributes" in changing and "createRiskObject" in changing
    for n, tool in enumerate(changing):
        answer = httpx.post(
            secured.mcp("pfefferminzia"),
            json={"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": tool, "arguments": {"caseId": "c", "body": {}}}},
            headers={"Accept": "application/json, text/event-stream",
                     "Authorization": f"Bearer {reader['access_token']}",
                     "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                     "Mcp-Name": tool},
        )  # fmt: skip
        assert answer.status_code == 403, (tool, answer.text)
        assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]


def test_client_secrets_are_kept_as_hashes_only(secured: ExampleServer) -> None:
    """Neither a registered client's secret nor one made by ``auth add-client`` is in the
    authorization server's store: only a hash of it."""
    import json as _json
    import subprocess
    import sys

    registered = register(secured.url)
    added = _json.loads(
        subprocess.run(
            [sys.executable, "-m", "omds_ld.cli", "auth", "add-client", "--database",
             str(secured.database), "--name", "hashed", "--broker", "alpha"],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    store = secured.database.with_name(secured.database.stem + "-auth.sqlite3")
    kept = b"".join(p.read_bytes() for p in store.parent.glob(store.name + "*"))
    for secret in (registered["client_secret"], added["client_secret"]):
        assert secret.encode() not in kept
    import hashlib

    assert hashlib.sha256(added["client_secret"].encode()).hexdigest().encode() in kept


def test_a_client_acting_for_no_broker_reads_the_catalogue_only(secured: ExampleServer) -> None:
    import json as _json
    import subprocess
    import sys

    client = _json.loads(
        subprocess.run(
            [sys.executable, "-m", "omds_ld.cli", "auth", "add-client", "--database",
             str(secured.database), "--name", "an MCP server run apart",
             "--exchange-for", "http://127.0.0.1:1/omds-ld/insurers/pfefferminzia/mcp"],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    api = secured.api("pfefferminzia")
    token = httpx.post(
        f"{secured.url}/oauth/token",
        data={"grant_type": "client_credentials", "resource": api},
        auth=(client["client_id"], client["client_secret"]),
    ).json()["access_token"]
    assert httpx.get(f"{api}/products", headers=_bearer(token)).status_code == 200
    created = httpx.post(
        f"{api}/calculations", json={"p:hasRootProduct": PRODUCT}, headers=_bearer(token)
    )
    assert created.status_code == 401 and "catalogue only" in created.json()["detail"]
    assert httpx.get(f"{api}/calculations/abc", headers=_bearer(token)).status_code == 401


def test_the_login_page_lets_its_form_send_the_code_to_a_native_apps_scheme(
    secured: ExampleServer,
) -> None:
    native = "com.example.broker:/oauth/callback"
    client = register(secured.url, redirect_uris=[native])
    _, challenge = pkce()
    page = httpx.get(
        f"{secured.url}/oauth/authorize",
        params={"response_type": "code", "client_id": client["client_id"], "redirect_uri": native,
                "state": "s", "resource": secured.mcp("pfefferminzia"),
                "code_challenge": challenge, "code_challenge_method": "S256"},
    )  # fmt: skip
    assert page.status_code == 200
    assert "com.example.broker:" in page.headers["content-security-policy"]
    assert native in page.text


@pytest.mark.parametrize("trusted", [None, "none"])
def test_behind_a_trusted_proxy_each_forwarded_address_has_its_own_registrations(
    tmp_path: Path, trusted: str | None
) -> None:
    """The per-address limit counts the client's address as a trusted reverse proxy forwards
    it (loopback by default: a proxy on the same host); where no proxy is trusted, a forwarded
    address is a claim like any other and everyone behind the proxy is one address."""
    extra = ["--require-token", "--max-registrations-per-address", "2"]
    extra += ["--trusted-proxy", trusted] if trusted else []
    with running(ExampleServer(tmp_path / "p.sqlite3", extra_args=extra)) as server:

        def one(address: str) -> int:
            return httpx.post(
                f"{server.url}/oauth/register", json={"redirect_uris": [REDIRECT]},
                headers={"X-Forwarded-For": address},
            ).status_code  # fmt: skip

        first = [one("192.0.2.1") for _ in range(3)]
        other = one("192.0.2.2")
    assert first == [201, 201, 400]
    assert other == (201 if trusted is None else 400)
