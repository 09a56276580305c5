"""The call pipeline of one tool call (seed 002): check, call the insurer, condense, log, answer."""

from __future__ import annotations

import contextvars
import datetime as dt
import functools
import hashlib
import json
import logging
import math
import re
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import mcp_types as types
from opentelemetry.trace import get_current_span

from omds_ld.auth.identity import UpstreamTokenError
from omds_ld.mcp.catalogue import ToolSpec, stated_shapes
from omds_ld.mcp.condense import (
    ANSWER_META,
    ANSWER_TYPES,
    Condensed,
    Effects,
    Shared,
    condense,
    condense_problem,
    local,
    many,
    summary_of,
)
from omds_ld.mcp.confirm import Confirmations, Person
from omds_ld.mcp.gate import Gate
from omds_ld.mcp.refusal import Refusal
from omds_ld.mcp.requestlog import RequestLog, field_names
from omds_ld.mcp.seen import Carried
from omds_ld.mcp.state import StateStore, StateUnavailable
from omds_ld.mcp.transport import InsurerUnavailable
from omds_ld.mcp.upstream import CALLER, Upstream, UpstreamResponse
from omds_ld.norm import Norm, hygiene
from omds_ld.norm.jsonld import CONTEXT_URL, NotJsonLd, canonical
from omds_ld.norm.receipt import Signer
from omds_ld.norm.schemas import SchemaValidator

logger = logging.getLogger("omds_ld.mcp")

MAX_STRING = 4000
MAX_SESSIONS_REMEMBERED = 10_000
MAX_CASES_REMEMBERED = 20  # per session: what an error for an unknown case lists
IDEMPOTENCY_TTL = 24 * 3600.0
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# What a problem means for the caller, by HTTP status: the kinds of error a tool can return.
KINDS = {400: "invalid input", 401: "unauthorized", 403: "unauthorized", 404: "not found",
         405: "invalid input", 409: "conflict", 413: "invalid input", 415: "invalid input",
         422: "invalid input", 428: "needs the person's confirmation", 429: "rate-limited",
         502: "invalid answer"}  # fmt: skip
# kinds a problem type says better than its status
KIND_OF_TYPE = {"confirmation-declined": "declined by the person"}


# a binding call waiting for the person: its next step is the same call, nothing corrected
WAITING_FOR_THE_PERSON = "/confirmation-required"


def error_kind(status: int, problem_type: str = "") -> str:
    by_type = KIND_OF_TYPE.get(problem_type.rsplit("/", 1)[-1])
    if by_type:
        return by_type
    if status >= 500 and status != 502:
        return "temporary"
    return KINDS.get(status, "invalid input")


@dataclass
class SessionMemory:
    """What one session was shown by this connector."""

    shapes: set[str] = field(default_factory=set)
    cases: dict[str, str] = field(default_factory=dict)  # caseId → product IRI
    drafts: dict[str, str] = field(default_factory=dict)  # draft IRI → digest of what was shown


@dataclass(frozen=True)
class BrokerCall:
    """A call the broker endpoint hands to a connector: the arguments every next step takes
    besides its own (``insurer``), and what the broker's session was shown at any insurer."""

    step_arguments: Mapping[str, Any]
    shared: Shared | None


BROKER_CALL: contextvars.ContextVar[BrokerCall | None] = contextvars.ContextVar(
    "broker_call", default=None
)


@dataclass(frozen=True)
class Instance:
    """Who this connector speaks for, and what a client shows of it."""

    name: str
    display_name: str
    language: str
    website: str | None = None
    icon: str | None = None  # an https URL or a data: URI (SEP-973)


def _too_long(value: Any, pointer: str, errors: list[dict[str, str]]) -> None:
    """Strings within their size (the schemas bound most; this bounds every one)."""
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            errors.append({"pointer": pointer, "detail": f"longer than {MAX_STRING} characters"})
    elif isinstance(value, dict):
        for key, item in value.items():
            _too_long(item, f"{pointer}/{key}", errors)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _too_long(item, f"{pointer}/{index}", errors)


class Executor:
    """Runs every tool call of one connector through the same steps."""

    def __init__(
        self,
        *,
        norm: Norm,
        instance: Instance,
        upstream: Upstream,
        state: StateStore,
        request_log: RequestLog,
        lease_seconds: float = 15.0,
        rate: tuple[float, float] | None = None,
        binding: Collection[str] | None = None,
        confirmation_page: str | None = None,
        receipts: Signer | None = None,
    ) -> None:
        self.norm = norm
        # the norm's deprecated operations, each with the one to use instead: answers say so
        self.deprecated = {n: op.replaced_by for n, op in norm.operations.items() if op.deprecated}
        # the body parts the person confirming states (the consent): next steps say so
        self.stated = stated_shapes(norm)
        # the part of a business case each operation acts on: an answer names a step on a
        # part the call kept (x-omds-ld keeps) as offered before
        self.about = {n: op.about for n, op in norm.operations.items() if op.about}
        # calls a second and the burst one caller may make; None: no limit
        self.rate = rate
        self.instance = instance
        self.upstream = upstream
        self.state = state
        self.request_log = request_log
        # how long a call holds its idempotency key: a few seconds past the insurer's timeout;
        # a claim whose holder died lapses after it, and a retry asks the insurer again with
        # the same key (the insurer acts once per key)
        self.lease_seconds = lease_seconds
        self._validators: dict[str, SchemaValidator] = {}
        # what each session was shown: shapes (named, not repeated) and business cases (listed
        # when the session names a case the insurer does not know)
        self._sessions: OrderedDict[str, SessionMemory] = OrderedDict()
        # calls that bind a customer wait for the person's yes (the norm's binding operations,
        # or the ones an operator names)
        if binding is None:
            binding = [name for name, op in norm.operations.items() if op.binds]
        self.gate = Gate(
            norm=norm, insurer=instance.name, display_name=instance.display_name,
            language=instance.language, upstream=upstream,
            confirmations=Confirmations(state, confirmation_page), binding=binding,
            problem=self._problem, receipts=receipts,
        )  # fmt: skip

    def _problem(
        self, slug: str, detail: str, errors: list[dict[str, str]] | None = None, **extra: Any
    ) -> dict[str, Any]:
        kind = self.norm.problem_types[slug]
        problem: dict[str, Any] = {
            "type": kind.uri,
            "title": kind.title_en,
            "status": kind.status,
            "detail": detail,
        }
        if errors:
            problem["errors"] = errors
        problem.update(extra)
        return problem

    def _validator(self, spec: ToolSpec) -> SchemaValidator:
        validator = self._validators.get(spec.name)
        if validator is None:
            validator = SchemaValidator(spec.input_schema)
            self._validators[spec.name] = validator
        return validator

    def _entry_steps(
        self, spec: ToolSpec, arguments: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Where a refused call can go on: the same tool, corrected, with the ids the call named
        (its target filled in where they are valid), and the entry points."""
        base = self.upstream.api_url
        steps = [("listProducts", "products"), ("readProcessKnowledge", "process-knowledge")]
        named = {
            p.name: str(arguments[p.name])
            for p in spec.operation.path_parameters
            if arguments and isinstance(arguments.get(p.name), str | int)
            and _IDENTIFIER.fullmatch(str(arguments[p.name]))
        }  # fmt: skip
        # the MCP server's own steps act on the interface's URL, which the tool and its arguments
        # already name: bc:href says so, and the condensed text leaves the target out
        target = spec.operation.href(base, **named)
        same: dict[str, Any] = {
            "bc:operation": spec.name,
            "bc:target": target,
            "bc:href": target,
            "rdfs:label": "the same call with corrected arguments",
        }
        if named:
            same["bc:parameters"] = named
        out = [same]
        out += [
            {"bc:operation": op, "bc:target": f"{base}/{path}", "bc:href": f"{base}/{path}"}
            for op, path in steps
        ]
        return out

    async def _within_rate(self, spec: ToolSpec, caller: str) -> None:
        """A token per call from the caller's bucket (shared by replicas on Redis), or refuse."""
        if self.rate is None:
            return
        per_second, burst = self.rate
        wait = await self.state.take(f"rate:{self.instance.name}:{caller}", per_second, burst)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise Refusal(
                self._problem(
                    "rate-limited",
                    f"more calls than {round(per_second * 60)} a minute (bursts of {round(burst)}) "
                    f"from this caller; wait {seconds} s, then retry",
                    retryAfterSeconds=seconds,
                    **{"bc:nextStep": self._entry_steps(spec)},
                )
            )

    def prepare(self, spec: ToolSpec, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Sanitize, complete the body, validate against the tool's schema: or refuse.

        A client shown the strict variant of the schemas (OpenAI's strict function calling)
        sends the body as its JSON text and every optional argument, null where it has none:
        the text is read back into the body, a null optional argument is no argument; the body
        is then checked exactly as any other."""
        clean: dict[str, Any] = dict(arguments or {})
        required = set(spec.input_schema.get("required", ()))
        for name in [k for k, v in clean.items() if v is None and k not in required]:
            del clean[name]
        text = clean.get("body")
        if isinstance(text, str) and spec.operation.request_schema is not None:
            try:
                clean["body"] = json.loads(text)
            except (ValueError, RecursionError) as error:
                found = [{"pointer": "/body", "detail": f"the body's JSON text does not parse: {error}"[:300]}]  # fmt: skip
                raise self._bad_arguments(
                    spec, clean, found, "do not match its input schema"
                ) from None
        # values no request may carry are refused, never cleaned (hygiene checks depth first,
        # so nothing below walks a hostile nesting)
        hostile = [{"pointer": v.pointer, "detail": v.detail} for v in hygiene.violations(clean)]
        if not hostile:
            _too_long(clean, "", hostile)
        if hostile:
            raise self._bad_arguments(spec, clean, hostile, "carry a value no request may carry")
        body = clean.get("body")
        if isinstance(body, dict) and spec.operation.request_schema is not None:
            body = dict(body)
            body.setdefault("@context", CONTEXT_URL)
            schema = spec.operation.request_schema
            root = schema["$defs"][str(schema["$ref"]).rsplit("/", 1)[-1]]
            fixed_type = root.get("properties", {}).get("@type", {}).get("const")
            if fixed_type and "@type" not in body:
                body["@type"] = fixed_type
            clean["body"] = body
        violations = self._validator(spec).violations(clean, redact=spec.operation.personal)
        if violations:
            found = [{"pointer": v.pointer, "detail": v.detail} for v in violations]
            raise self._bad_arguments(spec, clean, found, "do not match its input schema")
        return clean

    def _bad_arguments(
        self, spec: ToolSpec, arguments: Mapping[str, Any], found: list[dict[str, str]], why: str
    ) -> Refusal:
        """Arguments refused before the insurer is asked: the body's, or a parameter's."""
        in_body = any(f["pointer"].startswith("/body") for f in found)
        return Refusal(
            self._problem(
                "invalid-body" if in_body else "invalid-parameter",
                f"the arguments of {spec.name} {why}; the insurer was not called",
                found,
                **{"bc:nextStep": self._entry_steps(spec, arguments)},
            )
        )

    async def known_products(self) -> list[dict[str, Any]]:
        """Every product of the insurer (all windows), from the shared read cache."""
        operation = self.norm.operation("listProducts")
        products: list[dict[str, Any]] = []
        offset = 0
        for _ in range(100):
            answer = await self.upstream.send(
                operation, {}, {"offset": offset, "limit": 50}, None, None
            )
            if answer.status != 200 or not isinstance(answer.body, dict):
                break
            try:
                page = canonical(answer.body, ANSWER_TYPES, answer.text)
            except NotJsonLd:  # a broken list: the insurer judges the name itself
                break
            for product in many(page.get("p:product")):
                if isinstance(product, dict):
                    # where the answer has no bc:productId, its IRI's last segment is the id
                    iri = product.get("@id")
                    product_id = product.get("bc:productId") or (local(str(iri)) if iri else None)
                    products.append({**product, "bc:productId": product_id})
            window = page.get("bc:window") or {}
            if not window.get("bc:moreToFind") or window.get("bc:nextOffset") is None:
                break
            offset = int(window["bc:nextOffset"])
        return products

    async def check_names(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
        """A product named by id or IRI must exist: an unknown one is an error listing what exists."""
        named: list[tuple[str, str, str]] = []
        if "productId" in arguments:
            named.append(("bc:productId", str(arguments["productId"]), "/productId"))
        body = arguments.get("body")
        if isinstance(body, dict):
            if "p:hasRootProduct" in body:
                named.append(("@id", str(body["p:hasRootProduct"]), "/body/p:hasRootProduct"))
            instance = body.get("p:instance")
            if isinstance(instance, dict) and "p:instanceOf" in instance:
                named.append(
                    ("@id", str(instance["p:instanceOf"]), "/body/p:instance/p:instanceOf")
                )
        if not named:
            return
        products = await self.known_products()
        if not products:
            return  # the insurer could not list them: let it judge the name itself
        for key, value, pointer in named:
            if all(p.get(key) != value for p in products):
                known = [f"{p.get('bc:productId')} <{p.get('@id')}>" for p in products]
                raise Refusal(
                    self._problem(
                        "unknown-product",
                        f"{self.instance.display_name} has no product {value!r}; "
                        f"products: {', '.join(known)}",
                        [{"pointer": pointer, "detail": "use a product from listProducts"}],
                        known=known,
                        **{"bc:nextStep": self._entry_steps(spec)[1:]},
                    )
                )

    async def call(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any] | None,
        session: str | None,
        offered: Collection[str] | None = None,
        caller: str = "local",
        person: Person | None = None,
        who: str = "the person using the client",
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One tool call, start to finish. Never raises: every failure is a tool error.

        ``caller`` names who is calling for the rate limit (the client's address until brokers
        authenticate; then the broker).

        ``offered`` names the tools the connector offers now: next steps to any other tool are
        left out of the answer (a step the caller cannot take is no step).

        ``person`` is how the person using the client can be asked (None: they cannot), before
        a call that binds a customer; ``who`` names them in the confirmation.
        """
        started = time.perf_counter()
        provenance = self._provenance(spec.name, self.upstream.api_url + spec.operation.path)
        log = self._log_entry(spec, arguments, session, provenance)
        try:
            await self._within_rate(spec, caller)
            clean = self.prepare(spec, arguments)
            await self.check_names(spec, clean)
            if self.gate.binds(spec):
                gated = await self.gate.check(spec, clean, person, who)
                if isinstance(gated, types.InputRequiredResult):
                    log.update(outcome="asked", status=0)
                    self.request_log.write(log)
                    return gated  # the client asks its user, then calls again
                clean = gated
            result = await self._call_insurer(spec, clean, provenance, log, offered)
        except Exception as error:
            problem, outcome = self._failure(error, spec, arguments, provenance, log)
            result = tool_result(self._refused(spec.name, problem, provenance, offered), error=True)
            log.update(outcome=outcome, status=problem["status"], problem=problem["type"])
        log.pop("insurerAsked", None)
        duration = round((time.perf_counter() - started) * 1000, 2)
        log["durationMs"] = duration
        log["provenance"] = dict(provenance)
        if isinstance(result.meta, dict) and ANSWER_META in result.meta:
            result.meta[ANSWER_META]["provenance"]["durationMs"] = duration
        self.request_log.write(log)
        return result

    def _log_entry(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any] | None,
        session: str | None,
        provenance: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The call's line of the request log, as far as it is known before it runs: names,
        never values; the broker the checked token speaks for, never the token; the trace."""
        log: dict[str, Any] = {
            "time": provenance["time"],
            "insurer": self.instance.name,
            "session": session_ref(session),
            "tool": spec.name,
            **field_names(arguments or {}),
        }
        broker = CALLER.get().subject
        if broker:
            log["broker"] = broker
        trace = get_current_span().get_span_context()
        if trace.is_valid:  # the caller's trace (W3C trace context in the request's _meta)
            log["traceId"] = format(trace.trace_id, "032x")
        return log

    def _failure(
        self,
        error: Exception,
        spec: ToolSpec,
        arguments: Mapping[str, Any] | None,
        provenance: dict[str, Any],
        log: Mapping[str, Any],
    ) -> tuple[dict[str, Any], str]:
        """The one place a failure of a call becomes its problem, and the outcome logged."""
        again = {"bc:nextStep": self._entry_steps(spec, arguments)}
        if isinstance(error, Refusal):
            steps = again["bc:nextStep"]
            if str(error.problem.get("type", "")).endswith(WAITING_FOR_THE_PERSON):
                # nothing to correct: the same call once the person answered
                steps[0]["rdfs:label"] = "the same call, once the person answered"
            error.problem.setdefault("bc:nextStep", steps)
            return error.problem, "refused"
        if isinstance(error, InsurerUnavailable):
            slug = "insurer-timeout" if error.kind == "timeout" else "insurer-unavailable"
            provenance["url"] = error.url
            return self._problem(slug, error.detail, **again), "temporary"
        if isinstance(error, UpstreamTokenError):
            detail = (
                f"the MCP server got no token to call {self.instance.display_name} as you: "
                f"{error}; nothing was done"
            )
            return self._problem("unauthorized", detail), "temporary"
        if isinstance(error, StateUnavailable):
            logger.warning("%s · %s: %s", self.instance.name, spec.name, error)
            detail = f"the MCP server's shared state cannot be reached ({error}); retry later"
            if log.get("insurerAsked"):  # a write may have acted at the insurer
                detail += "; the insurer was asked: retry with the same idempotencyKey"
            return self._problem("service-unavailable", detail, **again), "temporary"
        # a bug of ours: an internal error, never a stack trace
        logger.exception("%s · %s failed", self.instance.name, spec.name, exc_info=error)
        detail = f"the MCP server failed: {type(error).__name__}"
        return self._problem("internal-error", detail), "internal-error"

    def _provenance(self, operation: str, url: str) -> dict[str, Any]:
        """Where an answer comes from: insurer, operation, upstream URL, time, cache or not."""
        return {
            "insurer": self.instance.display_name,
            "operation": operation,
            "url": url,
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "fromCache": False,
        }

    async def unknown_tool(
        self, name: str, known: list[str], session: str | None, *, switched_off: bool = False
    ) -> types.CallToolResult:
        """A tool this connector does not offer: an error naming the tools it does offer."""
        provenance = self._provenance(name, self.upstream.api_url)
        in_norm = name in self.norm.operations
        if switched_off:
            reason = f"{name} is switched off by the operator of this MCP server"
        elif in_norm:
            operation = self.norm.operations[name]
            why = (
                "it keeps no draft at the server"
                if operation.draft
                else "it keeps the draft at the server (its process starts with createCalculation)"
                if operation.inquiry
                else "its interface does not publish it"
            )
            reason = f"{name} is not offered by {self.instance.display_name}: {why}"
        else:
            reason = f"there is no tool {name!r}"
        problem = self._problem(
            "operation-not-admissible" if in_norm else "not-found",
            f"{reason}; tools: {', '.join(known)}",
            known=known,
        )
        problem["bc:nextStep"] = [
            {"bc:operation": "listProducts", "bc:target": f"{self.upstream.api_url}/products"}
        ]
        return self._answered_here(name, problem, provenance, session, "refused", known)

    async def unavailable(
        self, name: str, reason: str, session: str | None
    ) -> types.CallToolResult:
        """A call while the insurer's process knowledge is not known: temporary, nothing asked."""
        provenance = self._provenance(name, self.upstream.api_url)
        problem = self._problem(
            "service-unavailable",
            f"{self.instance.display_name} has not been reached yet ({reason}); the MCP server "
            "keeps asking: retry shortly",
            **{"bc:nextStep": [
                {"bc:operation": "readProcessKnowledge",
                 "bc:target": f"{self.upstream.api_url}/process-knowledge"}
            ]},
        )  # fmt: skip
        return self._answered_here(name, problem, provenance, session, "temporary")

    def _answered_here(
        self,
        name: str,
        problem: dict[str, Any],
        provenance: dict[str, Any],
        session: str | None,
        outcome: str,
        offered: Collection[str] | None = None,
    ) -> types.CallToolResult:
        """A tool error the MCP server gives without asking the insurer, logged like any call."""
        self.request_log.write(
            {"time": provenance["time"], "insurer": self.instance.name,
             "session": session_ref(session), "tool": name, "outcome": outcome,
             "status": problem["status"], "problem": problem["type"], "durationMs": 0.0,
             "provenance": provenance}
        )  # fmt: skip
        return tool_result(self._refused(name, problem, provenance, offered), error=True)

    def _refused(
        self,
        name: str,
        problem: Mapping[str, Any],
        provenance: Mapping[str, Any],
        offered: Collection[str] | None = None,
    ) -> Condensed:
        return condense_problem(
            problem,
            operation=name,
            insurer=self.instance.display_name,
            language=self.instance.language,
            kind=error_kind(int(problem.get("status", 500)), str(problem.get("type", ""))),
            provenance=provenance,
            offered=offered,
            step_arguments=_step_arguments(),
            deprecated=self.deprecated,
            stated=self.stated,
        )

    async def _call_insurer(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        provenance: dict[str, Any],
        log: dict[str, Any],
        offered: Collection[str] | None = None,
    ) -> types.CallToolResult:
        """The call at the insurer: its idempotency record claimed (or the first call's answer
        replayed), the request sent, the answer read as JSON-LD of the norm, the insurer's
        problem a tool error, the record kept. A record is let go whenever the call fails."""
        request = _Request.of(spec, arguments)
        record = self._record_key(request)
        if record is not None:
            replayed = await self._replay(spec, record, request.fingerprint, arguments)
            if replayed is not None and "body" not in replayed:
                # personal data are not kept here: the insurer replays its answer to the key
                record = None
            elif replayed is not None:  # the first call's answer, condensed for this call
                provenance.update(url=replayed["url"], replayed=replayed["time"])
                log.update(outcome="replayed", status=replayed["status"])
                return self._answer(
                    spec, replayed["body"], replayed["status"], provenance, log, arguments, offered
                )
        try:
            answer = await self._send(spec, request, provenance, log)
            read = await self._read(spec, request, answer, arguments)
        except BaseException:
            if record is not None:
                await self.state.delete(record)
            raise
        if answer.status >= 400:
            if record is not None:
                await self.state.delete(record)
            return self._insurer_refused(spec, request, answer, provenance, log, offered)
        result = self._answer(spec, read, answer.status, provenance, log, arguments, offered)
        if record is not None:
            await self._keep_record(spec, record, request, answer, provenance, read)
        return result

    def _record_key(self, request: _Request) -> str | None:
        """Where a call's idempotency record is kept: per insurer and per broker (another
        broker's same key is another key); None without a key."""
        if not request.key:
            return None
        broker = CALLER.get().subject or "-"
        return f"idem:{self.instance.name}:{broker}:{request.key}"

    async def _send(
        self,
        spec: ToolSpec,
        request: _Request,
        provenance: dict[str, Any],
        log: dict[str, Any],
    ) -> UpstreamResponse:
        """The request to the insurer; where its answer came from and how fresh it is noted.
        An address the insurer has no route for is a refusal (the operation is not offered)."""
        operation = spec.operation
        if operation.method != "GET":
            log["insurerAsked"] = True  # from here on, a failure may come after the insurer acted
        answer = await self.upstream.send(
            operation, request.path, request.query, request.body, request.key
        )
        provenance["url"] = answer.url
        provenance["fromCache"] = answer.from_cache
        if answer.age is not None and answer.fresh_until is not None:
            left = answer.fresh_until - time.time()
            provenance["ageSeconds"] = round(answer.age)
            provenance["reusableForSeconds"] = max(0, round(left))
            provenance["reusableUntil"] = _iso(answer.fresh_until) if left > 0 else None
        if answer.replayed:
            provenance["replayed"] = True
        log["upstreamStatus"] = answer.status
        if answer.status in (404, 405, 501) and not _is_problem(answer):
            # not a problem of the norm but the web server's: no route for the operation
            raise Refusal(
                self._problem(
                    "operation-not-admissible",
                    f"{self.instance.display_name} does not offer {spec.name}: its interface "
                    f"answered {answer.status} at {answer.url}",
                    **{"bc:nextStep": self._entry_steps(spec)[1:]},
                )
            )
        return answer

    async def _read(
        self,
        spec: ToolSpec,
        request: _Request,
        answer: UpstreamResponse,
        arguments: Mapping[str, Any],
    ) -> dict[str, Any]:
        """A successful answer in the norm's canonical form ({} for a problem); an answer that
        breaks the norm is refused and, if a read, never served from the cache again."""
        broken = _breaks_the_norm(answer)
        read: dict[str, Any] = {}
        if broken is None and answer.status < 400:
            try:
                read = canonical(answer.body, ANSWER_TYPES, answer.text)
            except NotJsonLd as error:
                broken = f"not JSON-LD of the norm ({error})"
            else:
                broken = _profile_gap(read)
        if broken is None:
            return read
        if spec.operation.method == "GET":
            await self.upstream.forget(spec.operation, request.path, request.query)
        raise Refusal(
            self._problem(
                "insurer-answer-invalid",
                f"{self.instance.display_name} answered {spec.name} with {broken} "
                f"(HTTP {answer.status}); the norm's answer has a type of the norm and next "
                "steps, an error is application/problem+json",
                **{"bc:nextStep": self._entry_steps(spec, arguments)},
            )
        )

    def _insurer_refused(
        self,
        spec: ToolSpec,
        request: _Request,
        answer: UpstreamResponse,
        provenance: dict[str, Any],
        log: dict[str, Any],
        offered: Collection[str] | None,
    ) -> types.CallToolResult:
        """The insurer's problem as a tool error; for a case it does not know, the cases this
        session worked on (not a guess at what was meant)."""
        problem = answer.body if isinstance(answer.body, dict) else {}
        memory = self._memory(log.get("session"))
        if answer.status == 404 and "caseId" in request.path and memory.cases:
            problem.setdefault(
                "known", [f"{case} <{product}>" for case, product in memory.cases.items()]
            )
        problem.setdefault("status", answer.status)
        problem.setdefault("type", "about:blank")
        problem.setdefault("title", "the insurer refused the call")
        problem.setdefault("detail", "")
        log.update(outcome="tool-error", status=answer.status, problem=problem.get("type"))
        return tool_result(self._refused(spec.name, problem, provenance, offered), error=True)

    async def _keep_record(
        self,
        spec: ToolSpec,
        record: str,
        request: _Request,
        answer: UpstreamResponse,
        provenance: Mapping[str, Any],
        read: dict[str, Any],
    ) -> None:
        """The call's answer kept under its key: a retry replays it instead of acting again.
        An answer with personal data is not kept (only that the call was made): a retry asks
        the insurer again with the same key, and the insurer replays it."""
        stored = {
            "fingerprint": request.fingerprint, "state": "done", "status": answer.status,
            "url": answer.url, "time": provenance["time"], "body": read,
        }  # fmt: skip
        if spec.operation.personal:
            del stored["body"]
        await self.state.set(record, json.dumps(stored).encode(), IDEMPOTENCY_TTL)

    def _answer(
        self,
        spec: ToolSpec,
        body: dict[str, Any],
        status: int,
        provenance: dict[str, Any],
        log: dict[str, Any],
        arguments: Mapping[str, Any],
        offered: Collection[str] | None,
    ) -> types.CallToolResult:
        """The insurer's answer condensed for this session (or, without one, for what the
        client carries: its ``seen``); ``full`` adds the whole JSON-LD."""
        memory = self._memory(log.get("session"))
        carried = None if log.get("session") else Carried.read(arguments.get("seen"))
        seen = memory.shapes
        condensed = condense(
            body,
            operation=spec.name,
            insurer=self.instance.display_name,
            language=self.instance.language,
            status=status,
            provenance=provenance,
            shapes_seen=seen,
            offered=offered,
            # an edit's answer names a draft shown the same before; a read shows it whole
            drafts_seen=memory.drafts if spec.operation.kind != "read" else None,
            step_arguments=_step_arguments(),
            shared=_shared(),
            deprecated=self.deprecated,
            stated=self.stated,
            sent=arguments.get("body"),
            carried=carried,
            effects=Effects(spec.name, spec.operation.kind, spec.operation.keeps, self.about),
        )
        seen.update(s["@id"] for s in body.get("bc:shape", []) if "@id" in s)
        for iri, shown in condensed.drafts.items():  # the latest last
            memory.drafts.pop(iri, None)
            memory.drafts[iri] = shown
        while len(memory.drafts) > MAX_CASES_REMEMBERED:
            del memory.drafts[next(iter(memory.drafts))]
        case = condensed.structured.get("case")
        if log.get("session") and isinstance(case, dict) and case.get("caseId"):
            memory.cases.pop(str(case["caseId"]), None)  # the latest last
            memory.cases[str(case["caseId"])] = str(case.get("product", ""))
            while len(memory.cases) > MAX_CASES_REMEMBERED:
                del memory.cases[next(iter(memory.cases))]
        _log_scope(log, condensed)
        log.setdefault("outcome", "ok")
        log.setdefault("status", status)
        links = self._links(condensed, offered)
        full = body if arguments.get("full") else None
        return tool_result(condensed, error=False, full=full, links=links)

    def _links(
        self, condensed: Condensed, offered: Collection[str] | None
    ) -> list[types.ResourceLink]:
        """An answer that names an offer links to it as a resource (read as readOffer reads
        it), where readOffer is offered."""
        offer = condensed.structured.get("offer")
        offer_id = offer.get("offerId") if isinstance(offer, Mapping) else None
        if not offer_id or (offered is not None and "readOffer" not in offered):
            return []
        return [
            types.ResourceLink(
                uri=f"omds-ld://{self.instance.name}/offers/{quote(str(offer_id), safe='')}",
                name=f"offer {offer_id}", title=f"Offer {offer_id}",
                description="the offer's whole JSON-LD, as readOffer answers it",
                mime_type="application/ld+json",
            )
        ]  # fmt: skip

    def _memory(self, session: str | None) -> SessionMemory:
        """What a session was shown (a fresh, forgotten memory for calls without a session)."""
        if session is None:
            return SessionMemory()
        memory = self._sessions.get(session)
        if memory is None:
            memory = self._sessions[session] = SessionMemory()
            if len(self._sessions) > MAX_SESSIONS_REMEMBERED:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(session)
        return memory

    async def _replay(
        self, spec: ToolSpec, record_key: str, fingerprint: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Claim the key for this call (None), or the record of the first call to replay."""
        claim = json.dumps({"fingerprint": fingerprint, "state": "in-progress"}).encode()
        if await self.state.add(record_key, claim, self.lease_seconds):
            return None
        raw = await self.state.get(record_key)
        record: dict[str, Any] = json.loads(raw) if raw else {}
        if record.get("fingerprint") != fingerprint:
            raise Refusal(
                self._problem(
                    "idempotency-key-reused",
                    "this idempotencyKey was used for another call; use a new key",
                    **{"bc:nextStep": self._entry_steps(spec, arguments)},
                )
            )
        if record.get("state") != "done":
            raise Refusal(
                self._problem(
                    "idempotency-request-in-progress",
                    "a call with this idempotencyKey is still running; retry shortly",
                    **{"bc:nextStep": self._entry_steps(spec, arguments)},
                )
            )
        return record


@dataclass(frozen=True)
class _Request:
    """What a tool call asks of the insurer: the operation's path and query parameters, its
    body, its idempotency key, and the fingerprint a retry with that key must match."""

    path: dict[str, str]
    query: dict[str, Any]
    body: Any
    key: str | None
    name: str

    @functools.cached_property
    def fingerprint(self) -> str:
        """Worked out only for a call with an idempotency key (the only one it is kept for)."""
        named = [self.name, self.path, self.query, self.body]
        return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()

    @classmethod
    def of(cls, spec: ToolSpec, arguments: Mapping[str, Any]) -> _Request:
        operation = spec.operation
        path = {p.name: str(arguments[p.name]) for p in operation.path_parameters}
        query = {p.name: arguments.get(p.name) for p in operation.query_parameters}
        body = arguments.get("body")
        if operation.request_schema is not None and body is None and operation.method != "GET":
            body = {}
        key = arguments.get("idempotencyKey")
        return cls(path, query, body, str(key) if key else None, spec.name)


def _log_scope(log: dict[str, Any], condensed: Condensed) -> None:
    data = condensed.structured
    if "window" in data:
        log["scope"] = data["window"]
        log["hits"] = data["window"]["returned"]
    else:
        log["hits"] = 1
    log["nextSteps"] = len(data.get("nextSteps", []))


def _breaks_the_norm(answer: UpstreamResponse) -> str | None:
    """What makes an answer unusable before it is read as JSON-LD, or None.

    A success must be a JSON object; an error is a problem (application/problem+json, or at
    least its type and title); a 503 or 504 that is none is still the insurer being away for a
    moment (temporary), every other failure without one breaks the norm."""
    if answer.status < 400:
        if answer.invalid:
            return answer.invalid
        return None if isinstance(answer.body, dict) else "a JSON body that is no object"
    if _is_problem(answer) or answer.status < 500 or answer.status in (503, 504):
        return None
    return f"an error that is no problem+json ({answer.invalid or answer.media_type or 'untyped'})"


def _is_problem(answer: UpstreamResponse) -> bool:
    """Whether an error answer is a problem (RFC 9457), as the norm's errors are."""
    return answer.media_type == "application/problem+json" or (
        isinstance(answer.body, dict) and "type" in answer.body and "title" in answer.body
    )


def _profile_gap(answer: Mapping[str, Any]) -> str | None:
    """What every answer of the norm must carry and this one does not, or None."""
    if str(answer.get("@type", "")) not in ANSWER_TYPES:
        return f"an answer of type {answer.get('@type')!r}, which is no answer type of the norm"
    if "bc:nextStep" not in answer:
        return "an answer without next steps (bc:nextStep)"
    return None


@functools.lru_cache(maxsize=1024)  # a session's every call names it the same
def session_ref(session: str | None) -> str | None:
    """How the request log names a session: a hash, never the id a caller could use."""
    if session is None:
        return None
    return hashlib.sha256(session.encode()).hexdigest()[:16]


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


def _step_arguments() -> Mapping[str, Any] | None:
    call = BROKER_CALL.get()
    return call.step_arguments if call is not None else None


def _shared() -> Shared | None:
    call = BROKER_CALL.get()
    return call.shared if call is not None else None


def tool_result(
    condensed: Condensed,
    *,
    error: bool,
    full: Any = None,
    links: Sequence[types.ResourceLink] = (),
) -> types.CallToolResult:
    """The text for the model, a summary as structuredContent, the whole structured answer in
    ``_meta`` (and the insurer's JSON-LD with ``full``), resource links after the text."""
    structured = dict(condensed.structured)  # built for this call alone: no copy needed
    content: list[types.ContentBlock] = [types.TextContent(text=condensed.text), *links]
    if full is not None:
        structured["full"] = full
        content.append(types.TextContent(text=json.dumps(full, ensure_ascii=False)))
    return types.CallToolResult(
        content=content,
        structured_content=summary_of(structured),
        is_error=error,
        _meta={ANSWER_META: structured},
    )
