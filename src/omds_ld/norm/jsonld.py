"""The norm's JSON-LD context, served to PyLD from package data; nothing is fetched."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

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


class NotJsonLd(ValueError):
    """A document is no JSON-LD the norm can read (PyLD's reason, or a refused remote context)."""


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
    from pyld import jsonld  # only where JSON-LD is processed: a start never pays for it

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


# Keys of the norm's answers whose values are JSON literals (@json in the context): kept as sent;
# a ready body among them is itself a document of the norm and read the same way.
_JSON_LITERALS = {"bc:parameters", "bc:body"}
_NAMESPACES = tuple(PREFIXES.values())


def _canonical_already(value: Any, top: bool = True) -> bool:
    """Whether a document is in the norm's canonical form, checked cheaply: the norm's context by
    its URL at the top and nowhere else, no @graph, every key and every @type a term or CURIE of
    the norm (never an IRI a CURIE could shorten)."""
    if isinstance(value, list):
        return all(_canonical_already(item, False) for item in value)
    if not isinstance(value, dict):
        return True
    for key, item in value.items():
        if key == "@context":
            if not (top and item == CONTEXT_URL):
                return False
        elif key == "@graph" or key.startswith(_NAMESPACES):
            return False
        elif key == "@type":
            types = item if isinstance(item, list) else [item]
            if any(not isinstance(t, str) or t.startswith(_NAMESPACES) for t in types):
                return False
            if isinstance(item, list):
                return False
        elif key in _JSON_LITERALS:
            continue
        elif not _canonical_already(item, False):
            return False
    return True


# any of the norm's namespaces, in one search (the regular expression finds their shared
# "http" first: one pass over the text, where a search per namespace makes six)
_NAMESPACE_IRI = re.compile(b"|".join(re.escape(namespace.encode()) for namespace in _NAMESPACES))
# the keys the text's check looks at: @graph, @context, and @type with a value that is no string
# (JSON text has only keys before a colon, so this finds those keys and nothing else); the
# regular expression finds their shared '"@' first: one pass for the three
_KEYS_TO_CHECK = re.compile(rb'"@(?:graph"|context"|type"\s*:\s*[^"\s])')


def _canonical_text(text: bytes, document: dict[str, Any]) -> bool:
    """Whether the JSON text ``document`` was read from shows it in the norm's canonical form,
    without walking the tree (two passes over the text, under a tenth of the walk's time): no
    escape that could hide a key (``\\u``, ``\\/``), none of the norm's namespaces anywhere, no
    ``@graph``, ``@context`` once and at the top (as the norm's URL) or not at all, every
    ``@type`` a string. True only where ``_canonical_already`` is; False says only that the
    tree must be walked."""
    # one byte is found at memchr's speed, two only at a third of a microsecond per kilobyte
    if b"\\" in text and (b"\\u" in text or b"\\/" in text):
        return False
    if _NAMESPACE_IRI.search(text) is not None:
        return False
    if document.get("@context", CONTEXT_URL) != CONTEXT_URL:
        return False
    contexts = 0
    for key in _KEYS_TO_CHECK.finditer(text):
        if key.group() != b'"@context"':
            return False
        contexts += 1
    return contexts == (1 if "@context" in document else 0)


def _embed(node: Any, nodes: dict[str, dict[str, Any]], seen: frozenset[str]) -> Any:
    """A flattened graph as a tree again: references ({"@id": …} alone) replaced by their node."""
    if isinstance(node, list):
        return [_embed(item, nodes, seen) for item in node]
    if isinstance(node, str) and node.startswith("_:") and node in nodes and node not in seen:
        # a blank node under a term typed @id compacts to its bare id: it names nothing
        return _embed(nodes[node], nodes, seen | {node})
    if not isinstance(node, dict):
        return node
    iri = node.get("@id")
    if set(node) == {"@id"} and iri in nodes and iri not in seen:
        return _embed(nodes[iri], nodes, seen | {iri})
    return {
        k: v if k in _JSON_LITERALS else _embed(v, nodes, seen | ({iri} if iri else set()))
        for k, v in node.items()
    }


def canonical(
    document: dict[str, Any] | list[Any],
    root_types: frozenset[str] = frozenset(),
    text: bytes = b"",
) -> dict[str, Any]:
    """An answer of the norm in its canonical form: compacted with the norm's context, CURIEs of
    the norm's prefixes, one tree (a flattened ``@graph`` embedded again below its root, the node
    whose type is one of ``root_types``, else the first). Any equivalent JSON-LD gives the same
    form; a document already in it is returned as it is (the fast path). Only the norm's context
    is ever loaded: any other remote context, like anything PyLD cannot read, raises
    ``NotJsonLd``. ``text``, the JSON the document was read from where the caller has it, lets
    the fast path look at the text instead of walking the tree."""
    if isinstance(document, dict) and (
        (text and _canonical_text(text, document)) or _canonical_already(document)
    ):
        return document
    from pyld import jsonld
    from pyld.jsonld import JsonLdError

    options = {"documentLoader": document_loader}
    try:
        expanded = jsonld.expand(document, options)
        compacted: dict[str, Any] = jsonld.compact(expanded, CONTEXT_URL, options)
    except (JsonLdError, ValueError, TypeError) as error:
        raise NotJsonLd(f"{type(error).__name__}: {str(error)[:300]}") from error
    graph = compacted.pop("@graph", None)
    if graph is not None:
        nodes = {n["@id"]: n for n in graph if isinstance(n, dict) and "@id" in n}
        referenced = _references(graph)
        unreferenced = [n for n in graph if isinstance(n, dict) and n.get("@id") not in referenced]
        roots = [n for n in unreferenced if _types(n) & root_types] or unreferenced or graph
        compacted.update(_without_blank_ids(_embed(roots[0], nodes, frozenset())))
    for key in _JSON_LITERALS:
        body = compacted.get(key)
        if key == "bc:body" and isinstance(body, dict):
            compacted[key] = canonical({"@context": CONTEXT_URL, **body})
    return compacted


def _without_blank_ids(node: Any) -> Any:
    """A tree without the blank node ids a flattened graph gave its nodes (they name nothing)."""
    if isinstance(node, list):
        return [_without_blank_ids(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        k: v if k in _JSON_LITERALS else _without_blank_ids(v)
        for k, v in node.items()
        if not (k == "@id" and isinstance(v, str) and v.startswith("_:"))
    }


def _references(value: Any) -> set[str]:
    """Every node id a graph refers to from inside a node (a root is referred to by none)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if key == "@id" or key in _JSON_LITERALS:
                    continue
                if isinstance(child, dict) and set(child) == {"@id"}:
                    found.add(str(child["@id"]))
                elif isinstance(child, str) and child.startswith("_:"):
                    found.add(child)
                elif isinstance(child, list):
                    found.update(
                        str(c["@id"]) for c in child if isinstance(c, dict) and set(c) == {"@id"}
                    )
                    found.update(c for c in child if isinstance(c, str) and c.startswith("_:"))
                    stack.extend(
                        c for c in child if not (isinstance(c, dict) and set(c) == {"@id"})
                    )
                else:
                    stack.append(child)
    return found


def _types(node: dict[str, Any]) -> set[str]:
    value = node.get("@type", [])
    return set(value if isinstance(value, list) else [value])
