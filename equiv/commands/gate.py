"""``equiv gate``: the pre-merge gate (exit 0 pass, 1 a check failed, 2 bad usage)."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("gate", help="pre-merge gate: property suite + tolerance + MTP on one candidate")
    p.add_argument("--candidate", required=True, help="built-in name, pkg.mod:fn or file.py:fn")
    p.add_argument("--op", default="draft_topk", help="draft_topk (default) or verify (a rejection sampler)")
    p.add_argument("--k", type=int, default=1, help="the k the candidate is judged at (default 1)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--dtype", default=None, help="comma-separated input dtypes (default: by budget)")
    p.add_argument("--budget", default="quick", help="quick (pull request, default) or full (nightly)")
    p.add_argument("--seed", type=int, default=0, help="seed of every recipe and of Hypothesis (default 0)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size of the tolerance stage")
    p.add_argument("--timeout", type=float, default=60.0, help="per-call time-out in seconds (default 60)")
    p.add_argument("--stages", default=None,
                   help="which stages to run (draft_topk: properties,tolerance,mtp; verify: properties,statistics)")
    p.add_argument("--json", dest="json_file", default=None, metavar="FILE", help="write the verdict as JSON")
    p.add_argument("--junit", dest="junit_file", default=None, metavar="FILE", help="write JUnit XML")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.atomic import atomic_write
    from equiv.gate import run_gate

    result = run_gate(args.candidate, k=args.k, device=args.device, dtypes=args.dtype,
                      budget=args.budget, seed=args.seed, vocab=args.vocab, timeout=args.timeout,
                      stages=args.stages, op=args.op)
    print(result.summary())
    if args.json_file:
        atomic_write(args.json_file, json.dumps(result.to_json(), indent=2) + "\n")
    if args.junit_file:
        atomic_write(args.junit_file, result.to_junit())
    return 0 if result.passed else 1
