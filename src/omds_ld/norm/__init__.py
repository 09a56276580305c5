"""The norm: OpenAPI file, JSON-LD context, vocabulary, SHACL shapes and problem types."""

from omds_ld.norm.catalogue import Norm, Operation, load_norm

__all__ = ["Norm", "Operation", "load_norm"]
