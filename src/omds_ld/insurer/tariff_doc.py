"""Each product's tariff as the Markdown tables docs/tariffs.md shows: written by a command
(``omds-ld insurer tariffs``), so a fourth insurer's tables come from its data, never by hand."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from omds_ld.insurer.data import Insurer, Product
from omds_ld.insurer.tariff import Source


def _num(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _source(source: Source) -> str:
    return f"{'attribute' if source.kind == 'attribute' else 'risk object'} `{source.name}`"


def product_tables(insurer: Insurer, product: Product) -> str:
    tariff = product.tariff
    label = product.label.get(insurer.language) or next(iter(product.label.values()))
    lines = [f"### {insurer.display_name}: {label} (`{product.id}`)", ""]
    lines.append(f"Currency {tariff.currency}, period {tariff.period}.")
    lines.append("")
    lines.append("| component | base | insurance tax |")
    lines.append("|---|---|---|")
    for component_id, spec in tariff.components.items():
        base = f"{_num(spec.base)} × {_source(spec.base_of)}" if spec.base_of else _num(spec.base)
        lines.append(f"| `{component_id}` | {base} | {_num(spec.insurance_tax * 100)} % |")
    lines.append("")
    for component_id, spec in tariff.components.items():
        for factor in spec.factors:
            lines.append(f"Factor of `{component_id}` by {_source(factor.source)}:")
            lines.append("")
            if factor.values is not None:
                lines.append("| value | factor |")
                lines.append("|---|---|")
                lines += [f"| {k} | {_num(v)} |" for k, v in factor.values.items()]
            else:
                lines.append("| up to (inclusive) | factor |")
                lines.append("|---|---|")
                lines += [
                    f"| {'above' if bound is None else _num(bound)} | {_num(f)} |"
                    for bound, f in factor.bands
                ]
            lines.append("")
    for tax in tariff.taxes:
        name = tax.label.get(insurer.language) or next(iter(tax.label.values()))
        exempt = "; ".join(
            f"not charged where the risk object's `{field}` is {' or '.join(f'`{v}`' for v in values)}"
            for field, values in tax.exempt.items()
        )
        lines.append(
            f"{name} (`{tax.id}`): max({_source(tax.source)} − {_num(tax.offset)}, "
            f"{_num(tax.minimum)}) × {_num(tax.rate)} per period"
            + (f"; {exempt}." if exempt else ".")
        )
        lines.append("")
    return "\n".join(lines)


BEGIN = "<!-- tables: written by `omds-ld insurer tariffs --write docs/tariffs.md` -->"
END = "<!-- /tables -->"


def tables(insurers: Mapping[str, Insurer]) -> str:
    """Every product's tables, insurer by insurer, in the order of their names."""
    return "\n".join(
        product_tables(insurer, product)
        for _, insurer in sorted(insurers.items())
        for product in insurer.products.values()
    )


def with_tables(document: str, insurers: Mapping[str, Insurer]) -> str:
    """The document with the part between the markers written anew from the data."""
    head, found, rest = document.partition(BEGIN)
    if not found:
        raise ValueError(f"the document has no {BEGIN!r} marker")
    _, found_end, tail = rest.partition(END)
    if not found_end:
        raise ValueError(f"the document has no {END!r} marker")
    return f"{head}{BEGIN}\n\n{tables(insurers)}\n{END}{tail}"
