"""The tariff: a pure function from a complete draft to its premium, as documented in docs/tariffs.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

CENT = Decimal("0.01")


def money(value: Decimal) -> Decimal:
    """Round to cents, half up (the tariff's only rounding rule)."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Source:
    """Where a tariff input comes from: an attribute of the draft or a field of the risk object."""

    kind: Literal["attribute", "riskObject"]
    name: str

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Source:
        if "attribute" in raw:
            return cls("attribute", str(raw["attribute"]))
        if "riskObject" in raw:
            return cls("riskObject", str(raw["riskObject"]))
        raise ValueError(f"a tariff input needs 'attribute' or 'riskObject': {dict(raw)}")


@dataclass(frozen=True)
class Factor:
    """A multiplier looked up from one input, by bands (value up to a bound) or by exact value."""

    source: Source
    bands: tuple[tuple[Decimal | None, Decimal], ...] = ()
    values: Mapping[str, Decimal] | None = None

    def lookup(self, value: Any) -> Decimal:
        if self.values is not None:
            key = str(value)
            if key not in self.values:
                raise TariffError(f"no tariff factor for {self.source.name} = {value!r}")
            return self.values[key]
        number = Decimal(str(value))
        for bound, factor in self.bands:
            if bound is None or number <= bound:
                return factor
        raise TariffError(f"no band for {self.source.name} = {value!r}")


@dataclass(frozen=True)
class ComponentTariff:
    """A component's net premium: a fixed amount or a rate of an input, times its factors."""

    base: Decimal
    base_of: Source | None
    factors: tuple[Factor, ...]
    insurance_tax: Decimal


@dataclass(frozen=True)
class UnitTax:
    """A tax per unit of an input above an offset (with a minimum number of units), per period."""

    id: str
    label: Mapping[str, str]
    source: Source
    offset: Decimal
    minimum: Decimal
    rate: Decimal
    # not charged where a risk object's field has one of these values (an electric car is
    # exempt from the motor-related insurance tax): field name → values
    exempt: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tariff:
    """A product's tariff, read from its data file."""

    currency: str
    period: str
    components: Mapping[str, ComponentTariff]
    taxes: tuple[UnitTax, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Tariff:
        components: dict[str, ComponentTariff] = {}
        for component_id, spec in raw["components"].items():
            base = spec["base"]
            if isinstance(base, Mapping):
                amount, base_of = Decimal(str(base["rate"])), Source.parse(base)
            else:
                amount, base_of = Decimal(str(base)), None
            factors = tuple(_factor(f) for f in spec.get("factors", ()))
            components[component_id] = ComponentTariff(
                base=amount,
                base_of=base_of,
                factors=factors,
                insurance_tax=Decimal(str(spec["insuranceTax"])),
            )
        taxes = tuple(
            UnitTax(
                id=t["id"],
                label=t["label"],
                source=Source.parse(t),
                offset=Decimal(str(t.get("offset", 0))),
                minimum=Decimal(str(t.get("minimum", 0))),
                rate=Decimal(str(t["rate"])),
                exempt={str(k): tuple(str(v) for v in vs) for k, vs in t.get("exempt", {}).items()},
            )
            for t in raw.get("taxes", ())
        )
        return cls(str(raw["currency"]), str(raw["period"]), components, taxes)


def _factor(raw: Mapping[str, Any]) -> Factor:
    source = Source.parse(raw)
    if "values" in raw:
        values = {str(k): Decimal(str(v)) for k, v in raw["values"].items()}
        return Factor(source, values=values)
    bands = tuple(
        (None if bound is None else Decimal(str(bound)), Decimal(str(factor)))
        for bound, factor in raw["bands"]
    )
    return Factor(source, bands=bands)


class TariffError(ValueError):
    """The tariff has no rate for an input; the shapes should have prevented it."""


@dataclass(frozen=True)
class ComponentPremium:
    component_id: str
    net: Decimal
    insurance_tax: Decimal


@dataclass(frozen=True)
class TaxAmount:
    id: str
    label: Mapping[str, str]
    amount: Decimal


@dataclass(frozen=True)
class Premium:
    """A premium with every part shown: per component net and insurance tax, and unit taxes."""

    currency: str
    period: str
    components: tuple[ComponentPremium, ...]
    unit_taxes: tuple[TaxAmount, ...]

    @property
    def net(self) -> Decimal:
        return sum((c.net for c in self.components), Decimal(0))

    @property
    def insurance_tax(self) -> Decimal:
        return sum((c.insurance_tax for c in self.components), Decimal(0))

    @property
    def gross(self) -> Decimal:
        return self.net + self.insurance_tax + sum((t.amount for t in self.unit_taxes), Decimal(0))


@dataclass(frozen=True)
class TariffInput:
    """What the tariff reads: attributes by component, and the risk object's fields by name."""

    included: Sequence[str]
    attributes: Mapping[str, Mapping[str, Any]]
    risk_object: Mapping[str, Any]

    def value(self, source: Source, component_id: str) -> Any:
        if source.kind == "riskObject":
            found = self.risk_object.get(source.name)
        else:
            found = self.attributes.get(component_id, {}).get(source.name)
            if found is None:
                found = self.attributes.get("", {}).get(source.name)
        if found is None:
            raise TariffError(f"the tariff needs {source.kind} {source.name}, which is missing")
        return found


def calculate(tariff: Tariff, data: TariffInput) -> Premium:
    """The premium of a complete draft: pure, deterministic, rounded as docs/tariffs.md says."""
    components = []
    for component_id in data.included:
        spec = tariff.components.get(component_id)
        if spec is None:
            continue
        amount = spec.base
        if spec.base_of is not None:
            amount *= Decimal(str(data.value(spec.base_of, component_id)))
        for factor in spec.factors:
            amount *= factor.lookup(data.value(factor.source, component_id))
        net = money(amount)
        components.append(ComponentPremium(component_id, net, money(net * spec.insurance_tax)))
    taxes = []
    for tax in tariff.taxes:
        if any(str(data.risk_object.get(f)) in values for f, values in tax.exempt.items()):
            continue  # exempt by law: no line at all, not a line of 0
        units = max(Decimal(str(data.value(tax.source, ""))) - tax.offset, tax.minimum)
        taxes.append(TaxAmount(tax.id, tax.label, money(units * tax.rate)))
    return Premium(tariff.currency, tariff.period, tuple(components), tuple(taxes))
