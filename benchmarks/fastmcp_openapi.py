"""The peer for benchmarks/mcp.py: FastMCP's OpenAPI server in front of one insurer, over HTTP.

Run: ``.venv/bin/python benchmarks/fastmcp_openapi.py --api URL --port PORT``. It reads the norm's OpenAPI
file from this repository and lets FastMCP make its tools, with FastMCP's defaults.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

# benchmarks/mcp.py lives beside this file: keep this folder from shadowing the mcp package
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx2  # noqa: E402
import yaml  # noqa: E402
from fastmcp import FastMCP  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    text = resources.files("omds_ld.norm").joinpath("data/openapi.yaml").read_text("utf-8")
    spec = yaml.safe_load(text)
    spec["servers"] = [{"url": args.api}]
    client = httpx2.AsyncClient(base_url=args.api, timeout=30)
    server = FastMCP.from_openapi(spec, client=client, name="fastmcp-openapi")
    server.run(transport="http", host="127.0.0.1", port=args.port, show_banner=False)


if __name__ == "__main__":
    main()
