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
    p.add_argument("--timeout", default="60", metavar="SEC",
                   help="per-call time-out in seconds (default 60; inf: none)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.compare import compare
    from equiv.devices import resolve_device
    from equiv.inputs import Recipe
    from equiv.properties.subjects import parse_timeout
    from equiv.run import load_check

    recipe = Recipe.parse(args.recipe)
    device = resolve_device(args.device)
    timeout = parse_timeout(args.timeout)
    load_check(args.candidate, device, timeout)  # CandidateLoadError -> exit 2, before any work
    result = compare(args.candidate, recipe, k=args.k, timeout=timeout, device=device)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.summary())
    return 0 if result.passed else 1
