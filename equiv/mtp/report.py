"""How an ``MtpRun`` is shown: the path x consumer table, and the PNG of accepted-count histograms.

Plan. ``format_table(run)`` is one row per record, columns named as the JSON keys, so a reader
can go from the table to ``--json`` output without a legend; ``record_cells`` reads a record as
``--json`` writes it, so the HTML report shows the same columns from an ``equiv mtp --json`` file.
``summary_line(run)`` is the last line (what failed, what was expected to).
``acceptance_png(records)`` draws one panel per consumer (two a row, so the image fits a 1400 px
page), the share of verify rounds that accepted 0..steps drafts, one bar per path;
``write_plot(run, path)`` writes it atomically.
"""
from __future__ import annotations

from equiv.atomic import atomic_write
from equiv.figures import b64, figure_png, pyplot, short_label


RECORD_HEAD = ("path", "consumer", "accept_length", "diff [90% CI]", "accept_rate", "per_position",
               "drafted/emitted", "invalid", "lossless", "same_tokens", "equivalent", "verdict")


def _fmt(v, spec=".3f"):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return format(v, spec)


def _verdict(r: dict) -> str:
    if not r.get("applicable", True):
        return "n/a"
    if r.get("passed") is None:
        return "-"
    if r["passed"]:
        return "pass"
    return "expected-fail" if r.get("expected_failure") else "FAIL"


def record_cells(r: dict) -> tuple:
    """The ``RECORD_HEAD`` cells of one record as ``to_json`` (and ``equiv mtp --json``) writes it;
    a key it lacks shows as "-"."""
    tail = (_fmt(r.get("lossless")), _fmt(r.get("tokens_match_reference")),
            _fmt(r.get("equivalent_to_reference")), _verdict(r))
    if not r.get("applicable", True) or r.get("accept_length") is None:
        return (r["path"], r["consumer"], "-", "-", "-", "-", "-", "-", *tail)
    e = r.get("accept_length_difference")
    diff = "-" if e is None else f"{e['mean_difference']:+.3f} [{e['ci_low']:+.3f}, {e['ci_high']:+.3f}]"
    return (r["path"], r["consumer"], _fmt(r["accept_length"]), diff, _fmt(r.get("accept_rate")),
            " ".join(f"{p:.2f}" for p in r.get("per_position") or ()), _fmt(r.get("drafted_per_emitted")),
            _fmt(r.get("invalid_output_rate"), ".2%"), *tail)


def format_table(run) -> str:
    rows = [RECORD_HEAD] + [record_cells(r.to_json()) for r in run.records]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(RECORD_HEAD))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in run.records:
        if r.error:
            lines.append(f"{r.path} x {r.consumer}: {r.error}")
        elif r.applicable is False:
            lines.append(f"{r.path} x {r.consumer}: not applicable: {r.reason}")
    return "\n".join(lines)


def summary_line(run) -> str:
    cfg = run.config
    where = (f"trace {cfg['trace']}" if cfg.get("trace") else f"synthetic V={cfg['vocab']}")
    if cfg.get("model", "synthetic") != "synthetic":
        where = f"{cfg['model']} (draft {cfg['draft']}, {cfg['replicas']} seeds a prompt under sampling)"
    size = f"{cfg['sequences']} sequences x {cfg['rounds']} rounds, steps={cfg['steps']}, seed={cfg['seed']}"
    expected = [r for r in run.records if r.passed is False and r.expected_failure]
    parts = [f"mtp on {cfg['device']}, {where}, {size}:"]
    if run.failures:
        parts.append("FAIL " + ", ".join(f"{r.path} x {r.consumer} ({', '.join(r.failed_checks)})"
                                         for r in run.failures) + ";")
    else:
        parts.append("pass;")
    if expected:
        parts.append("expected failures (EXPECTED_FAILURES): " +
                     ", ".join(f"{r.path} x {r.consumer}" for r in expected))
    return " ".join(parts)


def acceptance_png(records, title: str | None = None) -> bytes | None:
    """PNG of accepted-count histograms from record dicts (``to_json``), one panel per consumer,
    two panels a row so that the image fits a 1400 px page; None when no record has a histogram."""
    records = [r for r in records if r.get("histogram")]
    if not records:
        return None
    plt = pyplot()
    consumers = list(dict.fromkeys(r["consumer"] for r in records))
    paths = list(dict.fromkeys(r["path"] for r in records))
    cols = min(len(consumers), 2)
    rows = -(-len(consumers) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 3.2 * rows), squeeze=False)
    width = 0.8 / len(paths)
    for ax, consumer in zip(axes.flat, consumers):
        for i, p in enumerate(paths):
            r = next((x for x in records if x["path"] == p and x["consumer"] == consumer), None)
            if r is None:
                continue
            h = r["histogram"]
            total = sum(h) or 1
            ax.bar([a + (i - (len(paths) - 1) / 2) * width for a in range(len(h))],
                   [c / total for c in h], width, label=f"{short_label(p)} ({_fmt(r.get('accept_length'), '.2f')})")
        ax.set_title(consumer, fontsize=10)
        ax.set_xlabel("accepted drafts per verify")
        ax.set_ylabel("share of verify rounds")
        ax.set_xticks(range(max(len(r["histogram"]) for r in records)))
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, title="path (accept length)", title_fontsize=7)
    for ax in list(axes.flat)[len(consumers):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return figure_png(fig)


def write_plot(run, path) -> str:
    """PNG of the accepted-count histograms, one panel per consumer, written atomically."""
    cfg = run.config
    title = (f"accepted-count histograms: V={cfg['vocab']}, {cfg['sequences']} x {cfg['rounds']} "
             f"rounds, steps={cfg['steps']}, seed={cfg['seed']}, {cfg['device']}")
    png = acceptance_png([r.to_json() for r in run.records], title)
    if png is None:
        raise ValueError("no record of this run has an acceptance histogram to plot")
    return atomic_write(path, png, mode="wb")


def html_section(results) -> dict | None:
    """The MTP part of the tolerance report's HTML page (an ``equiv mtp --json`` run's records):
    the acceptance histogram as base64 PNG, the record table's head and rows."""
    if not results:
        return None
    png = acceptance_png(results)
    return {"image": b64(png) if png else None, "head": RECORD_HEAD, "rows": [record_cells(r) for r in results]}
