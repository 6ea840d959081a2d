"""``equiv check``: compare one candidate to the reference on one recipe (what REPRO lines run)."""
from __future__ import annotations

import json

DRAFT_RECIPE = "gaussian:seed=0,batch=4,vocab=129280,dtype=float32"
VERIFY_RECIPE = "realistic:seed=0,batch=256,n=3,vocab=129280"


def add_parser(sub):
    p = sub.add_parser("check", help="compare one candidate on one input recipe")
    p.add_argument("--candidate", required=True, help="built-in name, pkg.mod:fn or file.py:fn")
    p.add_argument("--op", default="draft_topk", help="draft_topk (default) or verify (a rejection sampler)")
    p.add_argument("--recipe", default=None,
                   help=f"input recipe, family:key=value,... (default {DRAFT_RECIPE}; {VERIFY_RECIPE} with --op verify)")
    p.add_argument("--calls", type=int, default=1, help="verify: seeded calls on the recipe (default 1)")
    p.add_argument("--seed", type=int, default=0, help="verify: generator seed of the first call (default 0)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.op == "verify":
        from equiv.ops.verify.gate import run_verify_check

        verdict = run_verify_check(args.candidate, args.recipe or VERIFY_RECIPE, calls=args.calls,
                                   seed=args.seed, device=args.device)
        print(json.dumps(verdict.to_json(), indent=2) if args.json else verdict.summary())
        return 0 if verdict.passed else 1
    from equiv.validation import check_choice

    check_choice("op", args.op, ("draft_topk", "verify"))
    from equiv.candidate import load_candidate
    from equiv.compare import compare
    from equiv.devices import resolve_device
    from equiv.inputs import Recipe

    recipe = Recipe.parse(args.recipe or DRAFT_RECIPE)
    device = resolve_device(args.device)
    cand = load_candidate(args.candidate)
    result = compare(cand, recipe.build(device), k=args.k, recipe=recipe)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.summary())
    return 0 if result.passed else 1
