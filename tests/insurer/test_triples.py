"""``omds_ld.insurer.triples``: the index the compiled checks read a draft from answers as
rdflib's graph does, on the questions they ask (the reports themselves are compared in
tests/insurer/test_constraints.py, on generated drafts)."""

from __future__ import annotations

from rdflib import RDF, RDFS, Graph, Literal, URIRef

from omds_ld.insurer.triples import Triples

EX = "https://example.org/"
A, B, C, D = (URIRef(EX + n) for n in "abcd")
KIND, SUB, VALUE = URIRef(EX + "Kind"), URIRef(EX + "Sub"), URIRef(EX + "value")
TRIPLES = [
    (A, RDF.type, SUB),
    (SUB, RDFS.subClassOf, KIND),
    (B, RDF.type, KIND),
    (A, VALUE, Literal(1)),
    (A, VALUE, Literal("x")),
    (A, VALUE, Literal(1)),  # twice: there once
    (C, RDFS.subClassOf, SUB),
    (D, RDFS.subClassOf, C),
    (KIND, RDFS.subClassOf, D),  # a cycle: the closures end
]


def _both() -> tuple[Triples, Graph]:
    triples, graph = Triples(), Graph()
    for triple in TRIPLES:
        triples.add(triple)
        graph.add(triple)
    return triples, graph


def test_the_index_answers_what_rdflibs_graph_answers() -> None:
    triples, graph = _both()
    assert set(triples) == set(graph) and len(triples) == len(graph) == 8
    assert list(triples.objects(A, VALUE)) == [Literal(1), Literal("x")]
    assert set(triples.objects(A, VALUE)) == set(graph.objects(A, VALUE))
    assert set(triples.subjects(RDF.type, KIND)) == set(graph.subjects(RDF.type, KIND)) == {B}
    assert list(triples.objects(B, VALUE)) == [] and list(triples.subjects(VALUE, A)) == []
    for start in (KIND, SUB, C):
        assert set(triples.transitive_subjects(RDFS.subClassOf, start)) == set(
            graph.transitive_subjects(RDFS.subClassOf, start)
        )
        assert set(triples.transitive_objects(start, RDFS.subClassOf)) == set(
            graph.transitive_objects(start, RDFS.subClassOf)
        )
    assert (A, VALUE, Literal("x")) in triples and (A, VALUE, Literal(2)) not in triples
    assert set(triples.graph()) == set(graph)
