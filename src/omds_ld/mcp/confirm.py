"""A person's yes before anything binds a customer (seed 003: the host decides when a human
confirmation is required; nothing binds on a model's word).

A binding tool call (``x-omds-ld binds``, or one an operator adds) runs only once the person
using the client has confirmed what it binds to. The MCP server asks them the way the client can:

- 2025-11-25 with elicitation (form mode): ``elicitation/create`` on the session;
- 2026-07-28 with elicitation: an ``input_required`` result of the multi-round-trip flow; the
  client asks its user and retries with the answer and the request state;
- a client that declares URL-mode elicitation, where this deployment has a confirmation page: the
  page's address goes to the client (2025-11-25: ``elicitation/create`` with mode url, the call
  waiting for the person's answer there; 2026-07-28: an ``input_required`` result with a URL
  request), never to the model; the person logs in there and answers;
- otherwise: a tool error (``confirmation-required``) with a confirmation page of this
  deployment; the person logs in and confirms there and the agent retries with the same
  idempotencyKey.

A yes is the boolean yes the question asked for; any other answer is a no. It confirms one call:
a call without an idempotencyKey spends it, a call with one keeps it for the retries of that key
(the answer was lost: the same consent goes to the insurer, which acts once per key), and another
key, another call or a call after a withdrawal is asked anew. What is kept of a yes is who, when,
how and a digest of what the person was shown, never the text (it names the customer); the record
goes into the consent as ``bc:confirmation``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import mcp_types as types

from omds_ld.mcp.state import StateStore
from omds_ld.norm import consent as consent_rules

INPUT_KEY = "omds-ld-confirmation"  # the key of our one input request in a round trip
CONFIRMATION_TTL = 24 * 3600.0  # as long as an idempotency record: a retry finds it
PENDING_TTL = 15 * 60.0  # how long a question waits for the person's answer
# pending: not answered on the page yet
Action = Literal["accept", "decline", "cancel", "pending"]
PAGE_WAIT_SECONDS = 120.0  # how long a 2025 call waits for the person's answer on the page
URL_MESSAGE = (
    "Eine verbindliche Anfrage wartet auf Ihre Bestätigung: Melden Sie sich auf der Seite als "
    "Makler an, prüfen Sie, was sie den Kunden bindet, und antworten Sie dort. / A binding "
    "request waits for your confirmation: log in on the page as the broker, review what it binds "
    "the customer to and answer there."
)

CONSENT_METHODS = consent_rules.METHODS
FORM_FIELDS = {"consentedBy": "bc:consentedBy", "consentMethod": "bc:consentMethod",
               "consentedAt": "bc:consentedAt"}  # fmt: skip


def question_schema(asked: Mapping[str, Any] | None) -> types.ElicitRequestedSchema:
    """The form the person answers: their yes, and, where the call applies for a customer, the
    customer's consent as they state it (who, how, when). What the model was told is a field's
    default, named as such; nothing nobody said is filled in, and a time the model was told from
    before the offer was made is named as that, not filled in."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": "Ja, verbindlich beantragen / Yes, apply (binds the customer)",
                "default": False,
            }
        },
        "required": ["confirm"],
    }
    if asked is None:
        return schema
    told = told_consent(asked)
    at = told.get("bc:consentedAt", "")
    flagged = consent_rules.before_offer(at, offered_at(asked))
    by = {"type": "string", "title": "Zugestimmt hat / Consented by", "minLength": 1,
          "maxLength": consent_rules.MAX_WHO}  # fmt: skip
    how: dict[str, Any] = {"type": "string", "title": "Wie / How", "enum": list(CONSENT_METHODS)}
    when: dict[str, Any] = {
        "type": "string",
        "title": "Wann / When",
        "format": "date-time",
        "description": "date and time with its offset, e.g. 2026-12-06T17:30:00+01:00",
    }
    for part, key in ((by, "bc:consentedBy"), (how, "bc:consentMethod"), (when, "bc:consentedAt")):
        if told.get(key) and not (key == "bc:consentedAt" and flagged):
            part["default"] = told[key]
            before = f"{part['description']}; " if part.get("description") else ""
            part["description"] = f"{before}as the assistant was told: {told[key]}"
    if flagged:
        when["description"] += (
            f"; the assistant was told {at}, before this offer was made "
            f"({asked.get('offeredAt')}): the customer's consent must be to this offer"
        )
    schema["properties"].update(consentedBy=by, consentMethod=how, consentedAt=when)
    schema["required"] += list(FORM_FIELDS)
    return schema


def told_consent(asked: Mapping[str, Any] | None) -> dict[str, str]:
    """What the model was told of the customer's consent, as the question keeps it."""
    told = (asked or {}).get("told") or {}
    return {k: str(v) for k, v in told.items() if k in consent_rules.FIELDS and v}


def offered_at(asked: Mapping[str, Any] | None) -> dt.datetime | None:
    """When the offer the question names was made (a consent is to it, never from before)."""
    return consent_rules.moment((asked or {}).get("offeredAt"))


def stated_consent(
    content: Mapping[str, Any] | None,
    asked: Mapping[str, Any] | None,
    language: str = "en",
) -> tuple[dict[str, str] | None, dict[str, str]]:
    """The customer's consent as the person stated it (a field they left alone: what the model
    was told, as shown), and each rule it breaks; ({}, {}) where the call needs none. Checked
    with the norm's rules, as the insurer checks it."""
    if asked is None:
        return {}, {}
    content = content or {}
    told = told_consent(asked)
    stated: dict[str, str] = {}
    for name, key in FORM_FIELDS.items():
        value = content.get(name)  # a field not sent: what the model was told, as shown
        stated[key] = str(value).strip() if value is not None else told.get(key, "")
    stated["bc:consentedBy"] = " ".join(stated["bc:consentedBy"].split())
    now = dt.datetime.now(dt.UTC)
    broken = consent_rules.errors(stated, offered_at(asked), now, language)
    return (None, broken) if broken else (stated, {})


@dataclass(frozen=True)
class Said:
    """The person's answer through the client: accept (a yes, with what they filled in of the
    consent: ``content``, checked by the gate against the question), decline, cancel, or pending
    (not answered on the page yet)."""

    action: Action
    content: Mapping[str, Any] | None = None


MAX_WHO = consent_rules.MAX_WHO  # the norm's bound on bc:confirmedBy: a long name never breaks it


@dataclass(frozen=True)
class Confirmed:
    """A person's yes: who (the authenticated subject), when, how, and the digest of exactly
    what they were shown; ``name`` is how they are called (the authorization server's display
    name, or the client they used)."""

    who: str
    at: str
    via: str
    shown: str  # "sha256:<hex>" of the text shown
    name: str = ""
    # the customer's consent as the person stated it (bc:consentedBy, bc:consentMethod,
    # bc:consentedAt); {} where the call binds without one
    consent: Mapping[str, str] = field(default_factory=dict)
    receipt: str = ""  # signed for the insurer (omds_ld.norm.receipt), once per yes

    def to_jsonld(self) -> dict[str, str]:
        record = {
            "bc:confirmedBy": _bounded(self.who),
            "bc:confirmedAt": self.at,
            "bc:confirmedVia": self.via,
            "bc:shownDigest": self.shown,
        }
        if self.name:
            record["bc:confirmedByName"] = _bounded(self.name)
        if self.receipt:
            record["bc:receipt"] = self.receipt
        return record

    @classmethod
    def of(
        cls, who: str, via: str, shown: str, name: str = "", consent: Mapping[str, str] = {}
    ) -> Confirmed:
        """A yes given now to the text ``shown``."""
        return cls(who, now(), via, shown_digest(shown), name, dict(consent))

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Confirmed:
        return cls(
            str(record["who"]), str(record["at"]), str(record["via"]), str(record["shown"]),
            str(record.get("name", "")), dict(record.get("consent") or {}),
            str(record.get("receipt", "")),
        )  # fmt: skip


def _bounded(text: str) -> str:
    return " ".join(text.split())[:MAX_WHO]


def shown_digest(shown: str) -> str:
    """What binds the customer, as the person saw it: a digest, so that nothing kept or sent
    repeats the customer's data."""
    return "sha256:" + hashlib.sha256(shown.encode("utf-8")).hexdigest()


def is_yes(action: str, content: Mapping[str, Any] | None) -> bool:
    """Whether an answer is the boolean yes the question asked for (``confirm: true``); a text,
    a list, a missing box, anything else is a no."""
    return action == "accept" and (content or {}).get("confirm") is True


class Person(Protocol):
    """How the MCP server reaches the person using the client, for one call. ``on_page``: the
    person answers on the confirmation page (their yes is the one the page keeps)."""

    via: str
    on_page: bool

    async def ask(
        self, message: str, pending: str, schema: types.ElicitRequestedSchema
    ) -> Said | types.InputRequiredResult:  # pragma: no cover - a protocol
        ...


class FormElicitation:
    """2025-11-25: the client's session asks its user (``elicitation/create``, form mode)."""

    via = "elicitation (form)"
    on_page = False

    def __init__(self, session: Any, request_id: Any = None) -> None:
        self.session = session
        self.request_id = request_id

    async def ask(
        self, message: str, pending: str, schema: types.ElicitRequestedSchema
    ) -> Said | types.InputRequiredResult:
        result = await self.session.elicit_form(message, schema, self.request_id)
        return _said(result, schema)


class RoundTrip:
    """2026-07-28: the question is an ``input_required`` result; the answer comes with the
    retried call (its input responses and the request state naming the pending question)."""

    via = "elicitation (input_required)"
    on_page = False

    def __init__(self, params: types.CallToolRequestParams) -> None:
        self.responses = params.input_responses or {}
        self.request_state = params.request_state

    @property
    def answering(self) -> str | None:
        """The pending question this call answers, if it carries an answer."""
        return self.request_state if INPUT_KEY in self.responses else None

    def answer(self, schema: types.ElicitRequestedSchema) -> Said:
        response = self.responses.get(INPUT_KEY)
        if not isinstance(response, types.ElicitResult):
            return Said("cancel")
        return _said(response, schema)

    async def ask(
        self, message: str, pending: str, schema: types.ElicitRequestedSchema
    ) -> Said | types.InputRequiredResult:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        return types.InputRequiredResult(input_requests={INPUT_KEY: request}, request_state=pending)


class UrlElicitation:
    """2025-11-25, a client with URL mode: ``elicitation/create`` (mode url) with the page's
    address; the client opens it for its user, who logs in and answers there; the call waits
    for that answer (up to ``wait`` seconds) and tells the client it is complete."""

    via = "confirmation page (URL elicitation)"
    on_page = True

    def __init__(
        self, session: Any, request_id: Any, confirmations: Confirmations, wait: float
    ) -> None:
        self.session = session
        self.request_id = request_id
        self.confirmations = confirmations
        self.wait = wait

    async def ask(
        self, message: str, pending: str, schema: types.ElicitRequestedSchema
    ) -> Said | types.InputRequiredResult:
        url = self.confirmations.page(pending)
        if url is None:
            return Said("cancel")
        result = await self.session.elicit_url(URL_MESSAGE, url, pending, self.request_id)
        if result.action != "accept":
            return Said(result.action)
        state = await self.confirmations.wait(pending, self.wait)
        if state == "pending":
            return Said("pending")
        with contextlib.suppress(Exception):  # a courtesy: the answer is kept either way
            await self.session.send_elicit_complete(pending, self.request_id)
        return Said("accept" if state == "confirmed" else "decline")


class UrlRoundTrip(RoundTrip):
    """2026-07-28, a client with URL mode: an ``input_required`` result with a URL request; the
    client opens the page for its user and retries once they are done."""

    via = "confirmation page (URL elicitation)"
    on_page = True

    def __init__(self, params: types.CallToolRequestParams, confirmations: Confirmations) -> None:
        super().__init__(params)
        self.confirmations = confirmations

    def answer(self, schema: types.ElicitRequestedSchema) -> Said:
        response = self.responses.get(INPUT_KEY)
        if not isinstance(response, types.ElicitResult):
            return Said("cancel")
        # the yes itself is the page's: accepting the URL is only having opened it
        return Said("pending" if response.action == "accept" else response.action)

    async def ask(
        self, message: str, pending: str, schema: types.ElicitRequestedSchema
    ) -> Said | types.InputRequiredResult:
        url = self.confirmations.page(pending)
        if url is None:
            return Said("cancel")
        request = types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                message=URL_MESSAGE, url=url, elicitation_id=pending
            )
        )
        return types.InputRequiredResult(input_requests={INPUT_KEY: request}, request_state=pending)


def with_offer(stated: Mapping[str, str] | None, asked: Mapping[str, Any] | None) -> dict[str, str]:
    """The consent the person stated, bound to the offer the question named."""
    if not stated or not asked:
        return {}
    return {**stated, "bc:offerDigest": str(asked.get("bc:offerDigest", ""))}


def _said(result: types.ElicitResult, schema: types.ElicitRequestedSchema) -> Said:
    """A form's answer: a yes only with the boolean yes; what it states of the consent is
    checked by the gate, against the question it answers."""
    if result.action != "accept":
        return Said(result.action)
    if not is_yes(result.action, result.content):
        return Said("decline")  # the form was sent without the box ticked
    return Said("accept", dict(result.content or {}))


def call_digest(insurer: str, broker: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """What a confirmation is bound to: the insurer, the broker and the call's arguments (the
    idempotencyKey included: another key is another act, asked anew; not how the answer is
    shown: ``full``, ``seen``)."""
    content = {k: v for k, v in arguments.items() if k not in ("full", "seen")}
    canonical = json.dumps(
        {"insurer": insurer, "broker": broker, "tool": tool, "arguments": content},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Confirmations:
    """Questions and answers in the shared state store: a question waits for the person
    (``pending:<id>``), an answer is kept by the call's digest (``given:<digest>``)."""

    def __init__(self, state: StateStore, page_base: str | None = None) -> None:
        self.state = state
        # the confirmation page of this deployment (…/omds-ld/confirmations), None: there is none
        self.page_base = page_base.rstrip("/") if page_base else None

    async def given(self, digest: str) -> Confirmed | None:
        raw = await self.state.get(f"confirm:given:{digest}")
        return Confirmed.from_record(json.loads(raw)) if raw else None

    async def take(self, digest: str) -> Confirmed | None:
        """A yes for a call without an idempotencyKey: used by this call, gone for any other
        (of two such calls at once, one gets it)."""
        raw = await self.state.pop(f"confirm:given:{digest}")
        return Confirmed.from_record(json.loads(raw)) if raw else None

    async def give(self, digest: str, confirmed: Confirmed) -> None:
        record = json.dumps(confirmed.__dict__).encode()
        await self.state.set(f"confirm:given:{digest}", record, CONFIRMATION_TTL)

    async def forget(self, digest: str) -> None:
        await self.state.delete(f"confirm:given:{digest}")

    async def ask(
        self,
        digest: str,
        insurer: str,
        broker: str,
        shown: str,
        consent: Mapping[str, Any] | None = None,
        display_name: str = "",
        shown_in: Mapping[str, str] | None = None,
    ) -> str:
        """A new question (its id: unguessable, the page's address); ``consent``: what the
        consent the person states is asked with (``Question.consent``; None: the call needs
        none); ``display_name``: the insurer as the person knows it."""
        pending = secrets.token_urlsafe(24)
        record = {
            "digest": digest, "insurer": insurer, "broker": broker, "shown": shown,
            "insurer_name": display_name or insurer,
            # the text in each language alone (a page shows the person's): the yes is to the one
            # shown
            "shown_in": dict(shown_in or {}),
            "consent": dict(consent) if consent is not None else None,
            "state": "pending", "asked": time.time(),
        }  # fmt: skip
        await self.state.set(f"confirm:pending:{pending}", json.dumps(record).encode(), PENDING_TTL)
        return pending

    async def question(self, pending: str) -> dict[str, Any] | None:
        raw = await self.state.get(f"confirm:pending:{pending}")
        return json.loads(raw) if raw else None

    async def answered(self, pending: str, digest: str) -> dict[str, Any] | None:
        """The question a round trip's answer names, taken (it is answered once), if it was asked
        for this call."""
        raw = await self.state.pop(f"confirm:pending:{pending}")
        question = json.loads(raw) if raw else None
        if question is None or question.get("digest") != digest:
            return None
        return question  # type: ignore[no-any-return]

    async def answer_page(
        self,
        pending: str,
        yes: bool,
        subject: str,
        name: str = "",
        consent: Mapping[str, str] | None = None,
        language: str = "",
    ) -> dict[str, Any] | None:
        """The logged-in person's answer on the confirmation page, once per question (of two
        answers at once, the first counts): a yes is kept by the call's digest for the call,
        bound to the text as the page showed it (``language``: the one it was shown in)."""
        question = await self.question(pending)
        if question is None or question["state"] != "pending":
            return question
        if not await self.state.add(f"confirm:answered:{pending}", b"1", PENDING_TTL):
            return await self.question(pending)
        if yes:
            consent = with_offer(consent, question.get("consent"))
            shown = shown_text(question, language)
            confirmed = Confirmed.of(subject, "confirmation page", shown, name, consent)
            await self.give(question["digest"], confirmed)
        else:
            await self.state.set(f"confirm:declined:{question['digest']}", b"1", PENDING_TTL)
        # answered: the text that names the customer is kept no longer
        question.update(
            state="confirmed" if yes else "declined", who=subject, name=name, shown="",
            shown_in={}, consent=None,
        )  # fmt: skip
        await self.state.set(
            f"confirm:pending:{pending}", json.dumps(question).encode(), PENDING_TTL
        )
        return question

    async def declined(self, digest: str) -> bool:
        """Whether the person declined this call on the page (said once: the next call asks
        anew)."""
        if await self.state.get(f"confirm:declined:{digest}") is None:
            return False
        await self.state.delete(f"confirm:declined:{digest}")
        return True

    async def wait(self, pending: str, seconds: float) -> str:
        """The question's state once the person answered it on the page (``confirmed`` or
        ``declined``), or ``pending`` after ``seconds``; an expired question is ``declined``."""
        deadline = time.monotonic() + seconds
        while True:
            question = await self.question(pending)
            if question is None:
                return "declined"
            if question["state"] != "pending" or time.monotonic() >= deadline:
                return str(question["state"])
            await asyncio.sleep(0.25)

    @property
    def has_page(self) -> bool:
        return self.page_base is not None

    def page(self, pending: str) -> str | None:
        return f"{self.page_base}/{pending}" if self.page_base else None


def shown_text(question: Mapping[str, Any], language: str) -> str:
    """The text of a question as a page shows it in ``language`` (the whole text, in every
    language the insurer writes, where it has none alone in that one)."""
    alone = (question.get("shown_in") or {}).get(language)
    return str(alone) if alone else str(question.get("shown", ""))


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
