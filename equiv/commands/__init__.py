"""The subcommands of ``equiv`` (one module each) and the options they share.

Every option that takes one of a fixed set of values shows the set in ``--help`` (as its
metavar, or in its help for comma-separated lists), and the library checks the value, so a bad
one gets the library's one-line message with a "did you mean".
"""
from __future__ import annotations

from equiv.ops import OP_NAMES
from equiv.options import BUDGETS, DEFAULT_VOCAB, DEFAULTS, DEVICES, DTYPES, LAWS  # noqa: F401 (BUDGETS, DTYPES: the subcommands')
from equiv.run.timeouts import timeout_text


def one_of(choices) -> str:
    return "{" + ",".join(choices) + "}"


def listed(choices) -> str:
    return ", ".join(choices)


def add_device(p) -> None:
    p.add_argument("--device", default=DEFAULTS["device"], metavar=one_of(DEVICES),
                   help="where inputs are built and the candidate runs (default auto: cuda when present)")


def add_op(p, what: str = "the operation") -> None:
    p.add_argument("--op", default=DEFAULTS["op"], metavar="|".join(OP_NAMES),
                   help=f"{what}: draft_topk (default) or verify, a rejection sampler "
                        f"fn(draft_token_ids, draft_probs, target_probs, generator)")


def add_timeout(p, what: str = "per-call time-out in seconds") -> None:
    default = timeout_text(DEFAULTS["timeout"])
    p.add_argument("--timeout", default=default, metavar="SEC", help=f"{what} (default {default}; inf: none)")


def add_law(p) -> None:
    p.add_argument("--law", default=DEFAULTS["law"], metavar="|".join(LAWS),
                   help="with --op verify: the law judged, lossless (default: the emitted text has the target "
                        "model's law) or token (the token-level rejection sampler's per-draft law)")


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
    from equiv.atomic import write_json as _write

    if args.json_out is not None:
        _write(args.json_out, doc)


def check_outputs(**outputs) -> None:
    """Refuse unwritable or clashing outputs before any work (``equiv.atomic.check_outputs``)."""
    from equiv.atomic import check_outputs as _check

    _check({f"--{flag.replace('_', '-')}": path for flag, path in outputs.items()})
