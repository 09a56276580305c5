"""A data graph as the compiled checks of ``omds_ld.insurer.constraints`` read it: rdflib's
terms in two plain indexes, without rdflib's store.

A draft is validated at every read and every change (readCalculation, calculatePremium, …);
building it as an rdflib ``Graph`` cost as much as checking it (the memory store keeps every
triple under its contexts, in several indexes). This holds the same triples (a set: one added
twice is there once) and answers what the checks ask: the objects of a subject's property, the
subjects of a property's object, the transitive closures rdflib gives, membership. Where
pySHACL validates (shapes the checks do not compile), ``graph()`` gives the rdflib graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rdflib import Graph
from rdflib.term import Node

Triple = tuple[Node, Node, Node]


class Triples:
    """Triples indexed by subject and property, and by property and object."""

    def __init__(self) -> None:
        # dicts as ordered sets: the objects in the order they were added, each once
        self._objects: dict[Node, dict[Node, dict[Node, None]]] = {}
        self._subjects: dict[tuple[Node, Node], dict[Node, None]] = {}

    def add(self, triple: Triple) -> None:
        subject, predicate, value = triple
        self._objects.setdefault(subject, {}).setdefault(predicate, {})[value] = None
        self._subjects.setdefault((predicate, value), {})[subject] = None

    def objects(self, subject: Node, predicate: Node) -> Iterator[Node]:
        return iter(self._objects.get(subject, {}).get(predicate, {}))

    def subjects(self, predicate: Node, value: Node) -> Iterator[Node]:
        return iter(self._subjects.get((predicate, value), {}))

    def transitive_subjects(self, predicate: Node, value: Node) -> Iterator[Node]:
        """``value`` and every subject that reaches it over ``predicate``, as rdflib's."""
        return self._closure(value, lambda node: self.subjects(predicate, node))

    def transitive_objects(self, subject: Node, predicate: Node) -> Iterator[Node]:
        """``subject`` and every object it reaches over ``predicate``, as rdflib's."""
        return self._closure(subject, lambda node: self.objects(node, predicate))

    @staticmethod
    def _closure(start: Node, step: Callable[[Node], Iterator[Node]]) -> Iterator[Node]:
        seen = {start}
        todo = [start]
        while todo:
            node = todo.pop()
            yield node
            for found in step(node):
                if found not in seen:
                    seen.add(found)
                    todo.append(found)

    def __contains__(self, triple: Triple) -> bool:
        subject, predicate, value = triple
        return value in self._objects.get(subject, {}).get(predicate, {})

    def __iter__(self) -> Iterator[Triple]:
        for subject, properties in self._objects.items():
            for predicate, values in properties.items():
                for value in values:
                    yield subject, predicate, value

    def __len__(self) -> int:
        return sum(len(v) for properties in self._objects.values() for v in properties.values())

    def graph(self) -> Graph:
        """The same triples as an rdflib graph (for pySHACL)."""
        graph = Graph()
        for triple in self:
            graph.add(triple)
        return graph


# what the compiled checks validate: an rdflib graph, or the same triples indexed here
Data = Graph | Triples
