"""Schemathesis hooks: fresh idempotency keys and ids that exist, so tests reach the core logic."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

import schemathesis

from omds_ld.insurer.data import load_insurers

IRI = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:[!-~]*")
_INSURERS = load_insurers(
    Path(os.environ["OMDS_LD_INSURERS"]) if "OMDS_LD_INSURERS" in os.environ else None
)
# ids that exist at some insurer (a fourth one in the folder too), so tests reach the core logic
KNOWN = {
    "productId": sorted({p for i in _INSURERS.values() for p in i.products}),
    "shapeId": sorted({s.local_name for i in _INSURERS.values() for s in i.shapes.values()}),
}


@schemathesis.hook
def map_headers(ctx: Any, headers: dict[str, str] | None) -> dict[str, str] | None:
    # One key per generated request: reusing a key for another body is refused (422) by design.
    if headers and "Idempotency-Key" in headers:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    return headers


@schemathesis.hook
def map_path_parameters(ctx: Any, params: dict[str, Any] | None) -> dict[str, Any] | None:
    if params:
        for name, values in KNOWN.items():
            if name in params:
                params[name] = values[hash(str(params[name])) % len(values)]
    return params


def _valid_iri(value: Any) -> bool:
    """Whether a generated value is a valid IRI by the schema: only those are swapped for the real
    product, so a negative case (a value made invalid on purpose) stays invalid."""
    return isinstance(value, str) and 0 < len(value) <= 2048 and bool(IRI.fullmatch(value))


@schemathesis.hook
def map_body(ctx: Any, body: Any) -> Any:
    # Half of the bodies name the insurer's real product, so stateful runs reach the draft.
    product = os.environ.get("OMDS_LD_PRODUCT")
    if not product or not isinstance(body, dict) or hash(repr(sorted(body))) % 2:
        return body
    if _valid_iri(body.get("p:hasRootProduct")):
        body["p:hasRootProduct"] = product
    instance = body.get("p:instance")
    if isinstance(instance, dict) and _valid_iri(instance.get("p:instanceOf")):
        instance["p:instanceOf"] = product
    return body
