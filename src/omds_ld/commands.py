"""The commands of ``omds-ld``: options per command, turned into a configuration value and
handed to the library (``omds_ld.example`` for ``serve``, ``omds_ld.mcp.service`` for ``mcp``, …).
A configuration that cannot run is one line on stderr (``ConfigError``), exit 2. The entry point
is ``omds_ld.cli``, which loads this module only for a command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from omds_ld import __version__, logs
from omds_ld.insurer.config import DEFAULT_PORT, ServerConfig, default_database
from omds_ld.mcp.config import (
    DEFAULT_MCP_PORT,
    PAGE_SECRET_ENV,
    SECRET_ENV,
    AuthConfig,
    HttpConfig,
    InstanceConfig,
    McpConfig,
    load_config,
)  # fmt: skip
from omds_ld.settings import ConfigError, Limits

Commands = Any  # argparse's subparsers action


def _given(args: argparse.Namespace, **names: str) -> dict[str, Any]:
    """The options given (not None), as the fields they set: ``field=option``."""
    return {f: getattr(args, o) for f, o in names.items() if getattr(args, o) is not None}


def _limits(args: argparse.Namespace) -> Limits:
    given: dict[str, Any] = _given(args, read_seconds="request_read_seconds",
                                   max_connections="max_connections",
                                   keep_alive_seconds="keep_alive_seconds")  # fmt: skip
    if args.trusted_proxy:
        given["trusted_proxies"] = tuple(p for p in args.trusted_proxy if p != "none")
    return Limits(**given)


def _http(args: argparse.Namespace, http: HttpConfig, **more: Any) -> HttpConfig:
    """The MCP endpoints' HTTP settings, with what the options say over ``http``."""
    given = _given(args, max_sessions="max_sessions",
                   max_sessions_per_client="max_sessions_per_client",
                   hibernate_seconds="hibernate_seconds")  # fmt: skip
    if args.session_minutes is not None:
        given["session_binding_seconds"] = args.session_minutes * 60
    if args.allowed_host:
        given["allowed_hosts"] = tuple(args.allowed_host)
    if args.allowed_origin:
        given["allowed_origins"] = tuple(args.allowed_origin)
    return replace(http, **given, **more)


# serve


def _norm_openapi(args: argparse.Namespace) -> Path | None:
    """The norm file the MCP servers make their tools of: --openapi FILE, or --norm-version
    (a released version kept in the package, or current)."""
    from omds_ld.contract.sources import norm_file

    if args.openapi and args.norm_version:
        raise ConfigError("give --openapi FILE or --norm-version VERSION, not both")
    if args.norm_version:
        return norm_file(args.norm_version)
    if args.openapi:
        path = Path(args.openapi)
        if not path.is_file():
            raise ConfigError(f"--openapi {args.openapi}: no such file")
        return path
    return None


def _add_norm_flags(add: Callable[..., Any]) -> None:
    add(
        "--openapi",
        help="another version of the norm's OpenAPI file for the MCP server's tools",
    )
    add(
        "--norm-version",
        help="pin the MCP server's tools to a released version of the norm kept in the package "
        "(e.g. 0.1.0, to roll back; current: the norm as it is being worked on)",
    )


def _example_config(args: argparse.Namespace) -> Any:
    from omds_ld.example_config import DEMO_PASSWORD_ENV, ExampleConfig

    server = ServerConfig(
        database=Path(args.database) if args.database else default_database(),
        insurers_folder=Path(args.insurers) if args.insurers else None,
        access_log=Path(args.access_log) if args.access_log else None,
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        require_token=args.require_token,
        trusted_receipt_keys=tuple(Path(p) for p in args.trust_receipt_keys or ()),
        **_given(args, host="host", port="port",
                 idempotency_lease_seconds="idempotency_lease_seconds",
                 clock_offset_days="clock_offset_days"),
    )  # fmt: skip
    return ExampleConfig(
        mcp_openapi=_norm_openapi(args),
        client_documents=tuple(Path(p) for p in args.client_document or ()),
        server=server,
        http=_http(args, HttpConfig(), host=server.host, port=server.port),
        request_log=Path(args.request_log) if args.request_log else None,
        auth_resources=tuple(args.auth_resource or ()),
        chat_model=args.chat_model,
        chat_model_base_url=args.chat_model_base_url,
        environment=dict(os.environ),  # the one place a model's key is read: handed on
        demo_password=os.environ.get(DEMO_PASSWORD_ENV, ""),
        **_given(args, access_token_seconds="access_token_seconds",
                 registrations_per_address="max_registrations_per_address",
                 registrations="max_registrations",
                 registrations_per_source="max_registrations_per_source",
                 chat_keep_hours="chat_keep_hours"),
    )  # fmt: skip


def _serve(args: argparse.Namespace) -> int:
    # a configuration that cannot run is answered before the server is loaded
    config, limits = _example_config(args), _limits(args)

    from omds_ld import serving
    from omds_ld.example import ExampleApp

    serving.check_port(config.server.host, config.server.port)
    app = ExampleApp(config)
    for line in app.banner():
        print(line, file=sys.stderr)
    serving.run(app, config.server.host, config.server.port, args.log_level, limits)
    return 0


# mcp

INSTANCE_FLAGS = ("api", "name", "display_name", "language", "token", "header", "disable_tool")


def _mcp_config(args: argparse.Namespace) -> McpConfig:
    """The file's configuration with the options over it; or, without a file, one instance
    from the options. Options that describe an instance are refused with a file: the file's
    [[instance]] tables say it."""
    given = [f"--{f.replace('_', '-')}" for f in INSTANCE_FLAGS if getattr(args, f) is not None]
    if args.config:
        if given:
            raise ConfigError(
                f"{', '.join(given)} describe an instance; with --config, "
                "say it in the file's [[instance]] table"
            )
        config = load_config(Path(args.config), os.environ)
    elif not (args.api and args.name):
        raise ConfigError("give --config FILE, or --api URL and --name NAME")
    else:
        config = McpConfig(instances=(_instance(args),))
    config = replace(
        config,
        auth=_mcp_auth(args, config.auth),
        **_given(args, refresh_seconds="refresh_seconds",
                 timeout_seconds="timeout_seconds", redis_url="redis",
                 calls_per_minute="calls_per_minute"),
    )  # fmt: skip
    if args.request_log:
        config = replace(config, request_log=Path(args.request_log))
    if args.receipt_key:
        config = replace(config, receipt_key=Path(args.receipt_key))
    openapi = _norm_openapi(args)
    if openapi is not None:
        config = replace(config, openapi=openapi)
    if args.schemas:
        config = replace(config, schemas=args.schemas)
    if args.http:
        config = replace(
            config, http=_http(args, config.http, **_given(args, host="host", port="port"))
        )
    return config


def _instance(args: argparse.Namespace) -> InstanceConfig:
    headers = {}
    for header in args.header or ():
        name, sep, value = header.partition("=")
        if not sep:
            raise ConfigError(f"--header {header!r} is not NAME=VALUE")
        headers[name] = value
    return InstanceConfig(
        name=args.name, display_name=args.display_name or args.name, api=args.api,
        language=args.language or "en", headers=headers, token=args.token,
        disabled_tools=tuple(args.disable_tool or ()), website=args.website, icon=args.icon,
    )  # fmt: skip


def _mcp_auth(args: argparse.Namespace, auth: AuthConfig) -> AuthConfig:
    if args.no_auth:
        auth = replace(auth, mode="off")
    elif args.auth_issuer:
        auth = replace(auth, mode="required", issuer=args.auth_issuer)
    auth = replace(auth, **_given(args, jwks_uri="auth_jwks_uri", public_url="public_url",
                                  token_url="upstream_token_url",
                                  client_id="upstream_client_id"))  # fmt: skip
    if not auth.client_secret and os.environ.get(SECRET_ENV):
        auth = replace(auth, client_secret=os.environ[SECRET_ENV])
    if not auth.page_client_secret and os.environ.get(PAGE_SECRET_ENV):
        auth = replace(auth, page_client_secret=os.environ[PAGE_SECRET_ENV])
    if (auth.token_url or auth.client_id) and not auth.upstream:
        raise ConfigError(
            "tokens from the insurer's authorization server need "
            f"--upstream-token-url, --upstream-client-id and {SECRET_ENV}"
        )
    return auth


def _mcp(args: argparse.Namespace) -> int:
    # a configuration that cannot run is answered before the server is loaded
    config, limits = _mcp_config(args), _limits(args)
    if config.redis_url:
        from omds_ld.mcp.state import unreachable

        problem = unreachable(config.redis_url)
        if problem:
            raise ConfigError(problem)

    if args.stdio:  # a desktop client waits for the start: no SDK client, no uvicorn, no
        from omds_ld.process import stdio_imports_only  # collection until it is ready

        stdio_imports_only()
    from omds_ld.norm import load_norm

    norm = load_norm(config.openapi)
    if args.stdio:
        import asyncio

        from omds_ld.mcp.stdio import run_stdio  # no HTTP server: a desktop client waits for it

        asyncio.run(run_stdio(config, norm))
        return 0
    from omds_ld import serving
    from omds_ld.mcp.service import standalone_app, standalone_banner

    app = standalone_app(config, norm)
    serving.check_port(config.http.host, config.http.port)
    for line in standalone_banner(config):
        print(line, file=sys.stderr)
    serving.run(app, config.http.host, config.http.port, args.log_level, limits)
    return 0


class _WhenShown:
    """A value in a help text, worked out only when the help is shown (argparse fills a help
    text in with ``%``, from its action's attributes): the store's default path needs
    platformdirs, which a stdio server's start does not load."""

    def __init__(self, value: Callable[[], object]) -> None:
        self.value = value

    def __str__(self) -> str:
        return str(self.value())


# auth


def _server_of(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        database=Path(args.database) if args.database else default_database(),
        insurers_folder=Path(args.insurers) if getattr(args, "insurers", None) else None,
    )


def _auth_add_client(args: argparse.Namespace) -> int:
    from omds_ld.example import add_software_client

    added = add_software_client(
        _server_of(args), args.name, args.broker, tuple(args.exchange_for or ())
    )
    print(json.dumps(added))
    print("The secret is shown once; the store keeps only its hash.", file=sys.stderr)
    return 0


TRUST_RECEIPT_KEYS = (
    "a JWKS file of receipt keys the insurers trust besides their authorization server's: those "
    "of MCP servers run apart (omds-ld mcp --receipt-key) in front of them"
)
RECEIPT_KEY = (
    "private key (PEM or JWK) that signs the receipt of each person's yes for the insurer "
    "(default: a new key per process, its public key logged at start)"
)


def _auth_receipt_key(args: argparse.Namespace) -> int:
    from omds_ld.norm.receipt import Signer, new_key

    key, private, public = new_key(), Path(args.out), Path(args.jwks)
    if private.exists():
        raise ConfigError(f"--out {private}: exists already; a receipt key is never overwritten")
    private.touch(mode=0o600)
    private.write_bytes(key.as_pem(private=True))
    public.write_text(json.dumps(Signer(key, "").public_jwks(), indent=2) + "\n", "utf-8")
    print(f"receipt key {key.kid}: omds-ld mcp --receipt-key {private}; "
          f"omds-ld serve --trust-receipt-keys {public}")  # fmt: skip
    return 0


def _auth_rotate_key(args: argparse.Namespace) -> int:
    from omds_ld.example import auth_store

    store = auth_store(_server_of(args))
    try:
        kid = store.rotate_key(args.retire_after_seconds)
    finally:
        store.close()
    print(f"signing with key {kid}; the previous key verifies for {args.retire_after_seconds:g} s")
    return 0


# scenarios, the insurer checker, insurers as data, the demo


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
        return await run_all(
            scenarios, make_agent, args.runs, base_url, out, progress, era=args.era
        )

    import asyncio

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

    from omds_ld.scenarios.grader import NotGradable, grade
    from omds_ld.scenarios.protocol import read_protocol
    from omds_ld.scenarios.report import metrics, render, summarize

    graded = []
    console = Console(width=180)
    for name in args.protocols:
        protocol = read_protocol(Path(name))
        try:
            verdict = grade(protocol)
        except NotGradable as error:
            console.print(f"{name}: not graded: {error}")
            return 2
        except ValueError as error:  # its scenario is not one: a field of the wrong type, named
            console.print(f"{name}: not graded: its scenario cannot be read: {error}")
            return 2
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


def _tools_diff(args: argparse.Namespace) -> int:
    from omds_ld.contract.sources import TOKENS_HINT, contract_of, token_counter
    from omds_ld.contract.tools import diff, exit_code, report_text

    async def both() -> Any:
        return await contract_of(args.old, args.token), await contract_of(args.new, args.token)

    import asyncio

    old, new = asyncio.run(both())
    counter = None if args.no_tokens else token_counter()
    result = diff(old, new, counter)
    if args.json:
        text = json.dumps(result.as_json(), ensure_ascii=False, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if args.json != "-":
        print(report_text(result, args.allow_breaking))
        if counter is None and not args.no_tokens:
            print(f"tokens not counted: {TOKENS_HINT}")
    return exit_code(result, args.allow_breaking)


def _norm_gate(args: argparse.Namespace) -> int:
    from omds_ld.contract.gate import GateOptions, run_gate, write_report
    from omds_ld.contract.sources import TOKENS_HINT, token_counter

    count = token_counter()
    if count is None:
        raise ConfigError(f"the gate counts tokens with tiktoken: {TOKENS_HINT}")
    options = GateOptions(
        against=args.against,
        norm=args.norm,
        budgets=Path(args.budgets) if args.budgets else None,
        skip=frozenset(s for part in args.skip or () for s in part.split(",") if s),
        node_tools=Path(args.node_tools),
        keep=Path(args.keep) if args.keep else None,
        scenarios=tuple(s for part in args.scenario or () for s in part.split(",") if s),
    )
    report = run_gate(options, count, lambda line: print(f"… {line}", file=sys.stderr))
    write_report(report, Path(args.report) if args.report else None,
                 Path(args.json) if args.json else None)  # fmt: skip
    print(report.text())
    return 0 if report.passed else 1


def _norm_release(args: argparse.Namespace) -> int:
    from omds_ld.contract.release import release

    folder = release(
        Path(args.data) if args.data else None,
        args.force,
        Path(args.releases) if args.releases else None,
    )
    print(f"released: {folder}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from omds_ld.scenarios.demo import run_demo

    return run_demo(print)


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
    key = None
    if args.receipt_key:
        from omds_ld.norm.receipt import load_private_key

        try:
            key = load_private_key(Path(args.receipt_key).read_text("utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigError(f"--receipt-key {args.receipt_key}: {error}") from None
    console = Console(stderr=True)
    terminal = console.is_terminal

    async def run() -> Any:
        async with httpx.AsyncClient(headers=headers, timeout=args.timeout_seconds) as client:
            status = console.status("checking …") if terminal else contextlib.nullcontext()
            with status:
                checker = InsurerChecker(
                    load_norm(), args.api, client, facts, on_check=lambda c: print(c.line()),
                    receipt_key=key, broker=args.receipt_broker,
                )  # fmt: skip
                return await checker.run()

    import asyncio

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


# the options of each command


def _log_level(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-level", default=default, choices=["debug", "info", "warning", "error"]
    )


def _defaults(cls: Any) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls)}


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    http, limits = _defaults(HttpConfig), _defaults(Limits)
    add = parser.add_argument
    add(
        "--trusted-proxy",
        action="append",
        metavar="ADDRESS",
        help="a reverse proxy (address or network, repeatable) whose X-Forwarded-For names "
        "the client: its address counts for per-address limits; none: no proxy is trusted "
        f"(default {', '.join(limits['trusted_proxies'])})",
    )
    add(
        "--hibernate-seconds",
        type=float,
        help="an MCP session with nothing in flight this long lets go of its SDK state and is "
        f"made again on its next request; 0: never (default {http['hibernate_seconds']:g})",
    )
    add(
        "--max-sessions",
        type=int,
        help=f"open MCP sessions per insurer (default {http['max_sessions']})",
    )
    add(
        "--max-sessions-per-client",
        type=int,
        help="live MCP sessions per caller (broker, else address); only initialize is counted "
        f"(default {http['max_sessions_per_client']})",
    )
    add(
        "--session-minutes",
        type=float,
        help=f"MCP session binding lifetime (default {http['session_binding_seconds'] / 60:g})",
    )
    add(
        "--request-read-seconds",
        type=float,
        help=f"a client must send each whole request within this (default {limits['read_seconds']:g})",
    )
    add(
        "--keep-alive-seconds",
        type=float,
        help="an idle connection is closed after this; keep it longer than the clients' and a "
        f"load balancer's idle timeouts (default {limits['keep_alive_seconds']:g})",
    )
    add(
        "--max-connections",
        type=int,
        help=f"open connections before new ones are answered 503 (default {limits['max_connections']})",
    )
    add("--allowed-host", action="append", help="a further Host to accept")
    add("--allowed-origin", action="append", help="a further Origin the MCP endpoints accept")


def _add_chat_flags(add: Callable[..., Any]) -> None:
    """The chat page's: its model, and how long it keeps a conversation."""
    add(
        "--chat-model",
        help="the chat page's model: anthropic:MODEL (key from ANTHROPIC_API_KEY) or openai:MODEL "
        "(OPENAI_API_KEY; any OpenAI-compatible endpoint); without it the page works by hand",
    )
    add(
        "--chat-model-base-url",
        help="the OpenAI-compatible endpoint of --chat-model openai:… (e.g. a local model server)",
    )
    add(
        "--chat-keep-hours",
        type=float,
        help="how long the chat page keeps a conversation after its last event, with what the "
        "model was told (default 24)",
    )


def _add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve", help="run the example insurers' interfaces and their MCP servers"
    )
    add, server = serve.add_argument, _defaults(ServerConfig)
    add("--host", help=f"address to bind (default {server['host']})")
    add("--port", type=int, help=f"port (default {DEFAULT_PORT})")
    store = add("--database", help="SQLite file of the embedded store (default %(store)s)")
    store.store = _WhenShown(default_database)
    add("--insurers", help="folder of insurer folders (default: the examples)")
    add("--require-token", action="store_true", help="refuse callers without a bearer token")
    add("--access-log", help="append one JSON line per HTTP request to this file")
    add("--request-log", help="MCP request log (JSONL); default: stderr")
    _add_norm_flags(add)
    add(
        "--idempotency-lease-seconds",
        type=float,
        help="how long a write holds its Idempotency-Key; a crashed write's key is free after it "
        f"(default {server['idempotency_lease_seconds']:g})",
    )
    add(
        "--clock-offset-days",
        type=float,
        help="move the insurers' clock by this many days, to try an offer's expiry without "
        "waiting (default 0; never in production)",
    )
    add("--trust-receipt-keys", action="append", metavar="JWKS", help=TRUST_RECEIPT_KEYS)
    add(
        "--auth-resource",
        action="append",
        help="a further resource its authorization server issues tokens for: the URL of an MCP "
        "server run apart (omds-ld mcp --http --auth-issuer …) in front of these insurers",
    )
    add(
        "--client-document",
        action="append",
        help="a client's metadata document (JSON, its https URL as client_id) its authorization "
        "server admits without fetching it: for a server without outbound access (repeatable)",
    )
    add(
        "--access-token-seconds",
        type=int,
        help="how long its authorization server's access tokens live (default 3600)",
    )
    add(
        "--max-registrations-per-address",
        type=int,
        help="clients of one client_name that may register themselves (RFC 7591) from one address "
        "in an hour (default 50)",
    )
    add(
        "--max-registrations",
        type=int,
        help="clients that may register themselves in all; one that never logs anybody in is "
        "forgotten after a day (default 5000)",
    )
    add(
        "--max-registrations-per-source",
        type=int,
        help="clients that registered themselves and never logged anybody in that one address "
        "may hold at once, whatever their names: a flood from one address leaves the rest of "
        "--max-registrations to others (default 500)",
    )
    _add_chat_flags(add)
    _add_limit_flags(serve)
    _log_level(serve, "info")
    serve.set_defaults(run=_serve)


def _add_mcp_auth_flags(mcp: argparse.ArgumentParser) -> None:
    """Who may call the MCP server over HTTP, and how it gets the insurer's tokens."""
    add = mcp.add_argument
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
    add("--auth-jwks-uri", help="its keys (default: <issuer>/jwks)")
    add(
        "--public-url",
        help="the endpoints' public base URL, for their resource identifiers "
        "(default: http://<host>:<port>)",
    )
    add(
        "--upstream-token-url",
        help="the insurer's token endpoint: tokens for its interface by token exchange (a "
        f"caller's) or client credentials (the MCP server's own); secret from {SECRET_ENV}",
    )
    add("--upstream-client-id", help="the MCP server's client at that endpoint")


def _add_mcp(commands: Commands) -> None:
    mcp = commands.add_parser("mcp", help="run the MCP server of the norm in front of an insurer")
    transport = mcp.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="one instance over stdio")
    transport.add_argument(
        "--http", action="store_true", help="Streamable HTTP, one endpoint per instance"
    )
    add = mcp.add_argument
    add("--config", help="TOML file with [[instance]] tables and [http], [state], [auth] settings")
    add(
        "--api",
        help="the insurer's interface, e.g. http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/api",
    )
    add("--name", help="the instance's name (the server name clients see)")
    add("--display-name", help="the insurer's display name")
    add("--language", help="language of labels in answers (de, en; default en)")
    add("--website", help="the insurer's website, which a client shows beside the server")
    add(
        "--icon", help="the insurer's icon, an https URL (or a data:image/… URI), for its tools too"
    )
    add("--token", help="bearer token for the insurer's interface")
    add("--receipt-key", metavar="PEM", help=RECEIPT_KEY)
    add("--header", action="append", help="further header for the insurer, NAME=VALUE")
    add(
        "--disable-tool",
        action="append",
        help="switch a tool off (not listed, refused; repeatable), e.g. createOffer",
    )
    _add_norm_flags(add)
    add(
        "--schemas",
        choices=("lean", "strict", "gemini"),
        help="the tools' input schemas: lean (default); strict, for OpenAI's strict function "
        "calling (every property required, optional ones nullable, the body as its JSON text); "
        "gemini, for Google's Gemini (the body as its JSON text); over HTTP a client may ask by "
        "its URL: …/mcp?schemas=strict",
    )
    add("--request-log", help="request log (JSONL); default: stderr")
    add("--refresh-seconds", type=float, help="how often process knowledge is re-read")
    add("--timeout-seconds", type=float, help="how long to wait for the insurer (default 10)")
    add("--host", help="address to bind (HTTP; default 127.0.0.1)")
    add("--port", type=int, help=f"port (HTTP; default {DEFAULT_MCP_PORT})")
    add(
        "--redis",
        help="Redis URL for state shared by replicas (sessions, idempotency records, "
        "cache); default: in memory",
    )
    _add_limit_flags(mcp)
    add(
        "--calls-per-minute",
        type=float,
        help="tool calls one caller may make a minute (bursts of 60); default: no limit",
    )
    _add_mcp_auth_flags(mcp)
    _log_level(mcp, "info")
    mcp.set_defaults(run=_mcp)


def _add_auth(commands: Commands) -> None:
    auth = commands.add_parser(
        "auth", help="the example server's authorization server: clients and signing keys"
    )
    subcommands = auth.add_subparsers(dest="auth_command", required=True)
    add_client = subcommands.add_parser(
        "add-client", help="register a software house's client (client credentials); prints it"
    )
    add_client.add_argument("--database", help="the example server's store (as for serve)")
    add_client.add_argument("--insurers", help="folder of insurer folders (as for serve)")
    add_client.add_argument("--name", required=True, help="the client's name")
    add_client.add_argument("--broker", help="the broker (subject) it acts for")
    add_client.add_argument(
        "--exchange-for",
        action="append",
        help="an MCP server run apart: the URL (resource) whose callers' tokens this "
        "client may exchange for tokens at the interfaces (RFC 8693)",
    )
    _log_level(add_client, "warning")
    add_client.set_defaults(run=_auth_add_client)
    rotate = subcommands.add_parser(
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
    receipt = subcommands.add_parser(
        "receipt-key",
        help="a new key for an MCP server run apart to sign receipts of the person's yes, and "
        "its public JWKS for the insurers",
    )
    receipt.add_argument("--out", required=True, help="the private key (PEM), for --receipt-key")
    receipt.add_argument(
        "--jwks", required=True, help="its public key set, for serve --trust-receipt-keys"
    )
    _log_level(receipt, "warning")
    receipt.set_defaults(run=_auth_receipt_key)


def _add_scenario(commands: Commands) -> None:
    scenario = commands.add_parser("scenario", help="run agents on scenarios; grade protocols")
    subcommands = scenario.add_subparsers(dest="scenario_command", required=True)
    run = subcommands.add_parser("run", help="run scenarios (default: the built-in ones)")
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
    run.add_argument(
        "--era",
        choices=("2025-11-25", "2026-07-28"),
        default="2025-11-25",
        help="the MCP protocol revision the runs speak: 2025-11-25 with a session (default), "
        "2026-07-28 without one, as the SDK's default Client()",
    )
    run.add_argument("--base-url", help="an example server's URL (default: start one)")
    run.add_argument("--out", help="folder for the protocols (default: omds-ld-runs/<time>)")
    run.add_argument("--html", help="the HTML report (default: report.html in the --out folder)")
    _log_level(run, "warning")
    run.set_defaults(run=_scenario_run)
    grade = subcommands.add_parser("grade", help="grade existing protocols (JSONL)")
    grade.add_argument("protocols", nargs="+")
    grade.add_argument("--html", help="also write the report as a self-contained HTML page")
    _log_level(grade, "warning")
    grade.set_defaults(run=_scenario_grade)


def _add_checker(commands: Commands) -> None:
    checker = commands.add_parser(
        "check-insurer", help="check any insurer's interface against the norm, as an agent meets it"
    )
    add = checker.add_argument
    add("--api", required=True, help="the interface's base URL (…/api)")
    add("--token", help="a bearer token for the interface")
    add("--header", action="append", help="a further header NAME=VALUE")
    add("--facts", help="risk objects to use (YAML or JSON: class → fields)")
    add("--json", help="write the report as JSON to this file")
    add("--html", help="write the report as an HTML page to this file")
    add("--timeout-seconds", type=float, default=30.0)
    add(
        "--receipt-key",
        help="a receipt key the interface trusts (a test interface's, PEM or JWK): then a receipt "
        "right in all but the application's data is sent, and must be refused",
    )
    add("--receipt-broker", default="anonymous", help="the broker the caller is (the receipt's)")
    _log_level(checker, "warning")
    checker.set_defaults(run=_check_insurer)


def _add_insurer(commands: Commands) -> None:
    insurer = commands.add_parser("insurer", help="work with insurers as data")
    subcommands = insurer.add_subparsers(dest="insurer_command", required=True)
    check = subcommands.add_parser(
        "check", help="check an insurer's folder (or a folder of them) as the server loads it"
    )
    check.add_argument("folder", help="an insurer's folder (with insurer.yaml), or their parent")
    _log_level(check, "warning")
    check.set_defaults(run=_insurer_check)
    tariffs = subcommands.add_parser(
        "tariffs", help="the tariff tables of every insurer, as docs/tariffs.md shows them"
    )
    tariffs.add_argument("folder", nargs="?", help="a folder of insurers (default: the examples)")
    tariffs.add_argument("--write", help="write them into this Markdown file, between its markers")
    _log_level(tariffs, "warning")
    tariffs.set_defaults(run=_insurer_tariffs)
    demo = commands.add_parser("demo", help="the reference agent on the seed's two examples")
    _log_level(demo, "warning")
    demo.set_defaults(run=_demo)


def _add_tools(commands: Commands) -> None:
    tools = commands.add_parser("tools", help="the norm's tools as an agent meets them")
    subcommands = tools.add_subparsers(dest="tools_command", required=True)
    compare = subcommands.add_parser(
        "diff",
        help="what a change of the norm does to its tools; exit 1 on a breaking change",
        description="Compare two versions of the norm's tools, each given as an OpenAPI file, a "
        "kept version (0.1.0, current) or a running MCP server (http://…/mcp, stdio:COMMAND).",
    )
    compare.add_argument("old", help="the version before: file, kept version or server")
    compare.add_argument("new", help="the version after")
    compare.add_argument(
        "--allow-breaking", action="store_true", help="exit 0 on a breaking change too"
    )
    compare.add_argument("--json", help="write the diff as JSON to this file ('-': stdout only)")
    compare.add_argument("--token", help="a bearer token for servers given by URL")
    compare.add_argument("--no-tokens", action="store_true", help="do not count tokens")
    _log_level(compare, "warning")
    compare.set_defaults(run=_tools_diff)


def _add_norm(commands: Commands) -> None:
    norm = commands.add_parser(
        "norm", help="the norm's versions: the agent-contract gate, releases"
    )
    subcommands = norm.add_subparsers(dest="norm_command", required=True)
    gate = subcommands.add_parser(
        "gate",
        help="check a change of the norm as a contract for agents; exit 1 when it regresses",
        description="Tools diff against the last release, the shipped scenarios with the "
        "reference agent, the token budgets, the MCP conformance suite in both eras: one report.",
    )
    gate.add_argument("--against", help="the released version to compare with (default: the last)")
    gate.add_argument(
        "--norm", default="current", help="the norm to check: current (default) or an OpenAPI file"
    )
    gate.add_argument("--budgets", help="a budgets file (default: the norm's budgets.yaml)")
    gate.add_argument(
        "--skip",
        action="append",
        help="leave steps out (diff, scenarios, budgets, conformance; comma-separated): the "
        "report says they were not checked",
    )
    gate.add_argument(
        "--node-tools",
        default="tools/node",
        help="where the conformance suite is installed (npm install --prefix tools/node)",
    )
    gate.add_argument("--keep", help="keep the scenario runs' protocols in this folder")
    gate.add_argument(
        "--scenario",
        action="append",
        help="run only these shipped scenarios (ids, comma-separated; default: every one)",
    )
    gate.add_argument("--report", help="also write the report (Markdown) to this file")
    gate.add_argument("--json", help="write the report as JSON to this file")
    _log_level(gate, "warning")
    gate.set_defaults(run=_norm_gate)
    cut = subcommands.add_parser(
        "release",
        help="keep the norm as it is now as its version (info.version) in releases/",
    )
    cut.add_argument("--data", help="the norm's data folder (default: the package's)")
    cut.add_argument("--force", action="store_true", help="replace a kept release of that version")
    cut.add_argument("--releases", help="the releases folder (default: the package's)")
    _log_level(cut, "warning")
    cut.set_defaults(run=_norm_release)


COMMANDS: tuple[Callable[[Commands], None], ...] = (
    _add_serve, _add_mcp, _add_auth, _add_scenario, _add_checker, _add_insurer, _add_tools,
    _add_norm,
)  # fmt: skip


# what each command's --help ends with: how it is used, as the docs use it
EXAMPLES = {
    "": """examples:
  omds-ld serve                                   the example insurers, their MCP servers, the chat page
  omds-ld mcp --stdio --api URL --name NAME       the MCP server of the norm in front of an insurer
  omds-ld scenario run                            the shipped scenarios with the reference agent
  omds-ld check-insurer --api URL                 an insurer's interface against the norm
  omds-ld tools diff 0.1.0 current                what a change of the norm does to the tools""",
    "serve": """examples:
  omds-ld serve                                   on 127.0.0.1:9092, store ./omds-ld.sqlite3
  omds-ld serve --port 9100 --database /tmp/demo.sqlite3
  omds-ld serve --require-token                   every MCP call with a token of its login
  ANTHROPIC_API_KEY=… omds-ld serve --chat-model anthropic:claude-sonnet-4-5""",
    "mcp": """examples:
  omds-ld mcp --stdio --api http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/api \\
      --name pfefferminzia --receipt-key key.pem  a desktop client starts it (claude mcp add …)
  omds-ld mcp --http --config mcp.toml            several insurers, one process, Streamable HTTP
  omds-ld mcp --http --api URL --name NAME --no-auth --port 9093""",
    "scenario": """examples:
  omds-ld scenario run                            every shipped scenario, the reference agent
  omds-ld scenario run my.yaml --runs 10 --out runs/ --agent anthropic:claude-sonnet-4-5
  omds-ld scenario grade runs/*.jsonl --html report.html""",
    "check-insurer": """examples:
  omds-ld check-insurer --api http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/api
  omds-ld check-insurer --api URL --token … --json report.json""",
    "tools": """examples:
  omds-ld tools diff 0.1.0 current                a kept release against the norm worked on
  omds-ld tools diff http://127.0.0.1:9092/omds-ld/insurers/pfefferminzia/mcp current""",
    "norm": """examples:
  omds-ld norm gate                               diff, scenarios, budgets, conformance
  omds-ld norm gate --skip conformance --scenario pfefferminzia-skoda""",
    "auth": """examples:
  omds-ld auth add-client --name "Alpha's software house" --broker alpha
  omds-ld auth receipt-key --out receipt.pem --jwks receipt.jwks""",
    "insurer": """examples:
  omds-ld insurer check my-insurers/              every mistake of an insurer's data, by file and key""",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omds-ld", description="OMDS LD for AI agents", epilog=EXAMPLES[""],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--version", action="version", version=f"omds-ld {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(commands)
    for name, command in commands.choices.items():
        if name in EXAMPLES:
            command.epilog = EXAMPLES[name]
            command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    try:
        code: int = args.run(args)
    except ConfigError as error:  # a configuration that cannot run: one line, never a traceback
        findings = getattr(error, "findings", None)  # the insurer data's mistakes: one line each
        if findings is None:
            print(f"omds-ld: {error}", file=sys.stderr)
        else:
            print("omds-ld: the insurer data has mistakes:", file=sys.stderr)
            for finding in findings:
                print(f"  {finding}", file=sys.stderr)
        return 2
    return code
