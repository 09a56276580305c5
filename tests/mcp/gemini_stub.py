"""A stand-in for Google's Gemini API on loopback, for google-genai's requests: it checks every
function declaration it is sent against the schema rules Gemini's API documents for
``FunctionDeclaration.parameters`` (an OpenAPI 3.0 subset) and answers 400 INVALID_ARGUMENT, as
the API does, naming the first rule broken; else a plain text answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# the fields of Gemini's Schema object, and its types
FIELDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
})  # fmt: skip
TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})


def broken(schema: Any, where: str = "parameters") -> Iterator[str]:
    """Each rule of Gemini's Schema that ``schema`` breaks, by where."""
    if not isinstance(schema, Mapping):
        yield f"{where}: a schema is an object"
        return
    for field in set(schema) - FIELDS:
        yield f"{where}.{field}: unknown field"
    kind = str(schema.get("type", "")).upper()
    if kind not in TYPES and "anyOf" not in schema:
        yield f"{where}.type: one of {sorted(TYPES)}"
    properties = schema.get("properties") or {}
    if kind == "OBJECT" and not properties:
        yield f"{where}.properties: should be non-empty for OBJECT type"
    if kind == "ARRAY" and "items" not in schema:
        yield f"{where}.items: missing field for ARRAY type"
    if "enum" in schema and kind != "STRING":
        yield f"{where}.enum: only allowed for STRING type"
    for name in schema.get("required") or ():
        if name not in properties:
            yield f"{where}.required: {name} is not a property"
    for name, sub in properties.items():
        yield from broken(sub, f"{where}.properties[{name}]")
    if "items" in schema:
        yield from broken(schema["items"], f"{where}.items")
    for index, sub in enumerate(schema.get("anyOf") or ()):
        yield from broken(sub, f"{where}.anyOf[{index}]")


class GeminiStub:
    """The stand-in, on a free loopback port; ``declarations`` holds what it was sent."""

    def __init__(self) -> None:
        self.declarations: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers["content-length"])))
                declared = [
                    d for t in sent.get("tools", []) for d in t.get("functionDeclarations", [])
                ]
                stub.declarations = declared
                problems = [p for d in declared for p in broken(d.get("parameters", {}),
                            f"{d.get('name')}.parameters")]  # fmt: skip
                if problems:
                    status, body = 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                   "message": "; ".join(problems[:5])}}  # fmt: skip
                else:
                    status, body = 200, {"candidates": [{"content": {"role": "model", "parts": [
                        {"text": "ok"}]}, "finishReason": "STOP"}]}  # fmt: skip
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GeminiStub:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
