"""Real MCP clients for tests: the official SDK's Client over stdio and Streamable HTTP."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import mcp
import mcp_types as types
from mcp.client.stdio import StdioServerParameters

from omds_ld.mcp.condense import answer_extension, answer_of
from tests.servers import ExampleServer

TRANSPORTS = ["stdio", "http-2025-11-25", "http-2026-07-28"]


class Client(mcp.Client):
    """The SDK's client, declaring the extension of the whole structured answer: its tool
    results carry it in ``_meta``, where the tests read what an answer says (``answer_of``).
    A client without it (a model's host) gets the text and structuredContent only."""

    def __init__(
        self,
        *args: Any,
        extensions: Sequence[Any] = (),
        elicitation_modes: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, extensions=[answer_extension(), *extensions], **kwargs)
        # the SDK declares both elicitation modes with a callback; a client may declare one
        self.elicitation_modes = elicitation_modes

    async def _build_session(self, exit_stack: contextlib.AsyncExitStack) -> Any:
        session = await super()._build_session(exit_stack)
        modes = self.elicitation_modes
        if modes is None:
            return session
        build = session._build_capabilities

        def declared(version: str) -> types.ClientCapabilities:
            capabilities = build(version)
            if capabilities.elicitation is not None:
                capabilities.elicitation = types.ElicitationCapability(
                    form=types.FormElicitationCapability() if "form" in modes else None,
                    url=types.UrlElicitationCapability() if "url" in modes else None,
                )
            return capabilities

        session._build_capabilities = declared
        return session


def stdio_parameters(
    server: ExampleServer, insurer: str, request_log: Path, extra: Sequence[str] = ()
) -> StdioServerParameters:
    """``omds-ld mcp --stdio`` in front of an example server's insurer; with the receipt key
    that server trusts, where it has one (tests/conftest.py)."""
    key = server.database.parent / "receipt-key.pem"
    extra = [*extra, *(["--receipt-key", str(key)] if key.exists() else [])]
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "omds_ld.cli", "mcp", "--stdio",
            "--api", server.api(insurer), "--name", insurer,
            "--request-log", str(request_log), "--log-level", "warning", *extra,
        ],
    )  # fmt: skip


@contextlib.asynccontextmanager
async def connect(
    transport: str, server: ExampleServer, insurer: str, request_log: Path
) -> AsyncIterator[Client]:
    """An initialized SDK client to one insurer's MCP server over the given transport."""
    if transport == "stdio":
        target: Any = stdio_parameters(server, insurer, request_log)
        mode = "legacy"
    else:
        target = server.mcp(insurer)
        mode = "legacy" if transport.endswith("2025-11-25") else "2026-07-28"
    async with Client(target, mode=mode) as client:
        yield client


def step(result: Any, tool: str, **match: str) -> dict[str, Any]:
    """The next step a tool result offered for this tool; fails if it offered none."""
    for candidate in answer_of(result)["nextSteps"]:
        arguments = candidate.get("arguments", {})
        if candidate["tool"] == tool and all(arguments.get(k) == v for k, v in match.items()):
            return dict(candidate)
    offered = [s["tool"] for s in answer_of(result)["nextSteps"]]
    raise AssertionError(f"{tool} is not offered; next steps: {offered}")


async def follow(
    client: Client, next_step: Mapping[str, Any], body: Any = None, **extra: Any
) -> Any:
    """Call a next step with the arguments it named (and a body); the result must not be an error."""
    arguments = dict(next_step.get("arguments", {}))
    if body is not None:
        arguments["body"] = body
    elif next_step.get("body") is not None:
        arguments["body"] = next_step["body"]
    arguments.update(extra)
    result = await client.call_tool(next_step["tool"], arguments)
    assert not result.is_error, result.content[0].text
    return result
