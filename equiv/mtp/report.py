"""How an ``MtpRun`` is shown: the path x consumer table, and the PNG of accepted-count histograms.

Plan. ``format_table(run)`` is one row per record, columns named as the JSON keys, so a reader
can go from the table to ``--json`` output without a legend; ``summary_line(run)`` is the last
line (what failed, what was expected to). ``write_plot(run, path)`` draws one panel per
consumer, the share of verify rounds that accepted 0..steps drafts, one bar per path, and
writes the PNG atomically.
"""
from __future__ import annotations

import io


def _fmt(v, spec=".3f"):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return format(v, spec)


def _verdict(r) -> str:
    if not r.applicable:
        return "n/a"
    if r.passed:
        return "pass"
    return "expected-fail" if r.expected_failure else "FAIL"


def format_table(run) -> str:
    head = ("path", "consumer", "accept_length", "diff [90% CI]", "accept_rate", "per_position",
            "drafted/emitted", "invalid", "lossless", "same_tokens", "equivalent", "verdict")
    rows = [head]
    for r in run.records:
        if not r.applicable or r.metrics is None:
            rows.append((r.path, r.consumer, "-", "-", "-", "-", "-", "-",
                         _fmt(r.lossless), _fmt(r.tokens_match_reference),
                         _fmt(r.equivalent_to_reference), _verdict(r)))
            continue
        m, e = r.metrics, r.equivalence
        diff = "-" if e is None else f"{e.mean_difference:+.3f} [{e.ci_low:+.3f}, {e.ci_high:+.3f}]"
        rows.append((r.path, r.consumer, _fmt(m.accept_length), diff, _fmt(m.accept_rate),
                     " ".join(f"{p:.2f}" for p in m.per_position), _fmt(m.drafted_per_emitted),
                     _fmt(m.invalid_output_rate, ".2%"), _fmt(r.lossless),
                     _fmt(r.tokens_match_reference), _fmt(r.equivalent_to_reference), _verdict(r)))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
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


def write_plot(run, path) -> str:
    """PNG of the accepted-count histograms, one panel per consumer, written atomically."""
    from equiv.atomic import atomic_write
    from equiv.errors import MissingDependency

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependency("--plot needs matplotlib: pip install matplotlib") from exc
    consumers = list(dict.fromkeys(r.consumer for r in run.records))
    paths = list(dict.fromkeys(r.path for r in run.records))
    steps = run.config["steps"]
    fig, axes = plt.subplots(1, len(consumers), figsize=(4.2 * len(consumers), 3.4), squeeze=False)
    width = 0.8 / max(len(paths), 1)
    for ax, consumer in zip(axes[0], consumers):
        for i, p in enumerate(paths):
            r = next(x for x in run.records if x.path == p and x.consumer == consumer)
            if r.metrics is None:
                continue
            h = r.metrics.histogram
            total = sum(h) or 1
            ax.bar([a + (i - (len(paths) - 1) / 2) * width for a in range(steps + 1)],
                   [c / total for c in h], width, label=f"{p} ({r.metrics.accept_length:.2f})")
        ax.set_title(consumer)
        ax.set_xlabel("accepted drafts per verify")
        ax.set_xticks(range(steps + 1))
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, title="path (accept length)", title_fontsize=7)
    axes[0][0].set_ylabel("share of verify rounds")
    cfg = run.config
    fig.suptitle(f"accepted-count histograms: V={cfg['vocab']}, {cfg['sequences']} x {cfg['rounds']} "
                 f"rounds, steps={steps}, seed={cfg['seed']}, {cfg['device']}", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write(path, buf.getvalue(), mode="wb")
