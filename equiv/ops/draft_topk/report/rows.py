"""The tolerance report: every path x dtype x input family compared to the reference.

Plan. ``report_rows`` runs one ``compare`` per (path, dtype, family) recipe and keeps, per case,
the columns a reviewer reads: ``max_ulp``, ``p99_ulp`` (over rows), ``max_rel_err`` and the
relative error allowed where it occurred, ``index_mismatches``, ``poisoning_violations``,
``passed``. It also records the ``Provenance`` (which equiv, libraries, device, date, command).

Every format reads in the same order: the **summary** (one line per path x dtype: verdict, failed
cases, the worst relative error against what was allowed there), then the **detail** (one line per
case), then ``tightest_rtol`` per dtype (the largest relative error any correct path showed: how
much of the table's allowance the correct paths actually use), then the provenance.

Formats: ``table`` (terminal), ``markdown``, ``json`` (``summary``, ``rows``, ``tightest_rtol``,
``provenance``) and ``html`` (the same, with one error histogram per dtype; ``equiv.report_html``).
A path is *required* to pass unless it is a built-in that is known not to be equivalent
(``hardcoded_one``: reported, not required); a user's candidate is always required.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.paths import path_names
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe
from equiv.provenance import collect

CORRECT_PATHS = ("softmax_topk", "identity_top1", "fused_triton")
COLUMNS = ("path", "dtype", "family", "max_ulp", "p99_ulp", "max_rel_err", "index_mismatches",
           "poisoning_violations", "passed")


def required(path: str) -> bool:
    """Must this path pass? The correct built-ins and every user candidate must."""
    return path in CORRECT_PATHS or path not in path_names()


@dataclass(frozen=True)
class ReportRow:
    """One case: ``path`` on the ``family`` recipe in ``dtype``; ``detail`` is the first failed
    check's line ("" when it passed), ``rel_err_allowed`` the relative error allowed where
    ``max_rel_err`` occurred."""

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
    rel_err_allowed: float = 0.0
    detail: str = ""
    row_ulp: tuple = field(default=(), repr=False)
    row_rel_err: tuple = field(default=(), repr=False)
    recipe: str | None = field(default=None, repr=False)     # the case's input, as data (diagnosis)

    def to_json(self) -> dict:
        d = asdict(self)
        d["failed_checks"] = list(self.failed_checks)
        d.pop("row_ulp")
        d.pop("row_rel_err")
        return d


@dataclass(frozen=True)
class SummaryRow:
    """One path x dtype over every family: ``verdict`` is ``pass``, ``FAIL`` or ``fail (not
    required)``; ``worst_rel_err`` is the largest relative error of any case (at ``worst_family``)
    and ``rel_err_allowed`` what the tolerance allowed there; all three are None when no case had
    a value to measure (every call failed its contract, or every row was poisoned)."""

    path: str
    dtype: str
    required: bool
    cases: int
    failed_cases: int
    worst_rel_err: float | None
    rel_err_allowed: float | None
    worst_family: str | None
    failed_checks: tuple

    @property
    def passed(self) -> bool:
        return self.failed_cases == 0

    @property
    def verdict(self) -> str:
        if self.passed:
            return "pass"
        return "FAIL" if self.required else "fail (not required)"

    def to_json(self) -> dict:
        d = asdict(self)
        d["failed_checks"] = list(self.failed_checks)
        d["verdict"] = self.verdict
        return d


def _summarise(rows) -> tuple:
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.path, r.dtype), []).append(r)
    out = []
    for (path, dtype), cases in groups.items():
        measured = [r for r in cases if r.row_rel_err]
        worst = max(measured, key=lambda r: r.max_rel_err) if measured else None
        failed = [r for r in cases if not r.passed]
        checks = tuple(dict.fromkeys(c for r in failed for c in r.failed_checks))
        out.append(SummaryRow(path, dtype, required(path), len(cases), len(failed),
                              worst and worst.max_rel_err, worst and worst.rel_err_allowed,
                              worst and worst.family, checks))
    return tuple(out)


@dataclass(frozen=True)
class Report:
    rows: tuple
    vocab: int
    batch: int
    seed: int
    device: str
    k: int
    provenance: object = None           # an equiv.provenance.Provenance

    @property
    def summary(self) -> tuple:
        return _summarise(self.rows)

    @property
    def tightest_rtol(self) -> dict:
        out: dict = {}
        for r in self.rows:
            if r.path in CORRECT_PATHS and r.passed:
                out[r.dtype] = max(out.get(r.dtype, 0.0), r.max_rel_err)
        return out

    @property
    def failures(self) -> list:
        """Failing cases, the required paths first."""
        return sorted((r for r in self.rows if not r.passed), key=lambda r: not required(r.path))

    @property
    def passed(self) -> bool:
        """Every required path passes everywhere (``hardcoded_one`` is reported, not required)."""
        return all(r.passed for r in self.rows if required(r.path))

    def to_json(self) -> dict:
        return {"vocab": self.vocab, "batch": self.batch, "seed": self.seed, "device": self.device,
                "k": self.k, "passed": self.passed, "summary": [s.to_json() for s in self.summary],
                "rows": [r.to_json() for r in self.rows], "tightest_rtol": self.tightest_rtol,
                "provenance": None if self.provenance is None else self.provenance.to_json()}


def report_rows(paths, dtypes, families=FAMILIES, *, vocab=129280, batch=8, seed=0, k=1,
                device="cpu", progress=None, timeout=None, argv=None) -> Report:
    """Run every case; ``argv`` is the command line the provenance records (default ``sys.argv``)."""
    rows = []
    jobs = [(p, d, f) for p in paths for d in dtypes for f in families]
    for n, (path, dtype, family) in enumerate(jobs):
        recipe = Recipe(family=family, seed=seed, batch=batch, vocab=vocab, dtype=dtype)
        res = compare(path, recipe, k=k, name=str(path), timeout=timeout, device=device)   # a spec: in its worker
        ulps = np.asarray(res.row_ulp, dtype=np.float64)
        p99 = float(np.percentile(ulps, 99)) if ulps.size else 0.0
        failed = res.failed_checks
        rows.append(ReportRow(str(path), dtype, family, k, res.max_ulp, p99, res.max_rel_err,
                              res.index_mismatches, res.poisoning_violations, res.passed,
                              tuple(c.name for c in failed), res.repro, res.rel_err_allowed,
                              failed[0].line() if failed else "", res.row_ulp, res.row_rel_err, res.recipe))
        if progress:
            progress(n + 1, len(jobs), f"{path} {dtype} {family}")
    return Report(tuple(rows), vocab, batch, seed, device, k, collect(device, argv))


# -- text formats: the same tables, as aligned columns or as markdown ---------------------------

SUMMARY_HEAD = ("path", "dtype", "verdict", "failed", "worst_rel_err", "allowed there", "at family",
                "failed checks")
DETAIL_HEAD = ("path", "dtype", "family", "max_ulp", "p99_ulp", "max_rel_err", "idx_miss", "poison",
               "result")


def summary_cells(s: SummaryRow) -> tuple:
    measured = s.worst_rel_err is not None
    return (s.path, s.dtype, s.verdict, f"{s.failed_cases} / {s.cases}",
            f"{s.worst_rel_err:.2e}" if measured else "-", f"{s.rel_err_allowed:.2e}" if measured else "-",
            s.worst_family or "-", ", ".join(s.failed_checks) or "-")


def detail_cells(r: ReportRow) -> tuple:
    return (r.path, r.dtype, r.family, f"{r.max_ulp:.3g}", f"{r.p99_ulp:.3g}", f"{r.max_rel_err:.3g}",
            str(r.index_mismatches), str(r.poisoning_violations),
            "pass" if r.passed else "FAIL " + ",".join(r.failed_checks))


def tight_line(report: Report) -> str:
    tight = report.tightest_rtol
    return ("tightest rtol met by every correct path: " +
            (", ".join(f"{d} {v:.3g}" for d, v in tight.items()) or "none ran"))


def _aligned(head, rows) -> list[str]:
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *rows]]


def _markdown(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows)]


def _text(report: Report, table, bullet: str) -> str:
    lines = table(SUMMARY_HEAD, [summary_cells(s) for s in report.summary])
    lines += ["", *table(DETAIL_HEAD, [detail_cells(r) for r in report.rows]), "", tight_line(report)]
    if report.provenance is not None:
        lines += ["", *(bullet + line for line in report.provenance.lines())]
    return "\n".join(lines)


def format_table(report: Report) -> str:
    return _text(report, _aligned, "")


def format_markdown(report: Report) -> str:
    return _text(report, _markdown, "- ")


def format_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
