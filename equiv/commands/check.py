"""``equiv check``: compare one candidate to the reference on one recipe (what REPRO lines run)."""
from __future__ import annotations

from equiv.commands import add_device, add_json, check_outputs, write_json

DRAFT_RECIPE = "gaussian:seed=0,batch=4,vocab=129280,dtype=float32"
VERIFY_RECIPE = "realistic:seed=0,batch=256,n=3,vocab=129280"


def add_parser(sub):
    p = sub.add_parser("check", help="compare one candidate on one input recipe")
    p.add_argument("--candidate", required=True, metavar="SPEC",
                   help="built-in path name, package.module:function or path/to/file.py:function")
    p.add_argument("--op", default="draft_topk", metavar="draft_topk|verify",
                   help="the operation: draft_topk (default) or verify (a rejection sampler)")
    p.add_argument("--recipe", default=None,
                   help=f"input recipe, family:key=value,... (default {DRAFT_RECIPE}; "
                        f"{VERIFY_RECIPE} with --op verify)")
    p.add_argument("--calls", type=int, default=1, help="verify: seeded calls on the recipe (default 1)")
    p.add_argument("--seed", type=int, default=0, help="verify: generator seed of the first call (default 0)")
    p.add_argument("--law", default="lossless", metavar="lossless|token", help="verify: the law judged (default lossless)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1)")
    add_device(p)
    p.add_argument("--timeout", default="60", metavar="SEC",
                   help="per-call time-out in seconds (default 60; inf: none)")
    add_json(p, "the result")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.validation import check_choice

    if check_choice("op", args.op, ("draft_topk", "verify")) == "verify":
        from equiv.ops.verify.gate import run_verify_check

        check_outputs(json=args.json_out)
        verdict = run_verify_check(args.candidate, args.recipe or VERIFY_RECIPE, calls=args.calls,
                                   seed=args.seed, device=args.device, timeout=args.timeout, law=args.law)
        write_json(args, verdict.to_json())
        args.console.out(verdict.summary())
        return 0 if verdict.passed else 1
    import time

    from equiv.ops.draft_topk.compare import compare
    from equiv.devices import resolve_device
    from equiv.diagnose.attach import for_comparison
    from equiv.ops.draft_topk.recipes import Recipe
    from equiv.properties.subjects import parse_timeout
    from equiv.run import load_check

    check_outputs(json=args.json_out)
    recipe = Recipe.parse(args.recipe or DRAFT_RECIPE)
    device = resolve_device(args.device)
    timeout = parse_timeout(args.timeout)
    load_check(args.candidate, device, timeout)  # CandidateLoadError -> exit 2, before any work
    t0 = time.perf_counter()
    result = compare(args.candidate, recipe, k=args.k, timeout=timeout, device=device)
    diagnosis = for_comparison(args.candidate, result, device=device, timeout=timeout,
                               elapsed_s=time.perf_counter() - t0)
    write_json(args, {**result.to_json(), **diagnosis.beside_checks()})
    args.console.out((diagnosis.summary() + "\n" if diagnosis.defects else "") + result.summary())
    return 0 if result.passed else 1
