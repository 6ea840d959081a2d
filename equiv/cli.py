"""The ``equiv`` command line: parses arguments and calls the library.

Exit codes, for every subcommand: 0 pass, 1 a check failed, 2 bad usage or an unloadable
candidate (one line on stderr, no traceback). Each subcommand lives in ``equiv/commands/NAME.py``
with ``add_parser(subparsers)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from equiv.errors import UsageError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# Each lives in equiv/commands/NAME.py; one whose module is not there yet is left out.
COMMANDS = ("paths", "check", "report", "gate", "mtp", "bench", "selftest")


class _Parser(argparse.ArgumentParser):
    def error(self, message):                    # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="equiv", description="Numerical-equivalence checks for draft top-k paths.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        if importlib.util.find_spec(f"equiv.commands.{name}") is not None:
            importlib.import_module(f"equiv.commands.{name}").add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"equiv {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"equiv {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
