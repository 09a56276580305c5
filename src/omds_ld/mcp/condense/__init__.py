"""Condensed answers: the insurer's JSON-LD answer cut down to what a model needs for its next move.

A pure function of the answer (``condense``, ``condense_problem``). The model gets the business
case; the draft as a tree with the IRIs of its nodes and what can be included; attributes with
value and admissible range; risk objects and the validation report; the premium; the next steps
as "tool · target · expected shapes"; and the fields of every shape a next step expects. As
compact text, and as ``structuredContent`` matching ``OUTPUT_SCHEMA``.

One module per part of an answer: ``draft`` (the tree, defaults, risk objects), ``report`` (the
validation report), ``premium``, ``steps`` (next steps), ``shapes`` (their fields, by
``fields``), one reader per answer type (``readers``), what the session was shown before
(``memory``; a client without a session carries it: ``omds_ld.mcp.seen``), the structured
form and where it travels (``form``), all written through one ``writer``; ``answers`` puts a
whole answer together. What a call could not have changed (the norm's ``x-omds-ld`` keeps, as
``Effects``) is said to be unchanged by it: an answer is short without any memory.
"""

from omds_ld.mcp.condense.answers import condense, condense_problem
from omds_ld.mcp.condense.form import (
    ANSWER_META,
    OUTPUT_SCHEMA,
    STRUCTURED_SCHEMA,
    SUMMARY_PARTS,
    answer_extension,
    answer_of,
    summary_of,
)
from omds_ld.mcp.condense.memory import DEFAULTS_AS_BEFORE
from omds_ld.mcp.condense.premium import per_period
from omds_ld.mcp.condense.readers import ANSWER_TYPES, MAX_PRODUCTS, READERS
from omds_ld.mcp.condense.report import MAX_VIOLATIONS
from omds_ld.mcp.condense.steps import MAX_NEXT_STEPS
from omds_ld.mcp.condense.writer import Condensed, Effects, Shared, label, local, many

__all__ = [
    "ANSWER_META",
    "ANSWER_TYPES",
    "DEFAULTS_AS_BEFORE",
    "MAX_NEXT_STEPS",
    "MAX_PRODUCTS",
    "MAX_VIOLATIONS",
    "OUTPUT_SCHEMA",
    "READERS",
    "STRUCTURED_SCHEMA",
    "SUMMARY_PARTS",
    "Condensed",
    "Effects",
    "Shared",
    "answer_extension",
    "answer_of",
    "condense",
    "condense_problem",
    "label",
    "local",
    "many",
    "per_period",
    "summary_of",
]
