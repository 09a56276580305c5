"""``omds-ld check-insurer``: an insurer's interface checked against the norm, the way an agent
meets it.

It starts where an agent starts (readProcessKnowledge, listProducts with every window), follows
the next steps the answers offer, and for every product calculates a premium: with the draft at
the server (createCalculation, createRiskObject, calculatePremium) or without
(readDefaultInstance, inquireTariff). Every answer is checked: JSON-LD of the norm and its answer
profile, the operation's response schema, next steps that name operations the insurer has with the
arguments they need, cache headers on reads, the validation report, and that the MCP server's own
condenser reads it. Every writing operation is given bad input (a body that violates its shape, a
malformed body, an unknown case) and must refuse it with a problem of the norm and change nothing;
an idempotency key is sent twice (a replay) and with another body (refused).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from omds_ld import yamlfile
from omds_ld.check.facts import risk_object
from omds_ld.mcp.condense import ANSWER_TYPES, condense, many
from omds_ld.norm import Norm, Operation
from omds_ld.norm.catalogue import bundle_schema
from omds_ld.norm.jsonld import NotJsonLd, canonical, expand_curie
from omds_ld.norm.schemas import SchemaValidator

PROBLEMS = "https://w3id.org/omds-ld/problems/"


@dataclass(frozen=True)
class Check:
    """One check of one operation: passed or not, where (a JSON pointer or URL) and why."""

    operation: str
    name: str
    passed: bool
    where: str = ""
    why: str = ""

    def line(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        detail = " · ".join(p for p in (self.where, self.why) if p)
        return f"{self.operation} · {self.name} · {verdict}" + (f" · {detail}" if detail else "")


@dataclass
class Answer:
    """One HTTP answer of the interface."""

    status: int
    headers: Mapping[str, str]
    body: Any
    url: str


@dataclass
class Report:
    """Every check of a run, and what the run saw."""

    api: str
    checks: list[Check] = field(default_factory=list)
    premiums: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def to_json(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "passed": not self.failed,
            "checks": [asdict(c) for c in self.checks],
            "premiums": self.premiums,
        }


class InsurerChecker:
    """Walks one interface by next steps and checks what it meets."""

    def __init__(
        self,
        norm: Norm,
        api: str,
        client: httpx.AsyncClient,
        facts: Mapping[str, Mapping[str, Any]] | None = None,
        on_check: Callable[[Check], None] | None = None,
        receipt_key: Any = None,
        broker: str = "anonymous",
    ) -> None:
        self.norm = norm
        # a receipt key the interface trusts (a test interface's), and the broker its caller is:
        # with it, a receipt right in all but the application's data is sent, to be refused
        self.receipt_key = receipt_key
        self.broker = broker
        self.api = api.rstrip("/")
        self.client = client
        self.facts = dict(facts or {})
        self.on_check = on_check
        self.report = Report(self.api)
        self.published: set[str] | None = None
        self._schemas: dict[str, SchemaValidator] = {}
        self._offers_made = 0  # the applications are checked on one offer

    # recording

    def record(
        self, operation: str, name: str, passed: bool, where: str = "", why: str = ""
    ) -> bool:
        check = Check(operation, name, passed, where, why)
        self.report.checks.append(check)
        if self.on_check is not None:
            self.on_check(check)
        return passed

    # calling

    async def call(
        self,
        operation_id: str,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        *,
        key: str | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        operation = self.norm.operation(operation_id)
        url = operation.href(self.api, **dict(path or {}))
        headers = {"Accept": "application/ld+json, application/problem+json"}
        if key:
            headers["Idempotency-Key"] = key
        content = raw
        if content is None and body is not None:
            content = json.dumps(body).encode()
        if content is not None:
            headers["Content-Type"] = "application/ld+json"
        response = await self.client.request(
            operation.method, url, params=dict(query or {}), content=content, headers=headers
        )
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = None
        return Answer(response.status_code, dict(response.headers), parsed, str(response.url))

    # what every answer must be

    def _schema(self, operation: Operation, status: int) -> SchemaValidator | None:
        raw = self.norm.openapi["paths"][operation.path][operation.method.lower()]
        reference = raw.get("responses", {}).get(str(status), {}).get("$ref", "")
        name = reference.rsplit("/", 1)[-1]
        response = self.norm.openapi["components"]["responses"].get(name, {})
        content = response.get("content", {})
        media: Mapping[str, Any] = next(iter(content.values()), {})
        schema_name = str(media.get("schema", {}).get("$ref", "")).rsplit("/", 1)[-1]
        if not schema_name:
            return None
        if schema_name not in self._schemas:
            self._schemas[schema_name] = SchemaValidator(
                bundle_schema(self.norm.openapi, schema_name)
            )
        return self._schemas[schema_name]

    def answer(
        self, operation_id: str, answer: Answer, expected: tuple[int, ...]
    ) -> dict[str, Any] | None:
        """Check a success: its status, form, profile, schema, next steps, cache headers and
        that it condenses. The answer in canonical form, or None if it is unusable."""
        op = self.norm.operation(operation_id)
        if not self.record(
            operation_id,
            "status",
            answer.status in expected,
            answer.url,
            f"{answer.status}, expected {'/'.join(map(str, expected))}"
            + ("" if answer.status in expected else f": {_detail(answer)}"),
        ):
            return None  # fmt: skip
        if not self.record(
            operation_id,
            "JSON object",
            isinstance(answer.body, dict),
            answer.url,
            "the body is a JSON object",
        ):
            return None  # fmt: skip
        try:
            read = canonical(answer.body, ANSWER_TYPES)
        except NotJsonLd as error:
            self.record(
                operation_id, "JSON-LD of the norm", False, "/", f"{type(error).__name__}: {error}"
            )
            return None
        self.record(operation_id, "JSON-LD of the norm", True)
        kind = str(read.get("@type", ""))
        self.record(operation_id, "answer type", kind in ANSWER_TYPES, "/@type",
                    f"{kind or 'none'}; the norm's: {', '.join(sorted(ANSWER_TYPES))}")  # fmt: skip
        self.record(operation_id, "next steps", "bc:nextStep" in read, "/bc:nextStep",
                    "every answer names its next steps")  # fmt: skip
        schema = self._schema(op, answer.status)
        if schema is not None:
            violations = schema.violations(read)
            self.record(operation_id, "response schema", not violations,
                        violations[0].pointer if violations else "",
                        violations[0].detail if violations else "")  # fmt: skip
        for index, step in enumerate(many(read.get("bc:nextStep"))):
            self._next_step(operation_id, index, step)
        if op.method == "GET":
            control = {k.lower(): v for k, v in answer.headers.items()}.get("cache-control")
            self.record(operation_id, "cache headers", bool(control), "Cache-Control",
                        control or "a read says how long it may be reused")  # fmt: skip
        try:
            condensed = condense(read, operation=operation_id, insurer="check", language="en",
                                 status=answer.status, provenance={})  # fmt: skip
        except Exception as error:  # whatever the condenser raises is what this check finds
            self.record(operation_id, "condenses", False, "", f"{type(error).__name__}: {error}")
        else:
            missing = condensed.structured.get("missing")
            self.record(operation_id, "condenses", True, "",
                        f"optional parts missing: {'; '.join(missing)}" if missing else "")  # fmt: skip
        return read

    def _next_step(self, operation_id: str, index: int, step: Mapping[str, Any]) -> None:
        where = f"/bc:nextStep/{index}"
        name = str(step.get("bc:operation", ""))
        has = set(self.norm.operations) if self.published is None else self.published
        if not self.record(
            operation_id, "next step names an operation", name in has, where, f"{name or '(none)'}"
        ):
            return  # fmt: skip
        self.record(operation_id, "next step has a target", bool(step.get("bc:target")), where)
        parameters = step.get("bc:parameters") or {}
        needed = {p.name for p in self.norm.operation(name).path_parameters}
        lacking = sorted(needed - set(parameters if isinstance(parameters, Mapping) else {}))
        self.record(operation_id, "next step has its arguments", not lacking, where,
                    f"{name} lacks {', '.join(lacking)}" if lacking else "")  # fmt: skip

    def problem(
        self, operation_id: str, check: str, answer: Answer, statuses: tuple[int, ...]
    ) -> None:
        """Check a refusal: one of the statuses, a problem of the norm with next steps."""
        body = answer.body if isinstance(answer.body, dict) else {}
        problem_type = str(body.get("type", ""))
        ok = (answer.status in statuses and problem_type.startswith(PROBLEMS)
              and "bc:nextStep" in body)  # fmt: skip
        self.record(operation_id, check, ok, answer.url,
                    f"{answer.status} {problem_type or 'no problem type'}; expected "
                    f"{'/'.join(map(str, statuses))} with a problem of the norm and next steps")  # fmt: skip

    # the walk

    async def run(self) -> Report:
        await self._read_published()
        knowledge = self.answer(
            "readProcessKnowledge", await self.call("readProcessKnowledge"), (200,)
        )
        draft = bool(knowledge and knowledge.get("pk:draftAtServer"))
        offset: int | None = 0
        pages = 0
        while offset is not None and pages < 100:
            listed = self.answer(
                "listProducts",
                await self.call("listProducts", query={"offset": offset, "limit": 50}),
                (200,),
            )
            pages += 1
            if listed is None:
                break
            for product in many(listed.get("p:product")):
                await self._product(listed, product, draft)
            window = listed.get("bc:window") or {}
            more = window.get("bc:moreToFind") and window.get("bc:nextOffset") is not None
            offset = int(window["bc:nextOffset"]) if more else None
        reader = "readCalculation" if draft else "readDefaultInstance"
        unknown = await self.call(
            reader, {"caseId": "no-such-case-000", "productId": "no-such-product-000"}
        )
        self.problem(reader, "an unknown id is refused", unknown, (404,))
        return self.report

    async def _read_published(self) -> None:
        try:
            response = await self.client.get(self.api + "/openapi.json")
            document = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            document = None
        if isinstance(document, dict) and isinstance(document.get("paths"), dict):
            self.published = {
                str(op["operationId"]) for item in document["paths"].values()
                if isinstance(item, dict) for op in item.values()
                if isinstance(op, dict) and op.get("operationId")
            }  # fmt: skip

    def _offered(
        self, answer: Mapping[str, Any], operation: str, target: str | None = None
    ) -> dict[str, Any] | None:
        for step in many(answer.get("bc:nextStep")):
            if step.get("bc:operation") == operation and (
                target is None or step.get("bc:target") == target
            ):
                return dict(step)
        return None

    @staticmethod
    def _arguments(step: Mapping[str, Any]) -> dict[str, str]:
        parameters = step.get("bc:parameters") or {}
        return (
            {str(k): str(v) for k, v in parameters.items()}
            if isinstance(parameters, Mapping)
            else {}
        )

    def _fields(
        self, answer: Mapping[str, Any], step: Mapping[str, Any], risk_class: str
    ) -> tuple[str, list[dict[str, Any]]]:
        """The class and the fields (condensed) of the risk object a step expects: the shape of
        the product's risk-object class among those the step names."""
        condensed = condense(
            answer, operation="", insurer="", language="en", status=200, provenance={}
        )
        wanted = expand_curie(risk_class)
        for shape in condensed.structured.get("shapes", []):
            target = str(shape.get("targetClass", ""))
            expected = shape.get("iri") in many(step.get("bc:expects")) and shape.get("fields")
            if expected and expand_curie(target) == wanted:
                return target, list(shape["fields"])
        self.record(
            str(step.get("bc:operation")),
            "the step names the risk object's shape",
            False,
            "/bc:shape",
            f"no shape for {risk_class} among {many(step.get('bc:expects'))}",
        )
        return risk_class, []

    async def _product(
        self, listed: Mapping[str, Any], product: Mapping[str, Any], draft: bool
    ) -> None:
        iri = str(product.get("@id", ""))
        start = self._offered(listed, "createCalculation" if draft else "readDefaultInstance", iri)
        if not self.record(
            "listProducts",
            "a step starts a calculation",
            start is not None,
            iri,
            "createCalculation" if draft else "readDefaultInstance",
        ):
            return  # fmt: skip
        assert start is not None
        risk_class = str(product.get("p:riskObjectClass", ""))
        self.record(
            "listProducts", "a product names its risk object's class", bool(risk_class), iri
        )
        if draft:
            await self._with_draft(iri, start, risk_class)
        else:
            await self._by_inquiry(iri, start, risk_class)

    async def _by_inquiry(self, iri: str, start: Mapping[str, Any], risk_class: str) -> None:
        instance = self.answer("readDefaultInstance",
                               await self.call("readDefaultInstance", self._arguments(start)), (200,))  # fmt: skip
        if instance is None:
            return
        inquire = self._offered(instance, "inquireTariff")
        if not self.record("readDefaultInstance", "offers inquireTariff", inquire is not None, iri):
            return
        assert inquire is not None
        risk_class, fields = self._fields(instance, inquire, risk_class)
        body = json.loads(json.dumps(instance.get("bc:body") or {}))
        good = risk_object(risk_class, fields, self.facts)
        body.setdefault("p:instance", {})["p:hasRiskObject"] = [good]
        bad = await self.call("inquireTariff", body={**body, "p:instance": {
            **body["p:instance"], "p:hasRiskObject": [_violating(good, fields)]}})  # fmt: skip
        self.problem("inquireTariff", "a body that violates its shape is refused", bad, (400, 422))
        malformed = await self.call("inquireTariff", raw=b'{"p:instance": ')
        self.problem("inquireTariff", "a malformed body is refused", malformed, (400, 422))
        result = self.answer("inquireTariff", await self.call("inquireTariff", body=body), (200,))
        self._premium("inquireTariff", iri, result)

    async def _with_draft(self, iri: str, start: Mapping[str, Any], risk_class: str) -> None:
        key = f"check-{uuid.uuid4().hex}"
        body = start.get("bc:body") or {"p:hasRootProduct": iri}
        first = await self.call("createCalculation", body=body, key=key)
        case = self.answer("createCalculation", first, (201, 200))
        if case is None:
            return
        again = await self.call("createCalculation", body=body, key=key)
        same = isinstance(again.body, dict) and again.body.get("bc:caseId") == case.get("bc:caseId")
        self.record("createCalculation", "a retry with the same key replays", again.status in (200, 201) and same,
                    key, f"{again.status}, case {again.body.get('bc:caseId') if isinstance(again.body, dict) else '—'}")  # fmt: skip
        other = await self.call("createCalculation", body={**body, "@type": "bc:CalculationRequest",
                                                           "p:hasRootProduct": iri + "-other"}, key=key)  # fmt: skip
        self.problem(
            "createCalculation", "the same key with another body is refused", other, (409, 422)
        )
        case_id = str(case.get("bc:caseId", ""))
        add = self._offered(case, "createRiskObject")
        if not self.record("createCalculation", "offers createRiskObject", add is not None, iri):
            return
        assert add is not None
        risk_class, fields = self._fields(case, add, risk_class)
        good = risk_object(risk_class, fields, self.facts)
        before = await self.call("readCalculation", {"caseId": case_id})
        bad = await self.call(
            "createRiskObject", self._arguments(add), body=_violating(good, fields)
        )
        self.problem("createRiskObject", "a body that violates its shape is refused", bad, (422,))
        malformed = await self.call("createRiskObject", self._arguments(add), raw=b'{"@type": ')
        self.problem("createRiskObject", "a malformed body is refused", malformed, (400,))
        gone = await self.call("createRiskObject", {"caseId": "no-such-case-000"}, body=good)
        self.problem("createRiskObject", "an unknown case is refused", gone, (404,))
        after = await self.call("readCalculation", {"caseId": case_id})
        unchanged = isinstance(before.body, dict) and isinstance(after.body, dict) and (
            before.body.get("bc:draft") == after.body.get("bc:draft"))  # fmt: skip
        self.record("createRiskObject", "a refused request changed nothing", unchanged, case_id)
        with_risk = self.answer("createRiskObject",
                                await self.call("createRiskObject", self._arguments(add), body=good), (201, 200))  # fmt: skip
        if with_risk is None:
            return
        self._kept("createRiskObject", case, with_risk, case_id)
        report = with_risk.get("bc:validationReport") or {}
        self.record("createRiskObject", "the draft conforms", bool(report.get("sh:conforms")), case_id,
                    "with the facts given, the validation report conforms")  # fmt: skip
        calculate = self._offered(with_risk, "calculatePremium")
        if not self.record(
            "createRiskObject", "offers calculatePremium", calculate is not None, case_id
        ):
            return
        assert calculate is not None
        priced = self.answer("calculatePremium",
                             await self.call("calculatePremium", self._arguments(calculate)), (200,))  # fmt: skip
        self._premium("calculatePremium", iri, priced)
        if priced is not None:
            self._kept("calculatePremium", with_risk, priced, case_id)
        if priced is not None and self._publishes("createApplication") and not self._offers_made:
            await self._applications(priced)

    def _kept(
        self, operation: str, before: Mapping[str, Any], after: Mapping[str, Any], where: str
    ) -> None:
        """The parts of the case the norm says ``operation`` keeps (x-omds-ld keeps) are in
        its answer as they were before: an MCP server tells a client without memory they are
        "unchanged by this call" instead of repeating them."""
        keeps = self.norm.operation(operation).keeps
        if not keeps:
            return
        changed = changed_parts(before, after, keeps)
        self.record(
            operation, f"keeps {', '.join(sorted(keeps))} as they were (x-omds-ld keeps)",
            not changed, where, f"changed: {', '.join(changed)}" if changed else "",
        )  # fmt: skip

    def _publishes(self, operation: str) -> bool:
        return self.published is None or operation in self.published

    async def _applications(self, priced: Mapping[str, Any]) -> None:
        """Where the interface takes applications: an offer (one, at the first product that
        reaches a premium) and every refusal an application must meet. No application is ever
        made: it would bind a customer."""
        make = self._offered(priced, "createOffer")
        if make is None:
            return
        self._offers_made += 1
        offer = self.answer(
            "createOffer", await self.call("createOffer", self._arguments(make),
                                           key=f"check-{uuid.uuid4().hex}"), (201, 200),
        )  # fmt: skip
        if offer is None:
            return
        digest = str(offer.get("bc:offerDigest", ""))
        self.record("createOffer", "the offer carries its digest (bc:offerDigest)",
                    digest.startswith("sha256:") and len(digest) == 71, str(offer.get("@id")))  # fmt: skip
        apply = self._offered(offer, "createApplication")
        if not self.record("createOffer", "offers createApplication", apply is not None,
                           str(offer.get("@id"))):  # fmt: skip
            return
        assert apply is not None
        where = self._arguments(apply)
        body = application_body(digest)
        cases: tuple[tuple[str, dict[str, Any], str], ...] = (
            ("without consent, refused as consent-missing", {k: v for k, v in body.items()
                                                             if k != "bc:consent"}, "consent-missing"),
            ("consent to another offer, refused as consent-mismatch",
             {**body, "bc:consent": {**body["bc:consent"], "bc:offerDigest": "sha256:" + "0" * 64}},
             "consent-mismatch"),
            ("invalid personal data, refused by field", {**body, "bc:payment": {
                **body["bc:payment"], "bc:iban": BAD_IBAN}}, "personal-data-invalid"),
            # right in all else: an interface that takes it takes a yes nobody can prove
            ("a receipt of the person's yes that does not verify, refused as receipt-invalid",
             {**body, "bc:consent": {**body["bc:consent"], "bc:confirmation": {
                 "bc:confirmedBy": "omds-ld check-insurer", "bc:confirmedVia": "none",
                 "bc:receipt": "not.a.receipt"}}}, "receipt-invalid"),
        )  # fmt: skip
        if self.receipt_key is not None:  # signed by a key it trusts, for other data
            cases += (
                ("a receipt for another application's data (another IBAN), refused as "
                 "receipt-invalid", self._signed_for_other_data(body), "receipt-invalid"),
            )  # fmt: skip
        for name, sent, slug in cases:
            refused = await self.call("createApplication", where, body=sent)
            self.problem("createApplication", name, refused, (422,))
            problem = refused.body if isinstance(refused.body, dict) else {}
            self.record("createApplication", f"{name}: its problem type",
                        str(problem.get("type", "")).endswith("/" + slug), refused.url,
                        str(problem.get("type")))  # fmt: skip
            if slug == "personal-data-invalid":
                text = json.dumps(problem)
                self.record("createApplication", "the refusal names the field, not its value",
                            "bc:iban" in text and BAD_IBAN not in text, refused.url)  # fmt: skip
        listed = self.answer("listApplications", await self.call("listApplications", where), (200,))
        if listed is not None:
            self.record("listApplications", "a refused application changed nothing",
                        not many(listed.get("bc:application")), str(listed.get("@id")))  # fmt: skip
        unknown = await self.call("readApplication", {"applicationId": "no-such-application-0"})
        self.problem("readApplication", "an unknown application is refused", unknown, (404,))

    def _signed_for_other_data(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The body with a receipt of a trusted key, right in every claim but the application's
        data: signed for the same body with another IBAN."""
        from omds_ld.norm.receipt import sign

        consent = dict(body["bc:consent"])
        confirmation = {"bc:confirmedBy": self.broker, "bc:confirmedVia": "omds-ld check-insurer",
                        "bc:confirmedAt": consent["bc:consentedAt"],
                        "bc:shownDigest": "sha256:" + "0" * 64}  # fmt: skip
        other = {**body, "bc:payment": {**body["bc:payment"], "bc:iban": OTHER_IBAN}}
        confirmation["bc:receipt"] = sign(
            self.receipt_key, issuer="omds-ld check-insurer", broker=self.broker,
            confirmation=confirmation, consent=consent, application=other,
        )  # fmt: skip
        return {**body, "bc:consent": {**consent, "bc:confirmation": confirmation}}

    def _premium(self, operation: str, product: str, answer: Mapping[str, Any] | None) -> None:
        if answer is None:
            return
        premium = answer.get("bc:premium") or {}
        report = answer.get("bc:validationReport") or {}
        self.record(operation, "a premium with a conforming report",
                    bool(premium.get("bc:gross")) and bool(report.get("sh:conforms")), product,
                    f"{premium.get('bc:gross')} {premium.get('bc:currency')}")  # fmt: skip
        if premium.get("bc:gross"):
            self.report.premiums[product] = premium.get("bc:gross")


BAD_IBAN = "AT611904300234573299"  # the check digits fail
OTHER_IBAN = "DE89370400440532013000"  # a valid one, not the body's


def changed_parts(
    before: Mapping[str, Any], after: Mapping[str, Any], keeps: Collection[str]
) -> list[str]:
    """Of the parts of a business case ``keeps`` names, those whose draft in ``after`` (an
    answer of the insurer) is not as in ``before``: ``components`` is the draft without its
    risk objects (components, attributes, what is at the default), ``riskObjects`` its risk
    objects."""
    was, now = before.get("bc:draft") or {}, after.get("bc:draft") or {}

    def part(draft: Mapping[str, Any], name: str) -> Any:
        if name == "components":
            return {k: v for k, v in draft.items() if k != "p:hasRiskObject"}
        return many(draft.get("p:hasRiskObject")) if name == "riskObjects" else None

    return [name for name in sorted(keeps) if part(was, name) != part(now, name)]


def application_body(digest: str) -> dict[str, Any]:
    """An application an interface must read (the checker never sends it whole and right)."""
    return {
        "bc:policyholder": {
            "@type": "p:Person", "p:givenName": "Erika", "p:familyName": "Muster",
            "p:birthDate": "1980-01-01", "p:streetAddress": "Teststraße 1", "p:postalCode": "1010",
            "p:addressLocality": "Wien", "p:email": "erika.muster@example.at",
        },
        "bc:payment": {"bc:paymentFrequency": "annual", "bc:paymentMethod": "sepa-direct-debit",
                       "bc:iban": "AT611904300234573201", "bc:accountHolder": "Erika Muster"},
        "bc:startDate": time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86400)),
        "bc:consent": {"bc:consentedBy": "Erika Muster", "bc:consentMethod": "in-person",
                       "bc:consentedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "bc:offerDigest": digest},
    }  # fmt: skip


def _violating(good: Mapping[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The risk object with one value its shape refuses (out of range, or of the wrong type)."""
    bad = dict(good)
    for spec in fields:
        name = str(spec["name"])
        if spec.get("max") is not None and isinstance(spec["max"], int | float):
            bad[name] = spec["max"] + 1000
            return bad
        if spec.get("in"):
            bad[name] = "no-such-value"
            return bad
    name = next((str(f["name"]) for f in fields if f.get("required")), "p:missing")
    bad[name] = {"@value": "not a literal of its type"} if name in bad else "x"
    bad.pop(name, None)  # a required field left out
    return bad


def _detail(answer: Answer) -> str:
    if isinstance(answer.body, dict):
        return str(answer.body.get("detail") or answer.body.get("title") or "")[:200]
    return "no JSON body"


def load_facts(text: str) -> dict[str, dict[str, Any]]:
    """A facts file (YAML or JSON): risk-object class → field → value."""

    raw = yamlfile.load(text) or {}
    return {expand_curie(str(k)): dict(v) for k, v in raw.items()}


def html(report: Report) -> str:
    """The report as a self-contained HTML page."""
    from html import escape

    rows = "".join(
        f"<tr class={'pass' if c.passed else 'fail'}><td>{escape(c.operation)}</td>"
        f"<td>{escape(c.name)}</td><td>{'pass' if c.passed else 'FAIL'}</td>"
        f"<td>{escape(c.where)}</td><td>{escape(c.why)}</td></tr>"
        for c in report.checks
    )
    verdict = "passes" if not report.failed else f"fails {len(report.failed)} check(s)"
    return (
        "<!doctype html><meta charset=utf-8><title>check-insurer</title><style>"
        "body{font:14px sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}"
        ".fail{background:#fdd}</style>"
        f"<h1>{escape(report.api)} {verdict}</h1><p>{len(report.checks)} checks</p>"
        "<table><tr><th>operation</th><th>check</th><th>verdict</th><th>where</th><th>why</th></tr>"
        f"{rows}</table>"
    )
