"""``equiv report``: the tolerance report of paths x dtypes x input families."""
from __future__ import annotations

import json

from equiv.api import report
from equiv.atomic import atomic_write
from equiv.commands import add_device, add_op, add_paths_and_dtypes, add_seed, add_vocab, check_outputs, one_of
from equiv.validation import check_choice
from equiv.errors import InvalidArgument
from equiv.atomic import json_text

FORMATS = ("table", "markdown", "json", "html")


def add_parser(sub):
    p = sub.add_parser("report", help="tolerance report: every path x dtype x input family")
    add_op(p)
    add_paths_and_dtypes(p, "float32,bfloat16,float16", "all")
    p.add_argument("--families", default=None, metavar="FAMILIES",
                   help="comma-separated input families (default: all; equiv.FAMILIES lists them)")
    add_vocab(p)
    p.add_argument("--batch", type=int, default=8, help="rows per case (default 8)")
    add_seed(p)
    p.add_argument("--k", type=int, default=1, help="top-k (default 1; k=1-only paths are left out above 1)")
    add_device(p)
    p.add_argument("--format", default="table", metavar=one_of(FORMATS), help="output format (default table)")
    p.add_argument("--out", default=None, metavar="FILE", help="write the report to FILE (atomically)")
    p.add_argument("--mtp-json", default=None, metavar="FILE",
                   help="an `equiv mtp --json` output whose acceptance histograms the HTML embeds")
    p.add_argument("--timeout", default=None, metavar="SEC", help="per-call time-out in seconds (default: none)")
    p.set_defaults(run=run)


def _read_mtp(path):
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

    return json_text(json.loads(text))


def run(args) -> int:
    check_outputs(out=args.out)
    fmt = check_choice("format", args.format, FORMATS)
    records = _read_mtp(args.mtp_json) if args.mtp_json else None    # a bad file: exit 2, before any work
    from equiv.mtp.report import html_section    # here: equiv.mtp loads torch, 2.9 s (-X importtime, busy CPU)

    mtp = html_section(records) if records and fmt == "html" else None
    with args.console.progress("equiv report", unit="case") as bar:
        result = report(args.paths, op=args.op, dtypes=args.dtype, families=args.families, vocab=args.vocab,
                        batch=args.batch, seed=args.seed, k=args.k, device=args.device,
                        timeout=args.timeout, progress=bar)
    text = _with_version(result.render(fmt, mtp), fmt)
    if args.out:
        atomic_write(args.out, text if text.endswith("\n") else text + "\n")
        args.console.note(f"equiv report: wrote {fmt} report to {args.out} "
                          f"({'all correct paths pass' if result.passed else 'a check failed'})")
    else:
        args.console.out(text)
    return 0 if result.passed else 1
