"""The HTML tolerance report: the tables and PNG plots embedded (one self-contained file).

Plots (matplotlib, Agg backend, imported only here):
- error distribution per path: histogram of each healthy row's largest ULP error, one panel per
  input dtype, log-scaled (0 ULP rows are drawn at 10**-2);
- acceptance histograms from ``equiv mtp`` (when MTP results are given): accepted drafts per
  verify step, one bar group per path, one panel per consumer.
"""
from __future__ import annotations

import base64
import html
import io

import numpy as np


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def error_plot(report) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = sorted({r.dtype for r in report.rows})
    paths = list(dict.fromkeys(r.path for r in report.rows))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 3.6), squeeze=False)
    bins = np.logspace(-2, 13, 61)
    for ax, dtype in zip(axes[0], dtypes):
        for path in paths:
            vals = [u for r in report.rows if r.path == path and r.dtype == dtype for u in r.row_ulp]
            if vals:
                v = np.clip(np.asarray(vals, dtype=np.float64), 1e-2, 1e13)
                ax.hist(v, bins=bins, histtype="step", linewidth=1.6, label=path)
        ax.set_xscale("log")
        ax.set_title(f"{dtype} input: largest ULP error per row")
        ax.set_xlabel("ULP of the output dtype (log)")
        ax.set_ylabel("rows")
        ax.legend(fontsize=8)
    return _png(fig)


def acceptance_plot(mtp_results) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in mtp_results if r.get("histogram")]
    if not records:
        return None
    consumers = list(dict.fromkeys(r["consumer"] for r in records))
    paths = list(dict.fromkeys(r["path"] for r in records))
    fig, axes = plt.subplots(1, len(consumers), figsize=(4.5 * len(consumers), 3.4), squeeze=False)
    width = 0.8 / max(len(paths), 1)
    for ax, consumer in zip(axes[0], consumers):
        for i, path in enumerate(paths):
            rec = next((r for r in records if r["path"] == path and r["consumer"] == consumer), None)
            if rec is None:
                continue
            h = np.asarray(rec["histogram"], dtype=np.float64)
            h = h / h.sum() if h.sum() else h
            ax.bar(np.arange(h.size) + i * width, h, width=width, label=path)
        ax.set_title(f"{consumer}: accepted drafts per verify")
        ax.set_xlabel("accepted drafts")
        ax.set_ylabel("fraction of verify steps")
        ax.legend(fontsize=7)
    return _png(fig)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:nth-child(-n+3),th{text-align:left}tr.fail td{background:#fde2e2}tr.pass td:last-child{color:#176c2e}
h1{font-size:22px}h2{font-size:17px;margin-top:1.6em}code{background:#f3f3f3;padding:1px 4px}"""


def format_html(report, mtp_results=None) -> str:
    from equiv.report import _HEAD, _cells, _tight_line
    from equiv.tolerance import TOLERANCES

    esc = html.escape
    rows = "\n".join(
        f'<tr class="{"pass" if r.passed else "fail"}">' + "".join(f"<td>{esc(c)}</td>" for c in _cells(r))
        + "</tr>" for r in report.rows)
    tol_rows = "\n".join(f"<tr><td>{d}</td><td>{t.rtol:.3g}</td><td>{t.top1_atol:.3g}</td>"
                         f"<td>{t.subnormal_atol:.3g}</td></tr>" for d, t in TOLERANCES.items())
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>equiv tolerance report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>equiv tolerance report</h1>",
        f"<p>V = {report.vocab}, {report.batch} rows per case, k = {report.k}, seed {report.seed}, "
        f"device <code>{esc(report.device)}</code>. {esc(_tight_line(report))}.</p>",
        "<h2>Paths x dtypes x input families</h2>",
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in _HEAD) + "</tr>", rows, "</table>",
        "<h2>Tolerance table in force</h2>",
        "<table><tr><th>input dtype</th><th>rtol</th><th>top1_atol</th><th>subnormal_atol</th></tr>",
        tol_rows, "</table>",
        "<h2>Error distribution per path</h2>",
        f"<img alt='error distribution' src='data:image/png;base64,{error_plot(report)}'>",
    ]
    if mtp_results:
        img = acceptance_plot(mtp_results)
        if img:
            parts += ["<h2>MTP acceptance histograms</h2>",
                      f"<img alt='acceptance histograms' src='data:image/png;base64,{img}'>"]
    failing = [r for r in report.rows if not r.passed]
    if failing:
        parts.append("<h2>Replay a failure</h2><ul>")
        parts += [f"<li><code>{esc(r.repro)}</code></li>" for r in failing[:20]]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
