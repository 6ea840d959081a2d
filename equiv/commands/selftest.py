"""``equiv selftest``: the mutant zoo through the gate, and the correct paths under many seeds."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("selftest", help="kill rate on the mutant zoo and false-positive rate of correct paths")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--seeds", type=int, default=20, help="seeded runs per correct path (default 20)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size (default 129280)")
    p.add_argument("--mutants", default=None, help="comma-separated subset of the zoo (default: all)")
    p.add_argument("--workers", type=int, default=2, help="mutants judged at once (default 2)")
    p.add_argument("--timeout", type=float, default=120.0, help="per-call time-out in seconds")
    p.add_argument("--json", dest="json_file", default=None, metavar="FILE", help="write the result as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    import sys

    from equiv.atomic import atomic_write
    from equiv.devices import resolve_device
    from equiv.selftest import _mutant_registry, run_selftest
    from equiv.validation import check_choices, check_float, check_int

    only = check_choices("mutants", args.mutants, list(_mutant_registry())) if args.mutants else None
    seeds = check_int("seeds", args.seeds, min_value=1)
    vocab = check_int("vocab", args.vocab, min_value=1)
    workers = check_int("workers", args.workers, min_value=1, max_value=64)
    timeout = check_float("timeout", args.timeout, min_value=0, exclusive_min=True)
    device = resolve_device(args.device)

    def progress(n, total, name):
        print(f"[{n}/{total}] {name}", file=sys.stderr, flush=True)

    result = run_selftest(device=device, seeds=seeds, vocab=vocab, only=only, timeout=timeout,
                          workers=workers, progress=progress)
    print(result.summary())
    if args.json_file:
        atomic_write(args.json_file, json.dumps(result.to_json(), indent=2) + "\n")
    return 0 if result.passed else 1
