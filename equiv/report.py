"""The tolerance report: every path x dtype x input family compared to the reference.

Each row is one ``compare`` over one recipe, summarised by the columns a reviewer reads:
``max_ulp``, ``p99_ulp``, ``max_rel_err``, ``index_mismatches``, ``poisoning_violations``,
``passed``. ``tightest_rtol`` per dtype is the smallest relative tolerance every passing row of a
correct path would still meet (the largest relative error seen among them).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from equiv.inputs import FAMILIES, Recipe


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

    def to_json(self) -> dict:
        d = asdict(self)
        d["failed_checks"] = list(self.failed_checks)
        return d


def _p99_ulp(cand, logits, k, res) -> float:
    """99th percentile of the per-row ULP error (re-derived from the candidate's output)."""
    import reference
    from equiv.compare import _to_numpy
    from equiv.ulp import ulp_error

    if not res.check("contract").passed:
        return float("nan")
    p, idx = cand(logits, k)
    ref = reference.softmax_topk(_to_numpy(logits), k)
    healthy = ~ref.poisoned
    if not healthy.any():
        return 0.0
    exact = ref.prob_of(_to_numpy(idx))[healthy]
    ulps = ulp_error(_to_numpy(p).astype(np.float64)[healthy], exact, str(p.dtype).replace("torch.", ""))
    return float(np.percentile(ulps.max(axis=1), 99))


def report_rows(paths, dtypes, families=FAMILIES, *, vocab=129280, batch=8, seed=0, k=1,
                device="cpu", progress=None) -> list[ReportRow]:
    from equiv.candidate import load_candidate
    from equiv.compare import compare

    rows = []
    jobs = [(p, d, f) for p in paths for d in dtypes for f in families]
    for n, (path, dtype, family) in enumerate(jobs):
        cand = load_candidate(path)
        recipe = Recipe(family=family, seed=seed, batch=batch, vocab=vocab, dtype=dtype)
        logits = recipe.build(device)
        res = compare(cand, logits, k=k, recipe=recipe, name=path)
        rows.append(ReportRow(path, dtype, family, k, res.max_ulp, _p99_ulp(cand, logits, k, res),
                              res.max_rel_err, res.index_mismatches, res.poisoning_violations,
                              res.passed, tuple(c.name for c in res.failed_checks), res.repro))
        if progress:
            progress(n + 1, len(jobs))
    return rows


def tightest_rtol(rows, correct_paths=("softmax_topk", "identity_top1", "fused_triton")) -> dict:
    out: dict = {}
    for r in rows:
        if r.path in correct_paths and r.passed:
            out[r.dtype] = max(out.get(r.dtype, 0.0), r.max_rel_err)
    return out


def format_table(rows) -> str:
    head = ("path", "dtype", "family", "max_ulp", "p99_ulp", "max_rel_err", "idx_miss", "poison", "result")
    body = [(r.path, r.dtype, r.family, f"{r.max_ulp:.3g}", f"{r.p99_ulp:.3g}", f"{r.max_rel_err:.3g}",
             str(r.index_mismatches), str(r.poisoning_violations),
             "pass" if r.passed else "FAIL " + ",".join(r.failed_checks)) for r in rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head] + body]
    return "\n".join(lines)
