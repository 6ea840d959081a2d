"""The ``equiv`` command line: parses arguments and calls the library.

Conventions, the same in every subcommand:
- exit codes: 0 pass, 1 a check failed, 2 bad usage, an unloadable candidate or an output that
  cannot be written (one line on stderr, no traceback, before any work), 3 not judged (the
  machine or the harness failed, not the candidate: out of memory while equiv built or moved
  the data, or in a call the device's free memory could not hold, a device busy or lost, a
  harness time-out; one line says which, ``equiv.run.faults``), 130 on SIGINT and 143 on
  SIGTERM (no output file half-written: ``equiv.atomic``; the suite's subprocesses killed);
- ``--version``; ``-q`` (no progress, no notes) and ``-v`` (more of each failure), before or
  after the subcommand; ``--json FILE`` (``-`` or no FILE: standard output); progress bars on
  stderr only when it is a terminal (``equiv.console``); a closed stdout pipe ends quietly.
Each subcommand lives in ``equiv/commands/NAME.py`` with ``add_parser(subparsers)`` and
``run(args) -> int``; the options they share are in ``equiv/commands/__init__.py``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from equiv._version import __version__
from equiv.console import Console
from equiv.errors import UsageError
from equiv.memory import allocator_environment, host_allocator, own_process
from equiv.run import faults
from equiv.run.faults import Terminated, signalled
from equiv.timeline import mark

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_NOT_JUDGED = 0, 1, 2, 3
EPILOG = ("exit codes: 0 pass; 1 a check failed (a defect of the candidate); 2 bad usage or an "
          "unloadable candidate; 3 not judged (the machine or the harness failed, not the candidate: "
          "out of memory, a device busy or lost, a harness time-out; re-run); 130 SIGINT; 143 SIGTERM")
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM
COMMANDS = ("paths", "check", "report", "gate", "mtp", "bench", "selftest")


class _Parser(argparse.ArgumentParser):
    def error(self, message):                    # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _verbosity_options(parser, default) -> None:
    parser.add_argument("-q", "--quiet", action="count", default=default,
                        help="less output: no progress bars, no notes")
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="more output: every failure in full")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="equiv", description="Numerical-equivalence checks for draft top-k paths.",
                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"equiv {__version__}")
    _verbosity_options(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"equiv.commands.{name}").add_parser(sub)
    for p in sub.choices.values():               # after the subcommand too; SUPPRESS keeps `equiv -q gate`
        _verbosity_options(p, argparse.SUPPRESS)
    return parser


def _on_sigterm(signum, frame):
    signalled(signum)                            # an interrupt from outside (equiv.run.faults)
    raise Terminated()


def _end_now(code: int, always: bool = False) -> None:
    """After SIGINT/SIGTERM (or, ``always``, at the end of the command's own process, whose
    outputs are written): kill the suite's subprocesses and the candidate workers, flush, and
    leave at once when other threads still run (a candidate call under a time-out, a pool of
    gates): letting the interpreter finalize under them aborts (``terminate called without an
    active exception``, exit 134) or waits for them. ``always`` leaves at once in any case: the
    interpreter's teardown (torch's, a CUDA context's) took ~0.4 s of a gate's wall time on the
    2-core CPU and held the exit code back from CI that long."""
    suite, workers = sys.modules.get("equiv.run.suite"), sys.modules.get("equiv.run.supervisor")
    if suite is not None:
        suite.kill_all()
    if workers is not None:                      # os._exit below skips the atexit that closes them
        workers.close_all()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if always or threading.active_count() > 1:
        os._exit(code)


def _not_judged(code: int, lines, command: str, console: Console) -> int:
    """``code``, or ``EXIT_NOT_JUDGED`` with one line on stderr when a command that did not pass
    met the machine's failures (``lines``); a gate's own verdict already says so (code 3)."""
    if code != EXIT_FAIL or not lines:
        return code
    console.error(f"equiv {command}: NOT JUDGED: {lines[0]} (the machine or the harness failed, not the "
                  f"candidate; re-run when the device is free)")
    return EXIT_NOT_JUDGED


def main(argv=None) -> int:
    """The command (``equiv`` and ``python -m equiv``: ``argv`` None). That process and its
    children use the caching allocator's setting of equiv's processes
    (``equiv.memory.allocator_environment``); a call with ``argv`` (in-process) leaves it alone."""
    if argv is None:
        mark("command start")
        host_allocator()
        allocator_environment()
        own_process()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with faults.interrupts_noted():          # Ctrl-C too is an interrupt from outside
            code = _main(argv)
    finally:
        if previous is not None:                 # main() called in-process (tests) leaves no trace
            signal.signal(signal.SIGTERM, previous)
    if argv is None:                             # the command's own process: its work is done
        mark("command end")
        _end_now(code, always=True)
    return code


def _main(argv) -> int:
    console = Console()
    code = EXIT_USAGE
    try:
        args = build_parser().parse_args(argv)
        console = Console(args.verbose - args.quiet, json_to_stdout=getattr(args, "json_out", None) == "-")
        args.console = console
        start = faults.mark()
        try:
            code = _not_judged(int(args.run(args)), faults.since(start), args.command, console)
        except UsageError as exc:
            if isinstance(exc, MemoryError):     # the device cannot hold the calls now: not judged
                code = _not_judged(EXIT_FAIL, [str(exc)], args.command, console)
            else:
                console.error(f"equiv {args.command}: error: {exc}")
                code = EXIT_USAGE
        except KeyboardInterrupt:
            console.error(f"equiv {args.command}: interrupted")
            code = EXIT_SIGINT
        except Terminated:
            console.error(f"equiv {args.command}: terminated")
            code = EXIT_SIGTERM
        except Exception as exc:                 # the machine's failure in this process: one line
            line = faults.harness_fault(exc, "in this process")
            if line is None:
                raise
            code = _not_judged(EXIT_FAIL, [line], args.command, console)
        sys.stdout.flush()
    except BrokenPipeError:                      # `equiv ... | head`: the reader has what it wanted
        console.close_stdout()
    if code in (EXIT_SIGINT, EXIT_SIGTERM):
        _end_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
