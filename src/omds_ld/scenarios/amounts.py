"""Amounts of money in a run, as a broker reads them: what a text states and as what (a premium,
or a deductible, a sum insured, a limit, a list price), what the task and the answers gave, and
how an amount of the final answer follows from those by the arithmetic a broker writes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

NUMBER = re.compile(r"\d[\d.,\u00a0\u202f]*\d|\d")  # no plain space: "2021, 110 kW" is two
CURRENCY = re.compile(r"€|\bEUR\b|\bEuro\b|\beuro\b|\bEuros\b|\beuros\b")
CENT = Decimal("0.01")
# words that make an amount next to them something other than a price of insurance
NOT_A_PREMIUM = re.compile(
    r"selbstbehalt|deductible|excess|versicherungssumme|sum insured|sums insured|"
    r"deckungssumme|deckung|coverage|limit|höchst|maximum|listenpreis|list price|neupreis|"
    r"kaufpreis|fahrzeugwert|wert\b|value\b|haftung bis|up to|bis zu",
    re.IGNORECASE,
)
# what a broker divides a yearly amount by, or multiplies an instalment by
INSTALMENTS = (2, 4, 12)
# keys of an answer's structured data whose numbers are money
MONEY_KEYS = frozenset({"gross", "net", "amount", "insuranceTax", "bc:gross", "bc:net",
                        "bc:amount", "bc:insuranceTax"})  # fmt: skip


def number(token: str) -> Decimal | None:
    """A number as German or English write it (1.684,88 · 1,684.88 · 1684,88 · 32.000)."""
    token = re.sub(r"[\u00a0\u202f ]", "", token).strip(".,")
    if not token:
        return None
    last_dot, last_comma = token.rfind("."), token.rfind(",")
    decimal_at = max(last_dot, last_comma)
    if decimal_at >= 0 and (
        (last_dot >= 0 and last_comma >= 0) or len(token) - decimal_at - 1 != 3
    ):
        whole, fraction = token[:decimal_at], token[decimal_at + 1 :]
    else:
        whole, fraction = token, ""
    digits = re.sub(r"[.,]", "", whole)
    try:
        return Decimal(f"{digits}.{fraction or '0'}").quantize(CENT)
    except ArithmeticError:
        return None


def amounts_in(text: str) -> set[Decimal]:
    """Every number a text writes."""
    return {n for t in NUMBER.findall(text) if (n := number(t)) is not None}


def spellings(amount: Decimal) -> list[str]:
    """How an amount is written: 1684.88 · 1,684.88 · 1.684,88 · 1 684,88 · 1684,88."""
    plain = f"{amount:.2f}"
    english = f"{amount:,.2f}"
    german = english.replace(",", "X").replace(".", ",").replace("X", ".")
    return [plain, english, german, german.replace(".", " "), plain.replace(".", ",")]


@dataclass(frozen=True)
class Mention:
    """An amount of money a text states, and whether it is stated as a price of insurance (a
    premium or a part of one) or as another amount (a deductible, a sum insured, a limit)."""

    amount: Decimal
    priced: bool


def mentions(text: str) -> list[Mention]:
    """The amounts of money a text states (a number with a currency right before or after it).
    A word such as "Selbstbehalt" or "sum insured" makes the amount nearest to it (within 40
    characters) something other than a price: "mit 500 EUR Selbstbehalt kostet sie 730 EUR"
    states a deductible and a price."""
    found = []
    for match in NUMBER.finditer(text):
        around = text[max(0, match.start() - 6) : match.end() + 7]
        amount = number(match.group())
        if amount is not None and CURRENCY.search(around):
            found.append((match.start(), match.end(), amount))
    priced = [True] * len(found)
    for word in NOT_A_PREMIUM.finditer(text) if found else ():
        distances = [max(0, start - word.end(), word.start() - end) for start, end, _ in found]
        nearest = min(range(len(found)), key=distances.__getitem__)
        if distances[nearest] <= 40:
            priced[nearest] = False
    return [Mention(amount, flag) for (_, _, amount), flag in zip(found, priced, strict=True)]


def money_in(text: str) -> list[Decimal]:
    """The amounts of money a text states, whatever they are stated as."""
    return [m.amount for m in mentions(text)]


class Ledger:
    """The amounts a run was given, each with where (the task, a protocol line), and how an
    amount follows from them: as given, a sum or difference of two or three of the amounts of
    money, a split into instalments (or an instalment times their number), a rounding."""

    def __init__(self, task: str = "") -> None:
        # the task's own figures, whatever they are (the customer's data, what they agreed to)
        self.task = amounts_in(task)
        self.money: dict[Decimal, str] = {}  # the amounts of money given, and where
        self.add(money_in(task), "the task")

    def add(self, amounts: Iterable[Decimal], where: str) -> None:
        for amount in amounts:
            if amount > 0:
                self.money.setdefault(amount, where)

    def add_answer(self, result: object, texts: Iterable[str], line: int) -> None:
        """An answer's amounts of money: by its keys (gross, net, amount, insurance tax) and
        by the currency its texts name beside a number; its other numbers (a year, a power,
        a count) are no money."""
        where = f"line {line}"
        for text in texts:
            self.add(money_in(text), where)
        for key, value in _numbers(result):
            if key in MONEY_KEYS:
                self.add((Decimal(str(value)).quantize(CENT),), where)

    def how(self, amount: Decimal) -> str | None:
        """How ``amount`` follows from what was given (None: from nothing)."""
        if amount in self.money:
            return f"given ({self.money[amount]})"
        if amount in self.task:
            return "given (the task)"
        derived = self._derived()
        if amount in derived:
            return derived[amount]
        if amount == amount.to_integral_value():  # "about 1,685": a rounding to whole units
            for value, how in itertools.chain(self.money.items(), derived.items()):
                if abs(value - amount) < Decimal("0.5"):
                    return f"{value} rounded" + ("" if value in self.money else f" ({how})")
        return None

    def _derived(self) -> dict[Decimal, str]:
        money = sorted(self.money)[-60:]  # the largest: a premium, its parts, their totals
        derived: dict[Decimal, str] = {}

        def note(value: Decimal, how: str) -> None:
            if value > 0:
                derived.setdefault(value.quantize(CENT), how)

        for a in money:
            for n in INSTALMENTS:
                note(a / n, f"{a} / {n}")
                note(a * n, f"{a} × {n}")
        for a, b in itertools.combinations(money, 2):
            note(a + b, f"{a} + {b}")
            note(abs(a - b), f"{max(a, b)} − {min(a, b)}")
        for a, b, c in itertools.combinations(money[-25:], 3):
            note(a + b + c, f"{a} + {b} + {c}")
        return derived


def _numbers(value: object, key: str = "") -> Iterable[tuple[str, float | int | str]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield key, value
    elif isinstance(value, str) and key in MONEY_KEYS and number(value) is not None:
        yield key, str(number(value))
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _numbers(item, str(name))
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item, key)
