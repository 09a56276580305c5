"""The one command, ``omds-ld``. ``--version`` answers at once, with nothing loaded; every
other command is parsed and run by ``omds_ld.commands``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from omds_ld import __version__


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == ["--version"]:  # what a package manager or a desktop client asks first
        print(f"omds-ld {__version__}")
        return 0
    from omds_ld.commands import main as run

    return run(arguments)


if __name__ == "__main__":
    raise SystemExit(main())
