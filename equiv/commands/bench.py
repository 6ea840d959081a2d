"""``equiv bench``: time every path of an operation on the GPU (``Op.bench``; the draft top-k's
protocol is in its folder's ``bench.py``)."""
from __future__ import annotations

from equiv.commands import add_json, add_op, add_paths_and_dtypes, add_vocab
from equiv.errors import InvalidArgument
from equiv.ops import get_op


def add_parser(sub):
    p = sub.add_parser("bench", help="time every path on the GPU against its read-bandwidth ceiling")
    add_op(p)
    add_paths_and_dtypes(p, "float32,bfloat16")
    p.add_argument("--batch", default="1,8,64,256,1024", metavar="B,...",
                   help="comma-separated batch sizes (default %(default)s)")
    p.add_argument("--k", default="1,4", metavar="K,...",
                   help="comma-separated k (default %(default)s; paths limited to k = 1 skip k > 1)")
    add_vocab(p)
    p.add_argument("--replays", type=int, default=30, help="timed graph replays per point (default 30)")
    p.add_argument("--no-size-matched", dest="size_matched", action="store_false",
                   help="skip the size-matched ceiling (torch.sum and a Triton read-sum in two layouts "
                        "at each point)")
    add_json(p, "every row")
    p.add_argument("--plot", default=None, metavar="FILE", help="write a PNG of time against B per path to FILE")
    p.set_defaults(run=run)


def run(args) -> int:
    op = get_op(args.op)
    if op.bench is None:
        raise InvalidArgument(f"--op {op.name} has no speed benchmark; `equiv bench` times the ops "
                              f"that have one")
    return op.bench(args)
