"""The operations of one insurer's interface: each reads or changes state and returns an answer."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from joserfc.jwk import KeySet

from omds_ld.insurer.answers import Answer, Answers, case_iri, draft_iri, premium_jsonld
from omds_ld.insurer.applications import ApplicationCheck
from omds_ld.insurer.data import Broker, Insurer, Product
from omds_ld.insurer.desk import ApplicationDesk
from omds_ld.insurer.draft import Draft, Scalar
from omds_ld.insurer.instance import attribute_iri, parse_instance, parse_risk_object
from omds_ld.insurer.problems import FieldError, Problem
from omds_ld.insurer.store import Case, EditConflict, Offer, Store
from omds_ld.insurer.tariff import calculate
from omds_ld.insurer.validation import (
    Report,
    node_iris,
    risk_object_iri,
    validate_draft,
    validate_risk_object,
)
from omds_ld.norm import Norm

Clock = Callable[[], dt.datetime]
TODAY = frozenset({"today", "heute", "ab sofort", "sofort"})  # a date attribute's value "today"


def system_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def offset_clock(seconds: float) -> Clock:
    """The system's clock moved by ``seconds`` (to try an offer's expiry without waiting)."""
    if not seconds:
        return system_clock
    shift = dt.timedelta(seconds=seconds)
    return lambda: system_clock() + shift


class InsurerService:
    """One insurer's interface: the norm's operations over its products and its store."""

    def __init__(
        self,
        norm: Norm,
        insurer: Insurer,
        store: Store,
        api_base: str,
        clock: Clock = system_clock,
        receipt_keys: Callable[[], KeySet] = lambda: KeySet([]),
    ) -> None:
        self.norm = norm
        # the keys whose receipts of a person's yes this insurer accepts (none: it takes none)
        self.receipt_keys = receipt_keys
        self.insurer = insurer
        self.store = store
        self.clock = clock
        self.answers = Answers(norm, insurer, api_base, clock)
        self.desk = ApplicationDesk(
            insurer, store, self.answers, ApplicationCheck(norm), clock, receipt_keys
        )

    def _now(self) -> str:
        return self.clock().isoformat(timespec="seconds")

    def handler(self, operation_id: str) -> Callable[..., Answer]:
        """The method that carries out an operation, by operationId."""
        method: Callable[..., Answer] = getattr(self, operation_id)
        return method

    # reading the insurer

    def readProcessKnowledge(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return Answer(200, self.answers.process_knowledge())

    def listProducts(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return Answer(200, self.answers.product_list(params["offset"], params["limit"]))

    def _product(self, product_id: str) -> Product:
        product = self.insurer.products.get(product_id)
        if product is None:
            known = sorted(self.insurer.products)
            raise Problem(
                "unknown-product",
                f"{self.insurer.display_name} has no product {product_id!r}; "
                f"products: {', '.join(known)}",
                extra={"known": known},
            )
        return product

    def readProduct(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return Answer(200, self.answers.product(self._product(params["productId"])))

    def readDefaultInstance(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return Answer(200, self.answers.default_instance(self._product(params["productId"])))

    def readShape(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        name = params["shapeId"]
        shape = self.insurer.shape_by_name(name) or next(
            (s for s in self.norm.shapes.values() if s.local_name == name), None
        )
        if shape is None:
            known = sorted(
                {s.local_name for s in (*self.insurer.shapes.values(), *self.norm.shapes.values())}
            )
            raise Problem(
                "unknown-shape",
                f"there is no shape {name!r}; shapes: {', '.join(known)}",
                extra={"known": known},
            )
        return Answer(200, self.answers.shape(shape))

    def inquireTariff(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        product, draft = parse_instance(self.insurer, body["p:instance"])
        self._check_inclusions(product, draft)
        report = validate_draft(
            product, draft, f"{product.iri}/inquired-instance", self.answers.today()
        )
        if not report.conforms:
            raise Problem(
                "shape-violation",
                "the instance does not conform to its shapes; the validation report says where",
                extra={"bc:validationReport": report.to_jsonld()},
                next_steps=self.answers.inquiry_steps(product),
            )
        premium = calculate(product.tariff, draft.tariff_input())
        return Answer(200, self.answers.tariff_result(product, draft, report, premium))

    # the draft at the server

    def _require_draft_at_server(self) -> None:
        if not self.insurer.draft_at_server:
            raise Problem(
                "operation-not-admissible",
                f"{self.insurer.display_name} keeps no draft at the server; "
                "calculate with readDefaultInstance and inquireTariff",
                next_steps=self.answers.entry_steps(),
            )

    def _case(self, broker: Broker, case_id: str) -> tuple[Product, Case]:
        case = self.store.get_case(self.insurer.name, case_id, broker.id)
        if case is None:
            raise Problem(
                "not-found",
                f"there is no business case {case_id!r} for you at {self.insurer.display_name}",
                next_steps=self.answers.entry_steps(),
            )
        return self.insurer.products[case.draft.product_id], case

    def _report(self, product: Product, case: Case) -> Report:
        return validate_draft(
            product, case.draft, draft_iri(self.insurer, case.case_id), self.answers.today()
        )

    def _case_answer(self, status: int, product: Product, case: Case) -> Answer:
        return Answer(status, self.answers.case(product, case, self._report(product, case)))

    def _not_admissible(self, product: Product, case: Case, detail: str) -> Problem:
        steps = self.answers.case_steps(product, case, self._report(product, case))
        return Problem("operation-not-admissible", detail, next_steps=steps)

    def _edit(
        self,
        broker: Broker,
        case_id: str,
        change: Callable[[Product, Case], Draft],
        status: int = 200,
    ) -> Answer:
        """Apply an edit to a case's draft; a stale read is retried, a failed check changes nothing."""
        self._require_draft_at_server()
        for _ in range(5):
            product, case = self._case(broker, case_id)
            if case.status == "offered":
                raise self._not_admissible(
                    product, case, "the business case has a binding offer; its draft is final"
                )
            draft = change(product, case)
            if draft == case.draft:
                return self._case_answer(status, product, case)
            edited = replace(case, draft=draft, status="draft", premium=None, updated=self._now())
            try:
                stored = self.store.update_case(edited, expected_version=case.version)
            except EditConflict:
                continue
            return self._case_answer(status, product, stored)
        raise Problem("edit-conflict", "the business case kept changing; read it and try again")

    def createCalculation(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        self._require_draft_at_server()
        product_iri = body["p:hasRootProduct"]
        product = self.insurer.product_by_iri(product_iri)
        if product is None:
            known = [p.iri for p in self.insurer.products.values()]
            raise Problem(
                "unknown-product",
                f"{product_iri!r} is no product of {self.insurer.display_name}; "
                f"products: {', '.join(known)}",
                errors=[FieldError("/p:hasRootProduct", "use a product IRI from listProducts")],
                extra={"known": known},
                next_steps=self.answers.entry_steps(),
            )
        now = self._now()
        case = Case(
            insurer=self.insurer.name,
            case_id=uuid.uuid4().hex[:20],
            broker=broker.id,
            status="draft",
            draft=self._from_today(
                product, self._starting_draft(broker, product, body.get("bc:basedOn"))
            ),
            premium=None,
            offer_id=None,
            version=1,
            created=now,
            updated=now,
        )
        self.store.insert_case(case)
        answer = self._case_answer(201, product, case)
        location = self.answers.step("readCalculation", "", {"caseId": case.case_id})["bc:href"]
        return replace(answer, headers={"Location": location})

    def _from_today(self, product: Product, draft: Draft) -> Draft:
        """A new draft's contract start, where nobody chose it, is never before the insurer's
        today: a default of the product (or an earlier case's) moves up to today."""
        today = self.answers.today().isoformat()
        attributes = {node: dict(values) for node, values in draft.attributes.items()}
        for node in product.nodes:
            for attribute in node.attributes:
                value = attributes.get(node.id, {}).get(attribute.local_name)
                chosen = draft.is_chosen(node.id, attribute.local_name)
                if attribute.contract_start and isinstance(value, str) and value < today:
                    attributes[node.id][attribute.local_name] = value if chosen else today
        return replace(draft, attributes=attributes)

    def _starting_draft(self, broker: Broker, product: Product, based_on: str | None) -> Draft:
        """The default instance, or the draft of an earlier case of the same broker and product
        (``bc:basedOn``: a new calculation from the same case data, as after an expired offer)."""
        if based_on is None:
            return Draft.default(product)
        case_id = based_on.rstrip("/").rsplit("/", 1)[-1]
        earlier = self.store.get_case(self.insurer.name, case_id, broker.id)
        if earlier is None or based_on != case_iri(self.insurer, case_id):
            raise Problem(
                "not-found",
                f"bc:basedOn names no business case of yours at {self.insurer.display_name}",
                errors=[FieldError("/bc:basedOn", "the IRI of one of your business cases")],
                next_steps=self.answers.entry_steps(),
            )
        if earlier.draft.product_id != product.id:
            raise Problem(
                "invalid-body",
                "bc:basedOn names a business case of another product",
                errors=[FieldError("/bc:basedOn", f"a business case of {product.iri}")],
                next_steps=self.answers.entry_steps(),
            )
        return earlier.draft

    def readCalculation(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        self.answers.require_cases()
        product, case = self._case(broker, params["caseId"])
        return self._case_answer(200, product, case)

    def validateCalculation(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return self.readCalculation(broker, params, body)

    def _checked_risk_object(
        self, product: Product, case: Case, body: Any, risk_object_id: str
    ) -> Any:
        risk_object = parse_risk_object(product, body, risk_object_id)
        iri = risk_object_iri(draft_iri(self.insurer, case.case_id), risk_object_id)
        report = validate_risk_object(product, risk_object, iri, self.answers.today())
        if not report.conforms:
            raise Problem(
                "shape-violation",
                f"the risk object violates {product.risk_object.shape.local_name}; nothing was changed",
                extra={"bc:validationReport": report.to_jsonld()},
                next_steps=self.answers.case_steps(product, case, self._report(product, case)),
            )
        return risk_object

    def createRiskObject(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        def change(product: Product, case: Case) -> Draft:
            spec = product.risk_object
            if spec.max_count is not None and len(case.draft.risk_objects) >= spec.max_count:
                raise self._not_admissible(
                    product,
                    case,
                    f"the draft already has {len(case.draft.risk_objects)} risk object(s), the most "
                    "it admits; change one with updateRiskObject or remove it with deleteRiskObject",
                )
            new_id = case.draft.next_risk_object_id()
            return case.draft.with_risk_object(
                self._checked_risk_object(product, case, body, new_id)
            )

        return self._edit(broker, params["caseId"], change, status=201)

    def _existing_risk_object(self, product: Product, case: Case, risk_object_id: str) -> None:
        if case.draft.risk_object(risk_object_id) is None:
            existing = [r.id for r in case.draft.risk_objects]
            raise Problem(
                "not-found",
                f"the draft has no risk object {risk_object_id!r}; risk objects: "
                f"{', '.join(existing) or 'none'}",
                next_steps=self.answers.case_steps(product, case, self._report(product, case)),
            )

    def updateRiskObject(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        risk_object_id = params["riskObjectId"]

        def change(product: Product, case: Case) -> Draft:
            self._existing_risk_object(product, case, risk_object_id)
            checked = self._checked_risk_object(product, case, body, risk_object_id)
            return case.draft.with_risk_object(checked)

        return self._edit(broker, params["caseId"], change)

    def deleteRiskObject(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        risk_object_id = params["riskObjectId"]

        def change(product: Product, case: Case) -> Draft:
            self._existing_risk_object(product, case, risk_object_id)
            return case.draft.without_risk_object(risk_object_id)

        return self._edit(broker, params["caseId"], change)

    def _component(self, product: Product, case: Case, component_id: str) -> Any:
        component = product.component(component_id) if component_id else None
        if component is None:
            known = ", ".join(c.id for c in product.components)
            raise Problem(
                "not-found",
                f"{product.id} has no component {component_id!r}; components: {known}",
                next_steps=self.answers.case_steps(product, case, self._report(product, case)),
            )
        return component

    def includeComponent(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        """Include a component; in an exclusive group it replaces the member that is included."""
        replaced: list[str] = []

        def change(product: Product, case: Case) -> Draft:
            replaced.clear()  # an edit retried after a conflict starts again
            component = self._component(product, case, params["componentId"])
            if case.draft.is_included(component.id):
                return case.draft
            draft = case.draft
            for rival in self.answers.replaces(product, case.draft, component):
                draft = draft.with_included(product, rival.id, False)
                replaced.append(rival.id)
            return draft.with_included(product, component.id, True)

        answer = self._edit(broker, params["caseId"], change)
        if not replaced:
            return answer
        product = self.insurer.product_by_iri(str(answer.body["p:hasRootProduct"]))
        assert product is not None
        iris = node_iris(product, str(answer.body["bc:draft"]["@id"]))
        return replace(answer, body={**answer.body, "bc:replaced": [iris[r] for r in replaced]})

    def excludeComponent(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        def change(product: Product, case: Case) -> Draft:
            component = self._component(product, case, params["componentId"])
            if component.mandatory:
                raise self._not_admissible(
                    product, case, f"{component.id} is mandatory and cannot be excluded"
                )
            return case.draft.with_included(product, component.id, False)

        return self._edit(broker, params["caseId"], change)

    def setAttributes(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        def change(product: Product, case: Case) -> Draft:
            base = draft_iri(self.insurer, case.case_id)
            iris = node_iris(product, base)
            known: dict[str, tuple[str, str, str]] = {}
            dates: set[str] = set()  # attributes whose value may be "today"
            for node in product.nodes:
                for attribute in node.attributes:
                    iri = attribute_iri(iris[node.id], attribute)
                    known[iri] = (node.id, attribute.local_name, attribute.path)
                    if (attribute.datatype or "").endswith("#date"):
                        dates.add(iri)
            changes: dict[tuple[str, str], Scalar] = {}
            changed: set[tuple[str, str | None]] = set()
            errors = []
            for index, item in enumerate(body["bc:values"]):
                target = known.get(item["bc:attribute"])
                if target is None:
                    errors.append(
                        FieldError(
                            f"/bc:values/{index}/bc:attribute",
                            "no attribute of this draft; admissible: " + ", ".join(known),
                        )
                    )
                    continue
                value = item["p:value"]
                if item["bc:attribute"] in dates and str(value).strip().lower() in TODAY:
                    value = self.answers.today().isoformat()  # the insurer's today, not the agent's
                changes[(target[0], target[1])] = value
                changed.add((iris[target[0]], target[2]))
            if errors:
                raise Problem(
                    "invalid-body",
                    "the body names attributes the draft does not have",
                    errors=errors,
                    next_steps=self.answers.case_steps(product, case, self._report(product, case)),
                )
            draft = case.draft.with_attributes(changes)
            report = validate_draft(product, draft, base, self.answers.today())
            offending = [r for r in report.results if (r.focus_node, r.path) in changed]
            if offending:
                raise Problem(
                    "shape-violation",
                    "a value is outside its admissible range; nothing was changed",
                    extra={"bc:validationReport": Report(False, tuple(offending)).to_jsonld()},
                    next_steps=self.answers.case_steps(product, case, self._report(product, case)),
                )
            return draft

        return self._edit(broker, params["caseId"], change)

    def _check_inclusions(self, product: Product, draft: Draft) -> None:
        for component in product.components:
            if component.mandatory and not draft.is_included(component.id):
                raise Problem(
                    "invalid-body",
                    f"{component.id} is mandatory and must stay included",
                    next_steps=self.answers.inquiry_steps(product),
                )
        groups: dict[str, list[str]] = {}
        for component in product.components:
            if component.group and draft.is_included(component.id):
                groups.setdefault(component.group, []).append(component.id)
        for members in groups.values():
            if len(members) > 1:
                raise Problem(
                    "invalid-body",
                    f"{' and '.join(members)} exclude each other; include at most one",
                    next_steps=self.answers.inquiry_steps(product),
                )

    def calculatePremium(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        self.answers.require_cases()
        for _ in range(5):
            product, case = self._case(broker, params["caseId"])
            report = self._report(product, case)
            if case.status == "offered":
                raise self._not_admissible(
                    product, case, "the business case has a binding offer; read it with readOffer"
                )
            if not report.conforms:
                raise Problem(
                    "draft-not-conforming",
                    "the draft is not complete; the validation report says what is missing and the "
                    "next steps how to complete it",
                    extra={"bc:validationReport": report.to_jsonld()},
                    next_steps=self.answers.case_steps(product, case, report),
                )
            self._check_start(product, case, report)
            premium = premium_jsonld(product, calculate(product.tariff, case.draft.tariff_input()))
            calculated = replace(case, status="calculated", premium=premium, updated=self._now())
            if case.status == "calculated" and case.premium == premium:
                return Answer(200, self.answers.case(product, case, report))
            try:
                stored = self.store.update_case(calculated, expected_version=case.version)
            except EditConflict:
                continue
            return Answer(200, self.answers.case(product, stored, report))
        raise Problem("edit-conflict", "the business case kept changing; read it and try again")

    def createOffer(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        self._require_draft_at_server()
        product, case = self._case(broker, params["caseId"])
        if case.status == "offered":
            raise self._not_admissible(
                product, case, "the business case already has a binding offer"
            )
        report = self._report(product, case)
        if not report.conforms:
            raise Problem(
                "draft-not-conforming",
                "the draft does not conform; an offer needs a complete, conforming draft with its "
                "premium calculated",
                extra={"bc:validationReport": report.to_jsonld()},
                next_steps=self.answers.case_steps(product, case, report),
            )
        if case.status != "calculated" or case.premium is None:
            raise self._not_admissible(
                product, case, "calculate the premium first (calculatePremium); an offer needs it"
            )
        self._check_start(product, case, report)
        now = self.clock()
        offer_id = uuid.uuid4().hex[:20]
        offer = Offer(
            insurer=self.insurer.name,
            offer_id=offer_id,
            case_id=case.case_id,
            broker=broker.id,
            record={
                "product": product.iri,
                "premium": case.premium,
                "draft": case.draft.to_dict(),
                "validUntil": (now + self.insurer.offer_validity).date().isoformat(),
            },
            created=now.isoformat(timespec="seconds"),
        )
        offered = replace(case, status="offered", offer_id=offer_id, updated=self._now())
        try:
            self.store.insert_offer(offer, offered, expected_version=case.version)
        except EditConflict:
            raise Problem(
                "edit-conflict", "the business case changed meanwhile; read it and try again"
            ) from None
        location = self.answers.step("readOffer", "", {"offerId": offer_id})["bc:href"]
        return Answer(201, self.desk.offer_answer(offer), {"Location": location})

    def _check_start(self, product: Product, case: Case, report: Report) -> None:
        """A contract start (bc:contractStart) before the insurer's today is refused before
        anything is priced or offered, with the range that is admissible today."""
        today = self.answers.today()
        iris = node_iris(product, draft_iri(self.insurer, case.case_id))
        for node in product.nodes:
            for attribute in node.attributes:
                value = case.draft.attributes.get(node.id, {}).get(attribute.local_name)
                if not (attribute.contract_start and isinstance(value, str)):
                    continue
                try:
                    start = dt.date.fromisoformat(value)
                except ValueError:
                    continue  # not a date: the shape's error, not this one's
                if start >= today:
                    continue
                name = attribute.name.get(self.insurer.language) or attribute.local_name
                latest = attribute.max_inclusive
                admissible = f"{today.isoformat()}" + (f" to {latest}" if latest else " or later")
                raise Problem(
                    "start-in-the-past",
                    f"{name} {value} is before today at {self.insurer.display_name} "
                    f"({today.isoformat()}, {self.insurer.time_zone}); admissible: {admissible}. "
                    "Nothing was priced or offered; set it with setAttributes (the value "
                    '"today" names the insurer\'s today)',
                    errors=[
                        FieldError("/bc:values", f"{attribute_iri(iris[node.id], attribute)}: "
                                   f"{admissible}")
                    ],
                    extra={"bc:insurerToday": today.isoformat(),
                           "bc:timeZone": self.insurer.time_zone},
                    next_steps=self.answers.case_steps(product, case, report),
                )  # fmt: skip

    def readOffer(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        self.answers.require_cases()
        offer = self.store.get_offer(self.insurer.name, params["offerId"], broker.id)
        if offer is None:
            raise Problem(
                "not-found",
                f"there is no offer {params['offerId']!r} for you at {self.insurer.display_name}",
                next_steps=self.answers.entry_steps(),
            )
        return Answer(200, self.desk.offer_answer(offer))

    # applications: binding the customer to an offer (omds_ld.insurer.desk)

    def createApplication(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return self.desk.create(broker, params["offerId"], body)

    def listApplications(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return self.desk.list(broker, params["offerId"])

    def readApplication(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return self.desk.read(broker, params["applicationId"])

    def withdrawApplication(self, broker: Broker, params: Mapping[str, Any], body: Any) -> Answer:
        return self.desk.withdraw(broker, params["applicationId"])
