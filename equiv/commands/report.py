"""``equiv report``: the tolerance report of paths x dtypes x input families."""
from __future__ import annotations

import json
import sys


def add_parser(sub):
    p = sub.add_parser("report", help="tolerance report: every path x dtype x input family")
    p.add_argument("--paths", default=None, help="comma-separated candidates (default: every built-in)")
    p.add_argument("--dtype", default="float32,bfloat16,float16", help="comma-separated input dtypes")
    p.add_argument("--families", default=None, help="comma-separated input families (default: all)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size V (default 129280)")
    p.add_argument("--batch", type=int, default=8, help="rows per case (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of every recipe (default 0)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1; k=1-only paths are left out above 1)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--format", default="table", help="table (default), markdown, json or html")
    p.add_argument("--out", default=None, metavar="FILE", help="write the report here (atomically)")
    p.add_argument("--mtp-json", default=None, metavar="FILE",
                   help="an `equiv mtp --json` output whose acceptance histograms the HTML embeds")
    p.add_argument("--timeout", type=float, default=None, help="per-call time-out in seconds")
    p.set_defaults(run=run)


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.live = stream.isatty()

    def __call__(self, n, total, what=""):
        if not self.live:
            return
        filled = int(30 * n / total)
        end = "\n" if n == total else ""
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {n}/{total} {what[:40]:<40}", end=end,
              file=self.stream, flush=True)


def _read_mtp(path):
    from equiv.errors import InvalidArgument

    try:
        with open(path) as f:
            data = json.load(f)
        return data["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"--mtp-json {path!r} is not an `equiv mtp --json` file "
                              f"({type(exc).__name__}): run equiv mtp --json FILE first") from None


def run(args) -> int:
    from equiv.atomic import atomic_write
    from equiv.devices import resolve_device
    from equiv.inputs import DTYPES, FAMILIES
    from equiv.paths import get_path, path_names
    from equiv.report import FORMATS, render, report_rows
    from equiv.validation import check_choice, check_choices, check_float, check_int

    fmt = check_choice("format", args.format, FORMATS)
    paths = check_choices("paths", args.paths, path_names()) if args.paths and ":" not in args.paths \
        else (args.paths.split(",") if args.paths else path_names())
    dtypes = check_choices("dtype", args.dtype, DTYPES)
    families = check_choices("families", args.families, FAMILIES) if args.families else list(FAMILIES)
    vocab = check_int("vocab", args.vocab, min_value=1)
    batch = check_int("batch", args.batch, min_value=1)
    seed = check_int("seed", args.seed, min_value=0)
    k = check_int("k", args.k, min_value=1, max_value=vocab)
    timeout = check_float("timeout", args.timeout, min_value=0, exclusive_min=True) if args.timeout else None
    device = resolve_device(args.device)
    mtp = _read_mtp(args.mtp_json) if args.mtp_json else None
    from equiv.run import load_check

    for p in paths:
        load_check(p, device, timeout)           # fail fast, exit 2, before any work (in its worker)
    paths = [p for p in paths if p not in path_names() or get_path(p).supports_k(k)]
    report = report_rows(paths, dtypes, families, vocab=vocab, batch=batch, seed=seed, k=k,
                         device=device, progress=_Progress(), timeout=timeout)
    text = render(report, fmt, mtp)
    if args.out:
        atomic_write(args.out, text if text.endswith("\n") else text + "\n")
        print(f"equiv report: wrote {fmt} report to {args.out} "
              f"({'all correct paths pass' if report.passed else 'a check failed'})")
    else:
        print(text)
    return 0 if report.passed else 1
