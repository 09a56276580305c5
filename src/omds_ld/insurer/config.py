"""The example server's configuration: one frozen value, built once by the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 9092


def default_database() -> Path:
    """Where the embedded store lives unless told otherwise: the user's data directory
    (platformdirs loaded here: ``omds-ld mcp --stdio`` has no store and never asks)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("omds-ld")) / "omds-ld.sqlite3"


@dataclass(frozen=True)
class ServerConfig:
    """How the example server runs: address, store, callers, limits."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    database: Path = Path("omds-ld.sqlite3")
    insurers_folder: Path | None = None
    require_token: bool = False
    max_body_bytes: int = 256 * 1024  # of a request to an insurer's interface
    # of any request to the example server (the MCP endpoints, the chat page and the
    # authorization server hold their own, smaller or equal caps)
    max_request_bytes: int = 1024 * 1024
    idempotency_retention_seconds: float = 24 * 3600.0
    # how long a request holds its Idempotency-Key: a request is answered well within it (the
    # MCP server's upstream timeout is 10 s); a claim whose holder died lapses after it
    idempotency_lease_seconds: float = 15.0
    access_log: Path | None = None
    # Host (and Origin) values answered besides loopback, e.g. the name behind a reverse proxy
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # the insurers' clock moved by this many days (to try an offer's expiry without waiting);
    # 0 in production
    clock_offset_days: float = 0.0
    # JWKS files of receipt keys the insurers trust besides their authorization server's: the
    # keys of MCP servers run apart (omds-ld mcp --receipt-key) in front of these insurers
    trusted_receipt_keys: tuple[Path, ...] = ()

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in {"0.0.0.0", "::"} else self.host
        return f"http://{host}:{self.port}"
