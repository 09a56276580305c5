"""The norm's problem types (RFC 9457), loaded from package data."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from omds_ld import yamlfile


@dataclass(frozen=True)
class ProblemType:
    """One problem type of the norm: its IRI, HTTP status and titles."""

    slug: str
    uri: str
    status: int
    title_en: str
    title_de: str
    description: str


def load_problem_types() -> dict[str, ProblemType]:
    """Every problem type of the norm, by slug."""
    raw = yamlfile.load_file(resources.files("omds_ld.norm") / "data", "problems.yaml")
    base: str = raw["base"]
    return {
        slug: ProblemType(
            slug=slug,
            uri=base + slug,
            status=int(entry["status"]),
            title_en=entry["title"]["en"],
            title_de=entry["title"]["de"],
            description=entry["description"],
        )
        for slug, entry in raw["types"].items()
    }
