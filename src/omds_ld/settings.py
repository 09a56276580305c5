"""Configuration read where it is given, checked where it is read: one ``ConfigError`` that the
command line prints as one line, naming the file (or flag) and the key.

A TOML table becomes a frozen dataclass by ``from_table``: every key must be a field of it (a typo
switches nothing off silently, it is refused), every value must have the field's type, and what a
table leaves out keeps the field's default. The dataclasses are the one place defaults live.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(Exception):
    """A configuration that cannot run: the message says where and what, in one line."""


def read_toml(path: Path) -> dict[str, Any]:
    """A configuration file's table (tomllib loaded here: a start without one never reads TOML)."""
    import tomllib

    try:
        return tomllib.loads(path.read_text("utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not TOML ({error})") from None


def from_table(
    cls: type[T],
    table: Any,
    where: str,
    *,
    skip: frozenset[str] = frozenset(),
    extra: Mapping[str, Any] | None = None,
    convert: Mapping[str, Callable[[Any], tuple[str, Any]]] | None = None,
) -> T:
    """The dataclass ``cls`` from a TOML table: its keys the fields (less ``skip``, which the
    file may not set), or a key of ``convert`` (which turns the value into a field and its value,
    e.g. minutes into seconds); ``extra`` fields set by the caller."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: a table is expected, not {type(table).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    allowed = (set(fields) - skip) | set(convert or {})
    values: dict[str, Any] = dict(extra or {})
    for key, raw in table.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r}; known: {', '.join(sorted(allowed))}")
        name, value = (convert or {}).get(key, lambda v, k=key: (k, v))(raw)
        values[name] = _typed(hints[name], value, f"{where}.{key}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: {error}") from None


def _typed(hint: Any, value: Any, where: str) -> Any:
    """``value`` as the field's type (a TOML list for a tuple, a string for a path), or
    ConfigError naming the key and what it should be."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _typed(options[0], value, where) if len(options) == 1 else value
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: a list is expected, not {value!r}")
        item = typing.get_args(hint)[0]
        return tuple(_typed(item, v, where) for v in value)
    if origin in (dict, Mapping) or hint is Mapping:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: a table is expected, not {value!r}")
        return dict(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: a number is expected, not {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: a whole number is expected, not {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: true or false is expected, not {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: a string is expected, not {value!r}")
        return value
    if hint is Path:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: a path is expected, not {value!r}")
        return Path(value)
    return value


def minutes_as(field_name: str) -> Callable[[Any], tuple[str, Any]]:
    """A key given in minutes for a field kept in seconds."""

    def convert(value: Any) -> tuple[str, Any]:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                f"{field_name.removesuffix('_seconds')}_minutes: a number is expected"
            )
        return field_name, float(value) * 60

    return convert


def at_least(where: str, value: float, least: float) -> None:
    """A setting below what it may be: refused, naming it."""
    if value < least:
        raise ConfigError(f"{where} must be at least {least:g}, not {value:g}")


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one listening process allows a client."""

    read_seconds: float = 15.0  # to send one whole request, head and body
    max_connections: int = 1000  # open connections (and requests in flight) before 503
    # an idle keep-alive connection is closed after this: longer than clients keep one idle
    # (httpx 5 s, aiohttp 15 s), so that they give it up first (serving.py)
    keep_alive_seconds: float = 20.0
    max_head_bytes: int = 16 * 1024  # a request's line and headers (h11's default cap)
    # the reverse proxies whose X-Forwarded-For / -Proto name the client (addresses or
    # networks); a client's address counts (registrations, rate limits) as they forward it
    trusted_proxies: tuple[str, ...] = ("127.0.0.1",)

    def __post_init__(self) -> None:
        at_least("--keep-alive-seconds", self.keep_alive_seconds, 1)  # uvicorn counts seconds
