"""What ``omds-ld serve`` runs with, as one value (``ExampleConfig``), apart from the server it
configures: the command line checks a configuration without loading the server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from omds_ld.insurer.config import ServerConfig
from omds_ld.mcp.config import HttpConfig
from omds_ld.settings import ConfigError

# the environment variable that sets the demo brokers' password (else serve makes one at start
# and prints it on its terminal only: never on a page a model could fetch)
DEMO_PASSWORD_ENV = "OMDS_LD_DEMO_PASSWORD"


@dataclass(frozen=True)
class ExampleConfig:
    """Everything ``omds-ld serve`` runs with, as one value: the interfaces (``server``), the
    MCP servers' HTTP side (``http``, on the server's host and port), the authorization server,
    the chat page's model. Secrets (a model's key) come from ``environment``."""

    server: ServerConfig = field(default_factory=ServerConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    request_log: Path | None = None  # the MCP request log; None: stderr
    auth_resources: tuple[str, ...] = ()  # MCP servers run apart that tokens are issued for
    access_token_seconds: int = 3600
    registrations_per_address: int = 50
    registrations: int = 5000
    # unused self-registered clients one address may hold at once, whatever their names: a
    # flood from one address never takes the capacity others register in
    registrations_per_source: int = 500
    # the demo brokers' password (OMDS_LD_DEMO_PASSWORD); "": one made at start, printed on the
    # terminal only
    demo_password: str = field(default="", repr=False)
    chat_model: str | None = None
    chat_model_base_url: str | None = None
    chat_keep_hours: float = 24.0  # a chat conversation, after its last event
    # the norm version the MCP servers make their tools of (an OpenAPI file: a released version
    # to roll back to, or a proposed one to try); None: the package's. The interfaces keep theirs.
    mcp_openapi: Path | None = None
    # clients' metadata documents its authorization server admits without fetching (JSON files)
    client_documents: tuple[Path, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_token_seconds", "registrations_per_address", "registrations",
                     "registrations_per_source"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be at least 1")
        if (self.http.host, self.http.port) != (self.server.host, self.server.port):
            raise ConfigError("the MCP servers are served on the example server's host and port")
        if not self.chat_keep_hours > 0:
            raise ConfigError("chat-keep-hours must be more than 0")
        if self.chat_model_base_url and not (self.chat_model or "").startswith("openai:"):
            raise ConfigError("--chat-model-base-url is for --chat-model openai:MODEL")
