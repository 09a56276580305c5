"""An insurer's data checked when it is loaded: every mistake a tariff file can hide, found at start.

A tariff that names a field no shape has, an enumeration value without a factor, a component
without a price: each loads fine and fails the first calculation that reaches it (a 500 an agent
is told to retry), or prices a component at 0. The loader runs these checks on every insurer
folder, and ``omds-ld insurer check DIR`` runs them for an insurer's author. Pure functions of the
loaded data; each finding names the file, the key and what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omds_ld.insurer.tariff import Factor, Source, Tariff
from omds_ld.norm.shapes import Field
from omds_ld.settings import ConfigError


@dataclass(frozen=True)
class Finding:
    """One mistake in an insurer's data: where (file and key) and what is wrong."""

    file: str
    key: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.detail}"


class InsurerDataError(ConfigError, ValueError):
    """An insurer's folder has mistakes; the message lists each with its file and key (a
    configuration that cannot run: ``findings`` are its lines)."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("\n".join(str(f) for f in findings))
        self.findings = findings


@dataclass(frozen=True)
class ProductFacts:
    """What the checks need of one product: its file, components, their fields, its tariff."""

    file: str
    component_ids: tuple[str, ...]
    free: frozenset[str]  # components declared free of charge (``free: true``)
    attributes: Mapping[str, Mapping[str, Field]]  # component id ("" the root) → name → field
    risk_fields: Mapping[str, Field]
    tariff: Tariff
    # each warning's risk object field and attribute, and the attribute's values its table names
    warnings: tuple[tuple[str, str, frozenset[str]], ...] = ()


def _field_of(facts: ProductFacts, source: Source, component: str) -> Field | None:
    if source.kind == "riskObject":
        return facts.risk_fields.get(source.name)
    return facts.attributes.get(component, {}).get(source.name) or facts.attributes.get("", {}).get(
        source.name
    )


def _input_findings(
    facts: ProductFacts, source: Source, component: str, key: str
) -> Iterator[Finding]:
    if _field_of(facts, source, component) is None:
        kind = "risk object" if source.kind == "riskObject" else "attribute"
        known = sorted(
            facts.risk_fields
            if source.kind == "riskObject"
            else {**facts.attributes.get("", {}), **facts.attributes.get(component, {})}
        )
        yield Finding(
            facts.file,
            key,
            f"{source.name!r} is no {kind} field of its shapes; fields: {', '.join(known)}",
        )


def _factor_findings(
    facts: ProductFacts, factor: Factor, component: str, key: str
) -> Iterator[Finding]:
    yield from _input_findings(facts, factor.source, component, key)
    field = _field_of(facts, factor.source, component)
    if field is None:
        return
    if factor.values is not None and field.in_values is not None:
        for value in field.in_values:
            if str(value) not in factor.values:
                yield Finding(
                    facts.file,
                    key,
                    f"{factor.source.name} may be {value!r} (its shape's sh:in), "
                    "but the tariff has no factor for it",
                )
    if factor.values is not None and field.in_values is None:
        yield Finding(
            facts.file,
            key,
            f"{factor.source.name} has factors by value, but its shape does not list the "
            "values it admits (sh:in): any other value would have no factor",
        )
    if factor.bands and factor.bands[-1][0] is not None:
        high = field.max_inclusive
        if high is None or float(str(high)) > float(factor.bands[-1][0]):
            yield Finding(
                facts.file,
                key,
                f"the last band of {factor.source.name} ends at {factor.bands[-1][0]}, but the "
                f"shape admits more ({'no maximum' if high is None else high}): end it with null",
            )


def check_product(facts: ProductFacts) -> list[Finding]:
    """Every mistake in one product's tariff against its components and shapes."""
    findings: list[Finding] = []
    tariff = facts.tariff
    for component in facts.component_ids:
        if component not in tariff.components and component not in facts.free:
            findings.append(
                Finding(
                    facts.file,
                    f"tariff.components.{component}",
                    "the component has no tariff entry: price it, or declare it `free: true`",
                )
            )
    for component, spec in tariff.components.items():
        key = f"tariff.components.{component}"
        if component not in facts.component_ids:
            findings.append(
                Finding(
                    facts.file,
                    key,
                    f"no component {component!r}; components: {', '.join(facts.component_ids)}",
                )
            )
            continue
        if spec.base_of is not None:
            findings += _input_findings(facts, spec.base_of, component, f"{key}.base")
        for index, factor in enumerate(spec.factors):
            findings += _factor_findings(facts, factor, component, f"{key}.factors[{index}]")
    for index, tax in enumerate(tariff.taxes):
        findings += _input_findings(facts, tax.source, "", f"tariff.taxes[{index}]")
        for name in tax.exempt:  # an exemption reads a field of the risk object
            findings += _input_findings(
                facts, Source("riskObject", name), "", f"tariff.taxes[{index}].exempt"
            )
    findings += _unlabelled_values(facts)
    for index, (field, attribute, values) in enumerate(facts.warnings):
        key = f"warnings[{index}]"
        findings += _input_findings(facts, Source("riskObject", field), "", key)
        findings += _input_findings(facts, Source("attribute", attribute), "", key)
        admissible = getattr(facts.attributes.get("", {}).get(attribute), "in_values", None)
        for value in sorted(values - {str(v) for v in admissible or ()} if admissible else ()):
            findings.append(
                Finding(
                    facts.file, key, f"its table names {value!r}, no value {attribute} may have"
                )
            )
    return findings


def _unlabelled_values(facts: ProductFacts) -> list[Finding]:
    """Every coded value of an enumeration (a text in sh:in) says what it means, in German and
    English (p:valueLabel): an agent must not guess that St is Styria."""
    fields = [*facts.risk_fields.values()]
    fields += [f for node in facts.attributes.values() for f in node.values()]
    findings = []
    for field in fields:
        labelled = dict(field.value_labels)
        for value in field.in_values or ():
            if isinstance(value, str) and not {"de", "en"} <= set(labelled.get(value, {})):
                findings.append(
                    Finding(
                        facts.file,
                        f"shapes: {field.local_name}",
                        f"the value {value!r} has no p:valueLabel in German and English",
                    )
                )
    return findings


def product_facts(file: str, raw: Mapping[str, Any], product: Any) -> ProductFacts:
    """The facts of a loaded product (``omds_ld.insurer.data.Product``) and its raw file."""
    return ProductFacts(
        file=file,
        component_ids=tuple(c.id for c in product.components),
        free=frozenset(c["id"] for c in raw.get("components", ()) if c.get("free")),
        attributes={node.id: {a.local_name: a for a in node.attributes} for node in product.nodes},
        risk_fields={f.local_name: f for f in product.risk_object.shape.fields},
        tariff=product.tariff,
        warnings=tuple(
            (r.risk_field, r.attribute, frozenset(r.table.values())) for r in product.warnings
        ),
    )
