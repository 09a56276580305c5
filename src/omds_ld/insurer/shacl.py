"""pySHACL behind one small interface: a data graph in, a validation report of plain values out."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rdflib import RDF, Graph, Literal, URIRef

from omds_ld.norm.jsonld import compact_iri
from omds_ld.norm.shapes import SH

if TYPE_CHECKING:
    from pyshacl.shapes_graph import ShapesGraph


@dataclass(frozen=True)
class Result:
    """One violation: where (focus node, path), what (messages in German and English)."""

    focus_node: str
    path: str | None
    messages: Mapping[str, str]
    constraint: str
    value: Any = None
    severity: str = str(SH.Violation)  # a warning (SH.Warning) never makes a report not conform


@dataclass(frozen=True)
class Report:
    """A SHACL validation report."""

    conforms: bool
    results: tuple[Result, ...]

    def warned(self, warnings: tuple[Result, ...]) -> Report:
        """The report with these warnings added; whether it conforms stays as it was."""
        return Report(self.conforms, (*self.results, *warnings)) if warnings else self

    def without_values(self, paths: frozenset[str]) -> Report:
        """The report with no value of these properties (personal data: a result says which
        field and what is admissible, never what was sent)."""
        if not paths:
            return self
        kept = tuple(
            replace(r, value=None) if r.path in paths and r.value is not None else r
            for r in self.results
        )
        return Report(self.conforms, kept)

    def to_jsonld(self) -> dict[str, Any]:
        results = []
        for r in self.results:
            out: dict[str, Any] = {
                "@type": "sh:ValidationResult",
                "sh:focusNode": r.focus_node,
                "sh:resultSeverity": compact_iri(r.severity),
                "sh:sourceConstraintComponent": compact_iri(r.constraint),
                "sh:resultMessage": dict(r.messages),
            }
            if r.path:
                out["sh:resultPath"] = compact_iri(r.path)
            if r.value is not None:
                out["sh:value"] = r.value
            results.append(out)
        return {"@type": "sh:ValidationReport", "sh:conforms": self.conforms, "sh:result": results}


def _report(conforms: bool, results_graph: Graph) -> Report:
    results = []
    for node in results_graph.subjects(RDF.type, SH.ValidationResult):
        messages: dict[str, str] = {}
        for message in results_graph.objects(node, SH.resultMessage):
            if isinstance(message, Literal):
                messages.setdefault(message.language or "en", str(message))
        messages.setdefault("en", "constraint violated")
        messages.setdefault("de", messages["en"])
        path = results_graph.value(node, SH.resultPath)
        value = results_graph.value(node, SH.value)
        results.append(
            Result(
                focus_node=str(results_graph.value(node, SH.focusNode)),
                path=str(path) if isinstance(path, URIRef) else None,
                messages=messages,
                constraint=str(results_graph.value(node, SH.sourceConstraintComponent)),
                value=value.toPython() if isinstance(value, Literal) else None,
            )
        )
    return clean_report(conforms, results)


def clean_report(conforms: bool, results: list[Result]) -> Report:
    """The results in a stable order, each said once, their values as JSON has them."""
    results.sort(key=lambda r: (r.focus_node, r.path or "", r.constraint))
    clean: list[Result] = []
    seen: set[tuple[str, str | None, tuple[tuple[str, str], ...]]] = set()
    for r in results:
        # one value may break several constraints of a field that share one message: say it once
        key = (r.focus_node, r.path, tuple(sorted(r.messages.items())))
        if key not in seen:
            seen.add(key)
            clean.append(Result(r.focus_node, r.path, r.messages, r.constraint, _jsonable(r.value)))
    return Report(conforms=conforms, results=tuple(clean))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class PyShaclValidator:
    """Validates data graphs against one shapes graph with pySHACL, its shapes harvested once.

    pySHACL harvests the shapes of a shapes graph on every call of its ``validate()``; here the
    harvested shapes graph is kept and reused, the way compiled JSON schema validators are. The
    lock serialises runs on the shared shapes (pySHACL is CPU-bound under the GIL anyway).
    """

    def __init__(self, shapes: Graph) -> None:
        self.shapes = shapes
        self._compiled: ShapesGraph | None = None
        self._lock = threading.Lock()

    def validate(self, data: Graph) -> Report:
        # pySHACL is loaded by the first shape only it can check (compiled constraints check
        # the rest): a server whose shapes all compile never loads it
        from pyshacl import Validator
        from pyshacl.graph_abstraction import DataGraph

        with self._lock:
            validator = Validator(
                DataGraph.from_rdflib(data), shacl_graph=self.shapes, options={"inference": "none"}
            )
            if self._compiled is None:
                self._compiled = validator.shacl_graph
            else:
                validator.shacl_graph = self._compiled
            conforms, results_graph, _ = validator.run()  # type: ignore[no-untyped-call]
        return _report(bool(conforms), results_graph)
