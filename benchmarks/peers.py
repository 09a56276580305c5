"""FastMCP's OpenAPI server as the benchmarks' peer: started in front of an interface, read back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.servers import free_port

PEER = Path(__file__).resolve().parent / "fastmcp_openapi.py"


def start_peer(api: str) -> tuple[subprocess.Popen[bytes], str]:
    """FastMCP's OpenAPI server (its defaults) in front of ``api``, and its MCP URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(PEER), "--api", api, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{port}/mcp"


def wait_started(process: subprocess.Popen[bytes], url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("FastMCP's OpenAPI server did not start")


def peer_answer(result: Any) -> dict[str, Any]:
    """The insurer's JSON-LD answer as FastMCP hands it on."""
    if isinstance(result.structured_content, dict) and "result" in result.structured_content:
        answer: dict[str, Any] = result.structured_content["result"]
        return answer
    loaded: dict[str, Any] = json.loads(result.content[0].text).get("result", {})
    return loaded
