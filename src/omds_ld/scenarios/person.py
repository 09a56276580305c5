"""The scenario's person at a confirmation page: a browser that logs in and answers.

The page answers only the broker the binding call was made for, logged in at the authorization
server. This person does what a person does with a browser: opens the page's address, is sent to
the login, logs in with the broker's name and password (the example authorization server's login
form), comes back to the page, reads what it binds the customer to, and confirms or declines with
the page's own form. Nothing here is a way around the login: without the password it is refused
like anyone else.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpx

# the embedded demo: every caller without a token is this broker, and logs in with this password
DEMO_BROKER = "demo-broker"
DEMO_PASSWORD = "demo"

_FORM = re.compile(r'<form method="post"(?: action="([^"]*)")?>(.*?)</form>', re.S)
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]*)" value="([^"]*)">')
_SHOWN = re.compile(r"<pre>(.*?)</pre>", re.S)
_INPUT = re.compile(r'<input (?:type="[^"]*" )?name="(consent[A-Za-z]*)"[^>]*? value="([^"]*)"')
_SELECTED = re.compile(r'<option value="([^"]+)" selected>')


@dataclass(frozen=True)
class Reading:
    """What the page showed once the person was logged in: its HTTP status, the question's text
    ("" where it showed none) and the page itself."""

    status: int
    shown: str
    page: str
    # the customer's consent as the person stated it there (the form's fields as sent)
    stated: Mapping[str, str] = field(default_factory=dict)


class PagePerson:
    """A person with a browser of their own (its cookies are theirs), logging in as ``broker``."""

    def __init__(
        self, broker: str = DEMO_BROKER, password: str = DEMO_PASSWORD, timeout: float = 30
    ) -> None:
        self.broker = broker
        self.password = password
        self.timeout = timeout

    def _browser(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, follow_redirects=True)

    async def read(self, page: str) -> Reading:
        """Open the page, logging in where it sends them to."""
        async with self._browser() as browser:
            return await self.open(browser, page)

    async def answer(
        self, page: str, answer: str, consent: Mapping[str, str] | None = None
    ) -> Reading:
        """Open the page (logging in), then confirm or decline with its form as a browser sends
        it: the fields as the page filled them in, the customer's consent as this person states
        it (``consent``: by, method, at; a time not stated is the moment they confirm). The
        answer's status, and what the page showed before."""
        async with self._browser() as browser:
            opened = await self.open(browser, page)
            token = dict(_HIDDEN.findall(opened.page)).get("csrf")
            if opened.status != 200 or token is None:
                return opened  # nothing to answer here (not found, not theirs, answered)
            data = {"csrf": html.unescape(token), "answer": answer}
            stated: dict[str, str] = {}
            if answer == "confirm" and 'name="consentedBy"' in opened.page:
                stated = consent_form(opened.page, consent or {})
            answered = await browser.post(page, data={**data, **stated})
            return Reading(answered.status_code, opened.shown, answered.text, stated)

    async def open(self, browser: httpx.AsyncClient, page: str) -> Reading:
        """Open the page in ``browser`` (a client that follows redirects), logging in."""
        opened = await browser.get(page)
        login = _login_form(opened.text)
        if login is not None:
            action, hidden = login
            fields: dict[str, list[str]] = {}
            for key, value in [*hidden, ("broker", self.broker), ("password", self.password)]:
                fields.setdefault(key, []).append(value)
            opened = await browser.post(urljoin(str(opened.url), action), data=fields)
        return _reading(opened)


def consent_form(page: str, consent: Mapping[str, str]) -> dict[str, str]:
    """The consent's fields as the page filled them in (what the assistant was told), each
    replaced where this person states it otherwise; a time nobody gave is now."""
    filled = {html.unescape(k): html.unescape(v) for k, v in _INPUT.findall(page)}
    chosen = _SELECTED.search(page)
    fields = {
        "consentedBy": consent.get("by") or filled.get("consentedBy", ""),
        "consentMethod": consent.get("method")
        or (html.unescape(chosen.group(1)) if chosen else ""),
    }
    at = consent.get("at")
    if at:
        fields["consentedAt"] = str(at)
    elif filled.get("consentedAtLocal"):
        fields["consentedAtLocal"] = filled["consentedAtLocal"]
    else:
        fields["consentedAt"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return fields


def _login_form(page: str) -> tuple[str, list[tuple[str, str]]] | None:
    """The authorization server's login form (the one asking for a password): where it is sent
    and its hidden fields."""
    for action, inner in _FORM.findall(page):
        if 'name="password"' in inner:
            fields = [(html.unescape(k), html.unescape(v)) for k, v in _HIDDEN.findall(inner)]
            return html.unescape(action), fields
    return None


def _reading(response: httpx.Response) -> Reading:
    found = _SHOWN.search(response.text)
    shown = html.unescape(found.group(1)) if found else ""
    return Reading(response.status_code, shown, response.text)
