"""The JSON-LD answers of the insurer's interface, each carrying the next steps a client may take."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from omds_ld.insurer.data import Component, Insurer, Product
from omds_ld.insurer.draft import Draft
from omds_ld.insurer.instance import instance_jsonld
from omds_ld.insurer.offers import offer_digest
from omds_ld.insurer.problems import Problem
from omds_ld.insurer.store import Application, Case, Offer
from omds_ld.insurer.tariff import Premium
from omds_ld.insurer.validation import Report, node_iris, risk_object_iri
from omds_ld.norm import Norm
from omds_ld.norm.jsonld import CONTEXT_URL, compact_iri
from omds_ld.norm.shapes import NodeShape

NORM_SHAPES = "https://w3id.org/omds-ld/shapes#"
INSURANCE_TAX_LABEL = {"de": "Versicherungssteuer", "en": "insurance tax"}


@dataclass(frozen=True)
class Answer:
    """An operation's successful answer: status, JSON-LD body and extra headers."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


def case_iri(insurer: Insurer, case_id: str) -> str:
    return f"{insurer.base}cases/{case_id}"


def draft_iri(insurer: Insurer, case_id: str) -> str:
    return f"{case_iri(insurer, case_id)}/draft"


def offer_iri(insurer: Insurer, offer_id: str) -> str:
    return f"{insurer.base}offers/{offer_id}"


def application_iri(insurer: Insurer, application_id: str) -> str:
    return f"{insurer.base}applications/{application_id}"


# what createApplication expects: the request and the shapes of its parts
APPLICATION_SHAPES = tuple(
    NORM_SHAPES + name
    for name in ("ApplicationRequestShape", "PersonShape", "PaymentShape", "ConsentShape")
)


def _number(value: Decimal) -> float | int:
    return int(value) if value == value.to_integral_value() else float(value)


def premium_jsonld(product: Product, premium: Premium) -> dict[str, Any]:
    """A premium with its parts: components (net, insurance tax) and each tax shown apart."""
    taxes: list[dict[str, Any]] = [
        {
            "bc:taxType": "insurance-tax",
            "rdfs:label": INSURANCE_TAX_LABEL,
            "bc:amount": _number(premium.insurance_tax),
        }
    ]
    taxes += [
        {"bc:taxType": t.id, "rdfs:label": dict(t.label), "bc:amount": _number(t.amount)}
        for t in premium.unit_taxes
    ]
    components = []
    for part in premium.components:
        component = product.component(part.component_id)
        assert component is not None
        components.append(
            {
                "bc:component": component.iri,
                "rdfs:label": dict(component.label),
                "bc:net": _number(part.net),
                "bc:insuranceTax": _number(part.insurance_tax),
            }
        )
    return {
        "@type": "bc:Premium",
        "bc:gross": _number(premium.gross),
        "bc:net": _number(premium.net),
        "bc:currency": premium.currency,
        "bc:period": premium.period,
        "bc:tax": taxes,
        "bc:component": components,
    }


class Answers:
    """Builds every answer of one insurer's interface; knows where each operation lives."""

    def __init__(
        self,
        norm: Norm,
        insurer: Insurer,
        api_base: str,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.norm = norm
        self.insurer = insurer
        self.api_base = api_base
        self.clock = clock
        self.zone = ZoneInfo(insurer.time_zone)
        self._shapes: dict[str, NodeShape] = {**norm.shapes, **insurer.shapes}

    def today(self) -> dt.date:
        """The insurer's today, in its time zone."""
        return self.clock().astimezone(self.zone).date()

    def _dated(self, body: dict[str, Any]) -> dict[str, Any]:
        """An answer that starts or continues a case says the insurer's today: an agent knows
        no date of its own."""
        body["bc:insurerToday"] = self.today().isoformat()
        body["bc:timeZone"] = self.insurer.time_zone
        return body

    # next steps

    def step(
        self,
        operation_id: str,
        target: str,
        parameters: Mapping[str, str] | None = None,
        expects: Sequence[str] = (),
        label: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One next step: the operation, the IRI it acts on, how to call it, what body it expects."""
        operation = self.norm.operation(operation_id)
        params = dict(parameters or {})
        out: dict[str, Any] = {
            "@type": "bc:NextStep",
            "bc:operation": operation_id,
            "bc:target": target,
        }
        if label:
            out["rdfs:label"] = label
        if params:
            out["bc:parameters"] = params
        if expects:
            out["bc:expects"] = list(expects)
        if body is not None:
            out["bc:body"] = dict(body)
        out["bc:method"] = operation.method
        path_params = {k: v for k, v in params.items() if "{" + k + "}" in operation.path}
        out["bc:href"] = operation.href(self.api_base, **path_params)
        return out

    def entry_steps(self) -> list[dict[str, Any]]:
        """Where a client can always start: the products and the process knowledge."""
        base = self.insurer.base
        return [
            self.step("listProducts", f"{base}products"),
            self.step("readProcessKnowledge", f"{base}process-knowledge"),
        ]

    def require_cases(self) -> None:
        """A read of a business case where the insurer keeps none is not found; where a task
        starts instead is the next step."""
        if not self.insurer.draft_at_server:
            raise Problem(
                "not-found",
                f"{self.insurer.display_name} keeps no business cases at the server",
                next_steps=self.entry_steps(),
            )

    def product_steps(self, product: Product) -> list[dict[str, Any]]:
        """How to start a calculation with a product, given where the insurer keeps the draft."""
        if self.insurer.draft_at_server:
            first = self.step(
                "createCalculation",
                product.iri,
                expects=[NORM_SHAPES + "CalculationRequestShape"],
                body={"p:hasRootProduct": product.iri},
            )
        else:
            first = self.step("readDefaultInstance", product.iri, {"productId": product.id})
        return [first, self.step("readProduct", product.iri, {"productId": product.id})]

    def inquiry_steps(self, product: Product) -> list[dict[str, Any]]:
        expects = [NORM_SHAPES + "TariffInquiryShape", product.risk_object.shape.iri]
        root_shape = product.root.shape
        if root_shape is not None:
            expects.insert(1, root_shape.iri)
        return [
            self.step("inquireTariff", product.iri, expects=expects),
            self.step("readProduct", product.iri, {"productId": product.id}),
        ]

    def case_steps(self, product: Product, case: Case, report: Report) -> list[dict[str, Any]]:
        """What the business case admits now; the first steps lead towards the premium."""
        case_id = case.case_id
        the_case = case_iri(self.insurer, case_id)
        params = {"caseId": case_id}
        if case.status == "offered" and case.offer_id:
            return [
                self.step(
                    "readOffer", offer_iri(self.insurer, case.offer_id), {"offerId": case.offer_id}
                ),
                self.step("readCalculation", the_case, params),
            ]
        draft = case.draft
        base = draft_iri(self.insurer, case_id)
        iris = node_iris(product, base)
        risk_shape = product.risk_object.shape.iri
        lead: list[dict[str, Any]] = []
        later: list[dict[str, Any]] = []
        spec = product.risk_object
        if spec.max_count is None or len(draft.risk_objects) < spec.max_count:
            step = self.step("createRiskObject", base, params, [risk_shape])
            (lead if len(draft.risk_objects) < spec.min_count else later).append(step)
        if report.conforms and case.status == "draft":
            lead.append(self.step("calculatePremium", the_case, params))
        if case.status == "calculated":
            lead.append(self.step("createOffer", the_case, params))
        edits = [self.step("setAttributes", base, params, [NORM_SHAPES + "AttributeValuesShape"])]
        for component in product.components:
            component_params = {**params, "componentId": component.id}
            label = self._label(component)
            if self.includable(product, draft, component):
                rivals = self.replaces(product, draft, component)
                if rivals:
                    label += " (replaces " + ", ".join(self._label(r) for r in rivals) + ")"
                edits.append(
                    self.step("includeComponent", iris[component.id], component_params, label=label)
                )
            elif draft.is_included(component.id) and not component.mandatory:
                edits.append(
                    self.step("excludeComponent", iris[component.id], component_params, label=label)
                )
        edits += later
        for risk_object in draft.risk_objects:
            ro_params = {**params, "riskObjectId": risk_object.id}
            iri = risk_object_iri(base, risk_object.id)
            edits.append(self.step("updateRiskObject", iri, ro_params, [risk_shape]))
            edits.append(self.step("deleteRiskObject", iri, ro_params))
        reads = [
            self.step("validateCalculation", base, params),
            self.step("readCalculation", the_case, params),
        ]
        return lead + edits + reads

    def _label(self, component: Component) -> str:
        return component.label.get(self.insurer.language) or next(iter(component.label.values()))

    @staticmethod
    def includable(product: Product, draft: Draft, component: Component) -> bool:
        """Not included yet: a member of an exclusive group replaces the one that is included."""
        return not draft.is_included(component.id)

    @staticmethod
    def replaces(product: Product, draft: Draft, component: Component) -> list[Component]:
        """The included components that including ``component`` would replace (its group's)."""
        if component.group is None or draft.is_included(component.id):
            return []
        return [
            c
            for c in product.components
            if c.id != component.id and c.group == component.group and draft.is_included(c.id)
        ]

    # envelopes

    def _shapes_of(self, steps: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        seen: list[str] = []
        for step in steps:
            for iri in step.get("bc:expects", ()):
                if iri not in seen and iri in self._shapes:
                    seen.append(iri)
        return [self._shapes[iri].to_jsonld() for iri in seen]

    def envelope(
        self, type_: str, body: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """An answer: context, type, body, next steps and the shapes those steps expect."""
        out: dict[str, Any] = {"@context": CONTEXT_URL, "@type": type_}
        out.update(body)
        out["bc:nextStep"] = list(steps)
        shapes = self._shapes_of(steps)
        if shapes:
            out["bc:shape"] = shapes
        return out

    # answers

    def process_knowledge(self) -> dict[str, Any]:
        insurer = self.insurer
        body = {
            "@id": f"{insurer.base}process-knowledge",
            "pk:insurer": insurer.display_name,
            "pk:draftAtServer": insurer.draft_at_server,
            "rdfs:comment": dict(insurer.process_description),
        }
        if insurer.application_process:
            body["pk:applications"] = dict(insurer.application_process)
        return self.envelope("pk:ProcessKnowledge", body, self.entry_steps()[:1])

    def product_summary(self, product: Product) -> dict[str, Any]:
        return {
            "@id": product.iri,
            "@type": "p:Product",
            "bc:productId": product.id,
            "rdfs:label": dict(product.label),
            "p:lineOfBusiness": dict(product.line_of_business),
            "p:riskObjectClass": compact_iri(product.risk_object.class_iri),
        }

    def product_list(self, offset: int, limit: int) -> dict[str, Any]:
        products = list(self.insurer.products.values())
        window = products[offset : offset + limit]
        more = max(0, len(products) - offset - len(window))
        steps: list[dict[str, Any]] = []
        for product in window:
            # what agents do anyway before they start is an offered step too
            steps += self.product_steps(product)
            shape = product.risk_object.shape
            steps.append(self.step("readShape", shape.iri, {"shapeId": shape.local_name}))
        if more:
            next_offset = offset + len(window)
            steps.append(
                self.step(
                    "listProducts",
                    f"{self.insurer.base}products",
                    {"offset": str(next_offset), "limit": str(limit)},
                )
            )
        if not window:
            # past the end: lead back to the first window, so an agent can always go on
            steps.append(self.step("listProducts", f"{self.insurer.base}products", {"offset": "0"}))
        body = {
            "@id": f"{self.insurer.base}products",
            "pk:insurer": self.insurer.display_name,
            "p:product": [self.product_summary(p) for p in window],
            "bc:window": {
                "bc:returned": len(window),
                "bc:total": len(products),
                "bc:offset": offset,
                "bc:moreToFind": more,
                "bc:nextOffset": offset + len(window) if more else None,
            },
        }
        return self.envelope("bc:ProductList", body, steps)

    def product(self, product: Product) -> dict[str, Any]:
        def component(node: Component) -> dict[str, Any]:
            out: dict[str, Any] = {
                "@id": node.iri,
                "bc:componentId": node.id,
                "rdfs:label": dict(node.label),
                "p:mandatory": node.mandatory,
                "p:includedByDefault": node.included_by_default,
            }
            if node.group:
                out["p:exclusiveGroup"] = node.group
            out["sh:property"] = [a.to_jsonld() for a in node.attributes]
            return out

        body = self.product_summary(product)
        body.pop("@type")
        body["sh:property"] = [a.to_jsonld() for a in product.root.attributes]
        body["p:component"] = [component(c) for c in product.components]
        body["p:riskObjectShape"] = product.risk_object.shape.iri
        steps = self.product_steps(product)[:1]
        return self.envelope("p:Product", body, steps)

    def default_instance(self, product: Product) -> dict[str, Any]:
        draft = Draft.default(product)
        ready = {
            "@context": CONTEXT_URL,
            "@type": "bc:TariffInquiry",
            "p:instance": instance_jsonld(product, draft, f"{product.iri}/default-instance"),
        }
        body = {"@id": f"{product.iri}/default-instance", "bc:body": ready}
        return self.envelope("bc:DefaultInstance", body, self.inquiry_steps(product))

    def shape(self, shape: NodeShape) -> dict[str, Any]:
        out = shape.to_jsonld()
        out["@context"] = CONTEXT_URL
        out["bc:nextStep"] = self.entry_steps()
        return out

    def tariff_result(
        self, product: Product, draft: Draft, report: Report, premium: Premium
    ) -> dict[str, Any]:
        base = f"{self.insurer.base}tariff-inquiries/result"
        body = {
            "@id": base,
            "p:hasRootProduct": product.iri,
            "p:instance": instance_jsonld(product, draft, f"{product.iri}/inquired-instance"),
            "bc:validationReport": report.to_jsonld(),
            "bc:premium": premium_jsonld(product, premium),
        }
        if self.insurer.applications is None and self.insurer.application_process:
            # where this premium leads: how (or whether) an application is made here
            body["pk:applications"] = dict(self.insurer.application_process)
        return self.envelope("bc:TariffResult", self._dated(body), self.inquiry_steps(product))

    def case(self, product: Product, case: Case, report: Report) -> dict[str, Any]:
        """The business case: draft tree, includable components, report, premium, next steps."""
        base = draft_iri(self.insurer, case.case_id)
        iris = node_iris(product, base)
        body: dict[str, Any] = {
            "@id": case_iri(self.insurer, case.case_id),
            "bc:caseId": case.case_id,
            "bc:status": case.status,
            "pk:insurer": self.insurer.display_name,
            "p:hasRootProduct": product.iri,
            "rdfs:label": dict(product.label),
            "bc:draft": instance_jsonld(product, case.draft, base),
            "p:includable": [
                iris[c.id] for c in product.components if self.includable(product, case.draft, c)
            ],
            "bc:validationReport": report.to_jsonld(),
        }
        if case.premium is not None:
            body["bc:premium"] = dict(case.premium)
        if case.offer_id:
            body["bc:offer"] = offer_iri(self.insurer, case.offer_id)
        return self.envelope(
            "bc:BusinessCase", self._dated(body), self.case_steps(product, case, report)
        )

    def offer(
        self, offer: Offer, applicable: bool = False, expired: bool = False
    ) -> dict[str, Any]:
        """A binding offer, with the digest a consent names; ``applicable``: an application can
        be made for it now (the insurer takes them, it is valid, none holds it); ``expired``:
        its validity has passed, and a new calculation from its case data is offered."""
        record = offer.record
        iri = offer_iri(self.insurer, offer.offer_id)
        body = {
            "@id": iri,
            "bc:offerId": offer.offer_id,
            "bc:offerFor": case_iri(self.insurer, offer.case_id),
            "pk:insurer": self.insurer.display_name,
            "p:hasRootProduct": record["product"],
            "bc:premium": record["premium"],
            "bc:validUntil": record["validUntil"],
            "bc:createdAt": offer.created,
            "bc:offerDigest": offer_digest(record, iri),
        }
        start = self.priced_start(record)
        if start:  # the start the premium was priced from: an application's may differ
            body["bc:contractStart"] = start
        params = {"offerId": offer.offer_id}
        steps = []
        if applicable:
            steps.append(self.step("createApplication", iri, params, APPLICATION_SHAPES))
        if expired:
            body["bc:expired"] = True
            steps += self.recalculate_steps(offer)[:1]
        steps.append(self.step("readOffer", iri, params))
        if self.insurer.applications is not None:
            steps.append(self.step("listApplications", iri, params))
        steps.append(
            self.step(
                "readCalculation", case_iri(self.insurer, offer.case_id), {"caseId": offer.case_id}
            )
        )
        return self.envelope("bc:Offer", self._dated(body), steps)

    def priced_start(self, record: Mapping[str, Any]) -> str | None:
        """The contract start (the attribute its shape marks bc:contractStart) an offer's premium
        was priced from, where its product has one."""
        product = self.insurer.product_by_iri(str(record.get("product", "")))
        if product is None:
            return None
        draft = Draft.from_dict(record["draft"])
        for node in product.nodes:
            for attribute in node.attributes:
                value = draft.attributes.get(node.id, {}).get(attribute.local_name)
                if attribute.contract_start and isinstance(value, str):
                    return value
        return None

    def recalculate_steps(self, offer: Offer) -> list[dict[str, Any]]:
        """A new calculation from an offer's case data (after it expired or was repriced)."""
        body = {
            "p:hasRootProduct": offer.record["product"],
            "bc:basedOn": case_iri(self.insurer, offer.case_id),
        }
        return [
            self.step(
                "createCalculation",
                offer.record["product"],
                expects=[NORM_SHAPES + "CalculationRequestShape"],
                label="a new calculation from the same case data",
                body=body,
            ),
            self.step(
                "readCalculation", case_iri(self.insurer, offer.case_id), {"caseId": offer.case_id}
            ),
        ]

    def application(self, application: Application, offer: Offer) -> dict[str, Any]:
        """An application as the broker sees it: the state, the decision, the policyholder by
        name only and the IBAN masked (personal data are answered only as far as needed)."""
        record = application.record
        iri = application_iri(self.insurer, application.application_id)
        body: dict[str, Any] = {
            "@id": iri,
            "bc:applicationId": application.application_id,
            "bc:applicationFor": offer_iri(self.insurer, application.offer_id),
            "pk:insurer": self.insurer.display_name,
            "bc:state": application.state,
            "bc:submittedAt": application.created,
            "p:hasRootProduct": offer.record["product"],
            "bc:premium": offer.record["premium"],
            "bc:startDate": record["startDate"],
            "bc:policyholder": {"rdfs:label": record["policyholderName"]},
            "bc:payment": record["paymentShown"],
            "bc:consent": recorded_consent(record.get("consent") or {}),
        }
        decision = record.get("decision", {})
        for key in ("policyNumber", "decisionBy", "decidedAt"):
            if decision.get(key):
                body[f"bc:{key}"] = decision[key]
        if decision.get("reason"):
            body["bc:reason"] = dict(decision["reason"])
        if decision.get("counterOffer"):
            body["bc:counterOffer"] = offer_iri(self.insurer, decision["counterOffer"])
            body["bc:declinedComponent"] = list(decision.get("declinedComponents", ()))
        if application.state == "accepted":
            body["bc:document"] = [
                {
                    "@id": f"{iri}/documents/{name}",
                    "rdfs:label": label,
                    "bc:mediaType": "application/pdf",
                }
                for name, label in (
                    ("policy", {"de": "Polizze", "en": "policy"}),
                    (
                        "conditions",
                        {"de": "Versicherungsbedingungen", "en": "terms and conditions"},
                    ),
                )
            ]
        return self.envelope("bc:Application", body, self.application_steps(application, offer))

    def application_steps(self, application: Application, offer: Offer) -> list[dict[str, Any]]:
        iri = application_iri(self.insurer, application.application_id)
        params = {"applicationId": application.application_id}
        steps = [self.step("readApplication", iri, params)]
        if application.state in {"submitted", "referred"}:
            steps.append(self.step("withdrawApplication", iri, params))
        counter = application.record.get("decision", {}).get("counterOffer")
        if counter:
            counter_iri = offer_iri(self.insurer, counter)
            steps.insert(0, self.step("readOffer", counter_iri, {"offerId": counter}))
            steps.insert(
                1,
                self.step(
                    "createApplication", counter_iri, {"offerId": counter}, APPLICATION_SHAPES
                ),
            )
        if application.state in {"declined", "withdrawn"}:
            steps += self.recalculate_steps(offer)
        steps.append(
            self.step(
                "readOffer", offer_iri(self.insurer, offer.offer_id), {"offerId": offer.offer_id}
            )
        )
        return steps

    def application_list(self, offer: Offer, applications: Sequence[Application]) -> dict[str, Any]:
        iri = offer_iri(self.insurer, offer.offer_id)
        body = {
            "@id": f"{iri}/applications",
            "bc:applicationFor": iri,
            "bc:application": [
                {
                    "@id": application_iri(self.insurer, a.application_id),
                    "bc:applicationId": a.application_id,
                    "bc:state": a.state,
                    "bc:submittedAt": a.created,
                }
                for a in applications
            ],
        }
        steps = [
            self.step(
                "readApplication",
                application_iri(self.insurer, a.application_id),
                {"applicationId": a.application_id},
            )
            for a in applications
        ]
        steps.append(self.step("readOffer", iri, {"offerId": offer.offer_id}))
        return self.envelope("bc:ApplicationList", body, steps)


def recorded_consent(consent: Mapping[str, Any]) -> dict[str, Any]:
    """The customer's consent as the insurer recorded it (who, how, when) and whose yes
    confirmed it, how: what the broker reports, not what a model sent (no receipt, no digest)."""
    recorded = {
        k: consent[k]
        for k in ("bc:consentedBy", "bc:consentMethod", "bc:consentedAt")
        if k in consent
    }
    confirmation = consent.get("bc:confirmation") or {}
    kept = ("bc:confirmedBy", "bc:confirmedByName", "bc:confirmedAt", "bc:confirmedVia")
    if confirmation:
        recorded["bc:confirmation"] = {k: confirmation[k] for k in kept if k in confirmation}
    return recorded
