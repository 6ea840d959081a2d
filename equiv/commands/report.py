"""``equiv report``: the tolerance report of paths x dtypes x input families."""
from __future__ import annotations

import json
import sys


def add_parser(sub):
    p = sub.add_parser("report", help="tolerance report: every path x dtype x input family")
    p.add_argument("--paths", default=None, help="comma-separated candidates (default: every built-in)")
    p.add_argument("--dtype", default="float32,bfloat16,float16", help="comma-separated input dtypes")
    p.add_argument("--families", default=None, help="comma-separated input families (default: all)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size V (default 129280)")
    p.add_argument("--batch", type=int, default=8, help="rows per case (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of every recipe (default 0)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--json", dest="json_out", action="store_true", help="print JSON rows")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.devices import resolve_device
    from equiv.inputs import DTYPES, FAMILIES
    from equiv.paths import get_path, path_names
    from equiv.report import format_table, report_rows, tightest_rtol
    from equiv.validation import check_choices, check_int

    paths = args.paths.split(",") if args.paths else path_names()
    dtypes = check_choices("dtype", args.dtype, DTYPES)
    families = check_choices("families", args.families, FAMILIES) if args.families else list(FAMILIES)
    vocab = check_int("vocab", args.vocab, min_value=1)
    batch = check_int("batch", args.batch, min_value=1)
    seed = check_int("seed", args.seed, min_value=0)
    device = resolve_device(args.device)
    from equiv.candidate import load_candidate

    for p in paths:
        load_candidate(p)                        # fail fast, exit 2, before any work
    paths = [p for p in paths if p not in path_names() or get_path(p).supports_k(1)]

    def progress(n, total):
        if sys.stderr.isatty():
            print(f"\r[{n}/{total}]", end="" if n < total else "\n", file=sys.stderr, flush=True)

    rows = report_rows(paths, dtypes, families, vocab=vocab, batch=batch, seed=seed, device=device,
                       progress=progress)
    if args.json_out:
        print(json.dumps({"rows": [r.to_json() for r in rows], "tightest_rtol": tightest_rtol(rows)},
                         indent=2))
    else:
        print(format_table(rows))
        tight = tightest_rtol(rows)
        print("tightest rtol met by every correct path: " +
              ", ".join(f"{d} {v:.3g}" for d, v in tight.items()))
    return 0 if all(r.passed for r in rows if r.path != "hardcoded_one") else 1
