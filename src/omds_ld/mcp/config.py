"""The MCP server's configuration: instances (one per insurer) and the HTTP host, as one value."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omds_ld.hosts import LOOPBACK_HOSTS, LOOPBACK_ORIGINS

DEFAULT_MCP_PORT = 9093


@dataclass(frozen=True)
class InstanceConfig:
    """One insurer: its name (the server name a client sees), display name, interface."""

    name: str
    display_name: str
    api: str
    language: str = "en"
    headers: Mapping[str, str] = field(default_factory=dict)
    token: str | None = None
    # tools the operator has switched off (a kill switch per capability): not listed, refused
    disabled_tools: tuple[str, ...] = ()

    @property
    def upstream_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


@dataclass(frozen=True)
class AuthConfig:
    """Who may call the MCP endpoints (OAuth 2.1, the MCP authorization specification) and how
    the MCP server authenticates at the insurer.

    ``mode``: ``required`` (every call needs a valid access token), ``optional`` (a token sent is
    checked and used, a call without one is anonymous: the embedded demo only) or ``off``; empty
    when not configured, which the HTTP endpoints refuse to start with (off only when said).
    ``issuer`` is the authorization server whose tokens are accepted (its keys at ``jwks_uri``,
    by default ``<issuer>/jwks``); ``public_url`` the endpoints' public base URL, which makes each
    endpoint's resource identifier (default ``http://<host>:<port>``).

    Towards the insurer, with ``token_url``, ``client_id`` and ``client_secret`` (a confidential
    client of the insurer's authorization server): a caller's token is exchanged (RFC 8693) for a
    token of the same broker at the insurer; without a caller (stdio, anonymous) the client's own
    token (client credentials) is used. Without them, an instance's static ``token``."""

    mode: str = ""
    issuer: str = ""
    jwks_uri: str = ""
    public_url: str = ""
    token_url: str = ""
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    # calls nobody authenticated go with the client's own token (client credentials); False: with
    # no token at all (the embedded demo, whose interfaces take anonymous callers)
    own_token: bool = True
    # the scopes a token needs: for every call, and for calls that create or edit
    read_scope: str = "omds-ld.read"
    write_scope: str = "omds-ld.write"

    @property
    def checks_tokens(self) -> bool:
        return self.mode in ("required", "optional")

    @property
    def keys_uri(self) -> str:
        return self.jwks_uri or f"{self.issuer.rstrip('/')}/jwks"

    @property
    def upstream(self) -> bool:
        return bool(self.token_url and self.client_id and self.client_secret)


@dataclass(frozen=True)
class HttpConfig:
    """How the Streamable HTTP endpoints are served and guarded."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_MCP_PORT
    prefix: str = "/omds-ld/insurers"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    session_binding_seconds: float = 30 * 60.0
    max_body_bytes: int = 1024 * 1024
    # sessions (2025-11-25 era) one connector keeps open, in all and per client address: each
    # costs memory until it lapses, so a client opening sessions in a loop is refused beyond
    max_sessions: int = 1000
    max_sessions_per_client: int = 100
    # a session with nothing in flight for this long lets go of its SDK state (a few hundred
    # bytes stay) and is made again on its next request; 0: never
    hibernate_seconds: float = 60.0

    @property
    def hosts(self) -> list[str]:
        return [*LOOPBACK_HOSTS, *self.allowed_hosts]

    @property
    def origins(self) -> list[str]:
        return [*LOOPBACK_ORIGINS, *self.allowed_origins]

    def path(self, name: str) -> str:
        return f"{self.prefix}/{name}/mcp"


@dataclass(frozen=True)
class McpConfig:
    """Everything the MCP server needs, built once from file, flags and environment."""

    instances: tuple[InstanceConfig, ...]
    http: HttpConfig = field(default_factory=HttpConfig)
    request_log: Path | None = None
    openapi: Path | None = None
    timeout_seconds: float = 10.0
    cache_ttl_seconds: float = 30.0
    refresh_seconds: float = 60.0
    # Redis for state shared by replicas (sessions, idempotency records, cache); None: in memory
    redis_url: str | None = None
    # tool calls one caller may make a minute (a token bucket, shared on Redis), and in a burst;
    # 0: no limit. Off by default: until brokers authenticate, a caller is a client address,
    # and behind a proxy (or on loopback) every broker has the same one
    calls_per_minute: float = 0.0
    call_burst: float = 60.0
    auth: AuthConfig = field(default_factory=AuthConfig)

    def with_http(self, **changes: Any) -> McpConfig:
        return replace(self, http=replace(self.http, **changes))


def load_config(path: Path, environment: Mapping[str, str] | None = None) -> McpConfig:
    """Read a TOML file: ``[http]``, ``[state]``, ``[auth]``, ``[[instance]]`` tables and top-level
    settings. A client secret is never in the file: ``[auth] client_secret_env`` names the
    environment variable that holds it (default ``OMDS_LD_CLIENT_SECRET``)."""
    raw = tomllib.loads(path.read_text("utf-8"))
    instances = tuple(
        InstanceConfig(
            name=i["name"],
            display_name=i.get("display_name", i["name"]),
            api=i["api"],
            language=i.get("language", "en"),
            headers=dict(i.get("headers", {})),
            token=i.get("token"),
            disabled_tools=tuple(i.get("disabled_tools", ())),
        )
        for i in raw.get("instance", [])
    )
    if not instances:
        raise ValueError(f"{path}: no [[instance]] tables")
    http_raw = raw.get("http", {})
    http = HttpConfig(
        host=http_raw.get("host", "127.0.0.1"),
        port=int(http_raw.get("port", DEFAULT_MCP_PORT)),
        prefix=http_raw.get("prefix", "/omds-ld/insurers"),
        allowed_hosts=tuple(http_raw.get("allowed_hosts", ())),
        allowed_origins=tuple(http_raw.get("allowed_origins", ())),
        session_binding_seconds=float(http_raw.get("session_binding_minutes", 30)) * 60,
        max_body_bytes=int(http_raw.get("max_body_bytes", 1024 * 1024)),
        max_sessions=int(http_raw.get("max_sessions", 1000)),
        max_sessions_per_client=int(http_raw.get("max_sessions_per_client", 100)),
        hibernate_seconds=float(http_raw.get("hibernate_seconds", 60)),
    )
    return McpConfig(
        instances=instances,
        http=http,
        request_log=Path(raw["request_log"]) if raw.get("request_log") else None,
        openapi=Path(raw["openapi"]) if raw.get("openapi") else None,
        timeout_seconds=float(raw.get("timeout_seconds", 10)),
        cache_ttl_seconds=float(raw.get("cache_ttl_seconds", 30)),
        refresh_seconds=float(raw.get("refresh_seconds", 60)),
        redis_url=raw.get("state", {}).get("redis"),
        calls_per_minute=float(raw.get("calls_per_minute", 0)),
        call_burst=float(raw.get("call_burst", 60)),
        auth=_auth(raw.get("auth", {}), environment if environment is not None else os.environ),
    )


def _auth(raw: Mapping[str, Any], environment: Mapping[str, str]) -> AuthConfig:
    if not raw:
        return AuthConfig()
    mode = str(raw.get("mode", "required"))
    if mode not in ("required", "optional", "off"):
        raise ValueError(f"[auth] mode is required, optional or off, not {mode!r}")
    if mode != "off" and not raw.get("issuer"):
        raise ValueError("[auth] needs the issuer (the authorization server) unless mode = off")
    return AuthConfig(
        mode=mode,
        issuer=str(raw.get("issuer", "")),
        jwks_uri=str(raw.get("jwks_uri", "")),
        public_url=str(raw.get("public_url", "")),
        token_url=str(raw.get("token_url", "")),
        client_id=str(raw.get("client_id", "")),
        client_secret=environment.get(
            str(raw.get("client_secret_env", "OMDS_LD_CLIENT_SECRET")), ""
        ),
        read_scope=str(raw.get("read_scope", "omds-ld.read")),
        write_scope=str(raw.get("write_scope", "omds-ld.write")),
    )
