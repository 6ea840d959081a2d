"""``equiv mtp``: acceptance statistics of every path under every consumer (equiv/mtp).

Exit code: 0 when every applicable path x consumer record passes (lossless, equivalent to
softmax_topk, no invalid output, no crash), not counting the known failures listed in
``equiv.mtp.EXPECTED_FAILURES``; 1 when any other record fails; 2 for bad usage.
"""
from __future__ import annotations

import json
import sys
import time


def add_parser(sub):
    p = sub.add_parser("mtp", help="MTP acceptance statistics: every path x consumer, "
                                   "lossless and equivalent to softmax_topk?")
    p.add_argument("--paths", default=None,
                   help="comma-separated candidates: built-in names, pkg.mod:fn or file.py:fn "
                        "(default: every built-in path that runs at speed on the device)")
    p.add_argument("--consumers", default=None,
                   help="comma-separated: greedy, target_only, confidence, tree (default: all)")
    p.add_argument("--steps", type=int, default=3,
                   help="draft tokens proposed per verify (default 3: 4 tokens per verify with the root)")
    p.add_argument("--vocab", type=int, default=None,
                   help="vocabulary size (default 129280 on cuda; 32000 on cpu, and 129280 with --budget quick)")
    p.add_argument("--sequences", type=int, default=None, help="sequences decoded at once (default: budget)")
    p.add_argument("--rounds", type=int, default=None, help="verify rounds per sequence (default: budget)")
    p.add_argument("--budget", default="default", help="default or quick: sizes of the run")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, prompts and sampling (default 0)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--trace", default=None, help="replay a recorded equiv-mtp-trace/1 .npz instead")
    p.add_argument("--threshold", type=float, default=None,
                   help="confidence consumer: stop when the running product of topk_p < this (default 0.3)")
    p.add_argument("--tree-topk", type=int, default=None, help="tree consumer: topk (default 4)")
    p.add_argument("--tree-tokens", type=int, default=None,
                   help="tree consumer: tokens verified per round, root included (default 8)")
    p.add_argument("--verify", default=None, metavar="SPEC",
                   help="verify target_only with this verifier (torch_sampler, reference_sampler, "
                        "pkg.mod:fn or file.py:fn) instead of the built-in one")
    p.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="write the JSON here")
    p.add_argument("--plot", default=None, metavar="FILE", help="write the PNG of histograms here")
    p.set_defaults(run=run)


def _check_output(flag, value) -> None:
    """Fail before the run, not after it, on an output file that cannot be written."""
    import os

    from equiv.errors import InvalidArgument

    if value is None:
        return
    folder = os.path.dirname(os.path.abspath(value)) if value.strip() else ""
    if not value.strip() or os.path.isdir(value):
        raise InvalidArgument(f"{flag}={value!r} is invalid: give a file name")
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{flag}={value!r}: folder {folder!r} does not exist; create it first")


def run(args) -> int:
    from equiv.mtp import run_mtp
    from equiv.mtp.report import format_table, summary_line, write_plot

    optional = {k: v for k, v in (("threshold", args.threshold), ("tree_topk", args.tree_topk),
                                  ("tree_tokens", args.tree_tokens)) if v is not None}
    _check_output("--json", args.json_out)
    _check_output("--plot", args.plot)
    start = time.monotonic()

    def progress(done, total, label):
        if sys.stderr.isatty():
            print(f"\r[{done}/{total}] {label:<40}", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    result = run_mtp(args.paths, args.consumers, steps=args.steps, vocab=args.vocab,
                     sequences=args.sequences, rounds=args.rounds, seed=args.seed,
                     device=args.device, trace=args.trace, budget=args.budget, progress=progress,
                     verifier=args.verify, **optional)
    elapsed = time.monotonic() - start
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(format_table(result))
    print(summary_line(result) + f" ({elapsed:.1f} s)")
    if args.json_out:
        from equiv.atomic import atomic_write

        atomic_write(args.json_out, json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
    if args.plot:
        write_plot(result, args.plot)
    for r in result.failures:
        print(f"REPRO: {r.repro}")
    return 0 if result.passed else 1
