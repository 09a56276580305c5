"""The MCP server's configuration: instances (one per insurer) and the HTTP host, as one value."""

from __future__ import annotations

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

    def with_http(self, **changes: Any) -> McpConfig:
        return replace(self, http=replace(self.http, **changes))


def load_config(path: Path) -> McpConfig:
    """Read a TOML file: ``[http]``, ``[state]``, ``[[instance]]`` tables and top-level settings."""
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
    )
