"""The `goosectl` command: discovers subcommand modules in `controller.commands`.

Exit codes are shared by every subcommand: 0 success, 1 the checked thing has findings
(e.g. `table check`), 2 bad input or environment (unreadable file, bad config, no root).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from controller import commands

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A user-facing failure: printed as ``goosectl: <message>`` and exit code 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goosectl",
        description="IEC 61850 GOOSE-style event-driven controller",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"goosectl: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
