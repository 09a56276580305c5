"""Helpers for the application tests: an offer made by next steps, an application body with
the customer's consent to it, and the person's answer as an MCP client's elicitation callback."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import mcp_types as types
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from omds_ld.mcp.condense import answer_of
from omds_ld.scenarios.person import DEMO_BROKER, PagePerson
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, follow, step
from tests.servers import ExampleServer, in_thread

IBAN = "AT611904300234573201"
PERSON = {
    "@type": "p:Person", "p:givenName": "Anna", "p:familyName": "Berger",
    "p:birthDate": "1985-04-12", "p:streetAddress": "Hauptstraße 1", "p:postalCode": "1010",
    "p:addressLocality": "Wien", "p:email": "anna.berger@example.at",
}  # fmt: skip
PAYMENT = {
    "bc:paymentFrequency": "annual", "bc:paymentMethod": "sepa-direct-debit",
    "bc:iban": IBAN, "bc:accountHolder": "Anna Berger",
}  # fmt: skip
OLD_TIMBER_HOUSE = {
    "@type": "p:Dwelling", "p:livingArea": 120, "p:constructionType": "timber",
    "p:yearOfConstruction": 1930, "p:postalCode": "6020",
}  # fmt: skip


async def make_offer(
    client: Client,
    risk_object: dict[str, Any] | None = None,
    include: Sequence[str] = (),
    product: str = "",
) -> Any:
    """listProducts → createCalculation → createRiskObject → (includeComponent) →
    calculatePremium → createOffer, each by the step the previous answer offered."""
    products = await client.call_tool("listProducts", {})
    starts = [s for s in answer_of(products)["nextSteps"] if s["tool"] == "createCalculation"]
    start = next(s for s in starts if s["body"]["p:hasRootProduct"].endswith(product))
    case = await follow(client, start)
    case = await follow(client, step(case, "createRiskObject"), dict(risk_object or SKODA))
    for component in include:
        case = await follow(client, step(case, "includeComponent", componentId=component))
    case = await follow(client, step(case, "calculatePremium"))
    return await follow(client, step(case, "createOffer"))


def application(offer: Any, **changes: Any) -> dict[str, Any]:
    """An application for an offer, with the customer's consent to exactly this offer,
    starting on the insurer's today (as its answer says: this machine's date may be another)."""
    answer = answer_of(offer)
    data = answer["offer"]
    body: dict[str, Any] = {
        "bc:policyholder": dict(PERSON),
        "bc:payment": dict(PAYMENT),
        "bc:startDate": answer["insurerToday"],
        "bc:consent": {
            "bc:consentedBy": "Anna Berger",
            "bc:consentedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "bc:consentMethod": "in-person",
            "bc:offerDigest": data["digest"],
        },
    }
    body.update(changes)
    return body


def with_receipt(
    server: ExampleServer, body: dict[str, Any], broker: str = "anonymous"
) -> dict[str, Any]:
    """An application body whose consent carries a person's confirmation and its receipt,
    signed with the example server's own authorization server key (which its insurers trust):
    what an MCP server sends after the person's yes, for tests at the interface itself."""
    from omds_ld.auth.store import AuthStore
    from omds_ld.norm.receipt import sign

    store = AuthStore(server.database.with_name(server.database.stem + "-auth.sqlite3"))
    try:
        key = store.signing_key()
    finally:
        store.close()
    consent = dict(body["bc:consent"])
    confirmation = {"bc:confirmedBy": broker, "bc:confirmedAt": consent["bc:consentedAt"],
                    "bc:confirmedVia": "test", "bc:shownDigest": "sha256:" + "0" * 64}  # fmt: skip
    confirmation["bc:receipt"] = sign(
        key, issuer="tests", broker=broker, confirmation=confirmation, consent=consent,
        application=body,
    )  # fmt: skip
    return {**body, "bc:consent": {**consent, "bc:confirmation": confirmation}}


MISSING = object()  # an answer whose form has no "confirm" at all


class Person:
    """The person using the client: answers every confirmation as told, and remembers what
    they were shown. Asked by URL, they open the page, log in as ``broker`` and answer there
    (``confirm`` True: confirm; anything else: decline); not accepting means not opening it."""

    def __init__(
        self,
        action: str = "accept",
        confirm: Any = True,
        broker: str = DEMO_BROKER,
        content: dict[str, Any] | None = None,
    ):
        self.action = action
        self.confirm = confirm
        self.broker = broker
        self.content = content or {}  # more of the form: the customer's consent as they state it
        self.shown: list[str] = []
        self.urls: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            self.urls.append(params.url)
            if self.action == "accept":
                answer = "confirm" if self.confirm is True else "decline"
                answered = await PagePerson(self.broker).answer(params.url, answer)
                assert answered.status == 200, answered.page
                self.shown.append(answered.shown)
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        self.shown.append(params.message)
        content = None
        if self.action == "accept":
            content = {} if self.confirm is MISSING else {"confirm": self.confirm}
            content.update(self.content)
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


@contextlib.contextmanager
def slow_first_application(upstream: str, delay: float) -> Iterator[str]:
    """A real HTTP proxy in front of the example server that holds the insurer's answer to the
    first createApplication for ``delay`` seconds: the insurer has acted, the answer comes too
    late. Yields the proxy's base URL."""
    held: list[str] = []

    async def forward(request: Request) -> Response:
        body = await request.body()
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length"}
        }
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.request(
                request.method, upstream + request.url.path, params=request.query_params,
                content=body, headers=headers,
            )  # fmt: skip
        if request.method == "POST" and request.url.path.endswith("/applications") and not held:
            held.append(request.url.path)
            await asyncio.sleep(delay)
        drop = {"content-length", "content-encoding", "transfer-encoding", "connection"}
        return Response(
            answer.content, answer.status_code,
            headers={k: v for k, v in answer.headers.items() if k.lower() not in drop},
        )  # fmt: skip

    app = Starlette(
        routes=[Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]
    )
    with in_thread(app) as url:
        yield url
