"""``equiv gate``: the pre-merge gate (exit 0 pass, 1 a check failed, 2 bad usage, 3 not judged:
the machine or the harness failed, not the candidate; ``equiv.verdict.EXIT_CODES``)."""
from __future__ import annotations

from equiv.atomic import atomic_write
from equiv.commands import (BUDGETS, DEFAULTS, DTYPES, add_device, add_json, add_max_gpu_memory, add_op,
                             add_op_options, add_seed, max_gpu_memory_of,
                             add_timeout, add_vocab, check_outputs, listed, one_of, op_options_of, write_json)
from equiv.gate import run_gate
from equiv.ops import get_op, op_names


def add_parser(sub):
    p = sub.add_parser("gate", help="pre-merge gate: every stage of the operation's plan on one candidate",
                       epilog="exit codes: 0 PASS; 1 FAIL (a defect of the candidate); 2 bad usage or an "
                              "unloadable candidate; 3 NOT JUDGED (the machine or the harness failed: out of "
                              "memory, a device busy or lost, a harness time-out; re-run); 130 SIGINT; 143 SIGTERM")
    p.add_argument("--candidate", required=True, metavar="SPEC",
                   help="built-in path name, package.module:function or path/to/file.py:function "
                        "(relative to the current folder)")
    add_op(p)
    p.add_argument("--k", default=None, metavar="K[,K...]",
                   help="the k values the candidate is judged at, e.g. 1 or 1,4; nothing calls it at another k "
                        "(default auto: k = 1 and one k drawn per class for the seed -- a power of two up to 16, "
                        "3-7, 9-15, 17-64 -- each that it accepts: a k where it raises NotImplementedError "
                        "or that its supported_k attribute leaves out is not judged)")
    add_device(p)
    p.add_argument("--dtype", default=None, metavar="DTYPES",
                   help=f"comma-separated input dtypes, from: {listed(DTYPES)} "
                        f"(default: float32,bfloat16 for quick, all three for full)")
    p.add_argument("--budget", default=DEFAULTS["budget_gate"], metavar=one_of(BUDGETS),
                   help="quick: a pull request, seconds (default); full: nightly example counts, 3 seeds")
    add_seed(p, "seed of every recipe and of Hypothesis")
    add_vocab(p, "vocabulary size of the tolerance stage")
    add_timeout(p, "per-call time-out in seconds, in every stage")
    add_max_gpu_memory(p)
    p.add_argument("--stages", default=None, metavar="STAGES",
                   help="comma-separated stages to run (default: all): "
                        + "; ".join(f"--op {n}: {listed(get_op(n).stages)}" for n in op_names()))
    add_op_options(p)
    add_json(p, "the verdict")
    p.add_argument("--junit", dest="junit_file", default=None, metavar="FILE", help="write JUnit XML to FILE")
    p.set_defaults(run=run)


def run(args) -> int:
    check_outputs(json=args.json_out, junit=args.junit_file)
    with args.console.progress("equiv gate", unit="check") as bar:
        result = run_gate(args.candidate, k=args.k, device=args.device, dtypes=args.dtype,
                          budget=args.budget, seed=args.seed, vocab=args.vocab, timeout=args.timeout,
                          stages=args.stages, progress=bar, op=args.op, max_gpu_memory=max_gpu_memory_of(args),
                          **op_options_of(args))
    args.console.out(result.summary(shown_per_stage=10 ** 6 if args.console.verbose else 2))
    write_json(args, result.to_json())
    if args.junit_file:
        atomic_write(args.junit_file, result.to_junit())
    return result.exit_code
