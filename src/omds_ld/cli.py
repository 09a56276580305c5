"""The one command: ``omds-ld``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from omds_ld import __version__
from omds_ld.insurer.config import DEFAULT_PORT, ServerConfig, default_database


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from omds_ld.insurer.app import api_base, create_app
    from omds_ld.insurer.data import load_insurers

    config = ServerConfig(
        host=args.host,
        port=args.port,
        database=Path(args.database) if args.database else default_database(),
        insurers_folder=Path(args.insurers) if args.insurers else None,
        require_token=args.require_token,
    )
    insurers = load_insurers(config.insurers_folder)
    app = create_app(config, insurers=insurers)
    out = sys.stderr
    print(f"omds-ld {__version__} example server, store {config.database}", file=out)
    for name, insurer in insurers.items():
        mode = "draft at the server" if insurer.draft_at_server else "tariff inquiry"
        print(f"  {insurer.display_name:<32} {config.base_url}{api_base(name)}  ({mode})", file=out)
    uvicorn.run(app, host=config.host, port=config.port, log_level=args.log_level)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omds-ld", description="OMDS LD for AI agents")
    parser.add_argument("--version", action="version", version=f"omds-ld {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the example insurers' interfaces")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--database", help=f"SQLite file of the embedded store (default {default_database()})"
    )
    serve.add_argument("--insurers", help="folder of insurer folders (default: the examples)")
    serve.add_argument(
        "--require-token", action="store_true", help="refuse callers without a bearer token"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(run=_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
