"""Readers: one small pure function per answer type of the norm, over the answer in its canonical
form (``omds_ld.norm.jsonld.canonical``). Each writes its part through the writer and returns the
shapes a ready body of it fills (their fields need not be listed). What the norm's answer profile
leaves optional may be missing: a reader says so (``w.missing``) and goes on."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from omds_ld.mcp.condense.draft import write_defaults, write_draft, write_risk_objects
from omds_ld.mcp.condense.fields import write_fields
from omds_ld.mcp.condense.memory import DEFAULTS_AS_BEFORE, same_as_last
from omds_ld.mcp.condense.premium import write_premium
from omds_ld.mcp.condense.report import write_validation
from omds_ld.mcp.condense.shapes import write_shapes
from omds_ld.mcp.condense.writer import Writer, as_compact_json, label, local, many
from omds_ld.mcp.scope import Precision, window

MAX_PRODUCTS = 50


Reader = Callable[[Writer, Mapping[str, Any]], set[str]]


def _process_knowledge(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    draft = bool(answer.get("pk:draftAtServer"))
    comment = answer.get("rdfs:comment")
    description = label(comment, w.language)
    w.line(f"Draft at the server: {'yes' if draft else 'no'}")
    w.line(description)
    other = label(comment, "en" if w.language != "en" else "de")
    if other and other != description:  # the other language too, where the norm has both
        w.line(other)
    w.data["processKnowledge"] = {
        "draftAtServer": draft, "description": description,
        **({"descriptions": dict(comment)} if isinstance(comment, Mapping) else {}),
    }  # fmt: skip
    applying = label(answer.get("pk:applications"), w.language)
    if applying:
        w.line(f"Applications: {applying}")
        w.data["processKnowledge"]["applications"] = applying
    return set()


def _product_list(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    window_ = answer.get("bc:window") or {}
    products = many(answer.get("p:product"))[:MAX_PRODUCTS]
    next_offset = window_.get("bc:nextOffset")
    precision: Precision = window(
        int(window_.get("bc:returned", len(products))),
        int(window_.get("bc:total", len(products))),
        int(window_.get("bc:moreToFind", 0)),
        f"call listProducts with offset={next_offset}" if next_offset is not None else None,
    )
    if answer.get("@id"):
        w.abbreviate_below(str(answer["@id"]))
    # a window that holds every product says nothing of its size
    w.line(f"Products ({precision.line()}):" if precision.more_to_find else "Products:")
    # a product a next step's ready body names (createCalculation's) is written there only
    in_bodies = {
        str(value)
        for step in many(answer.get("bc:nextStep"))
        if isinstance(step, Mapping) and isinstance(step.get("bc:body"), Mapping)
        for value in step["bc:body"].values()
    }
    out = []
    for product in products:
        name = label(product.get("rdfs:label"), w.language)
        line_of_business = label(product.get("p:lineOfBusiness"), w.language)
        product_id = product.get("bc:productId") or _id_of(product.get("@id"))
        if not product.get("bc:productId"):
            w.missing(f"bc:productId of product {name or product.get('@id')}")
        iri = str(product.get("@id", "—"))
        # the id is written only where the IRI does not end with it (the next steps give it)
        named = "" if local(iri) == product_id else f" productId={product_id}"
        # its line of business, unless the name already begins with it
        kind = "" if name.startswith(line_of_business) else f" ({line_of_business})"
        where = "" if iri in in_bodies else f" {w.iri(iri)}"
        w.line(f"{name}{kind}{where}{named}", 1)
        out.append(
            {
                "iri": product.get("@id"),
                "productId": product_id,
                "label": name,
                "lineOfBusiness": line_of_business,
                "riskObjectClass": product.get("p:riskObjectClass"),
            }
        )
    w.data["products"] = out
    w.data["window"] = precision.to_dict()
    _how_it_works(w, answer)
    return set()


def _how_it_works(w: Writer, answer: Mapping[str, Any]) -> None:
    """The insurer's process in one line, from the steps that start a calculation: so that
    an agent needs no readProcessKnowledge before its first step."""
    starts = {
        str(step.get("bc:operation"))
        for step in many(answer.get("bc:nextStep"))
        if isinstance(step, Mapping)
    }
    if "createCalculation" in starts:
        process = "draft at the server"
        line = (
            "How it works: a draft at the server; createCalculation starts it, each answer "
            "offers the edits, calculatePremium prices it."
        )
    elif "readDefaultInstance" in starts:
        process = "inquiry"
        line = (
            "How it works: no draft; readDefaultInstance gives a ready body, add the risk "
            "object, inquireTariff prices it."
        )
    else:
        return
    w.data["process"] = process
    if w.shared is not None:  # a broker session: said once for each way insurers work
        where = w.shared.drafts.setdefault(f"process {process}", w.insurer)
        if where != w.insurer:
            line = f"How it works: as at {where} ({process})"
    w.line(line)


def _product(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    name = label(answer.get("rdfs:label"), w.language)
    iri = answer.get("@id")
    w.line(f"Product {name} <{iri}>, risk object {answer.get('p:riskObjectClass')}")
    root = write_fields(w, answer, 1)
    components = []
    for component in many(answer.get("p:component")):
        component_label = label(component.get("rdfs:label"), w.language)
        flags = [
            text
            for key, text in (
                ("p:mandatory", "mandatory"),
                ("p:includedByDefault", "included by default"),
            )
            if component.get(key)
        ]
        if component.get("p:exclusiveGroup"):
            flags.append(f"one of group {component['p:exclusiveGroup']}")
        suffix = f" ({'; '.join(flags)})" if flags else ""
        w.line(f"{component_label}{suffix} <{component.get('@id')}>", 1)
        components.append(
            {
                "iri": component.get("@id"),
                "componentId": component.get("bc:componentId"),
                "label": component_label,
                "mandatory": component.get("p:mandatory", False),
                "group": component.get("p:exclusiveGroup"),
                "attributes": write_fields(w, component, 2),
            }
        )
    w.data["product"] = {"iri": iri, "label": name, "attributes": root, "components": components}
    return set()


def _default_instance(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    body = answer.get("bc:body") or {}
    instance = body.get("p:instance") or {}
    w.by_property = True
    # only the steps' targets are abbreviated: the IRIs a body needs are written out
    if instance.get("p:instanceOf"):
        w.inquired = str(instance["p:instanceOf"])
        w.abbreviate_below(w.inquired)
    else:
        w.missing("p:instanceOf of the default instance")
    write_draft(w, instance, None)
    # the smallest body that keeps every value above: the interface fills in the defaults
    ready: dict[str, Any] = {
        "p:instance": {"p:instanceOf": instance.get("p:instanceOf"), "p:hasRiskObject": []}
    }
    # what the body leaves out keeps the values above (inquireTariff's description says so)
    w.line("Ready body for inquireTariff; add the risk object to p:instance/p:hasRiskObject:")
    w.line(as_compact_json(ready), 1)
    w.data["body"] = ready
    # the ready body fills the inquiry's own shape: its fields need not be repeated
    return {
        s.get("@id", "")
        for s in many(answer.get("bc:shape"))
        if s.get("sh:targetClass") == body.get("@type")
    }


def _shape(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    write_shapes(w, [answer])
    w.data["shape"] = w.data.pop("shapes")[0]
    return set()


def _tariff_result(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    w.by_property = True
    instance = answer.get("p:instance")
    product = (instance or {}).get("p:instanceOf")
    if product:  # the product's default instance was shown with the same ~ and steps
        w.inquired = str(product)
        w.abbreviate_below(w.inquired)
    write_validation(w, answer.get("bc:validationReport"))
    write_premium(w, answer.get("bc:premium"))
    _insurer_today(w, answer)
    applying = label(answer.get("pk:applications"), w.language)
    if applying:  # where this premium leads: how (or whether) an application is made
        w.line(f"Applying: {applying}")
        w.data["applying"] = applying
    if instance:
        start = len(w.lines)
        write_defaults(w, instance)
        if product:
            same_as_last(w, f"{product} defaults", start, DEFAULTS_AS_BEFORE)
        write_risk_objects(w, many(instance.get("p:hasRiskObject")))
    return set()


def _insurer_today(w: Writer, answer: Mapping[str, Any]) -> None:
    """The insurer's today, where the answer says it: an agent knows no date of its own."""
    today = answer.get("bc:insurerToday")
    if isinstance(today, str) and today:
        zone = answer.get("bc:timeZone")
        w.line(f"Today at the insurer: {today}" + (f" ({zone})" if zone else ""))
        w.data["insurerToday"] = today


def _business_case(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    name = label(answer.get("rdfs:label"), w.language)
    w.line(f"Business case {answer.get('bc:caseId')} · status {answer.get('bc:status')} · {name}")
    _insurer_today(w, answer)
    if answer.get("@id"):
        w.abbreviate_below(str(answer["@id"]))
    w.data["case"] = {
        "iri": answer.get("@id"),
        "caseId": answer.get("bc:caseId"),
        "status": answer.get("bc:status"),
        "product": answer.get("p:hasRootProduct"),
        "offer": answer.get("bc:offer"),
    }
    draft = answer.get("bc:draft") or {}
    replaced = many(answer.get("bc:replaced"))
    if replaced:
        names = {
            part.get("@id"): label(part.get("rdfs:label"), w.language)
            for part in many(draft.get("p:hasPart"))
        }
        w.line("Replaced in its group: " + ", ".join(names.get(r, local(r)) for r in replaced))
        w.data["case"]["replaced"] = replaced
    write_draft(w, draft, many(answer.get("p:includable")))
    write_validation(w, answer.get("bc:validationReport"))
    write_premium(w, answer.get("bc:premium"))
    if not answer.get("bc:premium"):
        w.line("Premium: not calculated yet")
    return set()


def _days_between(start: str, end: str) -> int | None:
    try:
        return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days
    except ValueError:
        return None


def _offer(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    issued = str(answer.get("bc:createdAt") or "")[:10]
    until = str(answer.get("bc:validUntil") or "")
    days = _days_between(issued, until)
    validity = f"issued {issued}, " if issued else ""
    validity += f"valid until {until}" + (f" ({days} days from issue)" if days is not None else "")
    w.line(
        f"Offer {answer.get('bc:offerId')} <{answer.get('@id')}> for "
        f"<{answer.get('bc:offerFor')}>, {validity}"
    )
    _insurer_today(w, answer)
    digest = answer.get("bc:offerDigest")
    if answer.get("bc:expired"):
        w.line("Expired: the offer binds the insurer no longer; calculate again (next steps)")
    elif digest:
        # the consent is the person's to state when they confirm the application: the digest
        # is what binds it to this offer, not something a model fills in
        w.line(
            f"Offer digest: {digest} (the person confirming an application states the consent to it)"
        )
    start = answer.get("bc:contractStart")
    if start:
        w.line(f"Priced from the contract start {start}")
    w.data["offer"] = {
        **({"contractStart": start} if start else {}),
        "iri": answer.get("@id"),
        "offerId": answer.get("bc:offerId"),
        "case": answer.get("bc:offerFor"),
        "issued": issued or None,
        "validUntil": answer.get("bc:validUntil"),
        "validDays": days,
        **({"digest": digest} if digest else {}),
        **({"expired": True} if answer.get("bc:expired") else {}),
    }
    write_premium(w, answer.get("bc:premium"))
    return set()


STATES = {
    "submitted": "submitted, the insurer has not decided yet",
    "accepted": "accepted: the policy is issued",
    "referred": "referred to underwriting: the insurer decides later",
    "declined": "declined",
    "counter-offer": "not accepted as applied for: the insurer makes a counter-offer",
    "withdrawn": "withdrawn",
}


def _application(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    """An application: its state and the decision; the policyholder by name only, the IBAN by
    its last four characters (personal data only as far as the task needs)."""
    state = str(answer.get("bc:state", ""))
    if answer.get("@id"):  # its documents and the steps' targets lie below it
        w.abbreviate_below(str(answer["@id"]))
    w.line(
        f"Application {answer.get('bc:applicationId')} {w.iri(answer.get('@id'))} for offer "
        f"{answer.get('bc:applicationFor')}: {STATES.get(state, state)}"
    )
    data: dict[str, Any] = {
        "iri": answer.get("@id"), "applicationId": answer.get("bc:applicationId"),
        "offer": answer.get("bc:applicationFor"), "state": state,
    }  # fmt: skip
    for key, text in (("bc:policyNumber", "Policy number"), ("bc:decisionBy", "Decision by"),
                      ("bc:startDate", "Start"), ("bc:counterOffer", "Counter-offer")):  # fmt: skip
        if answer.get(key):
            w.line(f"{text}: {answer[key]}")
            data[key.removeprefix("bc:")] = answer[key]
    reason = label(answer.get("bc:reason"), w.language)
    if reason:
        w.line(f"Reason: {reason}")
        data["reason"] = reason
    holder = label((answer.get("bc:policyholder") or {}).get("rdfs:label"), w.language)
    payment = answer.get("bc:payment") or {}
    iban = str(payment.get("bc:iban") or "")
    masked = f" from …{iban[-4:]}" if iban else ""
    if holder:
        w.line(f"Policyholder: {holder}")
    if payment:
        w.line(
            f"Payment: {payment.get('bc:paymentFrequency')}, {payment.get('bc:paymentMethod')}"
            + masked
        )
        data["payment"] = {
            "frequency": payment.get("bc:paymentFrequency"),
            "method": payment.get("bc:paymentMethod"),
            **({"iban": f"…{iban[-4:]}"} if iban else {}),
        }
    _recorded_consent(w, answer.get("bc:consent"), data)
    documents = [d for d in many(answer.get("bc:document")) if isinstance(d, Mapping)]
    for document in documents:
        w.line(
            f"Document: {label(document.get('rdfs:label'), w.language)} {w.iri(document.get('@id'))}"
        )
    if documents:
        data["documents"] = [
            {"iri": d.get("@id"), "label": label(d.get("rdfs:label"), w.language)}
            for d in documents
        ]
    w.data["application"] = data
    write_premium(w, answer.get("bc:premium"))
    return set()


def _recorded_consent(w: Writer, consent: Any, data: dict[str, Any]) -> None:
    """The consent as the insurer recorded it, and whose yes confirmed it: what the broker
    reports (not what the call sent)."""
    if not isinstance(consent, Mapping) or not consent:
        return
    said = ", ".join(
        str(consent[k])
        for k in ("bc:consentedBy", "bc:consentMethod", "bc:consentedAt")
        if consent.get(k)
    )
    confirmation = consent.get("bc:confirmation") or {}
    who = confirmation.get("bc:confirmedByName") or confirmation.get("bc:confirmedBy")
    confirmed = (
        f"; confirmed by {who} ({confirmation.get('bc:confirmedVia')}) at "
        f"{confirmation.get('bc:confirmedAt')}"
        if who
        else ""
    )
    w.line(f"Consent as the insurer recorded it: {said}{confirmed}")
    data["consent"] = {
        "consentedBy": consent.get("bc:consentedBy"),
        "method": consent.get("bc:consentMethod"),
        "consentedAt": consent.get("bc:consentedAt"),
        **({"confirmedBy": who, "confirmedVia": confirmation.get("bc:confirmedVia"),
            "confirmedAt": confirmation.get("bc:confirmedAt")} if who else {}),
    }  # fmt: skip


def _application_list(w: Writer, answer: Mapping[str, Any]) -> set[str]:
    found = [a for a in many(answer.get("bc:application")) if isinstance(a, Mapping)]
    w.line(f"Applications for <{answer.get('bc:applicationFor')}>: {len(found) or 'none'}")
    for item in found:
        w.line(
            f"{item.get('bc:applicationId')}: {item.get('bc:state')}, submitted "
            f"{item.get('bc:submittedAt')}",
            1,
        )
    w.data["applications"] = [
        {"applicationId": a.get("bc:applicationId"), "state": a.get("bc:state"),
         "submittedAt": a.get("bc:submittedAt"), "iri": a.get("@id")}
        for a in found
    ]  # fmt: skip
    return set()


def _id_of(iri: Any) -> str | None:
    """The last segment of an IRI: what the interface takes as its id where the answer has none."""
    return local(str(iri)) if iri else None


READERS: dict[str, Reader] = {
    "pk:ProcessKnowledge": _process_knowledge,
    "bc:ProductList": _product_list,
    "p:Product": _product,
    "bc:DefaultInstance": _default_instance,
    "sh:NodeShape": _shape,
    "bc:TariffResult": _tariff_result,
    "bc:BusinessCase": _business_case,
    "bc:Offer": _offer,
    "bc:Application": _application,
    "bc:ApplicationList": _application_list,
}
# the answer types of the norm: what every answer's @type is one of
ANSWER_TYPES = frozenset(READERS)
