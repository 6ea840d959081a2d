"""The tolerance report: every path x dtype x input family compared to the reference.

Each row is one ``compare`` over one recipe, summarised by the columns a reviewer reads:
``max_ulp``, ``p99_ulp`` (over rows), ``max_rel_err``, ``index_mismatches``,
``poisoning_violations``, ``passed``. ``tightest_rtol`` per dtype is the smallest relative
tolerance that every correct path met on every row (the largest relative error seen among them):
how much of the table's allowance the correct paths actually use.

Formats: ``table`` (terminal), ``markdown``, ``json`` (``rows`` + ``tightest_rtol``) and ``html``
(the tables plus embedded PNG plots; see ``equiv.report_html``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from equiv.inputs import FAMILIES, Recipe

CORRECT_PATHS = ("softmax_topk", "identity_top1", "fused_triton")
FORMATS = ("table", "markdown", "json", "html")
COLUMNS = ("path", "dtype", "family", "max_ulp", "p99_ulp", "max_rel_err", "index_mismatches",
           "poisoning_violations", "passed")


@dataclass(frozen=True)
class ReportRow:
    path: str
    dtype: str
    family: str
    k: int
    max_ulp: float
    p99_ulp: float
    max_rel_err: float
    index_mismatches: int
    poisoning_violations: int
    passed: bool
    failed_checks: tuple
    repro: str
    row_ulp: tuple = field(default=(), repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d["failed_checks"] = list(self.failed_checks)
        d.pop("row_ulp")
        return d


@dataclass(frozen=True)
class Report:
    rows: tuple
    vocab: int
    batch: int
    seed: int
    device: str
    k: int

    @property
    def tightest_rtol(self) -> dict:
        out: dict = {}
        for r in self.rows:
            if r.path in CORRECT_PATHS and r.passed:
                out[r.dtype] = max(out.get(r.dtype, 0.0), r.max_rel_err)
        return out

    @property
    def passed(self) -> bool:
        """Every correct path passes everywhere (other candidates are reported, not required)."""
        return all(r.passed for r in self.rows if r.path in CORRECT_PATHS or r.path not in _BUILTINS())

    def to_json(self) -> dict:
        return {"vocab": self.vocab, "batch": self.batch, "seed": self.seed, "device": self.device,
                "k": self.k, "rows": [r.to_json() for r in self.rows],
                "tightest_rtol": self.tightest_rtol}


def _BUILTINS():
    from equiv.paths import path_names

    return path_names()


def report_rows(paths, dtypes, families=FAMILIES, *, vocab=129280, batch=8, seed=0, k=1,
                device="cpu", progress=None, timeout=None) -> Report:
    from equiv.candidate import load_candidate
    from equiv.compare import compare

    rows = []
    jobs = [(p, d, f) for p in paths for d in dtypes for f in families]
    for n, (path, dtype, family) in enumerate(jobs):
        cand = load_candidate(path)
        recipe = Recipe(family=family, seed=seed, batch=batch, vocab=vocab, dtype=dtype)
        res = compare(cand, recipe.build(device), k=k, recipe=recipe, name=path, timeout=timeout)
        ulps = np.asarray(res.row_ulp, dtype=np.float64)
        p99 = float(np.percentile(ulps, 99)) if ulps.size else 0.0
        rows.append(ReportRow(path, dtype, family, k, res.max_ulp, p99, res.max_rel_err,
                              res.index_mismatches, res.poisoning_violations, res.passed,
                              tuple(c.name for c in res.failed_checks), res.repro, res.row_ulp))
        if progress:
            progress(n + 1, len(jobs), f"{path} {dtype} {family}")
    return Report(tuple(rows), vocab, batch, seed, device, k)


def _cells(r: ReportRow) -> tuple:
    return (r.path, r.dtype, r.family, f"{r.max_ulp:.3g}", f"{r.p99_ulp:.3g}", f"{r.max_rel_err:.3g}",
            str(r.index_mismatches), str(r.poisoning_violations),
            "pass" if r.passed else "FAIL " + ",".join(r.failed_checks))


_HEAD = ("path", "dtype", "family", "max_ulp", "p99_ulp", "max_rel_err", "idx_miss", "poison", "result")


def _tight_line(report: Report) -> str:
    tight = report.tightest_rtol
    return ("tightest rtol met by every correct path: " +
            (", ".join(f"{d} {v:.3g}" for d, v in tight.items()) or "none ran"))


def format_table(report: Report) -> str:
    body = [_cells(r) for r in report.rows]
    widths = [max(len(x[i]) for x in [_HEAD] + body) for i in range(len(_HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [_HEAD] + body]
    return "\n".join(lines + [_tight_line(report)])


def format_markdown(report: Report) -> str:
    lines = ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in report.rows]
    return "\n".join(lines + ["", _tight_line(report)])


def format_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)


def render(report: Report, fmt: str, mtp_results=None) -> str:
    if fmt == "table":
        return format_table(report)
    if fmt == "markdown":
        return format_markdown(report)
    if fmt == "json":
        return format_json(report)
    from equiv.report_html import format_html

    return format_html(report, mtp_results)
