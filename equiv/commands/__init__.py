"""The subcommands of ``equiv`` (one module each) and the options they share.

Every option that takes one of a fixed set of values shows the set in ``--help`` (as its
metavar, or in its help for comma-separated lists), and the library checks the value, so a bad
one gets the library's one-line message with a "did you mean".
"""
from __future__ import annotations

from equiv.atomic import check_outputs as _check_outputs, write_json as _write_json
from equiv.memory import DEFAULT_MAX_GPU_MEMORY, memory_text, parse_memory
from equiv.ops import all_options, get_op, op_names
from equiv.options import BUDGETS, DEFAULT_VOCAB, DEFAULTS, DEVICES, DTYPES  # noqa: F401 (BUDGETS, DTYPES: the subcommands')
from equiv.run.timeouts import timeout_text


def one_of(choices) -> str:
    return "{" + ",".join(choices) + "}"


def listed(choices) -> str:
    return ", ".join(choices)


def add_device(p) -> None:
    p.add_argument("--device", default=DEFAULTS["device"], metavar=one_of(DEVICES),
                   help="where inputs are built and the candidate runs (default auto: cuda when present)")


def ops_help() -> str:
    """Each registered op with its signature, for ``--op``'s help (the registry's words)."""
    return "; ".join(f"{n}{' (default)' if n == DEFAULTS['op'] else ''}: {get_op(n).summary}, "
                     f"{get_op(n).signature}" for n in op_names())


def add_op(p, what: str = "the operation") -> None:
    p.add_argument("--op", default=DEFAULTS["op"], metavar="|".join(op_names()), help=f"{what}: {ops_help()}")


def add_op_options(p) -> None:
    """Each op's own options (``Op.options``) as ``--NAME``; left None when not given, so that the
    op's default applies and an option the op does not take is refused by name."""
    for name, o in all_options().items():
        owners = [n for n in op_names() if any(x.name == name for x in get_op(n).options)]
        p.add_argument(f"--{name}", default=None, metavar="|".join(o.choices),
                       help=f"with --op {'/'.join(owners)}: {o.help} (default {o.default})")


def op_options_of(args) -> dict:
    """The op options given on the command line: ``{name: value}``."""
    return {name: getattr(args, name) for name in all_options() if getattr(args, name, None) is not None}


def add_timeout(p, what: str = "per-call time-out in seconds") -> None:
    default = timeout_text(DEFAULTS["timeout"])
    p.add_argument("--timeout", default=default, metavar="SEC", help=f"{what} (default {default}; inf: none)")


def add_max_gpu_memory(p) -> None:
    p.add_argument("--max-gpu-memory", default=None, metavar="BYTES",
                   help=f"device memory one call may take, e.g. 8GiB, 512MiB or bytes (default "
                        f"{memory_text(DEFAULT_MAX_GPU_MEMORY)}): larger inputs go in more calls of fewer rows; "
                        f"a device with less free memory is not judged")


def max_gpu_memory_of(args) -> int | None:
    """``--max-gpu-memory`` in bytes (None: not given), checked with the flag's name."""
    return None if args.max_gpu_memory is None else parse_memory(args.max_gpu_memory, "--max-gpu-memory")


def add_paths_and_dtypes(p, dtypes: str, default_note: str | None = None) -> None:
    """``--paths`` (every built-in path by default) and ``--dtype`` (``dtypes`` by default) of
    a command that runs candidates over input dtypes."""
    p.add_argument("--paths", default=None, metavar="SPECS",
                   help="comma-separated candidates (default: every built-in path)")
    p.add_argument("--dtype", default=dtypes, metavar="DTYPES",
                   help=f"comma-separated input dtypes, from: {listed(DTYPES)} "
                        + (f"(default: {default_note})" if default_note else "(default %(default)s)"))


def add_vocab(p, what: str = "vocabulary size V") -> None:
    p.add_argument("--vocab", type=int, default=DEFAULT_VOCAB, help=f"{what} (default {DEFAULT_VOCAB})")


def add_seed(p, what: str = "seed of every recipe") -> None:
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help=f"{what} (default {DEFAULTS['seed']})")


def add_json(p, what: str) -> None:
    p.add_argument("--json", dest="json_out", nargs="?", const="-", default=None, metavar="FILE",
                   help=f"write {what} as JSON to FILE (-, or no FILE: standard output, and the text "
                        f"goes to standard error)")


def write_json(args, doc) -> None:
    """``doc`` to ``--json`` (see ``equiv.atomic.write_json``: version added, text cleaned)."""
    if args.json_out is not None:
        _write_json(args.json_out, doc)


def check_outputs(**outputs) -> None:
    """Refuse unwritable or clashing outputs before any work (``equiv.atomic.check_outputs``)."""
    _check_outputs({f"--{flag.replace('_', '-')}": path for flag, path in outputs.items()})
