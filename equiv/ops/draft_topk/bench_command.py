"""``equiv bench`` for the draft top-k: check the command's arguments, time, print and write.

The protocol is in ``bench.py``; the command's options are parsed in ``equiv/commands/bench.py``.
"""
from __future__ import annotations

from equiv.candidate import load_candidate
from equiv.atomic import check_outputs
from equiv.ops.draft_topk.bench import _require_gpu, run_bench, write_json, write_plot
from equiv.ops.draft_topk.recipes import DTYPES as KNOWN
from equiv.validation import check_choices, check_int, check_ints


def run_command(args) -> int:
    """``equiv bench`` with its arguments parsed (``equiv/commands/bench.py``)."""
    check_outputs({"--json": args.json_out, "--plot": args.plot})
    dtypes = check_choices("dtype", args.dtype, KNOWN)
    batches = check_ints("batch", args.batch, min_value=1)
    ks = check_ints("k", args.k, min_value=1)
    vocab = check_int("vocab", args.vocab, min_value=1)
    for k in ks:
        check_int("k", k, max_value=vocab)
    replays = check_int("replays", args.replays, min_value=1)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()] if args.paths else None
    for p in paths or ():
        load_candidate(p)                        # fail fast, exit 2, before any GPU work
    _require_gpu()
    with args.console.progress("equiv bench", unit="point") as bar:
        result = run_bench(paths, dtypes, ks, batches, vocab, replays, size_matched=args.size_matched,
                           progress=lambda n, total, row: bar(n, total, f"{row.path} {row.dtype} "
                                                                         f"k={row.k} B={row.batch}"))
    args.console.out(result.table())
    if args.json_out:
        write_json(result, args.json_out)
    if args.plot:
        write_plot(result, args.plot)
    return 0
