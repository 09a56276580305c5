"""The reference agent: no model. It follows next steps only, and fills the fields of the shapes
they expect from the scenario's facts. The deterministic baseline of every scenario."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from omds_ld.mcp.condense import answer_of
from omds_ld.norm.jsonld import expand_curie
from omds_ld.scenarios.scenario import Scenario
from omds_ld.scenarios.session import AgentGaveUp, RunSession, result_text

ENTRY = "listProducts"
STARTS = ("createCalculation", "readDefaultInstance")
MAX_STEPS = 12


def _step(result: Any, tool: str, target: str | None = None) -> dict[str, Any] | None:
    for step in answer_of(result).get("nextSteps", []):
        if step["tool"] == tool and (target is None or step["target"] == target):
            return dict(step)
    return None


def _fields(shape_fields: list[Mapping[str, Any]], facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts that fill a shape's fields, matched by field name or label."""
    by_label = {str(k).lower(): v for k, v in facts.items()}
    body: dict[str, Any] = {}
    for field in shape_fields:
        name = str(field["name"])
        if name in facts:
            body[name] = facts[name]
        elif str(field.get("label", "")).lower() in by_label:
            body[name] = by_label[str(field.get("label", "")).lower()]
    return body


def _attributes_named(
    content: Mapping[str, Any] | None, settings: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], Any]]:
    """The draft's attributes (root and components) the task sets, found by their labels."""
    draft = (content or {}).get("draft", {})
    attributes = list(draft.get("attributes", []))
    for component in draft.get("components", []):
        attributes += [{**a, "component": component} for a in component.get("attributes", [])]
    by_label = {str(a["label"]).lower(): a for a in attributes}
    found = []
    for name, value in settings.items():
        attribute = by_label.get(str(name).lower())
        if attribute is None:
            raise AgentGaveUp(f"no attribute {name!r}; attributes: {sorted(by_label)}")
        found.append((attribute, value))
    return found


def _tailored(
    body: Mapping[str, Any], content: Mapping[str, Any], scenario: Scenario, server: str
) -> dict[str, Any]:
    """The ready inquiry body with the task's components included or excluded and values set
    (at this server, by the labels its answers show)."""
    instance = dict(body["p:instance"])
    parts: dict[str, dict[str, Any]] = {}
    components = content.get("draft", {}).get("components", [])
    wanted = [(label, True) for label in scenario.include_for(server)]
    wanted += [(label, False) for label in scenario.exclude_for(server)]
    for label, included in wanted:
        component = next(
            (c for c in components if str(c["label"]).lower().startswith(label.lower())), None
        )
        if component is None:
            raise AgentGaveUp(f"no component {label!r}")
        part = parts.setdefault(component["instanceOf"], {"p:instanceOf": component["instanceOf"]})
        part["p:included"] = included
    for attribute, value in _attributes_named(content, scenario.settings_for(server)):
        item = {"p:property": attribute["property"], "p:value": value}
        component = attribute.get("component")
        if component is None:
            instance["p:attribute"] = [*instance.get("p:attribute", []), item]
        else:
            part = parts.setdefault(
                component["instanceOf"], {"p:instanceOf": component["instanceOf"]}
            )
            part["p:attribute"] = [*part.get("p:attribute", []), item]
    if parts:
        instance["p:hasPart"] = [*instance.get("p:hasPart", []), *parts.values()]
    return {**body, "p:instance": instance}


class Stopped(Exception):
    """No premium at this server, for a reason the final answer says: the insurer refuses the
    task's own data, or offers no product for it. The agent does not work around it."""

    def __init__(self, server: str, why: str) -> None:
        super().__init__(f"{server}: {why}")
        self.server = server
        self.why = why


def _violations(result: Any) -> list[str]:
    """What a refusal says is wrong, and what is admissible, in both languages where it has them."""
    content = answer_of(result)
    said = []
    for violation in (content.get("validation") or {}).get("violations", []):
        messages = violation.get("messages") or {}
        words = " / ".join(dict.fromkeys([*messages.values(), violation.get("message", "")]))
        said.append(f"{violation.get('path', '')}: {words}".strip(": "))
    problem = content.get("problem") or {}
    said += [f"{e.get('pointer', '')}: {e.get('detail', '')}" for e in problem.get("errors") or []]
    return said or [str(problem.get("detail") or result_text(result))]


def _assumed(content: Mapping[str, Any]) -> list[str]:
    """What a final answer names as assumed: the values nobody set, the components the insurer
    includes by default."""
    assumed = [f"{d['label']} = {d['value']}" for d in content.get("defaults", [])]
    return assumed + [
        f"{c['label']} (included by default / standardmäßig eingeschlossen)"
        for c in content.get("defaultComponents", [])
        if c.get("included")
    ]


def _german(amount: Decimal) -> str:
    return f"{amount:,.2f}".replace(",", "X").replace(".", ",").replace("X", ".")


CONSENT_TOLD = (("by", "consentedBy"), ("method", "consentMethod"), ("at", "consentedAt"))


class ReferenceAgent:
    """Follows next steps; knows no process, product or vocabulary beyond the scenario's facts."""

    name = "reference"
    model: str | None = None

    def __init__(self) -> None:
        self._shapes: dict[str, list[Mapping[str, Any]]] = {}

    async def run(self, scenario: Scenario, session: RunSession) -> str:
        self._shapes = {}  # the fields of every shape this run was shown
        lines = []
        for server in scenario.insurers:  # each by its server, or at the broker endpoint
            total, currency = Decimal(0), ""
            for name, facts in scenario.risk_objects():
                try:
                    premium, currency, assumed, offer = await self._calculate(
                        server, scenario, session, facts
                    )
                except Stopped as stopped:  # said as it is, no premium: the broker decides
                    lines.append(f"{server}: no premium / keine Prämie. {stopped.why}")
                    break
                total += premium
                what = f"{server} · {name}" if name else server
                lines.append(
                    f"{what}: premium {premium:.2f} {currency} per year "
                    f"(Prämie {_german(premium)} {currency} pro Jahr)."
                )
                if offer:
                    lines.append(f"Binding offer / verbindliches Angebot: {offer}")
                if assumed:
                    lines.append(
                        "Assumed, as the task does not say (the insurer's defaults) / Annahmen: "
                        + "; ".join(assumed)
                    )
            else:
                if len(scenario.risk_objects()) > 1:
                    lines.append(
                        f"{server}: together / zusammen {total:.2f} {currency} per year "
                        f"({_german(total)} {currency} pro Jahr)."
                    )
        return "\n".join(lines)

    async def _calculate(
        self, server: str, scenario: Scenario, session: RunSession, facts: Mapping[str, Any]
    ) -> tuple[Decimal, str, list[str], str | None]:
        products, offered = await self._products_for(server, session, facts)
        start = next(
            (s for tool in STARTS if (s := _step(products, tool, offered[0]["iri"]))), None
        )
        if start is None:
            raise AgentGaveUp(f"{server}: no next step starts a calculation")
        result = await session.call(
            server, start["tool"], self._arguments(start, start.get("body"))
        )
        inquiry_body = answer_of(result).get("body")
        if inquiry_body is not None:
            inquiry_body = _tailored(inquiry_body, answer_of(result), scenario, server)
        else:
            result = await self._adjust_draft(server, result, scenario, session)
        attempt, with_facts = 0, False  # whether the last risk object sent was the task's own
        for _ in range(MAX_STEPS):
            content = answer_of(result)
            self._remember(content)
            premium = content.get("premium")
            if premium and content.get("validation", {}).get("conforms") and not result.is_error:
                offer = await self._offer(server, result, scenario, session)
                gross = Decimal(str(premium["gross"]))
                return gross, premium.get("currency", ""), _assumed(content), offer
            if result.is_error and with_facts:
                # the task's own data is refused: say why and what is admissible, change nothing
                raise Stopped(
                    server,
                    "The insurer refuses the task's data / Der Versicherer lehnt die Angaben ab: "
                    + "; ".join(_violations(result)),
                )
            own = attempt > 0 or not scenario.first_attempt  # this attempt sends the task's data
            with_facts = False
            risk = {**facts, **(scenario.first_attempt if attempt == 0 else {})}
            if (step := _step(result, "createRiskObject")) and not content.get("riskObjects"):
                attempt, with_facts = attempt + 1, own
                shape = self._shape(step)
                body = {"@type": facts["@type"], **_fields(shape, risk)}
                result = await session.call(server, step["tool"], self._arguments(step, body))
            elif (step := _step(result, "inquireTariff")) and inquiry_body is not None:
                attempt, with_facts = attempt + 1, own
                shape = self._shape(step)
                vehicle = {"@type": facts["@type"], **_fields(shape, risk)}
                body = {
                    **inquiry_body,
                    "p:instance": {**inquiry_body["p:instance"], "p:hasRiskObject": [vehicle]},
                }
                result = await session.call(server, step["tool"], self._arguments(step, body))
            elif step := _step(result, "calculatePremium"):
                result = await session.call(server, step["tool"], self._arguments(step, None))
            else:
                offered_tools = [s["tool"] for s in content.get("nextSteps", [])]
                raise AgentGaveUp(f"{server}: no step leads on; offered: {offered_tools}")
        raise AgentGaveUp(f"{server}: no premium after {MAX_STEPS} steps")

    async def _products_for(
        self, server: str, session: RunSession, facts: Mapping[str, Any]
    ) -> tuple[Any, list[Mapping[str, Any]]]:
        """The product list, and its products for the task's risk object; none is a "no"."""
        risk_class = expand_curie(str(facts.get("@type", "")))
        products = await session.call(server, ENTRY, {})
        listed = answer_of(products)["products"]
        offered = [p for p in listed if expand_curie(str(p.get("riskObjectClass"))) == risk_class]
        if not offered:
            others = [f"{p.get('label')} ({p.get('lineOfBusiness')})" for p in listed]
            raise Stopped(
                server,
                f"{server} offers no product for this / bietet dafür kein Produkt an; it offers / "
                f"angeboten: {', '.join(others) or 'nothing'}",
            )
        return products, offered

    async def _adjust_draft(
        self, server: str, result: Any, scenario: Scenario, session: RunSession
    ) -> Any:
        """Include and exclude the components and set the values the task names (at this
        server, by the labels its answers show), by offered steps only."""
        self._remember(answer_of(result))
        wanted = [("includeComponent", label) for label in scenario.include_for(server)]
        wanted += [("excludeComponent", label) for label in scenario.exclude_for(server)]
        for tool, label in wanted:
            step = next(
                (
                    s
                    for s in answer_of(result).get("nextSteps", [])
                    if s["tool"] == tool
                    and str(s.get("label", "")).lower().startswith(label.lower())
                ),
                None,
            )
            if step is None:
                raise AgentGaveUp(f"{server}: no step {tool} for {label}")
            result = await session.call(server, step["tool"], self._arguments(step, None))
            self._remember(answer_of(result))
        settings = scenario.settings_for(server)
        if settings:
            values = [
                {"bc:attribute": attribute["iri"], "p:value": value}
                for attribute, value in _attributes_named(answer_of(result), settings)
            ]
            step = _step(result, "setAttributes")
            if step is None:
                raise AgentGaveUp(f"{server}: no step sets attributes")
            result = await session.call(
                server, step["tool"], self._arguments(step, {"bc:values": values})
            )
        return result

    async def _offer(
        self, server: str, result: Any, scenario: Scenario, session: RunSession
    ) -> str | None:
        """A binding offer, where the task asks for one: its id and validity."""
        if not scenario.offer:
            return None
        step = _step(result, "createOffer")
        if step is None:
            raise AgentGaveUp(f"{server}: no step makes an offer")
        made = await session.call(server, step["tool"], self._arguments(step, None))
        offer = answer_of(made).get("offer") or {}
        if made.is_error or not offer:
            raise AgentGaveUp(f"{server}: the offer was refused")
        said = f"{offer['offerId']} (valid until {offer.get('validUntil')})"
        if scenario.application:
            said += "\n" + await self._apply(server, made, scenario, session)
        return said

    async def _apply(self, server: str, made: Any, scenario: Scenario, session: RunSession) -> str:
        """The application the task asks for, with what the task told of the customer's consent
        (the person states it); a call the person must confirm first is made again once (they
        answered)."""
        step = _step(made, "createApplication")
        if step is None:
            raise AgentGaveUp(f"{server}: no step applies for the offer")
        facts = scenario.application
        consent = facts.get("consent") or {}
        start = str(facts.get("startDate", "today"))
        if start == "today":  # the insurer's today, as its answer says: never this machine's
            start = str(answer_of(made).get("insurerToday") or dt.date.today().isoformat())
        body = {
            "bc:policyholder": dict(facts["policyholder"]),
            "bc:payment": dict(facts["payment"]),
            "bc:startDate": start,
        }
        # the consent only as the task told it: the person confirming states it (never a time
        # or a way nobody said)
        told = {f"bc:{key}": str(consent[name]) for name, key in CONSENT_TOLD if consent.get(name)}
        if told:
            body["bc:consent"] = told
        arguments = {**self._arguments(step, body), "idempotencyKey": uuid.uuid4().hex}
        for _ in range(2):
            applied = await session.call(server, step["tool"], arguments)
            problem = (answer_of(applied).get("problem") or {}).get("type", "")
            if not applied.is_error:
                break
            if str(problem).endswith("/confirmation-declined"):
                return (
                    "No application was made: the person declined / Kein Antrag gestellt: "
                    "die Person hat nicht bestätigt."
                )
            if not str(problem).endswith("/confirmation-required"):
                raise AgentGaveUp(f"{server}: the application was refused: {result_text(applied)}")
        else:
            return "No application was made: nobody confirmed / Kein Antrag: niemand bestätigte."
        application = answer_of(applied)["application"]
        number = application.get("policyNumber")
        return f"Application / Antrag {application['applicationId']}: {application['state']}" + (
            f", policy number / Polizzennummer {number}" if number else ""
        )

    @staticmethod
    def _arguments(step: Mapping[str, Any], body: Any) -> dict[str, Any]:
        arguments = dict(step.get("arguments", {}))
        if body is not None:
            arguments["body"] = body
        return arguments

    def _remember(self, content: Mapping[str, Any]) -> None:
        for shape in content.get("shapes", []):
            if shape.get("fields"):
                self._shapes[shape["iri"]] = shape["fields"]

    def _shape(self, step: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The fields of the shapes a step expects, as this run was shown them."""
        return [f for iri in step.get("expects", []) for f in self._shapes.get(iri, [])]
