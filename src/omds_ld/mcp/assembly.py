"""The configured instances put together: one connector per instance on one state store and
transport, the HTTP client they reach their insurers by, the key that signs receipts. Both ways
of serving them use it: ``omds_ld.mcp.stdio`` (one instance, light to start) and
``omds_ld.mcp.service`` (Streamable HTTP)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omds_ld import __version__, metrics
from omds_ld.mcp.config import AuthConfig, HttpConfig, InstanceConfig, McpConfig
from omds_ld.mcp.connector import Connector, ConnectorSettings
from omds_ld.mcp.executor import Instance
from omds_ld.mcp.requestlog import RequestLog
from omds_ld.mcp.state import StateStore
from omds_ld.mcp.transport import Transport
from omds_ld.mcp.upstream import Upstream
from omds_ld.norm import Norm
from omds_ld.norm.receipt import Signer, load_private_key
from omds_ld.settings import ConfigError

if TYPE_CHECKING:
    import httpx

    from omds_ld.mcp.http_client import HttpTransport

# how long an idempotency claim outlives the insurer's timeout (a crashed call's key is free then)
LEASE_MARGIN = 2.0
log = logging.getLogger("omds_ld.mcp")


def build_connectors(
    config: McpConfig,
    norm: Norm,
    state: StateStore,
    transport: Transport,
    token_http: httpx.AsyncClient | None = None,
    confirmation_page: str | None = None,
    receipts: Signer | None = None,
) -> dict[str, Connector]:
    """One connector per configured instance, all on one state store and transport
    (``token_http`` reaches the insurer's authorization server, if not over the network;
    ``confirmation_page`` is where a person confirms a binding call whose client cannot ask
    them, None: nowhere, over stdio; ``receipts`` signs the receipt of each yes)."""
    labels = metrics.Labels.of(
        [i.name for i in config.instances], norm.operations, norm.problem_types
    )
    request_log = RequestLog(config.request_log, labels)
    return {
        i.name: _connector(
            i,
            config,
            norm,
            state,
            transport,
            request_log,
            token_http,
            confirmation_page,
            receipts,
        )
        for i in config.instances
    }


def _connector(
    instance: InstanceConfig,
    config: McpConfig,
    norm: Norm,
    state: StateStore,
    transport: Transport,
    request_log: RequestLog,
    token_http: httpx.AsyncClient | None = None,
    confirmation_page: str | None = None,
    receipts: Signer | None = None,
) -> Connector:
    tokens = None
    if config.auth.upstream:  # only then are the token exchange's libraries loaded
        from omds_ld.auth.upstream import ClientSecret, UpstreamTokens

        tokens = UpstreamTokens(
            ClientSecret(config.auth.token_url, config.auth.client_id, config.auth.client_secret),
            resource=instance.api.rstrip("/"),
            http=token_http,
        )
    upstream = Upstream(
        name=instance.name,
        api_url=instance.api,
        transport=transport,
        state=state,
        headers=instance.upstream_headers,
        default_ttl=config.cache_ttl_seconds,
        own_credentials=(
            _bearer(tokens.own) if tokens is not None and config.auth.own_token else None
        ),
    )
    return Connector(
        norm=norm,
        instance=Instance(
            instance.name,
            instance.display_name,
            instance.language,
            instance.website,
            instance.icon,
        ),
        upstream=upstream,
        state=state,
        request_log=request_log,
        settings=ConnectorSettings(
            refresh_seconds=config.refresh_seconds,
            disabled_tools=instance.disabled_tools,
            # a call waits at most one timeout for the insurer; its claim a little longer
            lease_seconds=config.timeout_seconds + LEASE_MARGIN,
            rate=(config.calls_per_minute / 60, config.call_burst)
            if config.calls_per_minute
            else None,
            confirm_tools=instance.confirm_tools,
            confirmation_page=confirmation_page,
            schemas=config.schemas,
        ),
        exchange=tokens.exchanged if tokens is not None else None,
        receipts=receipts,
    )


def _bearer(token: Callable[[], Any]) -> Callable[[], Any]:
    async def headers() -> dict[str, str]:
        return {"Authorization": f"Bearer {await token()}"}

    return headers


def http_transport(config: McpConfig) -> HttpTransport:
    """How every connector calls its insurer over the network: pooled, with a timeout."""
    from omds_ld.mcp.http_client import HttpTransport  # aiohttp: only where it is used

    return HttpTransport(config.timeout_seconds, user_agent=f"omds-ld/{__version__}")


def public_base(http: HttpConfig, auth: AuthConfig) -> str:
    """Where clients reach the HTTP endpoints: the configured public URL, else host and port."""
    return (auth.public_url or f"http://{http.host}:{http.port}").rstrip("/")


def receipt_signer(config: McpConfig) -> Signer:
    """What signs the receipts of the person's yes: the configured key, or a new one for this
    process (its public key logged, for an insurer to be given)."""
    issuer = public_base(config.http, config.auth)
    if config.receipt_key is not None:
        try:
            return Signer(load_private_key(config.receipt_key.read_text("utf-8")), issuer)
        except (OSError, ValueError) as error:
            raise ConfigError(f"--receipt-key {config.receipt_key}: {error}") from None
    log.warning(
        "no --receipt-key: receipts are signed with a key of this process only, made at the "
        "first binding call (its public key is logged then; an insurer verifies them only with "
        "it)"
    )
    return Signer(None, issuer, made=_log_public_key)


def _log_public_key(signer: Signer) -> None:
    log.warning(
        "the receipts of this process are signed with this key: %s",
        json.dumps(signer.public_jwks()),
    )
