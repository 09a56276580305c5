"""The norm: OpenAPI file, JSON-LD context, vocabulary, SHACL shapes and problem types.

Its names are imported where first used (PEP 562): a module of the norm (its problem types, its
personal data) can be imported without the catalogue and what it brings (the JSON schemas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omds_ld.norm.catalogue import Norm, Operation, load_norm

__all__ = ["Norm", "Operation", "load_norm"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from omds_ld.norm import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
