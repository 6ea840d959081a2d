"""``equiv check``: compare one candidate to the reference on one recipe (what REPRO lines run)."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("check", help="compare one candidate on one input recipe")
    p.add_argument("--candidate", required=True, help="built-in name, pkg.mod:fn or file.py:fn")
    p.add_argument("--recipe", default="gaussian:seed=0,batch=4,vocab=129280,dtype=float32",
                   help="input recipe, family:key=value,... (default %(default)s)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.candidate import load_candidate
    from equiv.compare import compare
    from equiv.devices import resolve_device
    from equiv.inputs import Recipe

    import time

    from equiv.diagnose.attach import for_comparison

    recipe = Recipe.parse(args.recipe)
    device = resolve_device(args.device)
    cand = load_candidate(args.candidate)
    t0 = time.perf_counter()
    result = compare(cand, recipe.build(device), k=args.k, recipe=recipe)
    diagnosis = for_comparison(cand.spec, result, device=device, timeout=None, elapsed_s=time.perf_counter() - t0)
    if args.json:
        print(json.dumps({**result.to_json(), **diagnosis.beside_checks()}, indent=2))
    else:
        print((diagnosis.summary() + "\n" if diagnosis.defects else "") + result.summary())
    return 0 if result.passed else 1
