"""``equiv bench``: time every path on the GPU (the protocol is in ``equiv/bench.py``)."""
from __future__ import annotations

from equiv.commands import DTYPES, add_json, check_outputs, listed


def add_parser(sub):
    p = sub.add_parser("bench", help="time every path on the GPU against its read-bandwidth ceiling")
    p.add_argument("--paths", default=None, metavar="SPECS",
                   help="comma-separated candidates (default: every built-in path)")
    p.add_argument("--dtype", default="float32,bfloat16", metavar="DTYPES",
                   help=f"comma-separated input dtypes, from: {listed(DTYPES)} (default %(default)s)")
    p.add_argument("--batch", default="1,8,64,256,1024", metavar="B,...",
                   help="comma-separated batch sizes (default %(default)s)")
    p.add_argument("--k", default="1,4", metavar="K,...",
                   help="comma-separated k (default %(default)s; paths limited to k = 1 skip k > 1)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size V (default 129280)")
    p.add_argument("--replays", type=int, default=30, help="timed graph replays per point (default 30)")
    p.add_argument("--no-size-matched", dest="size_matched", action="store_false",
                   help="skip the size-matched ceiling (torch.sum and a Triton read-sum in two layouts "
                        "at each point)")
    add_json(p, "every row")
    p.add_argument("--plot", default=None, metavar="FILE", help="write a PNG of time against B per path to FILE")
    p.set_defaults(run=run)


def _ints(name, text, min_value):
    from equiv.errors import InvalidArgument
    from equiv.validation import check_int

    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if not items:
        raise InvalidArgument(f"{name}={text!r} is empty: give comma-separated integers")
    out = []
    for s in items:
        try:
            value = int(s)
        except ValueError:
            raise InvalidArgument(f"{name}={text!r} is invalid: {s!r} is not an integer") from None
        out.append(check_int(name, value, min_value=min_value))
    return out


def run(args) -> int:
    from equiv.bench import _require_gpu, run_bench, write_json, write_plot
    from equiv.candidate import load_candidate
    from equiv.ops.draft_topk.recipes import DTYPES as KNOWN
    from equiv.validation import check_choices, check_int

    check_outputs(json=args.json_out, plot=args.plot)
    dtypes = check_choices("dtype", args.dtype, KNOWN)
    batches = _ints("batch", args.batch, 1)
    ks = _ints("k", args.k, 1)
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
