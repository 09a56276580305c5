"""What an offer binds the insurer to: the digest of its content that a consent names, and the
day it binds until."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any


def offer_digest(record: Mapping[str, Any], offer_iri: str) -> str:
    """What a consent is bound to: SHA-256 over the offer's content (its IRI, product, draft,
    premium and validity) in a canonical JSON form."""
    content = {
        "offer": offer_iri,
        "product": record["product"],
        "draft": record["draft"],
        "premium": record["premium"],
        "validUntil": record["validUntil"],
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def expired(valid_until: str, now: dt.datetime) -> bool:
    """An offer valid until a date is valid through that whole day (UTC)."""
    return now.date() > dt.date.fromisoformat(valid_until)
