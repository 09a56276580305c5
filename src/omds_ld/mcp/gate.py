"""The gate before a binding call: what the person is shown, their answer, the consent it adds.

``Gate.check`` returns the call's arguments with the person's confirmation in the consent
(``bc:confirmation``, overwriting whatever the caller put there: only the person's yes counts),
or an ``input_required`` result (2026-07-28: the client asks its user and retries), or refuses
(``confirmation-declined``, ``confirmation-required`` with a confirmation page, or a consent
that does not name the offer). Nothing is sent to the insurer before the yes.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types as types

from omds_ld.mcp.catalogue import ToolSpec
from omds_ld.mcp.confirm import (
    Confirmations,
    Confirmed,
    Person,
    RoundTrip,
    Said,
    call_digest,
    offered_at,
    question_schema,
    stated_consent,
    told_consent,
    with_offer,
)
from omds_ld.mcp.refusal import Refusal
from omds_ld.mcp.upstream import CALLER, Upstream
from omds_ld.norm import Norm
from omds_ld.norm import consent as consent_rules
from omds_ld.norm.jsonld import NotJsonLd, canonical
from omds_ld.norm.receipt import Signer

ProblemOf = Callable[..., dict[str, Any]]
PERIODS = {"P1Y": ("pro Jahr", "per year"), "P6M": ("pro Halbjahr", "per half-year"),
           "P3M": ("pro Quartal", "per quarter"), "P1M": ("pro Monat", "per month")}  # fmt: skip
FREQUENCIES = {"annual": ("jährlich", "annually"), "semiannual": ("halbjährlich", "half-yearly"),
               "quarterly": ("vierteljährlich", "quarterly"), "monthly": ("monatlich", "monthly")}  # fmt: skip
METHODS = {"sepa-direct-debit": ("SEPA-Lastschrift", "SEPA direct debit"),
           "invoice": ("Zahlschein", "invoice")}  # fmt: skip


class Gate:
    """Binding calls of one MCP server wait here for the person's yes."""

    def __init__(
        self,
        *,
        norm: Norm,
        insurer: str,
        display_name: str,
        language: str,
        upstream: Upstream,
        confirmations: Confirmations,
        binding: Collection[str],
        problem: ProblemOf,
        receipts: Signer | None = None,
    ) -> None:
        self.norm = norm
        self.insurer = insurer
        self.display_name = display_name
        self.language = language
        self.upstream = upstream
        self.confirmations = confirmations
        self.binding = frozenset(binding)
        self.problem = problem
        # signs the receipt the insurer checks (None: it sends none, and an insurer that wants
        # one refuses the application)
        self.receipts = receipts

    def binds(self, spec: ToolSpec) -> bool:
        return spec.name in self.binding

    async def check(
        self, spec: ToolSpec, arguments: dict[str, Any], person: Person | None, who: str
    ) -> dict[str, Any] | types.InputRequiredResult:
        """The arguments to send, with the person's confirmation and the customer's consent as
        they stated it; or the question to ask."""
        clean = _without_confirmation(arguments)
        broker = CALLER.get().subject or "-"
        digest = call_digest(self.insurer, broker, spec.name, clean)
        # a yes confirms one call: the retries of one idempotencyKey are that call
        keyed = bool(clean.get("idempotencyKey"))
        given = self.confirmations.given if keyed else self.confirmations.take
        confirmed = await given(digest)
        if confirmed is None and await self.confirmations.declined(digest):
            raise self._declined("decline")
        if confirmed is None and isinstance(person, RoundTrip) and person.answering:
            confirmed = await self._answered(person, digest, broker, who)
        if confirmed is None:
            question = await self.question(spec, clean)
            pending = await self.confirmations.ask(
                digest, self.insurer, broker, question.shown, question.consent, self.display_name,
                question.shown_in,
            )  # fmt: skip
            if person is None:
                raise self._required(pending)
            said = await person.ask(question.shown, pending, question_schema(question.consent))
            if isinstance(said, types.InputRequiredResult):
                return said
            confirmed = await self._yes(person, said, digest, given)
            if confirmed is None:
                consent = self._stated(said.content, question.consent)
                confirmed = Confirmed.of(_subject(broker), person.via, question.shown, who, consent)
        if self.receipts is not None and confirmed.consent and not confirmed.receipt:
            receipt = self.receipts(
                _subject(broker), confirmed.to_jsonld(), confirmed.consent, clean.get("body") or {}
            )
            confirmed = replace(confirmed, receipt=receipt)
        if keyed:  # the retries of the key send the same consent and receipt
            await self.confirmations.give(digest, confirmed)
        return _with_confirmation(clean, confirmed)

    async def _yes(
        self,
        person: Person,
        said: Said,
        digest: str,
        given: Callable[[str], Awaitable[Confirmed | None]],
    ) -> Confirmed | None:
        """The person's answer: a no refused, a yes on the page read as the page keeps it (None
        for a yes given through the client, which the caller records)."""
        if said.action == "pending":
            raise self._waiting()
        if said.action != "accept":
            await self.confirmations.declined(digest)  # told now: not again at the next call
            raise self._declined(said.action)
        if not person.on_page:
            return None
        confirmed = await given(digest)
        if confirmed is None:
            raise self._waiting()
        return confirmed

    async def _answered(
        self, person: RoundTrip, digest: str, broker: str, who: str
    ) -> Confirmed | None:
        """The person's answer a retried call carries, if it answers this call's question (once:
        the question is gone with its answer, so the same answer confirms no second call). On
        the page, the yes is the page's (found before this): here only a no, or not yet."""
        if person.on_page:
            action = person.answer(question_schema(None)).action
            raise self._waiting() if action == "pending" else self._declined(action)
        question = await self.confirmations.answered(person.answering or "", digest)
        if question is None:
            return None  # too late, answered before, or for another call: asked anew
        said = person.answer(question_schema(question.get("consent")))
        if said.action != "accept":
            raise self._declined(said.action)
        consent = self._stated(said.content, question.get("consent"))
        return Confirmed.of(_subject(broker), person.via, str(question["shown"]), who, consent)

    def _declined(self, action: str) -> Refusal:
        what = "declined" if action == "decline" else "cancelled"
        return Refusal(
            self.problem(
                "confirmation-declined",
                f"the person using the client {what} the confirmation: nothing was applied "
                "for and nothing was sent to the insurer. Ask them what to change",
            )
        )

    def _stated(
        self, content: Mapping[str, Any] | None, asked: Mapping[str, Any] | None
    ) -> dict[str, str]:
        """The consent the person stated through the client, bound to the offer; refused with
        the rules it breaks (the insurer's words for them)."""
        stated, broken = stated_consent(content, asked)
        if stated is None:
            raise self._incomplete(broken)
        return with_offer(stated, asked)

    def _incomplete(self, broken: Mapping[str, str]) -> Refusal:
        return Refusal(
            self.problem(
                "consent-missing",
                "the person confirmed, but the customer's consent they stated does not hold: "
                + "; ".join(broken.values())
                + ". Nothing was applied for; call again with the same arguments, and the "
                "person states it anew",
                [{"pointer": "/body/" + "bc:consent/" + k, "detail": v} for k, v in broken.items()],
            )
        )

    def _waiting(self) -> Refusal:
        return Refusal(
            self.problem(
                "confirmation-required",
                "the person using the client was given the confirmation page in their client "
                "and has not answered there yet. Once they have, call this tool again with the "
                "same arguments and idempotencyKey. Nothing was done",
            )
        )

    def _required(self, pending: str) -> Refusal:
        page = self.confirmations.page(pending)
        if page is None:
            return Refusal(
                self.problem(
                    "confirmation-required",
                    "this binds a customer and needs the confirmation of the person using the "
                    "client, but the client cannot ask its user (it declared no elicitation) and "
                    "this MCP server has no confirmation page (over stdio, or where no "
                    "authorization server logs people in for it, nobody could tell who "
                    "answered). Use a client with elicitation. Nothing was done",
                )
            )
        return Refusal(
            self.problem(
                "confirmation-required",
                "this binds a customer: the person using the client must confirm it first. "
                f"Give them this page to review and confirm: {page} . Once they have "
                "confirmed, call this tool again with the same arguments and idempotencyKey. "
                "Do not open the page yourself. Nothing was done",
                **{"bc:confirmationUrl": page},
            )
        )

    # what the person is shown

    async def question(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Question:
        """What the person confirms, in the insurer's language (and English for a German one):
        for an application everything it binds the customer to, and the consent they state
        (the model's account of it as defaults, bound to the offer as it is now)."""
        if spec.name != "createApplication":
            return Question(
                self._line(
                    f"{self.display_name}: {spec.title} ({spec.name}); das bindet den Kunden.",
                    f"{self.display_name}: {spec.title} ({spec.name}); this binds the customer.",
                ),
                None,
            )
        offer = await self._offer(str(arguments["offerId"]))
        body = arguments.get("body") or {}
        told = body.get("bc:consent") or {}
        if offer.get("bc:expired"):
            raise Refusal(
                self.problem(
                    "offer-expired",
                    f"the offer was valid until {offer.get('bc:validUntil')}; it binds "
                    f"{self.display_name} no longer. Calculate again from the same case data "
                    "(the next step), make a new offer and ask the customer to consent; "
                    "nothing was asked of the person or sent to the insurer",
                    **{"bc:nextStep": list(offer.get("bc:nextStep") or [])},
                )
            )
        if told and told.get("bc:offerDigest") not in (None, offer.get("bc:offerDigest")):
            raise Refusal(
                self.problem(
                    "consent-mismatch",
                    "the consent you sent names another offer's digest than this offer's "
                    f"({offer.get('bc:offerDigest')}): leave bc:offerDigest out. The person "
                    "confirming states the customer's consent to this offer; nothing was asked "
                    "of the person or sent to the insurer",
                )
            )
        asked = {
            "told": {k: told[k] for k in consent_rules.FIELDS if told.get(k)},
            "bc:offerDigest": str(offer.get("bc:offerDigest", "")),
            "offeredAt": str(offer.get("bc:createdAt", "")),
            "zone": str(offer.get("bc:timeZone", "")),
        }
        self._told_holds(asked)
        product = await self._product_label(str(offer.get("p:hasRootProduct", "")))
        pairs = self._application_lines(offer, product, body, asked)
        shown_in = {"en": "\n".join(en for _, en in pairs)}
        if self.language == "de":
            shown_in["de"] = "\n".join(de for de, _ in pairs)
        return Question("\n".join(self._line(de, en) for de, en in pairs), asked, shown_in)

    def _told_holds(self, asked: Mapping[str, Any]) -> None:
        """What the model was told of the consent, refused where no person could state it so (a
        time without its offset, in the future, no date at all), with the rule's words; a time
        from before the offer is shown to the person as that, not refused: they state when."""
        told = told_consent(asked)
        if "bc:consentedAt" not in told:
            return
        now = dt.datetime.now(dt.UTC)
        broken = consent_rules.time_error(told["bc:consentedAt"], None, now)
        if broken is None:
            return
        raise Refusal(
            self.problem(
                "invalid-body",
                f"{broken}. Send the time as you were told it, with its offset, or leave "
                "bc:consentedAt out: the person confirming states it. Nothing was asked of the "
                "person or sent to the insurer",
                [{"pointer": "/body/bc:consent/bc:consentedAt", "detail": broken}],
            )
        )

    def _application_lines(
        self,
        offer: Mapping[str, Any],
        product: str,
        body: Mapping[str, Any],
        asked: Mapping[str, Any],
    ) -> list[tuple[str, str]]:
        """Everything the application binds the customer to, in full: the person sees what the
        model is not shown (the whole account, the holder, the policyholder's identity, where
        the documents go), so a change of any of it changes what they confirm."""
        premium = offer.get("bc:premium") or {}
        de_period, en_period = PERIODS.get(str(premium.get("bc:period")), ("", ""))
        amount = f"{premium.get('bc:gross')} {premium.get('bc:currency', '')}".strip()
        holder = body.get("bc:policyholder") or {}
        payment = body.get("bc:payment") or {}
        de_freq, en_freq = FREQUENCIES.get(str(payment.get("bc:paymentFrequency")), ("", ""))
        de_method, en_method = METHODS.get(str(payment.get("bc:paymentMethod")), ("", ""))
        account = _account(payment)
        de_consent, en_consent = _told(asked)
        start = body.get("bc:startDate", "")
        priced = offer.get("bc:contractStart")
        de_priced, en_priced = (
            (f" (die Prämie wurde ab {priced} berechnet: ein anderer Beginn als im Angebot)",
             f" (the premium was priced from {priced}: another start than the offer's)")
            if priced and priced != start
            else ("", "")
        )  # fmt: skip
        email = holder.get("p:email", "")
        return [
            (
                f"Verbindlicher Antrag bei {self.display_name}: {product}",
                f"Binding application at {self.display_name}: {product}",
            ),
            (f"Prämie: {amount} {de_period}", f"Premium: {amount} {en_period}"),
            (
                f"Versicherungsnehmer: {_identity(holder, 'de')}",
                f"Policyholder: {_identity(holder, 'en')}",
            ),
            (f"Anschrift: {_address(holder)}", f"Address: {_address(holder)}"),
            (
                f"Zahlung: {de_freq}, {de_method}{account}",
                f"Payment: {en_freq}, {en_method}{account}",
            ),
            (
                f"Dokumente an: {email or 'keine E-Mail angegeben'}",
                f"Documents to: {email or 'no e-mail given'}",
            ),
            (f"Versicherungsbeginn: {start}{de_priced}", f"Start: {start}{en_priced}"),
            (
                f"Angebot gültig bis {offer.get('bc:validUntil')}",
                f"Offer valid until {offer.get('bc:validUntil')}",
            ),
            (
                "Zustimmung des Kunden zu diesem Angebot: geben Sie an, wer, wie und wann "
                f"({de_consent})",
                f"The customer's consent to this offer: state who, how and when ({en_consent})",
            ),
            (
                "Bestätigen Sie, dass der Kunde diesem Antrag zustimmt? Er bindet den Kunden.",
                "Do you confirm the customer agrees to this application? It binds them.",
            ),
        ]

    def _line(self, de: str, en: str) -> str:
        return f"{de} / {en}" if self.language == "de" else en

    async def _offer(self, offer_id: str) -> dict[str, Any]:
        """The offer as the insurer has it now (its premium and digest): what is confirmed."""
        answer = await self.upstream.send(
            self.norm.operation("readOffer"), {"offerId": offer_id}, {}, None, None
        )
        if answer.status != 200 or not isinstance(answer.body, dict):
            detail = answer.body.get("detail") if isinstance(answer.body, dict) else None
            raise Refusal(
                self.problem(
                    "not-found" if answer.status == 404 else "insurer-answer-invalid",
                    f"the offer {offer_id!r} could not be read at {self.display_name}"
                    + (f": {detail}" if detail else "")
                    + "; nothing was asked of the person or sent to the insurer",
                )
            )
        try:
            return canonical(answer.body, frozenset({"bc:Offer"}), answer.text)
        except NotJsonLd as error:
            raise Refusal(
                self.problem(
                    "insurer-answer-invalid", f"the offer is no JSON-LD of the norm: {error}"
                )
            ) from None

    async def _product_label(self, product_iri: str) -> str:
        product_id = product_iri.rstrip("/").rsplit("/", 1)[-1]
        try:
            answer = await self.upstream.send(
                self.norm.operation("readProduct"), {"productId": product_id}, {}, None, None
            )
        except Exception:  # the label is a courtesy: the product's IRI says it too
            return product_iri
        label = answer.body.get("rdfs:label") if isinstance(answer.body, dict) else None
        if isinstance(label, Mapping):
            return str(label.get(self.language) or next(iter(label.values()), product_iri))
        return str(label or product_iri)


@dataclass(frozen=True)
class Question:
    """What the person is shown, and what the consent they state is asked with: what the model
    was told of it (``told``), the offer's digest, when it was made and the insurer's time zone;
    None where the call binds without a consent."""

    shown: str
    consent: dict[str, Any] | None
    # the same text in each language alone, by language: a page shows the person's
    shown_in: dict[str, str] = field(default_factory=dict)


def _told(asked: Mapping[str, Any]) -> tuple[str, str]:
    """What the model was told of the consent, as the person is shown it (German, English): as
    told, never as stated; a time from before the offer named as such."""
    told = told_consent(asked)
    if not told:
        return ("dem Assistenten wurde nichts davon gesagt",
                "the assistant was told nothing of it")  # fmt: skip
    method = told.get("bc:consentMethod", "")
    at = told.get("bc:consentedAt", "")
    de = [
        told.get("bc:consentedBy", ""),
        consent_rules.method_label(method, "de") if method else "",
        at,
    ]
    en = [told.get("bc:consentedBy", ""), consent_rules.method_label(method) if method else "", at]
    de_text = "wie dem Assistenten gesagt: " + ", ".join(x for x in de if x)
    en_text = "as the assistant was told: " + ", ".join(x for x in en if x)
    if consent_rules.before_offer(at, offered_at(asked)):
        made = asked.get("offeredAt", "")
        de_text += (f"; das war vor der Erstellung dieses Angebots am {made}: die Zustimmung des "
                    "Kunden muss diesem Angebot gelten")  # fmt: skip
        en_text += (f"; that was before this offer was made at {made}: the customer's consent "
                    "must be to this offer")  # fmt: skip
    return de_text, en_text


def _subject(broker: str) -> str:
    """Who confirmed through the client: the broker its token names (the person using it)."""
    return "anonymous" if broker == "-" else broker


def _identity(holder: Mapping[str, Any], language: str) -> str:
    """The policyholder as they are identified: a person's name and birth date, a company's
    name and register number."""
    if holder.get("@type") == "p:Organization":
        number = str(holder.get("p:registrationNumber") or "")
        # an Austrian number is written with its register ("FN 123456a"): said once
        named = number.upper().startswith("FN")
        prefix = "" if named else ("FN " if language == "de" else "register no. ")
        register = f"{prefix}{number}" if number else ""
        return ", ".join(p for p in (str(holder.get("p:legalName", "")), register) if p)
    name = f"{holder.get('p:givenName', '')} {holder.get('p:familyName', '')}".strip()
    born = holder.get("p:birthDate")
    return f"{name}, {'geb.' if language == 'de' else 'born'} {born}" if born else name


def _address(holder: Mapping[str, Any]) -> str:
    town = f"{holder.get('p:postalCode', '')} {holder.get('p:addressLocality', '')}".strip()
    parts = (holder.get("p:streetAddress", ""), town, holder.get("p:addressCountry", ""))
    return ", ".join(str(p) for p in parts if p)


def _account(payment: Mapping[str, Any]) -> str:
    """The whole account the premium is taken from, and whose it is."""
    iban = " ".join(str(payment.get("bc:iban", "")).split())
    holder = payment.get("bc:accountHolder")
    if not iban:
        return ""
    return f", IBAN {iban}" + (f" ({holder})" if holder else "")


def _without_confirmation(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments without any confirmation the caller wrote itself: only ours counts."""
    clean = copy.deepcopy(dict(arguments))
    consent = (clean.get("body") or {}).get("bc:consent")
    if isinstance(consent, dict):
        consent.pop("bc:confirmation", None)
    return clean


def _with_confirmation(arguments: dict[str, Any], confirmed: Confirmed) -> dict[str, Any]:
    """The arguments with the consent as the person stated it (bound to the offer's digest)
    and their confirmation: whatever the model wrote there is replaced."""
    body = arguments.get("body")
    if isinstance(body, dict) and confirmed.consent:
        body["bc:consent"] = {**confirmed.consent, "bc:confirmation": confirmed.to_jsonld()}
    elif isinstance(body, dict) and isinstance(body.get("bc:consent"), dict):
        body["bc:consent"]["bc:confirmation"] = confirmed.to_jsonld()
    return arguments
