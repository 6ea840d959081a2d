"""``equiv check``: compare one candidate to the reference on one recipe (what REPRO lines run)."""
from __future__ import annotations

from equiv.api import check
from equiv.commands import (add_device, add_json, add_max_gpu_memory, add_op, add_op_options, add_seed, add_timeout,
                             check_outputs, max_gpu_memory_of, op_options_of, write_json)
from equiv.memory import use_budget
from equiv.ops import get_op, op_names


def add_parser(sub):
    p = sub.add_parser("check", help="compare one candidate on one input recipe")
    p.add_argument("--candidate", required=True, metavar="SPEC",
                   help="built-in path name, package.module:function or path/to/file.py:function")
    add_op(p)
    p.add_argument("--recipe", default=None,
                   help="input recipe, family:key=value,... (default: "
                        + "; ".join(f"--op {n}: {get_op(n).default_recipe}" for n in op_names()) + ")")
    p.add_argument("--calls", type=int, default=1, help="verify: seeded calls on the recipe (default 1)")
    add_seed(p, "verify: generator seed of the first call")
    add_op_options(p)
    p.add_argument("--k", type=int, default=1, help="top-k (default 1)")
    add_device(p)
    add_timeout(p)
    add_max_gpu_memory(p)
    add_json(p, "the result")
    p.set_defaults(run=run)


def run(args) -> int:
    check_outputs(json=args.json_out)
    use_budget(max_gpu_memory_of(args))          # the budget of this command's calls (equiv.memory)
    result = check(args.candidate, args.recipe, op=args.op, k=args.k, device=args.device,
                   timeout=args.timeout, calls=args.calls, seed=args.seed, **op_options_of(args))
    write_json(args, result.to_json())
    args.console.out(result.summary())
    return 0 if result.passed else 1
