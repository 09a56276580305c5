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
    r"kaufpreis|fahrzeugwert|wert\b|value\b|haftung bis|up to|bis zu|"
    r"möglich|possible|options?\b|alternativ|wählbar|available",
    re.IGNORECASE,
)
# words that state an amount next to them as a price: a figure an answer showed in another role
# (a deductible of 150 EUR) stated so ("monatlich 150 EUR") must follow from the prices given
PRICE_WORDS = re.compile(
    r"prämie|premium|kostet|kosten\b|costs?\b|monatlich|monthly|jährlich|yearly|annual|"
    r"im jahr|pro jahr|per year|a year|im monat|pro monat|per month|a month|raten?\b|"
    r"instal+ments?|gesamt|total|netto|net\b|brutto|gross|steuer|tax\b|zahlen|pay",
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
    # a price word stands nearest to it: stated as a price in so many words
    said_price: bool = False


# a currency written right before or right after a number (a space between at most): "€ 1.684,88",
# "EUR 2,396.65", "1684.88 EUR", "1.000 €"; "Kraftfahrt 2025): EUR 2,396.65" states one amount,
# "654,12 €. 2) Antrag" one too
_BEFORE = re.compile(r"(?:€|\bEUR|\bEuros?|\beuros?)[\u00a0\u202f ]?$")
_AFTER = re.compile(r"^[\u00a0\u202f ]?(?:€|EUR\b|Euros?\b|euros?\b)")


def mentions(text: str) -> list[Mention]:
    """The amounts of money a text states (a number with a currency right before or after it).
    A word such as "Selbstbehalt" or "sum insured" makes the amount nearest to it (within 40
    characters, measured from the amount with its currency) something other than a price: "mit
    500 EUR Selbstbehalt kostet sie 730 EUR" states a deductible and a price; "Third-party
    liability (20,000,000 EUR limit): 324.38 EUR net" a limit and a price."""
    found = []
    for match in NUMBER.finditer(text):
        amount = number(match.group())
        before = _BEFORE.search(text, max(0, match.start() - 7), match.start())
        after = _AFTER.search(text[match.end() : match.end() + 7])
        if amount is None or not (before or after):
            continue
        start = before.start() if before else match.start()
        end = match.end() + (after.end() if after else 0)
        found.append((start, end, amount))
    spans = [(start, end) for start, end, _ in found]
    other = _nearest_to(NOT_A_PREMIUM, text, spans)
    said = _nearest_to(PRICE_WORDS, text, spans)
    return [
        Mention(amount, i not in other, i in said and i not in other)
        for i, (_, _, amount) in enumerate(found)
    ]


def _nearest_to(words: re.Pattern[str], text: str, spans: list[tuple[int, int]]) -> set[int]:
    """The amounts (by index) that are the nearest, within 40 characters, to a word of
    ``words``: each word speaks of one amount."""
    marked: set[int] = set()
    for word in words.finditer(text) if spans else ():
        distances = [max(0, start - word.end(), word.start() - end) for start, end in spans]
        nearest = min(range(len(spans)), key=distances.__getitem__)
        if distances[nearest] <= 40:
            marked.add(nearest)
    return marked


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
        # every figure an answer showed, in whatever role (a limit, a sum insured, one of a
        # deductible's options): given as it is, never a part of a sum
        self.shown: dict[Decimal, str] = {}
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
            for figure in amounts_in(text):
                self.shown.setdefault(figure, where)
        for key, value in _numbers(result):
            if key in MONEY_KEYS:
                self.add((Decimal(str(value)).quantize(CENT),), where)

    def how(self, amount: Decimal, said_price: bool = False) -> str | None:
        """How ``amount`` follows from what was given (None: from nothing). A figure an answer
        showed in whatever role is given as itself, unless it is ``said_price``: stated as a
        price in so many words, it must be one."""
        if amount in self.money:
            return f"given ({self.money[amount]})"
        if amount in self.task:
            return "given (the task)"
        if amount in self.shown and not said_price:
            return f"shown ({self.shown[amount]}), as a figure of its own"
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
            # a total less a part that is itself two amounts (net plus its tax)
            note(c - a - b, f"{c} − ({a} + {b})")
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
