"""The receipt of a person's yes: what an insurer checks instead of trusting an MCP server's word.

An MCP server cannot prove that a person consented; what it can give is a statement, signed by a
key the insurer trusts, of exactly what was confirmed: a JWS (a JWT of type
``omds-ld-receipt+jwt``, ES256) in the consent's ``bc:confirmation`` as ``bc:receipt``. Its
claims bind it to one offer's content (``offer_digest``: the offer's ``bc:offerDigest``), one
broker (the subject the binding call was made for), the person who confirmed (``sub``), how they
were asked (``channel``), what they were shown (``shown``: a digest) and the consent they stated
(``consent``: a digest of who, how and when), the application's data (``application``: a digest
of the policyholder, the payment and the start, as the body carries them), a time (``iat``;
valid a day) and an id of its own (``jti``).

The insurer refuses a binding request whose receipt is missing, does not verify with a key it
trusts, is older than a day, names another offer, broker, consent, confirmation or application
data, or was used for an application before (``receipt-invalid``): one receipt, one application.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # joserfc is loaded where a receipt is signed or checked, not at a start
    from joserfc.jwk import ECKey, KeySet

RECEIPT_TYPE = "omds-ld-receipt+jwt"
ALGORITHM = "ES256"
VALID_SECONDS = 24 * 3600  # as long as a yes is kept for the retries of its idempotency key
LEEWAY_SECONDS = 60
CONSENT_FIELDS = ("bc:consentedBy", "bc:consentMethod", "bc:consentedAt")


class ReceiptRefused(Exception):
    """A receipt that does not show the person's yes to this request; the message says why."""


def consent_digest(consent: Mapping[str, Any]) -> str:
    """The consent's who, how and when, as one digest (its text names the customer)."""
    fields = {name: str(consent.get(name, "")) for name in CONSENT_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# what of an application's body binds the customer, beside the consent: the receipt names it
APPLICATION_FIELDS = ("bc:policyholder", "bc:payment", "bc:startDate")


def application_digest(body: Mapping[str, Any]) -> str:
    """What the application binds the customer to, beside the consent (the policyholder with
    the address the documents go to, the payment, the start), as one digest of their canonical
    JSON: the data the person was shown, which the insurer recomputes from the body it gets."""
    fields = {name: body.get(name) for name in APPLICATION_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def sign(
    key: ECKey,
    *,
    issuer: str,
    broker: str,
    confirmation: Mapping[str, Any],
    consent: Mapping[str, Any],
    application: Mapping[str, Any],
    now: float | None = None,
) -> str:
    """A receipt for a yes (the consent's ``bc:confirmation`` without its receipt) to the
    application ``application`` (its body): unique (``jti``), the insurer spends it once."""
    issued = int(now if now is not None else time.time())
    claims = {
        "iss": issuer,
        "iat": issued,
        "exp": issued + VALID_SECONDS,
        "jti": secrets.token_urlsafe(16),
        "sub": str(confirmation.get("bc:confirmedBy", "")),
        "broker": broker,
        "channel": str(confirmation.get("bc:confirmedVia", "")),
        "shown": str(confirmation.get("bc:shownDigest", "")),
        "offer_digest": str(consent.get("bc:offerDigest", "")),
        "consent": consent_digest(consent),
        "application": application_digest(application),
    }
    header = {"alg": ALGORITHM, "kid": key.kid, "typ": RECEIPT_TYPE}
    from joserfc import jwt

    return jwt.encode(header, claims, key, algorithms=[ALGORITHM])


def verify(
    receipt: Any,
    keys: KeySet,
    *,
    broker: str,
    consent: Mapping[str, Any],
    application: Mapping[str, Any],
    now: float | None = None,
) -> dict[str, Any]:
    """The receipt's claims, if it shows the person's yes to exactly this application (its
    body: the data that binds the customer, and the consent with its ``bc:confirmation``) for
    this broker; else ReceiptRefused saying why. Whether it was used before is the insurer's
    to know (its ``jti``)."""
    if not isinstance(receipt, str) or not receipt:
        raise ReceiptRefused("the consent's confirmation carries no receipt (bc:receipt)")
    from joserfc import errors, jwt

    try:
        decoded = jwt.decode(receipt, keys, algorithms=[ALGORITHM])
    except (errors.JoseError, ValueError) as error:
        raise ReceiptRefused(
            f"the receipt does not verify with a key this insurer trusts ({type(error).__name__})"
        ) from None
    if str(decoded.header.get("typ", "")) != RECEIPT_TYPE:
        raise ReceiptRefused(f"the token is no receipt (typ {RECEIPT_TYPE})")
    claims = dict(decoded.claims)
    moment = now if now is not None else time.time()
    issued = claims.get("iat")
    if not isinstance(issued, int) or not (
        moment - VALID_SECONDS - LEEWAY_SECONDS <= issued <= moment + LEEWAY_SECONDS
    ):
        raise ReceiptRefused("the receipt is stale: the person's yes is older than a day")
    confirmation = consent.get("bc:confirmation") or {}
    expected = {
        "offer_digest": str(consent.get("bc:offerDigest", "")),
        "broker": broker,
        "consent": consent_digest(consent),
        "sub": str(confirmation.get("bc:confirmedBy", "")),
        "channel": str(confirmation.get("bc:confirmedVia", "")),
        "shown": str(confirmation.get("bc:shownDigest", "")),
        "application": application_digest(application),
    }
    wrong = [name for name, value in expected.items() if claims.get(name) != value]
    if wrong:
        raise ReceiptRefused(
            "the receipt is for another " + ", ".join(_WHAT[name] for name in wrong)
        )
    return claims


_WHAT = {
    "offer_digest": "offer (its digest)",
    "broker": "broker",
    "consent": "consent",
    "sub": "confirming person",
    "channel": "way of asking",
    "shown": "text shown",
    "application": "application (its policyholder, payment or start)",
}


class Signer:
    """Signs the receipts of one MCP server (or hosting) with one key, as ``issuer``. Without a
    key given, one of this process is made at the first receipt (``made`` is told, with the
    signer: its public key is what an insurer would be given)."""

    def __init__(
        self,
        key: ECKey | None,
        issuer: str,
        made: Callable[[Signer], None] | None = None,
    ) -> None:
        self._key = key
        self.issuer = issuer
        self._made = made

    @property
    def key(self) -> ECKey:
        if self._key is None:
            self._key = new_key()
            if self._made is not None:
                self._made(self)
        return self._key

    def __call__(
        self,
        broker: str,
        confirmation: Mapping[str, Any],
        consent: Mapping[str, Any],
        application: Mapping[str, Any],
    ) -> str:
        return sign(
            self.key, issuer=self.issuer, broker=broker, confirmation=confirmation,
            consent=consent, application=application,
        )  # fmt: skip

    def public_jwks(self) -> dict[str, Any]:
        """The key set an insurer is given to trust these receipts."""
        return {"keys": [self.key.as_dict(private=False)]}


def new_key() -> ECKey:
    """A new receipt key (P-256), named by its thumbprint (RFC 7638): the same id whether it is
    read back from a PEM or a JWK."""
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256", parameters={"use": "sig", "alg": ALGORITHM})
    return ECKey.import_key(key.as_dict(private=True), {"kid": key.thumbprint()})


def load_private_key(text: str) -> ECKey:
    """A receipt key from a PEM or a JWK (JSON) text; ValueError if it is neither."""
    from joserfc.errors import JoseError
    from joserfc.jwk import ECKey

    try:
        if text.lstrip().startswith("{"):
            key = ECKey.import_key(json.loads(text))
        else:
            key = ECKey.import_key(text)
    except (JoseError, ValueError, TypeError) as error:
        raise ValueError(f"not an EC private key (PEM or JWK): {type(error).__name__}") from None
    if not key.is_private:
        raise ValueError("a public key: the MCP server signs with the private key")
    if not key.kid:
        key = ECKey.import_key(key.as_dict(private=True), {"kid": key.thumbprint()})
    return key


def load_key_set(text: str) -> KeySet:
    """Trusted receipt keys from a JWKS (JSON) text; ValueError if it is none."""
    from joserfc.errors import JoseError
    from joserfc.jwk import KeySet

    try:
        return KeySet.import_key_set(json.loads(text))
    except (JoseError, ValueError, TypeError, KeyError) as error:
        raise ValueError(f"not a JWKS: {type(error).__name__}") from None
