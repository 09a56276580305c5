"""The confirmation page: where a person confirms a binding call whose client cannot ask them.

A tool error (``confirmation-required``) carries the page's address; its last segment is the
question's id (unguessable, 192 bits, valid 15 minutes). The address alone answers nothing: the
page is a confidential OAuth client of the authorization server that issues the MCP endpoints'
tokens, and it answers only the person who logged in there as the broker the call was made for
(the MCP specification's rule for URL-mode elicitation: the server verifies the identity of the
user who opens the URL, never a typed identity). So a model that holds the address, or anyone it
is given to, cannot confirm: it would need the broker's login.

The way through it:

1. ``GET …/confirmations/<id>`` without a login of this page: sent to the authorization server's
   ``/authorize`` (authorization code, PKCE S256, the insurer's MCP endpoint as the resource).
2. ``GET …/confirmations/callback``: the code is redeemed by the page (its client secret), the
   access token checked as the MCP endpoint checks tokens, and its subject (with its display
   name) becomes the page's login: a cookie of this path only, its session in the shared state
   store (so any replica answers it), 15 minutes.
3. The page shows the question to the subject it was asked for, and only to them (another
   broker sees nothing of it), with a form whose token is bound to the login and the question.
4. ``POST``: the answer, accepted only with the login, the form's token and the page's own
   origin; what is recorded as who confirmed is the authenticated subject.

Without such a login (no authorization server, or none that knows this page as a client) there
is no page: a client that cannot ask its user is told to use one that can.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from omds_ld.auth.resource import ResourceGuard
from omds_ld.auth.tokens import Identity
from omds_ld.mcp.config import PageLogin
from omds_ld.mcp.confirm import (
    CONSENT_METHODS,
    FORM_FIELDS,
    Confirmations,
    offered_at,
    shown_text,
    stated_consent,
    told_consent,
)
from omds_ld.norm import consent as consent_rules

CONFIRMATION_PATH = "/omds-ld/confirmations"
CALLBACK = "callback"  # …/confirmations/callback: where the authorization server sends the code
COOKIE = "omds_ld_confirmation_login"
LOGIN_SECONDS = 15 * 60.0  # a page's login: long enough to read and answer, then log in again
STARTED_SECONDS = 10 * 60.0  # a login started and not finished is forgotten after this
MAX_FORM_BYTES = 4096
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    # same-origin, not no-referrer: with no-referrer a browser sends its form as "Origin: null",
    # and the page checks the form's origin; the address still never leaves this server
    "Referrer-Policy": "same-origin",
}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;color:#222}"
    "pre{white-space:pre-wrap;background:#f5f5f5;padding:1em;border-radius:4px}"
    "button{font-size:1em;padding:.4em 1em;margin-right:1em}"
)


# the page's own words, in the person's language (the browser's: German or English)
WORDS = {
    "en": {
        "title": "Confirm a binding request", "thanks": "Thank you",
        "not_yet": "Not confirmed yet", "answered_before": "Already answered",
        "intro": "You are logged in as <b>{who}</b> ({subject}). The assistant asks to apply at "
                 "<b>{insurer}</b> for you. Review what it would bind the customer to:",
        "other": "The same in {language}", "confirm": "Confirm (binds the customer)",
        "decline": "Decline", "legend": "The customer's consent to this offer, as you state it",
        "told": "As the assistant was told: {said}.",
        "told_nothing": "The assistant was told nothing of the customer's consent.",
        "flagged": "<b>That time is before this offer was made ({made}): the customer's consent "
                   "must be to this offer.</b> Ask the customer, and state when they agreed to it.",
        "who": "Who consented", "how": "How", "choose": "(choose)", "when": "When",
        "zone": "{zone}, the insurer's time",
        "does_not_hold": "The customer's consent does not hold; nothing was done:",
        "confirmed": "Confirmed by {who}. Go back to the chat or the assistant you were working "
                     "with and go on there: the application is sent to {insurer} once.",
        "declined": "Declined. Nothing was sent to the insurer. Go back to the chat or the "
                    "assistant you were working with: it is told that you declined.",
        "not_found_title": "Not found",
        "not_found": "This confirmation does not exist or has expired; nothing was done. Ask "
                     "the assistant to try again.",
        "not_for_you_title": "Not for you",
        "not_for_you": "You are logged in as <b>{who}</b>. This confirmation was asked for the "
                       "broker <b>{expected}</b>, and only they can see or answer it; nothing was "
                       "done.",
        "log_in_as": "Log in as {expected}",
        "not_here": "This confirmation is not answered here.",
        "log_in_again_title": "Log in again",
        "log_in_again": "This login was not started here, or has expired. Open the "
                        "confirmation's address again.",
        "not_logged_in_title": "Not logged in",
        "login_incomplete": "The login did not complete: {why}.",
        "server_not_asked": "The authorization server could not be asked ({why}).",
        "server_refused": "The authorization server refused the login ({why}).",
        "unknown_endpoint": "The login was for an endpoint this page does not know.",
        "token_does_not_hold": "The login's token does not hold: {why}",
        "log_in_first_title": "Log in first",
        "log_in_first": "Only the broker this was asked for can answer it, logged in; nothing "
                        "was done.",
        "too_large_title": "Too large",
        "too_large": "The form was too large; nothing was done.",
        "refused_title": "Refused",
        "own_page_only": "This form is sent from its own page only; nothing was done.",
        "not_shown_to_you": "This form was not shown to you for this confirmation; nothing was "
                            "done. Open the confirmation's address again.",
        "incomplete_title": "Incomplete",
        "incomplete": "Confirm or decline.",
    },
    "de": {
        "title": "Eine verbindliche Anfrage bestätigen", "thanks": "Danke",
        "not_yet": "Noch nicht bestätigt", "answered_before": "Bereits beantwortet",
        "intro": "Sie sind angemeldet als <b>{who}</b> ({subject}). Der Assistent möchte für Sie "
                 "bei <b>{insurer}</b> beantragen. Prüfen Sie, was das den Kunden bindet:",
        "other": "Dasselbe auf {language}", "confirm": "Bestätigen (bindet den Kunden)",
        "decline": "Ablehnen", "legend": "Die Zustimmung des Kunden zu diesem Angebot, wie Sie sie angeben",
        "told": "Wie dem Assistenten gesagt: {said}.",
        "told_nothing": "Dem Assistenten wurde nichts über die Zustimmung des Kunden gesagt.",
        "flagged": "<b>Dieser Zeitpunkt liegt vor der Erstellung dieses Angebots ({made}): die "
                   "Zustimmung des Kunden muss diesem Angebot gelten.</b> Fragen Sie den Kunden "
                   "und geben Sie an, wann er zugestimmt hat.",
        "who": "Zugestimmt hat", "how": "Wie", "choose": "(wählen)", "when": "Wann",
        "zone": "{zone}, die Zeit des Versicherers",
        "does_not_hold": "Die Zustimmung des Kunden hält nicht; es wurde nichts getan:",
        "confirmed": "Bestätigt von {who}. Gehen Sie zurück zum Chat oder zum Assistenten, mit dem "
                     "Sie arbeiten, und machen Sie dort weiter: der Antrag geht einmal an {insurer}.",
        "declined": "Abgelehnt. An den Versicherer wurde nichts gesendet. Gehen Sie zurück zum "
                    "Chat oder zum Assistenten: er erfährt, dass Sie abgelehnt haben.",
        "not_found_title": "Nicht gefunden",
        "not_found": "Diese Bestätigung gibt es nicht oder nicht mehr; es wurde nichts getan. "
                     "Bitten Sie den Assistenten, es noch einmal zu versuchen.",
        "not_for_you_title": "Nicht für Sie",
        "not_for_you": "Sie sind angemeldet als <b>{who}</b>. Diese Bestätigung wurde für den "
                       "Makler <b>{expected}</b> erbeten, und nur er kann sie sehen oder "
                       "beantworten; es wurde nichts getan.",
        "log_in_as": "Als {expected} anmelden",
        "not_here": "Diese Bestätigung wird hier nicht beantwortet.",
        "log_in_again_title": "Erneut anmelden",
        "log_in_again": "Diese Anmeldung wurde nicht hier begonnen oder ist abgelaufen. Öffnen "
                        "Sie die Adresse der Bestätigung noch einmal.",
        "not_logged_in_title": "Nicht angemeldet",
        "login_incomplete": "Die Anmeldung wurde nicht abgeschlossen: {why}.",
        "server_not_asked": "Der Autorisierungsserver war nicht erreichbar ({why}).",
        "server_refused": "Der Autorisierungsserver hat die Anmeldung abgelehnt ({why}).",
        "unknown_endpoint": "Die Anmeldung galt einem Endpunkt, den diese Seite nicht kennt.",
        "token_does_not_hold": "Das Token der Anmeldung gilt nicht: {why}",
        "log_in_first_title": "Zuerst anmelden",
        "log_in_first": "Nur der Makler, für den dies erbeten wurde, kann es angemeldet "
                        "beantworten; es wurde nichts getan.",
        "too_large_title": "Zu groß",
        "too_large": "Das Formular war zu groß; es wurde nichts getan.",
        "refused_title": "Abgelehnt",
        "own_page_only": "Dieses Formular wird nur von seiner eigenen Seite gesendet; es wurde "
                         "nichts getan.",
        "not_shown_to_you": "Dieses Formular wurde Ihnen nicht für diese Bestätigung gezeigt; "
                            "es wurde nichts getan. Öffnen Sie die Adresse der Bestätigung noch "
                            "einmal.",
        "incomplete_title": "Unvollständig",
        "incomplete": "Bestätigen oder ablehnen.",
    },
}  # fmt: skip
LANGUAGE_NAMES = {
    "de": {"de": "Deutsch", "en": "Englisch"},
    "en": {"de": "German", "en": "English"},
}


def page_language(accept_language: str) -> str:
    """The person's language for the page, from the browser's Accept-Language: German where it
    comes first of German and English, else English."""
    for part in accept_language.split(","):
        tag = part.split(";", 1)[0].strip().lower()
        if tag.startswith("de"):
            return "de"
        if tag.startswith("en"):
            return "en"
    return "en"


@dataclass(frozen=True)
class _Person:
    subject: str
    name: str
    session: str  # the cookie's value: the key of the form's token


class ConfirmationPage:
    """The page's routes, over the questions in the shared state store."""

    def __init__(
        self,
        confirmations: Confirmations,
        login: PageLogin,
        guards: Mapping[str, ResourceGuard],
        http: httpx.AsyncClient,
        page_base: str,
    ) -> None:
        self.confirmations = confirmations
        self.state = confirmations.state
        self.login = login
        self.guards = dict(guards)  # insurer name → its MCP endpoint's guard
        self.http = http
        self.page_base = page_base.rstrip("/")
        self.secure = page_base.startswith("https://")
        self.redirect_uri = f"{self.page_base}/{CALLBACK}"

    def routes(self) -> list[BaseRoute]:
        return [
            Route(f"{CONFIRMATION_PATH}/{CALLBACK}", self.callback, methods=["GET"]),
            Route(CONFIRMATION_PATH + "/{pending}", self.page, methods=["GET", "POST"]),
        ]

    # who is logged in

    async def _person(self, request: Request) -> _Person | None:
        session = request.cookies.get(COOKIE, "")
        if not session:
            return None
        raw = await self.state.get(_login_key(session))
        if raw is None:
            return None  # never logged in here, or the login expired
        record = json.loads(raw)
        return _Person(str(record["subject"]), str(record.get("name", "")), session)

    def _expected(self, question: Mapping[str, Any]) -> str:
        broker = str(question.get("broker", "-"))
        return self.login.anonymous_subject if broker == "-" else broker

    async def _start_login(
        self, pending: str, insurer: str, broker: str, lang: str = "en"
    ) -> Response:
        guard = self.guards.get(insurer)
        if guard is None:  # no endpoint of this hosting asked it
            return _page(
                WORDS[lang]["not_found_title"], f"<p>{WORDS[lang]['not_here']}</p>", 404, lang
            )
        state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        record = {"pending": pending, "verifier": verifier, "resource": guard.resource}
        await self.state.set(_started_key(state), json.dumps(record).encode(), STARTED_SECONDS)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = urlencode(
            [
                ("response_type", "code"),
                ("client_id", self.login.client_id),
                ("redirect_uri", self.redirect_uri),
                ("state", state),
                ("scope", guard.read_scope),
                ("code_challenge", challenge.rstrip(b"=").decode()),
                ("code_challenge_method", "S256"),
                ("resource", guard.resource),
                # the broker the call was made for, preselected at the login (OIDC's hint)
                ("login_hint", broker),
            ]
        )
        return RedirectResponse(f"{self.login.authorize_url}?{query}", 303, headers=HEADERS)

    async def callback(self, request: Request) -> Response:
        """The authorization server sends the browser back: the code is redeemed here, the
        token checked, its subject becomes the page's login."""
        params = request.query_params
        lang = page_language(request.headers.get("accept-language", ""))
        words = WORDS[lang]
        raw = await self.state.pop(_started_key(params.get("state", "")))
        if raw is None:
            return _page(words["log_in_again_title"], f"<p>{words['log_in_again']}</p>", 400, lang)
        started = json.loads(raw)
        if "error" in params or "code" not in params:
            why = params.get("error_description") or params.get("error") or "no code"
            said = words["login_incomplete"].format(why=escape(why))
            return _page(words["not_logged_in_title"], f"<p>{said}</p>", 401, lang)
        identity = await self._redeem(params["code"], started, lang)
        if isinstance(identity, str):
            return _page(words["not_logged_in_title"], f"<p>{escape(identity)}</p>", 401, lang)
        session = secrets.token_urlsafe(32)
        record = {"subject": identity.subject, "name": identity.name}
        await self.state.set(_login_key(session), json.dumps(record).encode(), LOGIN_SECONDS)
        response = RedirectResponse(
            f"{CONFIRMATION_PATH}/{started['pending']}", 303, headers=HEADERS
        )
        response.set_cookie(
            COOKIE, session, max_age=int(LOGIN_SECONDS), path=CONFIRMATION_PATH,
            httponly=True, samesite="lax", secure=self.secure,
        )  # fmt: skip
        return response

    async def _redeem(
        self, code: str, started: Mapping[str, Any], lang: str = "en"
    ) -> Identity | str:
        """The code's token, checked as its MCP endpoint checks tokens; or why not (in the
        page's language)."""
        words = WORDS[lang]
        form = {
            "grant_type": "authorization_code", "code": code,
            "code_verifier": started["verifier"], "resource": started["resource"],
            "redirect_uri": self.redirect_uri,
        }  # fmt: skip
        try:
            answer = await self.http.post(
                self.login.token_url, data=form,
                auth=(self.login.client_id, self.login.client_secret),
            )  # fmt: skip
            body = answer.json()
        except (httpx.HTTPError, ValueError) as error:
            return words["server_not_asked"].format(why=type(error).__name__)
        token = body.get("access_token") if isinstance(body, dict) else None
        if answer.status_code != 200 or not isinstance(token, str):
            why = (
                body.get("error_description") or body.get("error") if isinstance(body, dict) else ""
            )
            return words["server_refused"].format(why=why or answer.status_code)
        guard = next((g for g in self.guards.values() if g.resource == started["resource"]), None)
        if guard is None:
            return words["unknown_endpoint"]
        identity = await guard.identify({"authorization": f"Bearer {token}"})
        if not isinstance(identity, Identity):
            return words["token_does_not_hold"].format(why=identity.message)
        return identity

    # the question

    async def page(self, request: Request) -> Response:
        pending = request.path_params["pending"]
        question = await self.confirmations.question(pending)
        lang = page_language(request.headers.get("accept-language", ""))
        words = WORDS[lang]
        if question is None:
            if request.method == "POST":
                await _read_form(request)  # bounded: the answer to nothing
            return _page(words["not_found_title"], f"<p>{words['not_found']}</p>", 404, lang)
        person = await self._person(request)
        if person is None or request.query_params.get("login") == "again":
            if request.method == "POST":
                return _page(
                    words["log_in_first_title"], f"<p>{words['log_in_first']}</p>", 401, lang
                )
            return await self._start_login(
                pending, str(question.get("insurer", "")), self._expected(question), lang
            )
        expected = self._expected(question)
        if not expected or not hmac.compare_digest(person.subject, expected):
            mine = words["not_for_you"].format(
                who=escape(person.subject), expected=escape(expected)
            )
            again = escape(words["log_in_as"].format(expected=expected))
            return _page(
                words["not_for_you_title"],
                f'<p>{mine}</p><p><a href="?login=again">{again}</a></p>',
                403,
                lang,
            )
        if request.method == "POST":
            return await self._answer(request, pending, question, person)
        if question["state"] != "pending":
            return _page(words["answered_before"], _answered(question, lang), lang=lang)
        return _page(words["title"], self._form(pending, question, person, None, lang), lang=lang)

    def _form(
        self,
        pending: str,
        question: Mapping[str, Any],
        person: _Person,
        filled: Mapping[str, str] | None = None,
        lang: str = "en",
    ) -> str:
        """The question in the person's language (the same text in the insurer's other
        language folded away), and the form: the consent, confirm or decline."""
        words = WORDS[lang]
        insurer = str(question.get("insurer_name") or question["insurer"])
        intro = words["intro"].format(
            who=escape(person.name or person.subject), subject=escape(person.subject),
            insurer=escape(insurer),
        )  # fmt: skip
        others = "".join(
            f"<details><summary>{escape(words['other'].format(language=LANGUAGE_NAMES[lang][o]))}"
            f'</summary><pre class="other">{escape(text)}</pre></details>'
            for o, text in (question.get("shown_in") or {}).items()
            if o != lang and o in LANGUAGE_NAMES[lang] and shown_text(question, lang) != text
        )
        return (
            f"<p>{intro}</p><pre>{escape(shown_text(question, lang))}</pre>{others}"
            '<form method="post">'
            f'<input type="hidden" name="csrf" value="{_form_token(person.session, pending)}">'
            f'<input type="hidden" name="language" value="{lang}">'
            + _consent_fields(question.get("consent"), filled, lang)
            + f'<button name="answer" value="confirm">{escape(words["confirm"])}</button>'
            f'<button name="answer" value="decline" formnovalidate>{escape(words["decline"])}'
            "</button></form>"
        )

    async def _answer(
        self, request: Request, pending: str, question: Mapping[str, Any], person: _Person
    ) -> Response:
        # the page's language: the form's (what the person was shown), else the browser's
        lang = page_language(request.headers.get("accept-language", ""))
        form = await _read_form(request)
        if form is None:
            return _page(
                WORDS[lang]["too_large_title"], f"<p>{WORDS[lang]['too_large']}</p>", 413, lang
            )
        shown = (form.get("language") or [lang])[0]
        lang = shown if shown in WORDS else lang
        words = WORDS[lang]
        origin = request.headers.get("origin")
        if origin is not None and origin != _origin(self.page_base):
            return _page(words["refused_title"], f"<p>{words['own_page_only']}</p>", 403, lang)
        token = (form.get("csrf") or [""])[0]
        if not hmac.compare_digest(token, _form_token(person.session, pending)):
            return _page(words["refused_title"], f"<p>{words['not_shown_to_you']}</p>", 403, lang)
        if question["state"] != "pending":
            return _page(words["answered_before"], _answered(question, lang), 409, lang)
        answer = (form.get("answer") or [""])[0]
        if answer not in {"confirm", "decline"}:
            return _page(words["incomplete_title"], f"<p>{words['incomplete']}</p>", 422, lang)
        asked = question.get("consent")
        content = _stated_fields(form, asked)
        consent, broken = stated_consent(content, asked, lang)
        if answer == "confirm" and consent is None:
            # refused with the insurer's words for each rule, the form shown again as filled
            listed = "".join(f"<li>{escape(rule)}</li>" for rule in broken.values())
            return _page(
                words["not_yet"],
                f"<p>{words['does_not_hold']}</p><ul>{listed}</ul>"
                + self._form(pending, question, person, content, lang),
                422,
                lang,
            )
        answered = await self.confirmations.answer_page(
            pending, answer == "confirm", person.subject, person.name, consent, lang
        )
        return _page(words["thanks"], _answered(answered or question, lang), lang=lang)


async def _read_form(request: Request) -> dict[str, list[str]] | None:
    """The form, read no further than its bound: None when it is larger."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM_BYTES:
            return None
    return parse_qs(raw.decode("utf-8", "replace"))


def _stated_fields(
    form: Mapping[str, list[str]], asked: Mapping[str, Any] | None
) -> dict[str, str]:
    """What the person filled in of the consent, every field as sent (an empty one is empty,
    never what the assistant was told); the time picked in the insurer's time zone, with its
    offset, or as typed with one."""
    content = {name: (form.get(name) or [""])[0] for name in FORM_FIELDS if name != "consentedAt"}
    typed = (form.get("consentedAt") or [""])[0]
    picked = (form.get("consentedAtLocal") or [""])[0]
    content["consentedAt"] = typed or _in_zone(picked, _zone(asked))
    return content


def _zone(asked: Mapping[str, Any] | None) -> str:
    zone = str((asked or {}).get("zone") or "UTC")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return "UTC"
    return zone


def _in_zone(local: str, zone: str) -> str:
    """A picked date and time (no offset) as the moment it is in ``zone``; as picked where it
    is no date and time (the rule then says so)."""
    try:
        moment = dt.datetime.fromisoformat(local)
    except ValueError:
        return local
    if moment.tzinfo is not None:
        return local
    return moment.replace(tzinfo=ZoneInfo(zone)).isoformat(timespec="seconds")


def _consent_fields(
    asked: Mapping[str, Any] | None, filled: Mapping[str, str] | None, lang: str = "en"
) -> str:
    """The customer's consent as the person states it: what the assistant was told is shown as
    that (and filled in, unless it is from before the offer); nothing nobody said is filled in."""
    if asked is None:
        return ""
    told = told_consent(asked)
    flagged = consent_rules.before_offer(told.get("bc:consentedAt"), offered_at(asked))
    values = dict(filled or {})
    if filled is None:
        values = {name: told.get(key, "") for name, key in FORM_FIELDS.items()}
        if flagged:
            values["consentedAt"] = ""
    words = WORDS[lang]
    zone = _zone(asked)
    chosen = values.get("consentMethod", "")
    options = f'<option value="">{words["choose"]}</option>' + "".join(
        f'<option value="{m}"{" selected" if m == chosen else ""}>'
        f"{escape(consent_rules.method_label(m, lang))}</option>"
        for m in CONSENT_METHODS
    )
    local = _local(values.get("consentedAt", ""), zone)
    if told:
        said = ", ".join(
            escape(v)
            for v in (
                told.get("bc:consentedBy", ""),
                consent_rules.method_label(told.get("bc:consentMethod", ""), lang)
                if told.get("bc:consentMethod")
                else "",
                told.get("bc:consentedAt", ""),
            )
            if v
        )
        told_line = f"<p>{words['told'].format(said=said)}</p>"
    else:
        told_line = f"<p>{words['told_nothing']}</p>"
    if flagged:
        told_line += f"<p>{words['flagged'].format(made=escape(str(asked.get('offeredAt'))))}</p>"
    return (
        f"<fieldset><legend>{words['legend']}</legend>"
        + told_line
        + f'<p><label>{words["who"]} <input name="consentedBy" required maxlength="200" '
        f'value="{escape(values.get("consentedBy", ""))}"></label></p>'
        f'<p><label>{words["how"]} <select name="consentMethod" required>{options}</select>'
        "</label></p>"
        f'<p><label>{words["when"]} <input type="datetime-local" name="consentedAtLocal" required '
        f'value="{escape(local)}"></label> ({escape(words["zone"].format(zone=zone))})</p></fieldset>'
    )


def _local(text: str, zone: str) -> str:
    """A moment as a date-time picker shows it, in the insurer's time zone ('' if none)."""
    moment = consent_rules.moment(text)
    if moment is None:
        return ""
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M")


def _form_token(session: str, pending: str) -> str:
    """The form's token: bound to the login (the cookie's secret) and to the question."""
    return hmac.new(session.encode(), pending.encode(), hashlib.sha256).hexdigest()


def _login_key(session: str) -> str:
    # the store keeps a digest of the cookie, never the cookie itself
    return "confirm:login:" + hashlib.sha256(session.encode()).hexdigest()


def _started_key(state: str) -> str:
    return "confirm:started:" + hashlib.sha256(state.encode()).hexdigest()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _answered(question: Mapping[str, Any], lang: str = "en") -> str:
    insurer = escape(str(question.get("insurer_name") or question.get("insurer", "")))
    if question["state"] == "confirmed":
        who = escape(str(question.get("name") or question.get("who", "")))
        return f"<p>{WORDS[lang]['confirmed'].format(who=who, insurer=insurer)}</p>"
    return f"<p>{WORDS[lang]['declined']}</p>"


def _page(title: str, body: str, status: int = 200, lang: str = "en") -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status, headers=HEADERS)
