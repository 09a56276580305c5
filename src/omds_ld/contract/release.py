"""Releasing the norm: its files as they are now, kept as their version in ``releases/``, so an
MCP server can be pinned to it (``--norm-version``) and the next change compared with it."""

from __future__ import annotations

import shutil
from pathlib import Path

from omds_ld import yamlfile
from omds_ld.contract.sources import releases_folder
from omds_ld.settings import ConfigError

FILES = (
    "openapi.yaml",
    "context.jsonld",
    "vocab.ttl",
    "shapes.ttl",
    "problems.yaml",
    "budgets.yaml",
)


def release(data: Path | None = None, force: bool = False, into: Path | None = None) -> Path:
    """Copy the norm's files into ``releases/<info.version>/`` (``into``: another releases
    folder); refuses to replace a kept release (a release is never changed afterwards) unless
    ``force``."""
    source = data or releases_folder().parent / "data"
    document = yamlfile.load((source / "openapi.yaml").read_text("utf-8"))
    version = str(document.get("info", {}).get("version") or "")
    if not version:
        raise ConfigError(f"{source / 'openapi.yaml'} has no info.version")
    target = (into or releases_folder()) / version
    if target.exists() and not force:
        raise ConfigError(f"version {version} is released already ({target}): bump info.version")
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
    return target
