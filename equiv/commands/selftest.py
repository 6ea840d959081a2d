"""``equiv selftest``: the mutant zoo through the gate, and the correct paths under many seeds."""
from __future__ import annotations

from equiv.commands import add_device, add_json, add_op, add_vocab, check_outputs, write_json
from equiv.devices import resolve_device
from equiv.ops import get_op
from equiv.selftest import run_selftest
from equiv.validation import check_choices, check_float, check_int


def add_parser(sub):
    p = sub.add_parser("selftest", help="kill rate on the mutant zoo and false-positive rate of correct paths")
    add_op(p)
    add_device(p)
    p.add_argument("--seeds", type=int, default=20, help="seeded runs per correct path (default 20)")
    add_vocab(p)
    p.add_argument("--mutants", default=None, metavar="NAMES",
                   help="comma-separated subset of the zoo (default: all; `equiv paths --op OP --mutants` lists them)")
    p.add_argument("--workers", type=int, default=2, help="mutants judged at once (default 2)")
    p.add_argument("--timeout", type=float, default=120.0, help="per-call time-out in seconds (default 120)")
    add_json(p, "the result")
    p.set_defaults(run=run)


def run(args) -> int:
    check_outputs(json=args.json_out)
    only = check_choices("mutants", args.mutants, list(get_op(args.op).mutants())) if args.mutants else None
    seeds = check_int("seeds", args.seeds, min_value=1)
    vocab = check_int("vocab", args.vocab, min_value=1)
    workers = check_int("workers", args.workers, min_value=1, max_value=64)
    timeout = check_float("timeout", args.timeout, min_value=0, exclusive_min=True)
    device = resolve_device(args.device)
    with args.console.progress("equiv selftest", unit="mutant") as bar:
        result = run_selftest(op=args.op, device=device, seeds=seeds, vocab=vocab, only=only, timeout=timeout,
                              workers=workers, progress=bar)
    args.console.out(result.summary())
    write_json(args, result.to_json())
    return 0 if result.passed else 1
