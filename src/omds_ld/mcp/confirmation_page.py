"""The confirmation page: where a person confirms a binding call whose client cannot ask them.

A tool error (``confirmation-required``) carries the page's address; its last segment is the
question's id (unguessable, 192 bits, valid 15 minutes). The page shows exactly what the
question shows and asks for the person's name and their yes or no. It sets no cookie, runs no
script and may not be framed (a page that binds a customer must not be clicked through another
page). See docs/insurer-operator.md for who may open it.
"""

from __future__ import annotations

from html import escape
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from omds_ld.mcp.confirm import Confirmations

CONFIRMATION_PATH = "/omds-ld/confirmations"
MAX_FORM_BYTES = 4096
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;color:#222}"
    "pre{white-space:pre-wrap;background:#f5f5f5;padding:1em;border-radius:4px}"
    "button{font-size:1em;padding:.4em 1em;margin-right:1em}"
)


def confirmation_routes(confirmations: Confirmations) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        pending = request.path_params["pending"]
        question = await confirmations.question(pending)
        if request.method == "POST":
            return await _answer(request, confirmations, pending, question)
        if question is None:
            return _page("Not found", "<p>This confirmation does not exist or has expired. "
                         "Ask the agent to try again.</p>", 404)  # fmt: skip
        if question["state"] != "pending":
            return _page("Already answered", _answered(question))
        form = (
            '<form method="post"><p><label>Your name <input name="name" required '
            'maxlength="200" autocomplete="name"></label></p>'
            '<button name="answer" value="confirm">Confirm (binds the customer)</button>'
            '<button name="answer" value="decline">Decline</button></form>'
        )
        body = (
            f"<p>An agent asks to act for you at <b>{escape(question['insurer'])}</b>. "
            f"Review what it would bind the customer to:</p><pre>{escape(question['shown'])}</pre>"
            + form
        )
        return _page("Confirm a binding request", body)

    return [Route(CONFIRMATION_PATH + "/{pending}", page, methods=["GET", "POST"])]


async def _answer(
    request: Request,
    confirmations: Confirmations,
    pending: str,
    question: dict | None,  # type: ignore[type-arg]
) -> Response:
    if question is None:
        return _page("Not found", "<p>This confirmation has expired; nothing was done.</p>", 404)
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        return _page("Too large", "<p>The form was too large; nothing was done.</p>", 413)
    form = parse_qs(raw.decode("utf-8", "replace"))
    answer = (form.get("answer") or [""])[0]
    name = " ".join((form.get("name") or [""])[0].split())[:200]
    if answer not in {"confirm", "decline"} or (answer == "confirm" and not name):
        return _page("Incomplete", "<p>Give your name and confirm or decline.</p>", 422)
    answered = await confirmations.answer_page(pending, answer == "confirm", name)
    return _page("Thank you", _answered(answered or question))


def _answered(question: dict) -> str:  # type: ignore[type-arg]
    if question["state"] == "confirmed":
        return (
            f"<p>Confirmed by {escape(str(question.get('who', '')))}. The agent may now retry "
            "its call; it will be sent to the insurer once.</p>"
        )
    return "<p>Declined. Nothing was done; the agent is told so when it retries.</p>"


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status, headers=HEADERS)
