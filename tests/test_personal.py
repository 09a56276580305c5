"""Personal data as the norm marks them are masked in what is kept: in the node they are
personal for, and where their values are repeated in texts; nothing else changes."""

from __future__ import annotations

from omds_ld.norm.personal import masked
from tests.mcp.applications import OLD_TIMBER_HOUSE, PAYMENT, PERSON


def test_a_persons_fields_and_a_payments_are_masked_the_iban_keeps_its_last_four() -> None:
    kept = masked({"body": {"bc:policyholder": PERSON, "bc:payment": PAYMENT}})
    person, payment = kept["body"]["bc:policyholder"], kept["body"]["bc:payment"]
    assert person["@type"] == "p:Person"
    assert {k: v for k, v in person.items() if k != "@type"} == dict.fromkeys(
        (k for k in PERSON if k != "@type"), "•••"
    )
    assert payment["bc:iban"] == "•••" + PAYMENT["bc:iban"][-4:]
    assert payment["bc:accountHolder"] == "•••"
    assert payment["bc:paymentMethod"] == PAYMENT["bc:paymentMethod"]


def test_a_risk_objects_postal_code_is_not_a_persons() -> None:
    assert masked({"risk": OLD_TIMBER_HOUSE}) == {"risk": OLD_TIMBER_HOUSE}


def test_values_repeated_in_a_text_are_masked_as_words_never_inside_a_number() -> None:
    record = {
        "arguments": {"bc:policyholder": PERSON},
        "text": f"Policyholder Anna Berger (Annabel), {PERSON['p:birthDate']}, in "
        f"{PERSON['p:postalCode']} Wien; premium {PERSON['p:postalCode']}.50 EUR",
    }
    assert masked(record)["text"] == (
        "Policyholder ••• ••• (Annabel), •••, in 1010 •••; premium 1010.50 EUR"
    )
