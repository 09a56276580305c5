"""The one command: ``omds-ld``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the command line starts without them
    from starlette.routing import BaseRoute

    from omds_ld.auth.resource import LocalKeys
    from omds_ld.auth.store import AuthStore
    from omds_ld.chat.login import LoginSettings
    from omds_ld.insurer.app import TokenCheck
    from omds_ld.mcp.config import AuthConfig

from omds_ld import __version__, logs
from omds_ld.insurer.config import DEFAULT_PORT, ServerConfig, default_database
from omds_ld.mcp.config import DEFAULT_MCP_PORT, HttpConfig, InstanceConfig, McpConfig, load_config
from omds_ld.serving import Limits

ISSUER_PATH = "/oauth"  # the example authorization server's issuer, below the server's URL
MCP_CLIENT = "omds-ld-mcp"
CHAT_CLIENT = "omds-ld-chat"


class LateApp:
    """An ASGI app that forwards to one set after construction (the app it is part of)."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _http_settings(args: argparse.Namespace, port: int) -> HttpConfig:
    return HttpConfig(
        host=args.host,
        port=port,
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        session_binding_seconds=args.session_minutes * 60,
        max_sessions=args.max_sessions or HttpConfig.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client or HttpConfig.max_sessions_per_client,
        hibernate_seconds=(
            HttpConfig.hibernate_seconds
            if args.hibernate_seconds is None
            else args.hibernate_seconds
        ),
    )


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(read_seconds=args.request_read_seconds, max_connections=args.max_connections)


def _log_level(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-level", default=default, choices=["debug", "info", "warning", "error"]
    )


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    defaults = Limits()
    parser.add_argument(
        "--hibernate-seconds",
        type=float,
        help="an MCP session with nothing in flight this long lets go of its SDK state and is "
        f"made again on its next request; 0: never (default {HttpConfig.hibernate_seconds:g})",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        help=f"open MCP sessions per insurer (default {HttpConfig.max_sessions})",
    )
    parser.add_argument(
        "--max-sessions-per-client",
        type=int,
        help=f"open MCP sessions per client address (default {HttpConfig.max_sessions_per_client})",
    )
    parser.add_argument(
        "--request-read-seconds",
        type=float,
        default=defaults.read_seconds,
        help="a client must send each whole request (head and body) within this",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help="open connections before new ones are answered 503",
    )


def _serve(args: argparse.Namespace) -> int:
    import httpx
    from starlette.routing import Route

    from omds_ld import metrics, serving
    from omds_ld.chat.app import ChatPage
    from omds_ld.chat.conversations import Conversations
    from omds_ld.insurer.app import api_base, create_app
    from omds_ld.insurer.data import load_insurers
    from omds_ld.mcp.service import McpHosting, build_connectors
    from omds_ld.mcp.state import MemoryStateStore
    from omds_ld.mcp.transport import AsgiTransport
    from omds_ld.norm import load_norm

    config = ServerConfig(
        host=args.host,
        port=args.port,
        database=Path(args.database) if args.database else default_database(),
        insurers_folder=Path(args.insurers) if args.insurers else None,
        require_token=args.require_token,
        access_log=Path(args.access_log) if args.access_log else None,
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        idempotency_lease_seconds=args.idempotency_lease_seconds,
    )
    insurers = load_insurers(config.insurers_folder)
    norm = load_norm()
    mcp_config = McpConfig(
        instances=tuple(
            InstanceConfig(
                name=name,
                display_name=insurer.display_name,
                api=config.base_url + api_base(name),
                language=insurer.language,
            )
            for name, insurer in insurers.items()
        ),
        http=_http_settings(args, args.port),
        request_log=Path(args.request_log) if args.request_log else None,
    )
    state = MemoryStateStore()
    # the insurers' authorization server: brokers log in, the MCP servers exchange their tokens
    authorization = _authorization_server(
        config, insurers, mcp_config, tuple(args.auth_resource or ()), args.access_token_seconds,
        registrations=(args.max_registrations_per_address, args.max_registrations),
    )  # fmt: skip
    mcp_config = replace(mcp_config, auth=authorization.mcp_auth)
    # The MCP servers call the interfaces of this same process through ASGI: the same HTTP
    # requests and answers, without a trip through the network stack or an HTTP client.
    insurer_app = LateApp()
    transport = AsgiTransport(insurer_app, mcp_config.timeout_seconds)
    token_http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=insurer_app, raise_app_exceptions=False),
        timeout=mcp_config.timeout_seconds,
    )
    connectors = build_connectors(mcp_config, norm, state, transport, token_http)
    hosting = McpHosting(connectors, mcp_config.http, state, mcp_config.auth, authorization.keys)
    # the chat page reaches the MCP servers as any MCP client does: over HTTP, at their address
    agent = None
    if args.chat_model:
        from omds_ld.scenarios.agents.models import make_agent

        try:
            agent = make_agent(args.chat_model, os.environ, args.chat_model_base_url)
        except ValueError as error:
            raise SystemExit(f"omds-ld serve: --chat-model: {error}") from None
    mcp_urls = {name: config.base_url + mcp_config.http.path(name) for name in insurers}
    logins = None
    if config.require_token:  # the MCP endpoints want a broker's token: the page logs brokers in
        from omds_ld.chat.login import Logins

        logins = Logins(authorization.chat_login(tuple(mcp_urls.values())), token_http)
    chat = ChatPage(
        mcp_urls,
        {name: insurer.display_name for name, insurer in insurers.items()},
        Conversations(config.database.with_name(config.database.stem + "-chat.sqlite3")),
        agent,
        logins,
    )

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with token_http, hosting.running(), chat.running():
            yield
        authorization.store.close()

    app = create_app(
        config,
        norm=norm,
        insurers=insurers,
        extra_routes=[
            *authorization.routes,
            *hosting.routes(),
            *chat.routes(),
            Route("/metrics", metrics.endpoint),
        ],
        extra_lifespan=running,
        tokens=authorization.check,
    )
    insurer_app.app = app
    out = sys.stderr
    print(f"omds-ld {__version__} example server, store {config.database}", file=out)
    for name, insurer in insurers.items():
        mode = "draft at the server" if insurer.draft_at_server else "tariff inquiry"
        print(f"  {insurer.display_name:<30} {config.base_url}{api_base(name)}  ({mode})", file=out)
    if config.require_token:
        print(f"Authorization: required, OAuth 2.1 (authorization server {authorization.issuer})",
              file=out)  # fmt: skip
    else:
        print("Authorization: off, the embedded demo (a token sent is still checked); "
              "--require-token turns it on", file=out)  # fmt: skip
    chatting = f"with {agent.name}, or by hand" if agent else "by hand; --chat-model for a model"
    print(f"Chat page ({chatting}): {config.base_url}/chat", file=out)
    print("MCP servers (Streamable HTTP); to add them to Claude Code:", file=out)
    for name in insurers:
        url = config.base_url + mcp_config.http.path(name)
        print(f"  claude mcp add --transport http {name} {url}", file=out)
    serving.run(app, config.host, config.port, args.log_level, _limits(args))
    return 0


@dataclass
class _Authorization:
    """The example authorization server, as the rest of ``serve`` needs it."""

    issuer: str
    base_url: str
    store: AuthStore
    routes: list[BaseRoute]
    keys: LocalKeys
    check: TokenCheck
    mcp_auth: AuthConfig

    def chat_login(self, resources: tuple[str, ...]) -> LoginSettings:
        """The chat page as a client of the authorization server (a new secret at every start)."""
        import secrets

        from omds_ld.auth.tokens import SCOPES
        from omds_ld.chat.login import LoginSettings

        secret = secrets.token_urlsafe(32)
        redirect = f"{self.base_url}/chat/callback"
        self.store.add_client(
            CHAT_CLIENT,
            secret,
            {"client_name": "The example server's chat page", "redirect_uris": [redirect],
             "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
             "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES)},
        )  # fmt: skip
        return LoginSettings(self.issuer, CHAT_CLIENT, secret, redirect, resources)


def _authorization_server(
    config: ServerConfig,
    insurers: Mapping[str, Any],
    mcp_config: McpConfig,
    extra_resources: Sequence[str] = (),
    access_token_seconds: int = 3600,
    registrations: tuple[int, int] | None = None,
) -> _Authorization:
    """The example insurers' authorization server, and what the MCP servers and the interfaces
    need of it: its keys, and a client of its own for the MCP servers to exchange tokens."""
    import secrets

    from omds_ld.auth.resource import LocalKeys
    from omds_ld.auth.server import AuthSettings, ExampleAuthorizationServer
    from omds_ld.auth.store import AuthStore
    from omds_ld.auth.tokens import SCOPES, TOKEN_EXCHANGE, check, key_id
    from omds_ld.insurer.app import api_base
    from omds_ld.mcp.config import AuthConfig

    issuer = config.base_url + ISSUER_PATH
    store = AuthStore(config.database.with_name(config.database.stem + "-auth.sqlite3"))
    mcp_urls = {
        config.base_url + mcp_config.http.path(name): f"{insurer.display_name} · MCP server"
        for name, insurer in insurers.items()
    }
    api_urls = {
        config.base_url + api_base(name): f"{insurer.display_name} · interface"
        for name, insurer in insurers.items()
    }
    brokers: dict[str, str] = {}
    for insurer in insurers.values():
        for broker in insurer.brokers.values():
            if broker.subject:
                brokers.setdefault(broker.subject, broker.name)
    further = {url.rstrip("/"): "an MCP server run apart" for url in extra_resources}
    server = ExampleAuthorizationServer(
        AuthSettings(
            issuer=issuer,
            resources={**mcp_urls, **api_urls, **further},
            brokers=brokers,
            access_token_seconds=access_token_seconds,
            **(
                {"registrations_per_address": registrations[0], "registrations": registrations[1]}
                if registrations
                else {}
            ),
        ),
        store,
    )
    # the MCP servers' own client: a new secret at every start, known only to this process
    secret = secrets.token_urlsafe(32)
    store.add_client(
        MCP_CLIENT,
        secret,
        {"client_name": "The example server's MCP servers",
         "grant_types": [TOKEN_EXCHANGE, "client_credentials"],
         "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES),
         "omds_ld_exchanges_for": sorted(mcp_urls)},
    )  # fmt: skip
    return _Authorization(
        issuer=issuer,
        base_url=config.base_url,
        store=store,
        routes=server.routes(ISSUER_PATH),
        keys=LocalKeys(store.public_keys),
        check=lambda token, audience: check(
            token, store.public_keys(key_id(token)), issuer, audience
        ),
        mcp_auth=AuthConfig(
            mode="required" if config.require_token else "optional",
            issuer=issuer,
            public_url=config.base_url,
            token_url=f"{issuer}/token",
            client_id=MCP_CLIENT,
            client_secret=secret,
            # the demo's interfaces take anonymous callers: an anonymous MCP call stays anonymous
            own_token=config.require_token,
        ),
    )


def _auth_store(args: argparse.Namespace) -> Any:
    from omds_ld.auth.store import AuthStore

    database = Path(args.database) if args.database else default_database()
    return AuthStore(database.with_name(database.stem + "-auth.sqlite3"))


def _auth_add_client(args: argparse.Namespace) -> int:
    import json
    import secrets

    from omds_ld.auth.tokens import SCOPES, TOKEN_EXCHANGE

    if not (args.broker or args.exchange_for):
        raise SystemExit("omds-ld auth add-client: give --broker, --exchange-for, or both")
    store = _auth_store(args)
    client_id = f"{args.broker or 'mcp'}-{secrets.token_hex(4)}"
    secret = secrets.token_urlsafe(32)
    metadata: dict[str, Any] = {
        "client_name": args.name, "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "client_secret_basic", "scope": " ".join(SCOPES),
    }  # fmt: skip
    if args.broker:
        metadata["omds_ld_broker"] = args.broker
    if args.exchange_for:
        metadata["grant_types"].append(TOKEN_EXCHANGE)
        metadata["omds_ld_exchanges_for"] = [url.rstrip("/") for url in args.exchange_for]
    store.add_client(client_id, secret, metadata)
    store.close()
    print(json.dumps({"client_id": client_id, "client_secret": secret, "broker": args.broker}))
    print("The secret is shown once; the store keeps only its hash.", file=sys.stderr)
    return 0


def _auth_rotate_key(args: argparse.Namespace) -> int:
    store = _auth_store(args)
    kid = store.rotate_key(args.retire_after_seconds)
    store.close()
    print(f"signing with key {kid}; the previous key verifies for {args.retire_after_seconds:g} s")
    return 0


def _mcp_config(args: argparse.Namespace) -> McpConfig:
    if args.config:
        config = load_config(Path(args.config))
    else:
        if not (args.api and args.name):
            raise SystemExit("omds-ld mcp: give --config FILE, or --api URL and --name NAME")
        headers = dict(h.split("=", 1) for h in args.header or ())
        config = McpConfig(
            instances=(
                InstanceConfig(
                    name=args.name,
                    display_name=args.display_name or args.name,
                    api=args.api,
                    language=args.language,
                    headers=headers,
                    token=args.token,
                    disabled_tools=tuple(args.disable_tool or ()),
                ),
            )
        )
    changes: dict[str, object] = {}
    if args.request_log:
        changes["request_log"] = Path(args.request_log)
    if args.openapi:
        changes["openapi"] = Path(args.openapi)
    if args.refresh_seconds is not None:
        changes["refresh_seconds"] = args.refresh_seconds
    if args.timeout_seconds is not None:
        changes["timeout_seconds"] = args.timeout_seconds
    if args.redis:
        changes["redis_url"] = args.redis
    if args.calls_per_minute is not None:
        changes["calls_per_minute"] = args.calls_per_minute
    auth = config.auth
    if args.no_auth:
        auth = replace(auth, mode="off")
    elif args.auth_issuer:
        auth = replace(auth, mode="required", issuer=args.auth_issuer)
    if args.auth_jwks_uri:
        auth = replace(auth, jwks_uri=args.auth_jwks_uri)
    if args.public_url:
        auth = replace(auth, public_url=args.public_url)
    if args.upstream_token_url:
        auth = replace(auth, token_url=args.upstream_token_url)
    if args.upstream_client_id:
        auth = replace(auth, client_id=args.upstream_client_id)
    if not auth.client_secret and os.environ.get("OMDS_LD_CLIENT_SECRET"):
        auth = replace(auth, client_secret=os.environ["OMDS_LD_CLIENT_SECRET"])
    if (auth.token_url or auth.client_id) and not auth.upstream:
        raise SystemExit(
            "omds-ld mcp: tokens from the insurer's authorization server need "
            "--upstream-token-url, --upstream-client-id and OMDS_LD_CLIENT_SECRET"
        )
    changes["auth"] = auth

    config = replace(config, **changes)  # type: ignore[arg-type]
    if args.http:
        http = replace(
            config.http,
            host=args.host or config.http.host,
            port=args.port or config.http.port,
            allowed_hosts=tuple(args.allowed_host or ()) or config.http.allowed_hosts,
            allowed_origins=tuple(args.allowed_origin or ()) or config.http.allowed_origins,
        )
        if args.session_minutes is not None:
            http = replace(http, session_binding_seconds=args.session_minutes * 60)
        if args.max_sessions:
            http = replace(http, max_sessions=args.max_sessions)
        if args.max_sessions_per_client:
            http = replace(http, max_sessions_per_client=args.max_sessions_per_client)
        if args.hibernate_seconds is not None:
            http = replace(http, hibernate_seconds=args.hibernate_seconds)
        config = replace(config, http=http)
    return config


def _mcp(args: argparse.Namespace) -> int:
    from omds_ld.mcp.service import build_connectors, http_client, serve_stdio
    from omds_ld.mcp.state import make_state, state_in_use
    from omds_ld.mcp.transport import HttpTransport
    from omds_ld.norm import load_norm

    config = _mcp_config(args)
    norm = load_norm(config.openapi)
    state = make_state(config.redis_url)
    if args.stdio:
        if len(config.instances) != 1:
            raise SystemExit("omds-ld mcp --stdio serves exactly one instance")

        async def run_stdio() -> None:
            async with http_client(config) as client, state_in_use(state):
                connectors = build_connectors(config, norm, state, HttpTransport(client))
                await serve_stdio(next(iter(connectors.values())))

        asyncio.run(run_stdio())
        return 0

    from starlette.applications import Starlette
    from starlette.routing import Route

    from omds_ld import metrics, serving
    from omds_ld.mcp.service import McpHosting, healthz
    from omds_ld.process import freeze_startup_heap

    if not config.auth.mode:
        raise SystemExit(
            "omds-ld mcp --http: say who may call: --auth-issuer URL (OAuth, the norm's way) or "
            "--no-auth (every caller the same anonymous broker); or [auth] in --config"
        )
    client = http_client(config)
    keys = None
    if config.auth.checks_tokens:
        from omds_ld.auth.tokens import RemoteKeys

        keys = RemoteKeys(config.auth.keys_uri, client)
    hosting = McpHosting(
        build_connectors(config, norm, state, HttpTransport(client)),
        config.http,
        state,
        config.auth,
        keys,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client, state_in_use(state), hosting.running():
            freeze_startup_heap()
            yield

    app = Starlette(
        routes=[*hosting.routes(), Route("/healthz", healthz), Route("/metrics", metrics.endpoint)],
        lifespan=lifespan,
    )
    base = (config.auth.public_url or f"http://{config.http.host}:{config.http.port}").rstrip("/")
    if config.auth.checks_tokens:
        print(
            f"Authorization: {config.auth.mode}, OAuth 2.1 ({config.auth.issuer})", file=sys.stderr
        )
    else:
        print("Authorization: off (--no-auth): every caller is the same broker", file=sys.stderr)
    for instance in config.instances:
        print(
            f"  claude mcp add --transport http {instance.name} {base}{config.http.path(instance.name)}",
            file=sys.stderr,
        )
    serving.run(app, config.http.host, config.http.port, args.log_level, _limits(args))
    return 0


def _agent_factory(spec: str, model_base_url: str | None) -> Any:
    import os

    from omds_ld.scenarios.agents.models import make_agent
    from omds_ld.scenarios.agents.reference import ReferenceAgent

    if spec == "reference":
        return ReferenceAgent
    environment = dict(os.environ)  # the one place keys are read: handed to the adapter
    try:
        make_agent(spec, environment, model_base_url)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    return lambda: make_agent(spec, environment, model_base_url)


def _scenario_run(args: argparse.Namespace) -> int:
    import datetime as dt

    from rich.console import Console

    from omds_ld.scenarios.embedded import example_server
    from omds_ld.scenarios.report import metrics, render, summarize
    from omds_ld.scenarios.runner import RunRecord, run_all
    from omds_ld.scenarios.scenario import builtin_scenarios, load_scenario

    paths = [Path(f) for f in args.files] or builtin_scenarios()
    scenarios = [load_scenario(p) for p in paths]
    make_agent = _agent_factory(args.agent, args.model_base_url)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("omds-ld-runs") / stamp
    console = Console(stderr=True)

    def progress(record: RunRecord) -> None:
        verdict = "pass" if record.grade.passed else f"FAIL ({record.grade.end_reason})"
        failed = [c.name for c in record.grade.criteria if not c.passed]
        console.print(
            f"{record.scenario} #{record.index} {record.agent}: {verdict} {' '.join(failed)}"
        )

    async def go(base_url: str) -> list[RunRecord]:
        return await run_all(scenarios, make_agent, args.runs, base_url, out, progress)

    if args.base_url:
        records = asyncio.run(go(args.base_url))
    else:
        with example_server() as url:
            records = asyncio.run(go(url))
    from omds_ld.scenarios.protocol import read_protocol

    rows = summarize([(r.grade, metrics(read_protocol(r.protocol))) for r in records])
    Console(width=180).print(render(rows))
    _write_html(rows, args.html or str(out / "report.html"))
    console.print(f"protocols in {out}; report in {args.html or out / 'report.html'}")
    return 0 if all(r.grade.passed for r in records) else 1


def _scenario_grade(args: argparse.Namespace) -> int:
    from rich.console import Console

    from omds_ld.scenarios.grader import grade
    from omds_ld.scenarios.protocol import read_protocol
    from omds_ld.scenarios.report import metrics, render, summarize

    graded = []
    console = Console(width=180)
    for name in args.protocols:
        protocol = read_protocol(Path(name))
        verdict = grade(protocol)
        graded.append((verdict, metrics(protocol)))
        console.print(f"{name}: {'pass' if verdict.passed else 'FAIL'}")
        for criterion in verdict.criteria:
            mark = "ok  " if criterion.passed else "FAIL"
            lines = ", ".join(str(n) for n in criterion.evidence)
            console.print(
                f"  {mark} {criterion.name:<12} {criterion.reason}  [lines {lines or '—'}]"
            )
    rows = summarize(graded)
    console.print(render(rows))
    if args.html:
        _write_html(rows, args.html)
    return 0 if all(g.passed for g, _ in graded) else 1


def _write_html(rows: Any, path: str) -> None:
    from omds_ld.scenarios.report import render_html

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(render_html(rows), encoding="utf-8")


def _demo(args: argparse.Namespace) -> int:
    from omds_ld.scenarios.demo import run_demo

    return run_demo(print)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omds-ld", description="OMDS LD for AI agents")
    parser.add_argument("--version", action="version", version=f"omds-ld {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve", help="run the example insurers' interfaces and their MCP servers"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--database", help=f"SQLite file of the embedded store (default {default_database()})"
    )
    serve.add_argument("--insurers", help="folder of insurer folders (default: the examples)")
    serve.add_argument(
        "--require-token", action="store_true", help="refuse callers without a bearer token"
    )
    serve.add_argument("--access-log", help="append one JSON line per HTTP request to this file")
    serve.add_argument("--request-log", help="MCP request log (JSONL); default: stderr")
    serve.add_argument(
        "--allowed-host",
        action="append",
        help="a further Host the interfaces and MCP endpoints accept",
    )
    serve.add_argument(
        "--allowed-origin", action="append", help="a further Origin the MCP endpoints accept"
    )
    serve.add_argument(
        "--session-minutes", type=float, default=30, help="MCP session binding lifetime"
    )
    serve.add_argument(
        "--idempotency-lease-seconds",
        type=float,
        default=15.0,
        help="how long a write holds its Idempotency-Key; a crashed write's key is free after it",
    )
    serve.add_argument(
        "--auth-resource",
        action="append",
        help="a further resource its authorization server issues tokens for: the URL of an MCP "
        "server run apart (omds-ld mcp --http --auth-issuer …) in front of these insurers",
    )
    serve.add_argument(
        "--access-token-seconds",
        type=int,
        default=3600,
        help="how long its authorization server's access tokens live (default 3600)",
    )
    serve.add_argument(
        "--max-registrations-per-address",
        type=int,
        default=50,
        help="clients that may register themselves (RFC 7591) from one address (default 50)",
    )
    serve.add_argument(
        "--max-registrations",
        type=int,
        default=5000,
        help="clients that may register themselves in all; one that never logs anybody in is "
        "forgotten after a day (default 5000)",
    )
    serve.add_argument(
        "--chat-model",
        help="the chat page's model: anthropic:MODEL (key from ANTHROPIC_API_KEY) or openai:MODEL "
        "(OPENAI_API_KEY; any OpenAI-compatible endpoint); without it the page works by hand",
    )
    serve.add_argument(
        "--chat-model-base-url",
        help="the OpenAI-compatible endpoint of --chat-model openai:… (e.g. a local model server)",
    )
    _add_limit_flags(serve)
    _log_level(serve, "info")
    serve.set_defaults(run=_serve)

    mcp = commands.add_parser("mcp", help="run the MCP server of the norm in front of an insurer")
    transport = mcp.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="one instance over stdio")
    transport.add_argument(
        "--http", action="store_true", help="Streamable HTTP, one endpoint per instance"
    )
    mcp.add_argument("--config", help="TOML file with [[instance]] tables and [http] settings")
    mcp.add_argument(
        "--api",
        help="the insurer's interface, e.g. http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/api",
    )
    mcp.add_argument("--name", help="the instance's name (the server name clients see)")
    mcp.add_argument("--display-name", help="the insurer's display name")
    mcp.add_argument("--language", default="en", help="language of labels in answers (de, en)")
    mcp.add_argument("--token", help="bearer token for the insurer's interface")
    mcp.add_argument("--header", action="append", help="further header for the insurer, NAME=VALUE")
    mcp.add_argument(
        "--disable-tool",
        action="append",
        help="switch a tool off (not listed, refused; repeatable), e.g. createOffer",
    )
    mcp.add_argument("--openapi", help="another version of the norm's OpenAPI file")
    mcp.add_argument("--request-log", help="request log (JSONL); default: stderr")
    mcp.add_argument("--refresh-seconds", type=float, help="how often process knowledge is re-read")
    mcp.add_argument(
        "--timeout-seconds", type=float, help="how long to wait for the insurer (default 10)"
    )
    mcp.add_argument("--host", help="address to bind (HTTP; default 127.0.0.1)")
    mcp.add_argument("--port", type=int, help=f"port (HTTP; default {DEFAULT_MCP_PORT})")
    mcp.add_argument("--allowed-host", action="append", help="a further Host to accept (HTTP)")
    mcp.add_argument("--allowed-origin", action="append", help="a further Origin to accept (HTTP)")
    mcp.add_argument(
        "--session-minutes", type=float, help="session binding lifetime (HTTP; default 30)"
    )
    mcp.add_argument(
        "--redis",
        help="Redis URL for state shared by replicas (sessions, idempotency records, cache); "
        "default: in memory",
    )
    _add_limit_flags(mcp)
    mcp.add_argument(
        "--calls-per-minute",
        type=float,
        help="tool calls one caller may make a minute (bursts of 60); default: no limit",
    )
    auth = mcp.add_mutually_exclusive_group()
    auth.add_argument(
        "--auth-issuer",
        help="OAuth (HTTP): the authorization server whose access tokens the endpoints accept",
    )
    auth.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP without authorization: every caller is the same anonymous broker",
    )
    mcp.add_argument("--auth-jwks-uri", help="its keys (default: <issuer>/jwks)")
    mcp.add_argument(
        "--public-url",
        help="the endpoints' public base URL, for their resource identifiers (default: "
        "http://<host>:<port>)",
    )
    mcp.add_argument(
        "--upstream-token-url",
        help="the insurer's token endpoint: tokens for its interface by token exchange (a "
        "caller's) or client credentials (the MCP server's own); secret from "
        "OMDS_LD_CLIENT_SECRET",
    )
    mcp.add_argument("--upstream-client-id", help="the MCP server's client at that endpoint")
    _log_level(mcp, "info")
    mcp.set_defaults(run=_mcp)

    auth_command = commands.add_parser(
        "auth", help="the example server's authorization server: clients and signing keys"
    )
    auth_commands = auth_command.add_subparsers(dest="auth_command", required=True)
    add_client = auth_commands.add_parser(
        "add-client", help="register a software house's client (client credentials); prints it"
    )
    add_client.add_argument("--database", help="the example server's store (as for serve)")
    add_client.add_argument("--name", required=True, help="the client's name")
    add_client.add_argument("--broker", help="the broker (subject) it acts for")
    add_client.add_argument(
        "--exchange-for",
        action="append",
        help="an MCP server run apart: the URL (resource) whose callers' tokens this client may "
        "exchange for tokens at the interfaces (RFC 8693)",
    )
    _log_level(add_client, "warning")
    add_client.set_defaults(run=_auth_add_client)
    rotate = auth_commands.add_parser(
        "rotate-key", help="sign with a new key from now on; the old one verifies until it retires"
    )
    rotate.add_argument("--database", help="the example server's store (as for serve)")
    rotate.add_argument(
        "--retire-after-seconds",
        type=float,
        default=3600.0,
        help="how long the old key stays published (default: an access token's lifetime)",
    )
    _log_level(rotate, "warning")
    rotate.set_defaults(run=_auth_rotate_key)

    scenario = commands.add_parser("scenario", help="run agents on scenarios; grade protocols")
    scenario_commands = scenario.add_subparsers(dest="scenario_command", required=True)
    run = scenario_commands.add_parser("run", help="run scenarios (default: the built-in ones)")
    run.add_argument("files", nargs="*", help="scenario files (YAML)")
    run.add_argument(
        "--agent",
        default="reference",
        help="reference (no model), anthropic:MODEL or openai:MODEL (keys from the environment)",
    )
    run.add_argument(
        "--model-base-url",
        help="an OpenAI-compatible endpoint for openai:MODEL (e.g. a local server)",
    )
    run.add_argument("--runs", type=int, help="runs per scenario (default: as the scenario says)")
    run.add_argument("--base-url", help="an example server's URL (default: start one)")
    run.add_argument("--out", help="folder for the protocols (default: omds-ld-runs/<time>)")
    run.add_argument("--html", help="the HTML report (default: report.html in the --out folder)")
    _log_level(run, "warning")
    run.set_defaults(run=_scenario_run)
    grade = scenario_commands.add_parser("grade", help="grade existing protocols (JSONL)")
    grade.add_argument("protocols", nargs="+")
    grade.add_argument("--html", help="also write the report as a self-contained HTML page")
    _log_level(grade, "warning")
    grade.set_defaults(run=_scenario_grade)

    checker = commands.add_parser(
        "check-insurer", help="check any insurer's interface against the norm, as an agent meets it"
    )
    checker.add_argument("--api", required=True, help="the interface's base URL (…/api)")
    checker.add_argument("--token", help="a bearer token for the interface")
    checker.add_argument("--header", action="append", help="a further header NAME=VALUE")
    checker.add_argument("--facts", help="risk objects to use (YAML or JSON: class → fields)")
    checker.add_argument("--json", help="write the report as JSON to this file")
    checker.add_argument("--html", help="write the report as an HTML page to this file")
    checker.add_argument("--timeout-seconds", type=float, default=30.0)
    _log_level(checker, "warning")
    checker.set_defaults(run=_check_insurer)

    insurer = commands.add_parser("insurer", help="work with insurers as data")
    insurer_commands = insurer.add_subparsers(dest="insurer_command", required=True)
    check = insurer_commands.add_parser(
        "check", help="check an insurer's folder (or a folder of them) as the server loads it"
    )
    check.add_argument("folder", help="an insurer's folder (with insurer.yaml), or their parent")
    _log_level(check, "warning")
    check.set_defaults(run=_insurer_check)

    tariffs = insurer_commands.add_parser(
        "tariffs", help="the tariff tables of every insurer, as docs/tariffs.md shows them"
    )
    tariffs.add_argument("folder", nargs="?", help="a folder of insurers (default: the examples)")
    tariffs.add_argument("--write", help="write them into this Markdown file, between its markers")
    _log_level(tariffs, "warning")
    tariffs.set_defaults(run=_insurer_tariffs)

    demo = commands.add_parser("demo", help="the reference agent on the seed's two examples")
    _log_level(demo, "warning")
    demo.set_defaults(run=_demo)
    return parser


def _check_insurer(args: argparse.Namespace) -> int:
    import json

    import httpx
    from rich.console import Console

    from omds_ld.check.insurer import InsurerChecker, html, load_facts
    from omds_ld.norm import load_norm

    headers = dict(h.split("=", 1) for h in args.header or ())
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    facts = load_facts(Path(args.facts).read_text("utf-8")) if args.facts else {}
    console = Console(stderr=True)
    terminal = console.is_terminal

    async def run() -> Any:
        async with httpx.AsyncClient(headers=headers, timeout=args.timeout_seconds) as client:
            status = console.status("checking …") if terminal else contextlib.nullcontext()
            with status:
                checker = InsurerChecker(
                    load_norm(), args.api, client, facts, on_check=lambda c: print(c.line())
                )
                return await checker.run()

    report = asyncio.run(run())
    failed = report.failed
    print(
        f"{args.api}: {len(report.checks)} checks, {len(failed)} failed"
        + (f"; premiums: {report.premiums}" if report.premiums else "")
    )
    for check in failed:
        print(f"  FAIL {check.line()}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=2), "utf-8")
    if args.html:
        Path(args.html).write_text(html(report), "utf-8")
    return 1 if failed else 0


def _insurer_tariffs(args: argparse.Namespace) -> int:
    from omds_ld.insurer.data import load_insurers
    from omds_ld.insurer.tariff_doc import tables, with_tables

    insurers = load_insurers(Path(args.folder) if args.folder else None)
    if args.write:
        path = Path(args.write)
        path.write_text(with_tables(path.read_text("utf-8"), insurers), "utf-8")
        print(f"{path}: the tables of {', '.join(sorted(insurers))}")
    else:
        print(tables(insurers))
    return 0


def _insurer_check(args: argparse.Namespace) -> int:
    from omds_ld.insurer.checks import InsurerDataError
    from omds_ld.insurer.data import load_insurer, load_insurers

    folder = Path(args.folder)
    try:
        if (folder / "insurer.yaml").is_file():
            insurers = {"": load_insurer(folder)}
        else:
            insurers = load_insurers(folder)
    except InsurerDataError as error:
        for finding in error.findings:
            print(finding)
        print(f"{len(error.findings)} mistake(s)")
        return 1
    for insurer in insurers.values():
        print(f"{insurer.name}: ok, {len(insurer.products)} product(s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from omds_ld.insurer.checks import InsurerDataError

    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    try:
        code: int = args.run(args)
    except InsurerDataError as error:  # one line per mistake, never a traceback
        print("omds-ld: the insurer data has mistakes:", file=sys.stderr)
        for finding in error.findings:
            print(f"  {finding}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
