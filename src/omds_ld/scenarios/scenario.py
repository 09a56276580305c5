"""Scenarios as data: a task, the MCP servers it uses, the expected outcome, assumptions, a budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from omds_ld import yamlfile
from omds_ld.norm.consent import METHODS
from omds_ld.scenarios.protocol import BROKER_ENDPOINT


@dataclass(frozen=True)
class Assumption:
    """A value the task leaves open; a correct final answer names it, in one of these wordings."""

    name: str
    wordings: Mapping[str, tuple[str, ...]]

    @property
    def all_wordings(self) -> tuple[str, ...]:
        return tuple(w for words in self.wordings.values() for w in words)


@dataclass(frozen=True)
class Budget:
    """What one run may spend: tool calls, tokens, cost (USD) and wall time (seconds)."""

    tool_calls: int = 20
    tokens: int = 100_000
    cost: float = 1.0
    seconds: float = 300.0


@dataclass(frozen=True)
class Scenario:
    """One task for an agent, and what a passing run looks like."""

    id: str
    title: str
    task: str
    servers: tuple[str, ...]
    facts: Mapping[str, Any]
    premiums: Mapping[str, Decimal]
    currency: str
    assumptions: tuple[Assumption, ...]
    budget: Budget
    runs: int = 1
    first_attempt: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None
    # expected premiums to be found by an inquiry at run time (``premium: inquire``)
    inquire: bool = False
    # what the task asks beyond the risk object, by the labels the answers show (for the
    # reference agent): attribute values to set, components to include, a binding offer
    settings: Mapping[str, Any] = field(default_factory=dict)
    include: tuple[str, ...] = ()
    offer: bool = False
    # components to exclude (excludeComponent, or p:included false in an inquiry body)
    exclude: tuple[str, ...] = ()
    # what a task asks of one server only, where the insurers name things differently:
    # server → {"set": {...}, "include": [...], "exclude": [...]}, over the ones above
    per_server: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # several risk objects in one task (two cars): each priced on its own, by name; ``facts``
    # is the first of them
    objects: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    # what a correct run ends with: a premium (the default); "refused", the insurer refuses the
    # task's data and the final answer says why and what is admissible; "not offered", the
    # insurer has no such product and the final answer names what it offers instead
    outcome: str = "premium"
    # what the final answer of a refusal or a product not offered must say, in one of its wordings
    says: tuple[Assumption, ...] = ()
    # the field of the task's data the insurer refuses: no call may change it on the agent's
    # own account (the broker decides, not the agent)
    refused_field: str | None = None
    # the tool calls the reference agent needs for the task, by next steps alone: the baseline
    # a model's calls are measured against (found at run time; None where not measured)
    minimum_calls: int | None = None
    # the application the task asks for after the offer: the customer's data (policyholder,
    # payment, startDate, consent: by and method), by the norm's terms (for the reference agent)
    application: Mapping[str, Any] = field(default_factory=dict)
    # how the person using the client answers a confirmation: confirm, decline, or None (nobody
    # answers: a binding call stays unconfirmed)
    person: str | None = None
    # the customer's consent as that person states it on the page (by, method, at: what they
    # know of it, over what the task told the agent in ``application``'s consent; a time not
    # given is the moment they confirm): ``person: {answer: confirm, consent: {...}}``
    person_consent: Mapping[str, str] = field(default_factory=dict)
    # the application's expected state (accepted, referred, declined, counter-offer, withdrawn),
    # or "none": nothing may be applied for (the final answer says why: ``says``; without it,
    # the person declined)
    application_outcome: str | None = None
    # the insurer the application must go to, where the task says (the cheapest)
    application_at: str | None = None
    # the insurers the task is about: its servers, or at the broker endpoint (``servers:
    # [insurers]``) the ones it names (none named: every insurer the endpoint lists, filled in
    # when it runs)
    insurers: tuple[str, ...] = ()

    @property
    def at_broker_endpoint(self) -> bool:
        return self.servers == (BROKER_ENDPOINT,)

    def settings_for(self, server: str) -> Mapping[str, Any]:
        return {**self.settings, **self.per_server.get(server, {}).get("set", {})}

    def include_for(self, server: str) -> tuple[str, ...]:
        return (*self.include, *self.per_server.get(server, {}).get("include", ()))

    def exclude_for(self, server: str) -> tuple[str, ...]:
        return (*self.exclude, *self.per_server.get(server, {}).get("exclude", ()))

    def risk_objects(self) -> tuple[tuple[str, Mapping[str, Any]], ...]:
        """The task's risk objects by name: the ``objects``, or the one of ``facts``."""
        return self.objects or (("", self.facts),)


OUTCOMES = ("premium", "refused", "not offered")
APPLICATION_OUTCOMES = ("accepted", "referred", "declined", "counter-offer", "withdrawn", "none")
PERSON_ANSWERS = ("confirm", "decline")


def premium_key(server: str, risk_object: str = "") -> str:
    """Where an expected premium is kept: by server, or by server and risk object (two cars)."""
    return f"{server}/{risk_object}" if risk_object else server


def _named(raw: Any, where: str) -> tuple[Assumption, ...]:
    """Named wordings (assumptions, what a final answer says), each wording text: a wording YAML
    reads as a number or a date (``31.04`` written bare) is refused here, naming it."""
    if raw is not None and not isinstance(raw, list):
        raise ValueError(f"{where} is a list of names with their wordings")
    named = []
    for i, item in enumerate(raw or ()):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ValueError(f"{where}[{i}] has a name (text) and its wordings")
        wordings = item.get("wordings", {})
        if not isinstance(wordings, Mapping):
            raise ValueError(f"{where}[{i}].wordings is a language → wordings mapping")
        for lang, words in wordings.items():
            if not isinstance(words, list):
                raise ValueError(f"{where}[{i}].wordings.{lang} is a list of wordings")
            for j, word in enumerate(words):
                if not isinstance(word, str):
                    raise ValueError(
                        f"{where}[{i}].wordings.{lang}[{j}] is text (quote it), not {word!r}"
                    )
        named.append(
            Assumption(name=item["name"], wordings={k: tuple(v) for k, v in wordings.items()})
        )
    return tuple(named)


def parse_scenario(raw: Mapping[str, Any], path: Path | None = None) -> Scenario:
    expected = raw.get("expected", {})
    servers = tuple(raw["servers"])
    insurers = _insurers(raw, servers)
    outcome = str(expected.get("outcome", "premium"))
    if outcome not in OUTCOMES:
        raise ValueError(f"{raw.get('id')}: expected outcome is one of {', '.join(OUTCOMES)}")
    if expected.get("application") not in (None, *APPLICATION_OUTCOMES):
        raise ValueError(
            f"{raw.get('id')}: expected application is one of {', '.join(APPLICATION_OUTCOMES)}"
        )
    at = expected.get("application_at")
    if at is not None and insurers and at not in insurers:
        raise ValueError(f"{raw.get('id')}: application_at is one of its insurers")
    person, person_consent = _person(raw)
    inquire = "inquire" in (expected.get("premium"), expected.get("premiums"))
    if inquire or outcome != "premium":
        premiums: dict[str, Decimal] = {}
    elif "premiums" in expected:
        premiums = {k: Decimal(str(v)) for k, v in expected["premiums"].items()}
    elif insurers:
        premiums = {insurers[0]: Decimal(str(expected["premium"]))}
    else:
        raise ValueError(f"{raw.get('id')}: a premium at the broker endpoint names its insurer")
    if not isinstance(raw.get("task"), str):
        raise ValueError(f"{raw.get('id')}: task is text")
    assumptions = _named(raw.get("assumptions"), f"{raw.get('id')}: assumptions")
    budget = Budget(**raw.get("budget", {}))
    return Scenario(
        id=raw["id"],
        title=raw.get("title", raw["id"]),
        task=" ".join(str(raw["task"]).split()),
        servers=servers,
        facts=dict(raw.get("facts") or (raw["objects"][0]["facts"] if raw.get("objects") else {})),
        premiums=premiums,
        currency=expected.get("currency", "EUR"),
        assumptions=assumptions,
        budget=budget,
        runs=int(raw.get("runs", 1)),
        first_attempt=dict(raw.get("first_attempt", {})),
        path=path,
        inquire=inquire,
        settings=dict(raw.get("set", {})),
        include=tuple(str(label) for label in raw.get("include", ())),
        exclude=tuple(str(label) for label in raw.get("exclude", ())),
        per_server={str(k): dict(v) for k, v in (raw.get("per_server") or {}).items()},
        objects=tuple((str(o["name"]), dict(o["facts"])) for o in raw.get("objects", ())),
        offer=bool(expected.get("offer", False)),
        outcome=outcome,
        says=_named(expected.get("says"), f"{raw.get('id')}: expected.says"),
        refused_field=expected.get("refused"),
        minimum_calls=raw.get("minimum_calls"),
        application=dict(raw.get("application") or {}),
        person=person,
        person_consent=person_consent,
        application_outcome=expected.get("application"),
        application_at=expected.get("application_at"),
        insurers=insurers,
    )


def _person(raw: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """How the person answers (``person: confirm`` or ``person: {answer: confirm, consent: {by,
    method, at}}``), refused at load naming the field that is wrong."""
    given = raw.get("person")
    where = raw.get("id")
    if not isinstance(given, Mapping):
        if given not in (None, *PERSON_ANSWERS):
            raise ValueError(f"{where}: person is one of {', '.join(PERSON_ANSWERS)}")
        return given, {}
    answer = given.get("answer")
    if answer not in PERSON_ANSWERS:
        raise ValueError(f"{where}: person.answer is one of {', '.join(PERSON_ANSWERS)}")
    consent = given.get("consent") or {}
    if not isinstance(consent, Mapping) or not set(consent) <= {"by", "method", "at"}:
        raise ValueError(f"{where}: person.consent has by, method and at, nothing else")
    for key, value in consent.items():
        if not isinstance(value, str):
            raise ValueError(f"{where}: person.consent.{key} is text (quote it), not {value!r}")
    if "method" in consent and consent["method"] not in METHODS:
        raise ValueError(f"{where}: person.consent.method is one of {', '.join(METHODS)}")
    unknown = set(given) - {"answer", "consent"}
    if unknown:
        raise ValueError(
            f"{where}: person has answer and consent, not {', '.join(sorted(unknown))}"
        )
    return str(answer), dict(consent)


def _insurers(raw: Mapping[str, Any], servers: tuple[str, ...]) -> tuple[str, ...]:
    """The insurers a scenario is about: its servers, or those it names at the broker
    endpoint, which is then its only server (it serves every insurer)."""
    named = tuple(str(name) for name in raw.get("insurers") or ())
    if BROKER_ENDPOINT not in servers:
        if named:
            raise ValueError(f"{raw.get('id')}: insurers are named only at servers: [insurers]")
        return servers
    if len(servers) > 1:
        raise ValueError(
            f"{raw.get('id')}: the broker endpoint ({BROKER_ENDPOINT}) serves every insurer: it "
            "is a scenario's only server"
        )
    return named


def load_scenario(path: Path) -> Scenario:
    return parse_scenario(yamlfile.load(path.read_text("utf-8")), path)


def builtin_scenarios() -> list[Path]:
    """The scenarios shipped with the package."""
    folder = Path(str(resources.files("omds_ld.scenarios").joinpath("builtin")))
    return sorted(folder.glob("*.yaml"))
