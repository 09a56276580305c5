"""Applications (Anträge): the insurer's rules as data, the checks of personal data and consent,
the offer's digest that a consent is bound to.

An application binds the customer to an offer. It is refused (and nothing is stored) when the
offer has expired, when the consent is missing or for other conditions (another offer digest),
when the tariff would price the offer differently now, when the offer already has an open or
decided application, or when personal data violate their shapes. Otherwise the insurer decides
by its rules: the first rule whose conditions all hold, or acceptance.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from omds_ld.insurer.problems import FieldError
from omds_ld.norm.jsonld import expand_curie
from omds_ld.norm.shapes import Field, NodeShape

if TYPE_CHECKING:
    from omds_ld.insurer.draft import Draft

Decision = Literal["refer", "decline", "without"]
State = Literal["submitted", "accepted", "referred", "declined", "counter-offer", "withdrawn"]
OPEN_STATES = frozenset({"submitted", "referred"})
# states that keep an offer from being applied for again (a withdrawn one does not)
HOLDING_STATES = frozenset({"submitted", "referred", "accepted", "counter-offer", "declined"})
CLOCK_SKEW = dt.timedelta(minutes=5)  # a consent "from the future" within this is a clock's drift


@dataclass(frozen=True)
class Condition:
    """One test of an offer's data: a risk object field (full IRI) or ``component:<id>``
    (included), compared with ``above``, ``below``, ``equals`` or ``in``."""

    field: str
    above: float | None = None
    below: float | None = None
    equals: Any = None
    one_of: tuple[Any, ...] | None = None

    def holds(self, draft: Draft) -> bool:
        if self.field.startswith("component:"):
            return draft.is_included(self.field.removeprefix("component:"))
        values = [r.values.get(self.field) for r in draft.risk_objects]
        return any(self._holds(v) for v in values if v is not None)

    def _holds(self, value: Any) -> bool:
        number = _number(value)
        if self.above is not None and (number is None or number <= self.above):
            return False
        if self.below is not None and (number is None or number >= self.below):
            return False
        if self.equals is not None and value != self.equals:
            return False
        return self.one_of is None or value in self.one_of


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Rule:
    """refer (an underwriter decides), decline, or ``without`` (a counter-offer without these
    components), where every condition holds."""

    decision: Decision
    conditions: tuple[Condition, ...]
    reason: Mapping[str, str]
    components: tuple[str, ...] = ()

    def applies(self, draft: Draft) -> bool:
        return all(c.holds(draft) for c in self.conditions)


@dataclass(frozen=True)
class ApplicationRules:
    """How an insurer takes applications: its rules, how long an underwriter takes, how long an
    offer is valid, how its policy numbers begin."""

    rules: tuple[Rule, ...] = ()
    offer_validity_days: int = 30
    referral_days: int = 3
    policy_prefix: str = "POL"

    def decide(self, draft: Draft) -> Rule | None:
        return next((rule for rule in self.rules if rule.applies(draft)), None)


def parse_rules(raw: Mapping[str, Any] | None) -> ApplicationRules | None:
    """``applications:`` of insurer.yaml (its format is checked before); None: the insurer takes
    no applications at its interface."""
    if raw is None:
        return None
    rules = []
    for item in raw.get("rules", ()):
        conditions = tuple(
            Condition(
                field=c["field"]
                if c["field"].startswith("component:")
                else expand_curie(c["field"]),
                above=c.get("above"),
                below=c.get("below"),
                equals=c.get("equals"),
                one_of=tuple(c["in"]) if "in" in c else None,
            )
            for c in item["when"]
        )
        rules.append(
            Rule(
                decision=item["decision"],
                conditions=conditions,
                reason=dict(item["reason"]),
                components=tuple(item.get("components", ())),
            )
        )
    return ApplicationRules(
        rules=tuple(rules),
        offer_validity_days=int(raw.get("offerValidityDays", 30)),
        referral_days=int(raw.get("referralDays", 3)),
        policy_prefix=str(raw.get("policyPrefix", "POL")),
    )


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


# personal data and consent: checked against the norm's shapes, messages without values

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _admissible(shape_field: Field, language: str) -> str:
    message = shape_field.message
    return message.get(language) or message.get("en") or f"{shape_field.local_name}: see its shape"


def _shape_errors(
    node: Mapping[str, Any], shape: NodeShape, pointer: str, language: str
) -> list[FieldError]:
    """Each field of ``node`` that violates its property shape, by pointer and what is admissible;
    the value sent is never repeated."""
    errors = []
    for shape_field in shape.fields:
        key = next((k for k in node if expand_curie(k) == shape_field.path), None)
        value = node.get(key) if key is not None else None
        where = f"{pointer}/{key or _compact(shape_field.path)}"
        if value is None:
            if shape_field.min_count:
                errors.append(FieldError(where, _admissible(shape_field, language)))
            continue
        if not _conforms(value, shape_field):
            errors.append(FieldError(where, _admissible(shape_field, language)))
    return errors


def _compact(iri: str) -> str:
    for prefix, base in (
        ("p", "https://w3id.org/omds-ld/p#"),
        ("bc", "https://w3id.org/omds-ld/bc#"),
    ):
        if iri.startswith(base):
            return f"{prefix}:{iri[len(base) :]}"
    return iri


def _conforms(value: Any, shape_field: Field) -> bool:
    datatype = (shape_field.datatype or "").rsplit("#", 1)[-1]
    if datatype in {"string", "date", "dateTime"} and not isinstance(value, str):
        return False
    if datatype == "date" and not _is_date(value):
        return False
    if datatype == "dateTime" and _datetime(value) is None:
        return False
    if isinstance(value, str):
        if shape_field.min_length is not None and len(value) < shape_field.min_length:
            return False
        if shape_field.max_length is not None and len(value) > shape_field.max_length:
            return False
        if shape_field.pattern is not None and not re.search(shape_field.pattern, value):
            return False
    return shape_field.in_values is None or value in shape_field.in_values


def _is_date(value: str) -> bool:
    if not _DATE.match(value):
        return False
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _datetime(value: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def iban_valid(iban: str) -> bool:
    """ISO 13616 check digits (mod 97)."""
    if not re.fullmatch(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}", iban):
        return False
    moved = iban[4:] + iban[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def mask_iban(iban: str) -> str:
    """An IBAN as a model may see it: its last four characters."""
    return f"…{iban[-4:]}" if len(iban) > 4 else "…"


@dataclass(frozen=True)
class PersonalDataCheck:
    """The shapes an application's parts must conform to, from the norm."""

    shapes: Mapping[str, NodeShape]  # by local name

    def errors(self, body: Mapping[str, Any], now: dt.datetime, language: str) -> list[FieldError]:
        """Every field of the policyholder, the payment and the start date that is not
        admissible, each with what is."""
        holder = body.get("bc:policyholder") or {}
        company = holder.get("@type") == "p:Organization"
        shape = self.shapes["OrganizationShape" if company else "PersonShape"]
        errors = _shape_errors(holder, shape, "/bc:policyholder", language)
        if not company and not _of_age(holder.get("p:birthDate"), now):
            errors.append(self._error(shape, "/bc:policyholder/p:birthDate", language))
        payment = body.get("bc:payment") or {}
        payment_shape = self.shapes["PaymentShape"]
        errors += _shape_errors(payment, payment_shape, "/bc:payment", language)
        if payment.get("bc:paymentMethod") == "sepa-direct-debit":
            iban = payment.get("bc:iban")
            if not (isinstance(iban, str) and iban_valid(iban)):
                errors.append(self._error(payment_shape, "/bc:payment/bc:iban", language))
            if not payment.get("bc:accountHolder"):
                errors.append(self._error(payment_shape, "/bc:payment/bc:accountHolder", language))
        start = body.get("bc:startDate")
        if isinstance(start, str) and _is_date(start) and dt.date.fromisoformat(start) < now.date():
            errors.append(FieldError("/bc:startDate", _start_admissible(language)))
        return _first_per_field(errors)

    @staticmethod
    def _error(shape: NodeShape, pointer: str, language: str) -> FieldError:
        name = pointer.rsplit("/", 1)[-1]
        field_ = shape.field_for(expand_curie(name))
        if field_ is None:
            raise LookupError(f"the norm's {shape.local_name} has no field {name}")
        return FieldError(pointer, _admissible(field_, language))

    def consent_errors(
        self, consent: Mapping[str, Any], offered_at: dt.datetime, now: dt.datetime, language: str
    ) -> list[FieldError]:
        errors = _shape_errors(consent, self.shapes["ConsentShape"], "/bc:consent", language)
        moment = (
            _datetime(consent["bc:consentedAt"])
            if isinstance(consent.get("bc:consentedAt"), str)
            else None
        )
        if moment is not None and not (offered_at - CLOCK_SKEW <= moment <= now + CLOCK_SKEW):
            errors.append(
                FieldError(
                    "/bc:consent/bc:consentedAt",
                    "zugestimmt am: nach dem Angebot und nicht in der Zukunft"
                    if language == "de"
                    else "consented at: after the offer was made and not in the future",
                )
            )
        return errors


def _of_age(birth: Any, now: dt.datetime) -> bool:
    """Born at least 18 years ago (an unreadable date is the shape's error, not this one's)."""
    if not (isinstance(birth, str) and _is_date(birth)):
        return True
    born = dt.date.fromisoformat(birth)
    return dt.date(born.year + 18, born.month, min(born.day, 28)) <= now.date()


def _first_per_field(errors: list[FieldError]) -> list[FieldError]:
    seen: set[str] = set()
    out = []
    for error in errors:
        if error.pointer not in seen:
            seen.add(error.pointer)
            out.append(error)
    return out


def _start_admissible(language: str) -> str:
    if language == "de":
        return "Versicherungsbeginn: heute oder später (JJJJ-MM-TT)"
    return "start date: today or later (YYYY-MM-DD)"


def person_label(holder: Mapping[str, Any]) -> str:
    """The policyholder as answers name them: the name, nothing else."""
    if holder.get("@type") == "p:Organization":
        return str(holder.get("p:legalName", ""))
    return f"{holder.get('p:givenName', '')} {holder.get('p:familyName', '')}".strip()
