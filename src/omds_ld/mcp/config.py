"""The MCP server's configuration: instances (one per insurer) and the HTTP host, as one value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from omds_ld.hosts import LOOPBACK_HOSTS, LOOPBACK_ORIGINS
from omds_ld.settings import ConfigError, at_least, from_table, minutes_as, read_toml

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")

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
    # tools that wait for the person's yes besides the norm's binding operations
    # (createApplication), for instance createOffer where an offer binds the customer too
    confirm_tools: tuple[str, ...] = ()
    # what a client shows of the insurer (serverInfo websiteUrl and icons; its tools' icons):
    # its website, and an icon (an https URL, or a data: URI of an image: it goes with every
    # tool of every listing, so a URL keeps listings lean)
    website: str | None = None
    icon: str | None = None

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ConfigError(
                f"instance name {self.name!r}: letters, digits, '-' and '_' (it is in the URL)"
            )
        if not self.api.startswith(("http://", "https://")):
            raise ConfigError(f"instance {self.name}: api is an http(s) URL, not {self.api!r}")
        if self.website is not None and not self.website.startswith(("https://", "http://")):
            raise ConfigError(
                f"instance {self.name}: website is an http(s) URL, not {self.website!r}"
            )
        if self.icon is not None and not self.icon.startswith(
            ("https://", "http://", "data:image/")
        ):
            raise ConfigError(
                f"instance {self.name}: icon is an https URL (http on loopback) or a data:image/… "
                f"URI, not {self.icon[:60]!r}"
            )
        if "@" in urlsplit(self.api).netloc:
            raise ConfigError(
                f"instance {self.name}: api names no user or password (they would not be "
                "sent): give the insurer's credentials as token or headers"
            )

    @property
    def upstream_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


@dataclass(frozen=True)
class PageLogin:
    """How the confirmation page logs the person in: as a confidential client of the
    authorization server whose tokens the MCP endpoints accept (authorization code, PKCE)."""

    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    # whom a question of an anonymous call is for (the embedded demo's broker); "": nobody
    anonymous_subject: str = ""


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
    # the confirmation page as a confidential client of ``issuer`` (authorization code with PKCE,
    # redirect URI <public_url>/omds-ld/confirmations/callback): it logs the person in before
    # they may answer; without it there is no page. authorize_url and page_token_url default
    # to <issuer>/authorize and <issuer>/token
    page_client_id: str = ""
    page_client_secret: str = field(default="", repr=False)
    authorize_url: str = ""
    page_token_url: str = ""
    # whom a question of an anonymous call is for at the page (the embedded demo's broker)
    anonymous_subject: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("", "required", "optional", "off"):
            raise ConfigError(f"[auth] mode is required, optional or off, not {self.mode!r}")
        if self.mode in ("required", "optional") and not self.issuer:
            raise ConfigError(
                "[auth] needs the issuer (the authorization server) unless mode = off"
            )

    @property
    def checks_tokens(self) -> bool:
        return self.mode in ("required", "optional")

    @property
    def keys_uri(self) -> str:
        return self.jwks_uri or f"{self.issuer.rstrip('/')}/jwks"

    @property
    def upstream(self) -> bool:
        return bool(self.token_url and self.client_id and self.client_secret)

    @property
    def page_login(self) -> PageLogin | None:
        """How the confirmation page logs the person in; None: it cannot (no page)."""
        if not (self.checks_tokens and self.page_client_id and self.page_client_secret):
            return None
        issuer = self.issuer.rstrip("/")
        return PageLogin(
            authorize_url=self.authorize_url or f"{issuer}/authorize",
            token_url=self.page_token_url or f"{issuer}/token",
            client_id=self.page_client_id, client_secret=self.page_client_secret,
            anonymous_subject=self.anonymous_subject,
        )  # fmt: skip


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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is no TCP port")
        at_least("session_binding_seconds", self.session_binding_seconds, 1)
        at_least("max_body_bytes", self.max_body_bytes, 1024)
        at_least("max_sessions", self.max_sessions, 1)
        at_least("max_sessions_per_client", self.max_sessions_per_client, 1)
        at_least("hibernate_seconds", self.hibernate_seconds, 0)

    @property
    def hosts(self) -> list[str]:
        return [*LOOPBACK_HOSTS, *self.allowed_hosts]

    @property
    def origins(self) -> list[str]:
        return [*LOOPBACK_ORIGINS, *self.allowed_origins]

    def path(self, name: str) -> str:
        return f"{self.prefix}/{name}/mcp"

    @property
    def broker_path(self) -> str:
        """The broker endpoint's: every insurer's tools once, with an ``insurer`` argument."""
        return f"{self.prefix}/mcp"


@dataclass(frozen=True)
class McpConfig:
    """Everything the MCP server needs, built once from file, flags and environment."""

    instances: tuple[InstanceConfig, ...]
    http: HttpConfig = field(default_factory=HttpConfig)
    request_log: Path | None = None
    # the private key (PEM or JWK) that signs the receipt of each person's yes, which the
    # insurer checks; None: a new key for this process only (an insurer trusts it only if given
    # its public key, which the process logs at start)
    receipt_key: Path | None = None
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
    # the variant of every tool listing's input schemas (lean; strict: OpenAI's strict function
    # calling; gemini: Google's Gemini); over HTTP a client may ask by its URL (?schemas=strict)
    schemas: str = "lean"

    def __post_init__(self) -> None:
        at_least("timeout_seconds", self.timeout_seconds, 0.1)
        at_least("refresh_seconds", self.refresh_seconds, 0.1)
        at_least("cache_ttl_seconds", self.cache_ttl_seconds, 0)
        at_least("calls_per_minute", self.calls_per_minute, 0)
        at_least("call_burst", self.call_burst, 1)
        if self.schemas not in ("lean", "strict", "gemini"):
            raise ConfigError(f"schemas is lean, strict or gemini, not {self.schemas!r}")
        names = [i.name for i in self.instances]
        if len(set(names)) != len(names):
            raise ConfigError(f"instance names must differ: {', '.join(names)}")

    def with_http(self, **changes: Any) -> McpConfig:
        return replace(self, http=replace(self.http, **changes))


# the top-level keys of the file (beside its tables), by the McpConfig field each sets
_TOP_LEVEL = frozenset(
    {"request_log", "openapi", "timeout_seconds", "cache_ttl_seconds", "refresh_seconds",
     "calls_per_minute", "call_burst", "schemas"}
)  # fmt: skip
_TABLES = frozenset({"http", "state", "auth", "instance"})
SECRET_ENV = "OMDS_LD_CLIENT_SECRET"
PAGE_SECRET_ENV = "OMDS_LD_PAGE_CLIENT_SECRET"  # the confirmation page's client secret


@dataclass(frozen=True)
class _State:
    redis: str | None = None


def load_config(path: Path, environment: Mapping[str, str] | None = None) -> McpConfig:
    """Read a TOML file: ``[http]``, ``[state]``, ``[auth]``, ``[[instance]]`` tables and top-level
    settings, each key checked (an unknown one is refused, naming file and key). A client secret
    is never in the file: ``[auth] client_secret_env`` names the environment variable that holds
    it (default ``OMDS_LD_CLIENT_SECRET``)."""
    raw = read_toml(path)
    for key in raw:
        if key not in _TOP_LEVEL | _TABLES:
            known = ", ".join(sorted(_TOP_LEVEL | {f"[{t}]" for t in _TABLES}))
            raise ConfigError(f"{path}: unknown key {key!r}; known: {known}")
    tables = raw.get("instance", [])
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{path}: no [[instance]] tables")
    instances = tuple(
        from_table(InstanceConfig, table, f"{path} [[instance]] #{n}", extra=_display(table))
        for n, table in enumerate(tables, start=1)
    )
    http = from_table(
        HttpConfig, raw.get("http", {}), f"{path} [http]", skip=frozenset({"session_binding_seconds"}),
        convert={"session_binding_minutes": minutes_as("session_binding_seconds")},
    )  # fmt: skip
    state = from_table(_State, raw.get("state", {}), f"{path} [state]")
    auth = _auth(raw.get("auth"), f"{path} [auth]", environment or {})
    top = {k: v for k, v in raw.items() if k in _TOP_LEVEL}
    return from_table(
        McpConfig, top, str(path), skip=frozenset({"instances", "http", "auth", "redis_url"}),
        extra={"instances": instances, "http": http, "auth": auth, "redis_url": state.redis},
    )  # fmt: skip


def _display(table: Any) -> dict[str, Any]:
    """An instance without a display name shows its name."""
    if isinstance(table, Mapping) and "display_name" not in table and "name" in table:
        return {"display_name": table["name"]}
    return {}


def _auth(raw: Any, where: str, environment: Mapping[str, str]) -> AuthConfig:
    if raw is None:
        return AuthConfig()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a table is expected")
    secrets = {}
    for key, default in (("client_secret", SECRET_ENV), ("page_client_secret", PAGE_SECRET_ENV)):
        variable = raw.get(f"{key}_env", default)
        if not isinstance(variable, str):
            raise ConfigError(f"{where}.{key}_env: the name of a variable is expected")
        secrets[key] = environment.get(variable, "")
    named = {"client_secret_env", "page_client_secret_env"}
    table = {"mode": "required", **{k: v for k, v in raw.items() if k not in named}}
    return from_table(AuthConfig, table, where, skip=frozenset(secrets), extra=secrets)
