"""The protocol of a run: one JSON line per event, field names after the OpenTelemetry GenAI and
MCP conventions where they have one. Grading reads nothing else."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

RUN_START = "run.start"
TOOLS_LIST = "mcp.tools.list"
MODEL_CALL = "gen_ai.client.inference"
TOOL_CALL = "mcp.tool.call"
FINAL = "gen_ai.final_answer"
# the person using the client answered a confirmation of a binding call: answer (confirm,
# decline), via (the confirmation page, an elicitation, the chat page), what they were shown
PERSON = "person.confirmation"
RUN_END = "run.end"
# the broker endpoint as a scenario's server: every insurer's tools once, each call naming its
# insurer in the argument ``insurer``
BROKER_ENDPOINT = "insurers"
INSURER_ARGUMENT = "insurer"


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class ProtocolWriter:
    """Appends events to one JSONL file; each is on disk before the run goes on."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._out: TextIO = path.open("w", encoding="utf-8")
        self.events: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        entry = {"event": event, "time": now(), **fields}
        self.events.append(entry)
        self._out.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        self._out.flush()
        return entry

    def close(self) -> None:
        self._out.close()


def read_protocol(path: Path) -> list[dict[str, Any]]:
    """The events of a protocol file, in order (line n is event n - 1)."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def events_of(
    protocol: Sequence[Mapping[str, Any]], kind: str
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The events of one kind with their line numbers (1-based)."""
    for index, event in enumerate(protocol):
        if event.get("event") == kind:
            yield index + 1, event


def insurer_at(server: str, arguments: object) -> str:
    """The insurer a call to ``server`` with ``arguments`` goes to: the server's, or at the
    broker endpoint the one the arguments name."""
    if server != BROKER_ENDPOINT:
        return server
    return str(arguments.get(INSURER_ARGUMENT, "")) if isinstance(arguments, Mapping) else ""


def insurer_of(event: Mapping[str, Any]) -> str:
    """The insurer a recorded tool call went to."""
    return insurer_at(str(event.get("mcp.server", "")), event.get("gen_ai.tool.call.arguments"))
