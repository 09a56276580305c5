"""An insurer's interface written from the norm's files alone, as another insurer's engineer would.

It imports nothing of ``omds_ld.insurer`` (only the norm's OpenAPI file is read, to publish the
operations it implements). Petcare insures pets, keeps no draft at the server, and writes its
JSON-LD its own way: its own base path, its own product and risk-object class, every ``@type`` a
full IRI, instance nodes without ``@id``, products without ``bc:productId``, single values where
our example writes arrays. Four operations: readProcessKnowledge, listProducts,
readDefaultInstance, inquireTariff (and its OpenAPI document).

``Petcare(defect=...)`` runs a broken variant, one per class of defect an insurer might ship.
"""

from __future__ import annotations

import json
import threading
from decimal import ROUND_HALF_UP, Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import yaml

CONTEXT = "https://w3id.org/omds-ld/context.jsonld"
BC, P, PK, SH = (
    "https://w3id.org/omds-ld/bc#",
    "https://w3id.org/omds-ld/p#",
    "https://w3id.org/omds-ld/pk#",
    "http://www.w3.org/ns/shacl#",
)
VOCAB = "https://petcare.example/vocab#"
BASE = "/petcare/v1"
PRODUCT = "https://petcare.example/products/dog-health"
DOG_SHAPE = "https://petcare.example/shapes/DogShape"
OPERATIONS = ("readProcessKnowledge", "listProducts", "readDefaultInstance", "inquireTariff")
DEFECTS = (
    "none",
    "not JSON",
    "no next steps",
    "not a type of the norm",
    "an error that is no problem",
    "a remote context",
    "no published operations",
)
AGE_FACTORS = [(2, Decimal("0.9")), (7, Decimal("1.2")), (20, Decimal("1.8"))]


def premium_of(age: int, deductible: int) -> dict[str, Any]:
    """The tariff: 120 EUR a year, by the dog's age, less with a deductible; 11 % tax."""
    factor = next(f for upto, f in AGE_FACTORS if age <= upto)
    net = Decimal(120) * factor * (Decimal("0.8") if deductible >= 250 else Decimal(1))
    net = net.quantize(Decimal("0.01"), ROUND_HALF_UP)
    tax = (net * Decimal("0.11")).quantize(Decimal("0.01"), ROUND_HALF_UP)
    return {
        "@type": BC + "Premium",
        BC + "gross": float(net + tax),
        BC + "net": float(net),
        BC + "currency": "EUR",
        BC + "period": "P1Y",
        BC + "tax": {BC + "taxType": "insurance-tax", BC + "amount": float(tax)},  # one, no array
    }


def step(
    operation: str, target: str, href: str, method: str = "GET", **extra: Any
) -> dict[str, Any]:
    out = {"@type": BC + "NextStep", BC + "operation": operation, BC + "target": {"@id": target},
           BC + "method": method, BC + "href": BASE + href}  # fmt: skip
    out.update(extra)
    return out


DOG = {
    "@id": DOG_SHAPE,
    "@type": SH + "NodeShape",
    SH + "targetClass": {"@id": VOCAB + "Dog"},
    SH + "property": [
        {SH + "path": {"@id": VOCAB + "breed"}, SH + "name": {"@value": "breed", "@language": "en"},
         SH + "datatype": {"@id": "http://www.w3.org/2001/XMLSchema#string"},
         SH + "minCount": 1, SH + "maxLength": 60},
        {SH + "path": {"@id": VOCAB + "ageYears"}, SH + "name": {"@value": "age (years)", "@language": "en"},
         SH + "datatype": {"@id": "http://www.w3.org/2001/XMLSchema#integer"},
         SH + "minCount": 1, SH + "minInclusive": 0, SH + "maxInclusive": 20},
    ],
}  # fmt: skip


def published_openapi() -> dict[str, Any]:
    """The norm's OpenAPI document, cut down to the operations Petcare implements."""
    text = resources.files("omds_ld.norm").joinpath("data", "openapi.yaml").read_text("utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    paths = {}
    for path, item in document["paths"].items():
        kept = {m: op for m, op in item.items() if op.get("operationId") in OPERATIONS}
        if kept:
            paths[path] = kept
    return {**document, "paths": paths, "servers": [{"url": BASE}]}


class Petcare:
    """The interface on a free loopback port, in a thread of the test process."""

    def __init__(self, defect: str = "none") -> None:
        assert defect in DEFECTS, defect
        self.defect = defect
        handler = type("Handler", (_Handler,), {"insurer": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.asked: list[str] = []

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{BASE}"

    def __enter__(self) -> Petcare:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # the answers

    def answer(self, method: str, path: str, body: Any) -> tuple[int, str, Any]:
        self.asked.append(f"{method} {path}")
        if path == "/openapi.json" and self.defect != "no published operations":
            return 200, "application/json", published_openapi()
        if method == "GET" and path == "/process-knowledge":
            return 200, "application/ld+json", {
                "@context": CONTEXT, "@id": "https://petcare.example/process-knowledge",
                "@type": PK + "ProcessKnowledge", PK + "draftAtServer": False,
                "rdfs:comment": {"en": "Petcare keeps no draft: read the default instance, inquire."},
                BC + "nextStep": step("listProducts", "https://petcare.example/products", "/products"),
            }  # fmt: skip
        if method == "GET" and path.split("?")[0] == "/products":
            return 200, "application/ld+json", {
                "@context": CONTEXT, "@id": "https://petcare.example/products",
                "@type": BC + "ProductList",
                "p:product": {  # one product: a single value, and no bc:productId
                    "@id": PRODUCT, "@type": P + "Product",
                    "rdfs:label": {"en": "Dog health", "de": "Hundekranken"},
                    "p:lineOfBusiness": {"en": "Pets", "de": "Tiere"},
                    "p:riskObjectClass": {"@id": VOCAB + "Dog"},
                },
                BC + "window": {BC + "returned": 1, BC + "total": 1, BC + "offset": 0,
                                BC + "moreToFind": 0},
                BC + "nextStep": step("readDefaultInstance", PRODUCT,
                                      "/products/dog-health/default-instance",
                                      **{BC + "parameters": {"@value": {"productId": "dog-health"},
                                                             "@type": "@json"}}),
            }  # fmt: skip
        if method == "GET" and path == "/products/dog-health/default-instance":
            return 200, "application/ld+json", {
                "@context": CONTEXT, "@id": PRODUCT + "/default-instance",
                "@type": BC + "DefaultInstance",
                "bc:body": {
                    "@type": "bc:TariffInquiry",
                    "p:instance": {  # no @id anywhere in the instance
                        "p:instanceOf": PRODUCT, "rdfs:label": {"en": "Dog health"},
                        "p:attribute": [{
                            "p:property": VOCAB + "deductible", "rdfs:label": {"en": "deductible (EUR)"},
                            "p:value": 0, "sh:defaultValue": 0, "sh:in": [0, 250],
                        }],
                        "p:hasRiskObject": [],
                    },
                },
                BC + "nextStep": step("inquireTariff", PRODUCT, "/tariff-inquiries", "POST",
                                      **{BC + "expects": {"@id": DOG_SHAPE}}),
                BC + "shape": DOG,
            }  # fmt: skip
        if method == "POST" and path == "/tariff-inquiries":
            return self.inquire(body)
        if self.defect == "no published operations":  # a bare web server's 404 page
            return 404, "text/plain", f"Not Found: {path}"
        return 404, "application/problem+json", self.problem(404, "not-found", f"no {path}")

    def problem(self, status: int, slug: str, detail: str, errors: Any = ()) -> dict[str, Any]:
        return {"type": f"https://w3id.org/omds-ld/problems/{slug}", "title": slug,
                "status": status, "detail": detail, "errors": list(errors),
                "bc:nextStep": [step("listProducts", "https://petcare.example/products",
                                     "/products")]}  # fmt: skip

    def inquire(self, body: Any) -> tuple[int, str, Any]:
        instance = body.get("p:instance", {}) if isinstance(body, dict) else {}
        dogs = instance.get("p:hasRiskObject") or []
        dog = dogs[0] if dogs else {}
        errors = []
        breed, age = dog.get(VOCAB + "breed"), dog.get(VOCAB + "ageYears")
        if dog.get("@type") not in (VOCAB + "Dog",):
            errors.append({"pointer": "/p:instance/p:hasRiskObject/0/@type", "detail": "a Dog"})
        if not isinstance(breed, str) or not breed:
            errors.append({"pointer": "/p:instance/p:hasRiskObject/0/breed", "detail": "required"})
        if not isinstance(age, int) or not 0 <= age <= 20:
            errors.append({"pointer": "/p:instance/p:hasRiskObject/0/ageYears",
                           "detail": "a whole number from 0 to 20"})  # fmt: skip
        if errors:
            return (
                422,
                "application/problem+json",
                self.problem(
                    422, "invalid-body", "the dog is not described as the shape says", errors
                ),
            )
        deductible = 0
        for attribute in instance.get("p:attribute", []):
            if attribute.get("p:property") == VOCAB + "deductible":
                deductible = int(attribute.get("p:value", 0))
        return 200, "application/ld+json", {
            "@context": CONTEXT, "@id": "https://petcare.example/tariff-inquiries/result",
            "@type": BC + "TariffResult",
            "p:hasRootProduct": PRODUCT,
            "p:instance": {
                "p:instanceOf": PRODUCT,
                "p:attribute": [{"p:property": VOCAB + "deductible", "rdfs:label": {"en": "deductible (EUR)"},
                                 "p:value": deductible, "sh:defaultValue": 0}],
                "p:hasRiskObject": [dog],
            },
            BC + "validationReport": {"@type": SH + "ValidationReport", SH + "conforms": True},
            BC + "premium": premium_of(age, deductible),
            BC + "nextStep": step("inquireTariff", PRODUCT, "/tariff-inquiries", "POST",
                                  **{BC + "expects": {"@id": DOG_SHAPE}}),
        }  # fmt: skip

    def broken(self, status: int, media: str, body: Any) -> tuple[int, str, bytes]:
        """The answer as the broken variant gets it wrong."""
        defect = self.defect
        if isinstance(body, str):
            return status, media, body.encode()
        if defect == "not JSON" and status == 200:
            return 200, "text/html", b"<html><body>Welcome to Petcare</body></html>"
        if defect == "an error that is no problem":
            return 500, "text/html", b"<html><body>Internal Server Error</body></html>"
        if isinstance(body, dict) and status == 200 and "openapi" not in body:
            if defect == "no next steps":
                body = {k: v for k, v in body.items() if not k.endswith("nextStep")}
            elif defect == "not a type of the norm":
                body = {**body, "@type": "https://petcare.example/vocab#Answer"}
            elif defect == "a remote context":
                body = {**body, "@context": "https://petcare.example/context.jsonld"}
        return status, media, json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    insurer: Petcare

    def _serve(self, method: str) -> None:
        path = self.path
        if not path.startswith(BASE):
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        status, media, answer = self.insurer.answer(method, path[len(BASE) :], body)
        if path[len(BASE) :] == "/process-knowledge" and self.insurer.defect != "none":
            status, media, encoded = status, media, json.dumps(answer).encode()
        else:
            status, media, encoded = self.insurer.broken(status, media, answer)
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(encoded)))
        if method == "GET" and status == 200:
            self.send_header("Cache-Control", "max-age=30")
        self.end_headers()
        self.wfile.write(encoded)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, *args: Any) -> None:  # quiet
        pass
