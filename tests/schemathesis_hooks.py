"""Schemathesis hooks: fresh idempotency keys and ids that exist, so tests reach the core logic."""

from __future__ import annotations

import os
import uuid
from typing import Any

import schemathesis

KNOWN = {
    "productId": ["kraftfahrt-2025", "kraftfahrt-2022", "home-2024", "motor-select-2024"],
    "shapeId": ["VehicleShape", "DwellingShape", "CalculationRequestShape"],
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


@schemathesis.hook
def map_body(ctx: Any, body: Any) -> Any:
    # Half of the bodies name the insurer's real product, so stateful runs reach the draft.
    product = os.environ.get("OMDS_LD_PRODUCT")
    if not product or not isinstance(body, dict) or hash(repr(sorted(body))) % 2:
        return body
    if "p:hasRootProduct" in body:
        body["p:hasRootProduct"] = product
    instance = body.get("p:instance")
    if isinstance(instance, dict):
        instance["p:instanceOf"] = product
    return body
