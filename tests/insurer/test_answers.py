"""Every answer is JSON-LD of the norm: it expands locally and uses only terms of the vocabulary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from omds_ld.norm import load_norm
from omds_ld.norm.jsonld import expand
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer, call, step

NORM = load_norm()
PREFIXES = ("bc:", "p:", "pk:")


def curies(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key.startswith(PREFIXES):
                yield key
            if key == "@type" and isinstance(value, str) and value.startswith(PREFIXES):
                yield value
            if key != "bc:parameters":
                yield from curies(value)
    elif isinstance(node, list):
        for item in node:
            yield from curies(item)


def flow_answers(client: httpx.Client, server: ExampleServer) -> list[dict[str, Any]]:
    answers = [client.get(server.api("pfefferminzia") + "/process-knowledge").json()]
    answers.append(call(client, server, step(answers[-1], "listProducts")).json())
    start = step(answers[-1], "createCalculation")
    answers.append(call(client, server, start, {"p:hasRootProduct": start["bc:target"]}).json())
    answers.append(call(client, server, step(answers[-1], "createRiskObject"), SKODA).json())
    answers.append(call(client, server, step(answers[-1], "calculatePremium")).json())
    answers.append(call(client, server, step(answers[-1], "createOffer")).json())
    products = client.get(server.api("disrupto") + "/products").json()
    answers.append(call(client, server, step(products, "readDefaultInstance")).json())
    answers.append(client.get(server.api("disrupto") + "/shapes/VehicleShape").json())
    answers.append(client.get(server.api("pfefferminzia") + "/products/kraftfahrt-2025").json())
    return answers


def test_answers_expand_with_the_local_context(client: httpx.Client, server: ExampleServer) -> None:
    for answer in flow_answers(client, server):
        expanded = expand(answer)
        assert expanded, answer["@type"]


def test_answers_use_only_terms_of_the_vocabulary(
    client: httpx.Client, server: ExampleServer
) -> None:
    used = {term for answer in flow_answers(client, server) for term in curies(answer)}
    unknown = {term for term in used if _unknown(term)}
    assert not unknown, f"terms without labels in vocab.ttl: {sorted(unknown)}"


def _unknown(term: str) -> bool:
    try:
        NORM.term(term)
    except KeyError:
        return True
    return False


def test_every_next_step_names_an_operation_and_its_address(
    client: httpx.Client, server: ExampleServer
) -> None:
    for answer in flow_answers(client, server):
        for next_step in answer["bc:nextStep"]:
            operation = NORM.operation(next_step["bc:operation"])
            assert next_step["bc:method"] == operation.method
            assert "{" not in next_step["bc:href"]
            assert next_step["bc:target"].startswith("https://")
