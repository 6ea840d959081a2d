"""``equiv report``: the tolerance report of paths x dtypes x input families."""
from __future__ import annotations

import json

from equiv.commands import DTYPES, add_device, check_outputs, listed, one_of

FORMATS = ("table", "markdown", "json", "html")


def add_parser(sub):
    p = sub.add_parser("report", help="tolerance report: every path x dtype x input family")
    p.add_argument("--paths", default=None, metavar="SPECS",
                   help="comma-separated candidates (default: every built-in path)")
    p.add_argument("--dtype", default="float32,bfloat16,float16", metavar="DTYPES",
                   help=f"comma-separated input dtypes, from: {listed(DTYPES)} (default: all)")
    p.add_argument("--families", default=None, metavar="FAMILIES",
                   help="comma-separated input families (default: all; equiv.FAMILIES lists them)")
    p.add_argument("--vocab", type=int, default=129280, help="vocabulary size V (default 129280)")
    p.add_argument("--batch", type=int, default=8, help="rows per case (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of every recipe (default 0)")
    p.add_argument("--k", type=int, default=1, help="top-k (default 1; k=1-only paths are left out above 1)")
    add_device(p)
    p.add_argument("--format", default="table", metavar=one_of(FORMATS), help="output format (default table)")
    p.add_argument("--out", default=None, metavar="FILE", help="write the report to FILE (atomically)")
    p.add_argument("--mtp-json", default=None, metavar="FILE",
                   help="an `equiv mtp --json` output whose acceptance histograms the HTML embeds")
    p.add_argument("--timeout", type=float, default=None, help="per-call time-out in seconds (default: none)")
    p.set_defaults(run=run)


def _read_mtp(path):
    from equiv.errors import InvalidArgument

    try:
        with open(path) as f:
            data = json.load(f)
        return data["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"--mtp-json {path!r} is not an `equiv mtp --json` file "
                              f"({type(exc).__name__}): run equiv mtp --json FILE first") from None


def _with_version(text: str, fmt: str) -> str:
    """JSON reports carry ``equiv_version`` like every JSON equiv writes."""
    if fmt != "json":
        return text
    from equiv.atomic import json_text

    return json_text(json.loads(text))


def run(args) -> int:
    from equiv.atomic import atomic_write
    from equiv.devices import resolve_device
    from equiv.ops.draft_topk.recipes import DTYPES as KNOWN
    from equiv.ops.draft_topk.recipes import FAMILIES
    from equiv.ops.draft_topk.paths import get_path, path_names
    from equiv.report import FORMATS as RENDERED
    from equiv.report import render, report_rows
    from equiv.validation import check_choice, check_choices, check_float, check_int

    check_outputs(out=args.out)
    fmt = check_choice("format", args.format, RENDERED)
    paths = check_choices("paths", args.paths, path_names()) if args.paths and ":" not in args.paths \
        else (args.paths.split(",") if args.paths else path_names())
    dtypes = check_choices("dtype", args.dtype, KNOWN)
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
    import time

    from equiv.diagnose.attach import for_report, with_defects

    t0 = time.perf_counter()
    with args.console.progress("equiv report", unit="case") as bar:
        report = report_rows(paths, dtypes, families, vocab=vocab, batch=batch, seed=seed, k=k,
                             device=device, progress=bar, timeout=timeout)
    diagnoses = for_report(report, timeout=timeout, elapsed_s=time.perf_counter() - t0)
    text = _with_version(with_defects(render(report, fmt, mtp), fmt, diagnoses), fmt)
    if args.out:
        atomic_write(args.out, text if text.endswith("\n") else text + "\n")
        args.console.note(f"equiv report: wrote {fmt} report to {args.out} "
                          f"({'all correct paths pass' if report.passed else 'a check failed'})")
    else:
        args.console.out(text)
    return 0 if report.passed else 1
