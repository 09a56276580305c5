"""YAML documents read with libyaml's parser where PyYAML has it: the same safe subset as
``yaml.safe_load``, some ten times faster (a server reads its insurers' files and the norm at
every start).

A YAML file read at every start may come with its JSON rendering beside it (``name.json``:
the document and the SHA-256 of the text it was made of). Where the rendering was made of the
very text read, the document is the rendering's, and PyYAML is not even imported (a desktop
client waits for a stdio server's start: importing PyYAML and parsing the norm's OpenAPI file
took about 45 ms of it); any other text (an edit not rendered yet) is parsed as YAML, as if
there were no rendering. ``python -m omds_ld.yamlfile FILE...`` renders files anew."""

from __future__ import annotations

import hashlib
import json
import sys
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any


def load(text: str) -> Any:
    """The document of ``text``; ``yaml.YAMLError`` where it is no YAML."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rendering_of(text: str) -> str:
    """The JSON rendering of a YAML text: its document and the SHA-256 of the text. ValueError
    where the document is not JSON as it is (a date, a number as a key): it is read as YAML."""
    document = load(text)
    if json.loads(json.dumps(document, default=str)) != document:
        raise ValueError("the document has values JSON writes otherwise (a date, a key not text)")
    return json.dumps({"sha256": _digest(text), "document": document}, ensure_ascii=False) + "\n"


def rendered(text: str, rendering: str | None) -> Any:
    """The document of ``text``: the rendering's where it was made of this very text, else
    parsed from the text."""
    if rendering is not None:
        try:
            kept = json.loads(rendering)
        except ValueError:
            kept = None
        if isinstance(kept, dict) and kept.get("sha256") == _digest(text) and "document" in kept:
            return kept["document"]
    return load(text)


def load_file(folder: Traversable, name: str) -> Any:
    """The document of the YAML file ``name`` in ``folder`` (package data, or a path), by its
    rendering where a fresh one is beside it."""
    text = folder.joinpath(name).read_text("utf-8")
    beside = folder.joinpath(f"{name}.json")
    return rendered(text, beside.read_text("utf-8") if beside.is_file() else None)


def main(paths: list[str]) -> int:
    """Write each YAML file's rendering beside it (``openapi.yaml`` → ``openapi.yaml.json``)."""
    import yaml

    failed = 0
    for name in paths:
        path = Path(name)
        target = path.with_name(path.name + ".json")
        try:
            text = rendering_of(path.read_text("utf-8"))
        except (ValueError, yaml.YAMLError) as error:
            print(f"{path}: not rendered: {error}", file=sys.stderr)
            failed = 1
            continue
        target.write_text(text, "utf-8")
        print(f"{target} ({target.stat().st_size} bytes)")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
