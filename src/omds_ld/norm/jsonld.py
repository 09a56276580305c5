"""The norm's JSON-LD context, served to PyLD from package data; nothing is fetched."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from pyld import jsonld

CONTEXT_URL = "https://w3id.org/omds-ld/context.jsonld"
BC = "https://w3id.org/omds-ld/bc#"
P = "https://w3id.org/omds-ld/p#"
PK = "https://w3id.org/omds-ld/pk#"
SH = "http://www.w3.org/ns/shacl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"

PREFIXES = {"bc": BC, "p": P, "pk": PK, "sh": SH, "xsd": XSD, "rdfs": RDFS}


class RemoteContextRefused(ValueError):
    """A document asked for a context that is not the norm's; it is never fetched."""


@cache
def context_document() -> dict[str, Any]:
    """The norm's context document, as loaded from package data."""
    text = resources.files("omds_ld.norm").joinpath("data/context.jsonld").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def document_loader(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PyLD document loader that knows the norm's context and refuses everything else."""
    if url != CONTEXT_URL:
        raise RemoteContextRefused(f"only the norm's context is loaded, not {url}")
    return {
        "contentType": "application/ld+json",
        "contextUrl": None,
        "documentUrl": url,
        "document": context_document(),
    }


def expand(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand a JSON-LD document of the norm with the local context only."""
    result: list[dict[str, Any]] = jsonld.expand(document, {"documentLoader": document_loader})
    return result


def expand_curie(term: str) -> str:
    """Turn a CURIE of the norm's prefixes into a full IRI; anything else is returned as is."""
    prefix, sep, local = term.partition(":")
    if sep and prefix in PREFIXES and not local.startswith("//"):
        return PREFIXES[prefix] + local
    return term


def compact_iri(iri: str) -> str:
    """Turn a full IRI into a CURIE of the norm's prefixes where one fits."""
    for prefix, namespace in PREFIXES.items():
        if iri.startswith(namespace):
            return f"{prefix}:{iri[len(namespace) :]}"
    return iri
