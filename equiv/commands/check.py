"""``equiv check``: compare one candidate to the reference on one recipe (what REPRO lines run)."""
from __future__ import annotations

from equiv.commands import add_device, add_json, check_outputs, write_json


def add_parser(sub):
    p = sub.add_parser("check", help="compare one candidate on one input recipe")
    p.add_argument("--candidate", required=True, metavar="SPEC",
                   help="built-in path name, package.module:function or path/to/file.py:function")
    p.add_argument("--recipe", default="gaussian:seed=0,batch=4,vocab=129280,dtype=float32",
                   help="input recipe, family:key=value,... (default %(default)s)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1)")
    add_device(p)
    p.add_argument("--timeout", default="60", metavar="SEC",
                   help="per-call time-out in seconds (default 60; inf: none)")
    add_json(p, "the result")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.compare import compare
    from equiv.devices import resolve_device
    from equiv.inputs import Recipe
    from equiv.properties.subjects import parse_timeout
    from equiv.run import load_check

    check_outputs(json=args.json_out)
    recipe = Recipe.parse(args.recipe)
    device = resolve_device(args.device)
    timeout = parse_timeout(args.timeout)
    load_check(args.candidate, device, timeout)  # CandidateLoadError -> exit 2, before any work
    result = compare(args.candidate, recipe, k=args.k, timeout=timeout, device=device)
    write_json(args, result.to_json())
    args.console.out(result.summary())
    return 0 if result.passed else 1
