"""The HTML tolerance report: one self-contained page rendered from a jinja2 template.

Plan. ``format_html(report, mtp_section)`` gathers what the page shows and renders
``equiv/ops/draft_topk/report/templates/report.html.j2`` (package data) with autoescaping on, so whatever a
candidate put in an exception message reaches the page as text, never as markup. The page reads top down:
verdict, provenance, the path x dtype summary, one error histogram per input dtype with its
tolerance drawn, the failing cases with their REPRO lines, the MTP acceptance histograms (with
``--mtp-json``), the per-case detail, the tolerance table in force.

Images are PNGs embedded as base64 (the file stands alone) and never wider than the page
(``equiv.figures``: ``figure_png`` saves again at a lower resolution if a long title or label
pushed the tight bounding box past it). Any list the page cuts says how much it left out
("+N more").

Histograms (matplotlib, Agg backend, imported only when drawing): per input dtype, the largest
relative error of each healthy row, one step line per path, log x axis, the dtype's ``rtol`` as a
vertical line. Rows with no error sit at the left edge, rows with a non-finite error at the right
one; the legend counts both. A row right of the line may still pass: lower ranks get
``top1_atol x p_top1`` and float16 subnormal outputs ``subnormal_atol`` on top of ``rtol``.
"""
from __future__ import annotations

import numpy as np
from jinja2 import Environment, PackageLoader, StrictUndefined

from equiv.figures import b64, figure_png, pyplot, short_label
from equiv.ops.draft_topk.report.rows import (DETAIL_HEAD, SUMMARY_HEAD, detail_cells, required, summary_cells,
                                              tight_line)
from equiv.ops.draft_topk.tolerance import TOLERANCES

LIST_LIMIT = 20          # failing cases shown before "+N more"


def error_histogram(report, dtype: str) -> bytes:
    """PNG of ``error_figure``."""
    return figure_png(error_figure(report, dtype))


def error_figure(report, dtype: str):
    """The largest relative error of each healthy row in ``dtype``, one line per path, and rtol."""
    plt = pyplot()
    rtol = TOLERANCES[dtype].rtol
    series = {}
    for r in report.rows:
        if r.dtype == dtype:
            series.setdefault(r.path, []).extend(r.row_rel_err)
    finite = np.asarray([v for vals in series.values() for v in vals if 0 < v < np.inf])
    lo = min(finite.min() if finite.size else rtol, rtol) / 10
    hi = max(finite.max() if finite.size else rtol, rtol) * 10
    bins = np.logspace(np.log10(lo), np.log10(hi), 56)
    fig, ax = plt.subplots(figsize=(10, 3.4))
    for path, vals in series.items():
        v = np.asarray(vals, dtype=np.float64)
        zeros, off = int((v == 0).sum()), int((~np.isfinite(v)).sum())
        extra = ", ".join(s for s in (f"{zeros} exact" if zeros else "",
                                      f"{off} non-finite" if off else "") if s)
        label = short_label(path) + (f" ({v.size} rows{', ' + extra if extra else ''})" if v.size
                                     else " (no row measured)")
        ax.hist(np.clip(np.nan_to_num(v, nan=hi, posinf=hi), lo, hi), bins=bins, histtype="step",
                linewidth=1.6, label=label)
    ax.axvline(rtol, color="crimson", linestyle="--", linewidth=1.4, label=f"rtol {rtol:.3g} (allowed)")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_title(f"{dtype} input: largest relative error per healthy row "
                 f"(V = {report.vocab}, k = {report.k})", fontsize=10)
    ax.set_xlabel("relative error of topk_p against the exact probability (log); "
                  "exact rows at the left edge")
    ax.set_ylabel("rows")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def cut(items, limit: int = LIST_LIMIT) -> tuple[list, int]:
    """The first ``limit`` items and how many were left out."""
    items = list(items)
    return items[:limit], max(len(items) - limit, 0)


def _environment():
    return Environment(loader=PackageLoader(__name__.rpartition(".")[0], "templates"), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def format_html(report, mtp_section=None) -> str:
    dtypes = list(dict.fromkeys(r.dtype for r in report.rows))
    families, more_families = cut(dict.fromkeys(r.family for r in report.rows))
    failures, more_failures = cut(report.failures)
    mtp = mtp_section
    page = _environment().get_template("report.html.j2").render(
        report=report, passed=report.passed,
        failing_required=[s for s in report.summary if s.required and not s.passed],
        families=families, more_families=more_families,
        provenance=report.provenance.items() if report.provenance else [],
        summary_head=SUMMARY_HEAD, summary=[(s, summary_cells(s)) for s in report.summary],
        histograms=[(d, TOLERANCES[d].rtol, b64(error_histogram(report, d))) for d in dtypes],
        failures=[(r, required(r.path)) for r in failures], more_failures=more_failures,
        detail_head=DETAIL_HEAD, detail=[(r, detail_cells(r)) for r in report.rows],
        tight_line=tight_line(report), tolerances=list(TOLERANCES.values()), mtp=mtp)
    return page if page.endswith("\n") else page + "\n"
