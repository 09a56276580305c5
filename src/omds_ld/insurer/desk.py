"""The application desk of one insurer: createApplication, its reads and its withdrawal.

createApplication checks, in this order, each refusing with its own problem type and changing
nothing: the offer is still valid (offer-expired); the body conforms to the norm's shapes (one
pass, ``omds_ld.insurer.applications``): the personal data (personal-data-invalid), then the
consent is there (consent-missing) and conforms (personal-data-invalid); the consent names this
offer (consent-mismatch); the receipt of the person's yes to exactly this application, not used
before (receipt-invalid); the tariff
still prices the offer as offered (conditions-changed); the offer has no application yet
(already-applied). Then the insurer decides by its rules (``omds_ld.insurer.rules``). A write is
one transaction with its idempotency record (the interface wraps it in ``Store.unit``), so a
retry with the same key is a replay and a lost answer never makes a second application.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from joserfc.jwk import KeySet

from omds_ld.insurer.answers import Answer, Answers, application_iri, offer_iri, premium_jsonld
from omds_ld.insurer.applications import ApplicationCheck, mask_iban, person_label
from omds_ld.insurer.data import Broker, Insurer, Product
from omds_ld.insurer.draft import Draft
from omds_ld.insurer.offers import expired, offer_digest
from omds_ld.insurer.problems import FieldError, Problem
from omds_ld.insurer.rules import ApplicationRule
from omds_ld.insurer.store import Application, Case, EditConflict, Offer, Store
from omds_ld.insurer.tariff import calculate
from omds_ld.norm.receipt import ReceiptRefused, verify

OPEN_STATES = frozenset({"submitted", "referred"})
# states that keep an offer from being applied for again (a withdrawn one does not)
HOLDING_STATES = frozenset({"submitted", "referred", "accepted", "counter-offer", "declined"})


class ApplicationDesk:
    """Applications at one insurer, on its store, answers and clock."""

    def __init__(
        self,
        insurer: Insurer,
        store: Store,
        answers: Answers,
        check: ApplicationCheck,
        clock: Callable[[], dt.datetime],
        receipt_keys: Callable[[], KeySet],
    ) -> None:
        self.insurer = insurer
        self.store = store
        self.answers = answers
        self.check = check
        self.clock = clock
        # the keys whose receipts of a person's yes this insurer accepts (none: it takes none)
        self.receipt_keys = receipt_keys

    # what an offer admits

    def applicable(self, offer: Offer) -> bool:
        """Whether createApplication is a next step of this offer now."""
        if self.insurer.applications is None:
            return False
        if expired(str(offer.record["validUntil"]), self.clock()):
            return False
        return self._holding(offer) is None

    def _holding(self, offer: Offer) -> Application | None:
        """The application that keeps the offer from being applied for again, if any."""
        store = self.store
        return next(
            (
                a
                for a in store.applications_of(self.insurer.name, offer.offer_id, offer.broker)
                if a.state in HOLDING_STATES
            ),
            None,
        )

    def _offer(self, broker: Broker, offer_id: str) -> Offer:
        self.answers.require_cases()
        offer = self.store.get_offer(self.insurer.name, offer_id, broker.id)
        if offer is None:
            raise Problem(
                "not-found",
                f"there is no offer {offer_id!r} for you at {self.insurer.display_name}",
                next_steps=self.answers.entry_steps(),
            )
        return offer

    # createApplication, step by step: each check refuses with its own problem type

    def create(self, broker: Broker, offer_id: str, body: Mapping[str, Any]) -> Answer:
        offer = self._offer(broker, offer_id)
        rules = self.insurer.applications
        if rules is None:
            raise Problem(
                "operation-not-admissible",
                f"{self.insurer.display_name} takes no applications at this interface: "
                + self.insurer.application_process.get(self.insurer.language, ""),
                next_steps=self.answers.entry_steps(),
            )
        now = self.clock()
        self._check_valid(offer, now)
        self._check_body(offer, body, now)
        receipt = self._check_receipt(broker, offer, body, now)
        product = self._check_conditions(offer)
        self._check_not_applied(offer)
        rule = rules.decide(Draft.from_dict(offer.record["draft"]))
        application = self._decided(broker, offer, product, body, rule, now)
        self._spend(receipt, application, offer)
        self.store.insert_application(application)
        location = self.answers.step(
            "readApplication", "", {"applicationId": application.application_id}
        )["bc:href"]
        return Answer(201, self.answers.application(application, offer), {"Location": location})

    def _check_valid(self, offer: Offer, now: dt.datetime) -> None:
        if expired(str(offer.record["validUntil"]), now):
            raise Problem(
                "offer-expired",
                f"the offer was valid until {offer.record['validUntil']}; it binds "
                f"{self.insurer.display_name} no longer. Calculate again from the same case "
                "data (the next step), make a new offer and ask the customer to consent to it",
                next_steps=self.answers.recalculate_steps(offer),
            )

    def offer_answer(self, offer: Offer) -> dict[str, Any]:
        """The offer as it stands now: whether it can be applied for, whether it expired."""
        lapsed = expired(str(offer.record["validUntil"]), self.clock())
        return self.answers.offer(offer, self.applicable(offer), lapsed)

    def _offer_steps(self, offer: Offer) -> list[dict[str, Any]]:
        """Still admissible after a refused application: the offer as it stands."""
        return list(self.offer_answer(offer)["bc:nextStep"])

    def _check_body(self, offer: Offer, body: Mapping[str, Any], now: dt.datetime) -> None:
        """Personal data conform to the norm's shapes; then the consent is there, conforms and
        names this offer."""
        steps = self._offer_steps(offer)
        offered_at = dt.datetime.fromisoformat(offer.created)
        checked = self.check.check(
            body, offered_at, now, self.insurer.language, self.answers.today()
        )
        if checked.personal:
            raise Problem(
                "personal-data-invalid",
                "personal data are not admissible: "
                + "; ".join(e.pointer.rsplit("/", 1)[-1] for e in checked.personal)
                + " (each error says what is admissible; nothing was applied for)",
                errors=list(checked.personal),
                next_steps=steps,
            )
        consent = body.get("bc:consent")
        if not consent:
            raise Problem(
                "consent-missing",
                "an application binds the customer: bc:consent must say who consented, when, "
                "how, and name this offer's bc:offerDigest (readOffer gives it)",
                errors=[FieldError("/bc:consent", "the customer's consent to this offer")],
                next_steps=steps,
            )
        if checked.consent:
            raise Problem(
                "personal-data-invalid",
                "the consent is not admissible: "
                + "; ".join(e.detail for e in checked.consent)
                + " (nothing was applied for)",
                errors=list(checked.consent),
                next_steps=steps,
            )
        iri = offer_iri(self.insurer, offer.offer_id)
        if consent["bc:offerDigest"] != offer_digest(offer.record, iri):
            raise Problem(
                "consent-mismatch",
                "the consent names another offer's digest: the customer consented to other "
                "conditions, and consent is never carried over. Show the customer this offer "
                "(readOffer) and ask for their consent to it",
                errors=[FieldError("/bc:consent/bc:offerDigest", "this offer's bc:offerDigest")],
                next_steps=steps,
            )

    def _check_receipt(
        self, broker: Broker, offer: Offer, body: Mapping[str, Any], now: dt.datetime
    ) -> str:
        """The person's yes, as a receipt signed by a key this insurer trusts, for exactly this
        offer, broker, consent, confirmation and application data: the MCP server's word is not
        taken. Its id, which the application spends."""
        consent = body.get("bc:consent") or {}
        receipt = (consent.get("bc:confirmation") or {}).get("bc:receipt")
        try:
            claims = verify(
                receipt, self.receipt_keys(), broker=broker.subject or "anonymous",
                consent=consent, application=body, now=now.timestamp(),
            )  # fmt: skip
        except ReceiptRefused as refused:
            raise self._receipt_refused(offer, str(refused)) from None
        return str(claims.get("jti") or "")

    def _spend(self, receipt: str, application: Application, offer: Offer) -> None:
        """One receipt, one application: a receipt used before (for an application since
        withdrawn, say) binds nothing again. A retry with the same idempotency key never gets
        here: the interface replays its first answer."""
        spent = bool(receipt) and self.store.spend_receipt(
            self.insurer.name, receipt, application.application_id, application.created
        )
        if not spent:
            raise self._receipt_refused(
                offer,
                "the receipt was used for an application before (or names none): a person's "
                "yes binds one application",
            )

    def _receipt_refused(self, offer: Offer, why: str) -> Problem:
        return Problem(
            "receipt-invalid",
            f"{why}: an application binds the customer only with the receipt of the person's "
            "yes to exactly it. Apply through an MCP server whose receipts this insurer trusts, "
            "after the person confirmed; nothing was applied for",
            errors=[FieldError("/bc:consent/bc:confirmation/bc:receipt", why)],
            next_steps=self._offer_steps(offer),
        )

    def _check_conditions(self, offer: Offer) -> Product:
        """The offer as the tariff would price it now: a different premium is a repricing."""
        product = self.insurer.product_by_iri(str(offer.record["product"]))
        if product is not None:
            draft = Draft.from_dict(offer.record["draft"])
            now_priced = premium_jsonld(product, calculate(product.tariff, draft.tariff_input()))
            if now_priced == offer.record["premium"]:
                return product
        raise Problem(
            "conditions-changed",
            f"{self.insurer.display_name}'s tariff has changed since the offer was made: it would "
            "not be bound at the premium the customer consented to. Calculate again from the "
            "same case data and ask the customer anew",
            next_steps=self.answers.recalculate_steps(offer),
        )

    def _check_not_applied(self, offer: Offer) -> None:
        holding = self._holding(offer)
        if holding is not None:
            iri = application_iri(self.insurer, holding.application_id)
            raise Problem(
                "already-applied",
                f"the offer already has an application ({holding.application_id}, "
                f"{holding.state}); nothing was applied for again",
                extra={"bc:application": iri},
                next_steps=[
                    self.answers.step(
                        "readApplication", iri, {"applicationId": holding.application_id}
                    )
                ],
            )

    # the decision

    def _decided(
        self,
        broker: Broker,
        offer: Offer,
        product: Product,
        body: Mapping[str, Any],
        rule: ApplicationRule | None,
        now: dt.datetime,
    ) -> Application:
        rules = self.insurer.applications
        assert rules is not None
        stamp = now.isoformat(timespec="seconds")
        application_id = uuid.uuid4().hex[:20]
        decision: dict[str, Any] = {"decidedAt": stamp}
        if rule is None:
            state = "accepted"
            decision["policyNumber"] = f"{rules.policy_prefix}-{application_id[:10].upper()}"
        elif rule.decision == "refer":
            state = "referred"
            decision = {
                "decisionBy": (now + dt.timedelta(days=rules.referral_days)).date().isoformat(),
                "reason": dict(rule.reason),
            }
        elif rule.decision == "decline":
            state = "declined"
            decision["reason"] = dict(rule.reason)
        else:
            state = "counter-offer"
            counter = self._counter_offer(broker, offer, product, rule, now)
            decision.update(
                reason=dict(rule.reason),
                counterOffer=counter.offer_id,
                declinedComponents=[c.iri for c in product.components if c.id in rule.components],
            )
        payment = {k: v for k, v in body["bc:payment"].items() if k != "bc:accountHolder"}
        if "bc:iban" in payment:
            payment["bc:iban"] = mask_iban(str(payment["bc:iban"]))
        record = {
            "policyholder": dict(body["bc:policyholder"]),
            "policyholderName": person_label(body["bc:policyholder"]),
            "payment": dict(body["bc:payment"]),
            "paymentShown": payment,
            "startDate": body["bc:startDate"],
            "consent": dict(body["bc:consent"]),
            "decision": decision,
        }
        return Application(
            insurer=self.insurer.name,
            application_id=application_id,
            offer_id=offer.offer_id,
            broker=broker.id,
            state=state,
            record=record,
            created=stamp,
            updated=stamp,
        )

    def _counter_offer(
        self,
        broker: Broker,
        offer: Offer,
        product: Product,
        rule: ApplicationRule,
        now: dt.datetime,
    ) -> Offer:
        """What the insurer would accept: the offer's draft without the declined components,
        priced and offered as a new offer of its own (a new consent is needed for it)."""
        draft = Draft.from_dict(offer.record["draft"])
        for component in rule.components:
            if draft.is_included(component):
                draft = draft.with_included(product, component, False)
        premium = premium_jsonld(product, calculate(product.tariff, draft.tariff_input()))
        stamp = now.isoformat(timespec="seconds")
        case = Case(
            insurer=self.insurer.name,
            case_id=uuid.uuid4().hex[:20],
            broker=broker.id,
            status="calculated",
            draft=draft,
            premium=premium,
            offer_id=None,
            version=1,
            created=stamp,
            updated=stamp,
        )
        self.store.insert_case(case)
        counter = Offer(
            insurer=self.insurer.name,
            offer_id=uuid.uuid4().hex[:20],
            case_id=case.case_id,
            broker=broker.id,
            record={
                "product": product.iri,
                "premium": premium,
                "draft": draft.to_dict(),
                "validUntil": (now + self.insurer.offer_validity).date().isoformat(),
                "counterOfferTo": offer.offer_id,
            },
            created=stamp,
        )
        offered = replace(case, status="offered", offer_id=counter.offer_id)
        self.store.insert_offer(counter, offered, expected_version=case.version)
        return counter

    # reads and the withdrawal

    def _application(self, broker: Broker, application_id: str) -> tuple[Application, Offer]:
        self.answers.require_cases()
        application = self.store.get_application(self.insurer.name, application_id, broker.id)
        if application is None:
            raise Problem(
                "not-found",
                f"there is no application {application_id!r} for you at "
                f"{self.insurer.display_name}",
                next_steps=self.answers.entry_steps(),
            )
        return application, self._offer(broker, application.offer_id)

    def read(self, broker: Broker, application_id: str) -> Answer:
        application, offer = self._application(broker, application_id)
        return Answer(200, self.answers.application(application, offer))

    def list(self, broker: Broker, offer_id: str) -> Answer:
        offer = self._offer(broker, offer_id)
        found = self.store.applications_of(self.insurer.name, offer.offer_id, broker.id)
        return Answer(200, self.answers.application_list(offer, found))

    def withdraw(self, broker: Broker, application_id: str) -> Answer:
        application, offer = self._application(broker, application_id)
        if application.state == "withdrawn":
            return Answer(200, self.answers.application(application, offer))
        if application.state not in OPEN_STATES:
            raise Problem(
                "operation-not-admissible",
                f"the application is {application.state}: only an open one (submitted or "
                "referred) can be withdrawn",
                next_steps=self.answers.application_steps(application, offer),
            )
        withdrawn = replace(
            application,
            state="withdrawn",
            updated=self.clock().isoformat(timespec="seconds"),
        )
        try:
            stored = self.store.update_application(withdrawn, expected_version=application.version)
        except EditConflict:
            raise Problem(
                "edit-conflict", "the application changed meanwhile; read it and try again"
            ) from None
        return Answer(200, self.answers.application(stored, offer))
