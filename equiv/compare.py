"""Compare one path to the float64 reference: the comparison pipeline (README, "The reference and its rules").

Plan (each stage reports a ``CheckResult`` of the same shape: what differs, where, by how much,
what was allowed)
1. ``contract``: the call returns two tensors, ``topk_p [B, k]`` floating (float32 or the input
   dtype), ``topk_index [B, k]`` int64, on the input's device, every index in ``[0, V)``, and
   leaves its input logits unchanged. A call that raises (or outlives ``timeout``) is a failed
   contract check carrying the traceback, never a crash. If the contract
   fails, the later stages are reported as not run.
2. ``index``: each index is in the reference's tie set for its rank (exact ties plus near-ties
   within the tolerance's ``rtol``); with k > 1 the indices of a row are distinct.
3. ``value``: on healthy rows, ``|topk_p - p*(returned index)|`` within ``Tolerance.allowed``,
   finite, and non-increasing across ranks (up to the same allowance). Reported in ULPs of the
   output dtype and as relative error.
4. ``poisoning``: on poisoned rows (NaN, +inf, all -inf) the probability is NaN, or, for a
   single +inf, the limit (1.0 at the +inf index, 0 elsewhere); and a poisoned row does not leak
   non-finite values into its healthy neighbours.
5. ``regression``: the candidate's largest relative error on healthy rows is at most
   ``regression_factor`` x that of ``softmax_topk`` on the same input plus ``regression_floor``.
"""
from __future__ import annotations

import json
import traceback
from dataclasses import asdict, dataclass, field

import numpy as np

from equiv import reference
from equiv.checks import NamedChecks
from equiv.timeouts import call_with_timeout
from equiv.tolerance import Tolerance, dtype_name, tolerance_for
from equiv.ulp import ulp_error

CHECKS = ("contract", "index", "value", "poisoning", "regression")


@dataclass(frozen=True)
class CheckResult:
    """One stage of the pipeline.

    ``failing`` counts failing rows out of ``total``; ``worst_row`` is the row with the largest
    violation (None when nothing failed or the stage did not run)."""

    name: str
    passed: bool
    detail: str
    ran: bool = True
    failing: int = 0
    total: int = 0
    worst_row: int | None = None

    def line(self) -> str:
        status = "pass" if self.passed else ("not run" if not self.ran else "FAIL")
        return f"{self.name:<10} {status:<7} {self.detail}"


@dataclass(frozen=True)
class ComparisonResult:
    """Outcome of ``compare``: the inputs it judged, every check, and how to replay it."""

    path: str
    dtype: str
    device: str
    k: int
    batch: int
    vocab: int
    passed: bool
    checks: tuple
    worst_row: int | None
    max_ulp: float
    max_rel_err: float
    index_mismatches: int
    poisoning_violations: int
    repro: str
    seed: int | None = None
    recipe: str | None = None
    exception: str | None = field(default=None, repr=False)
    row_ulp: tuple = field(default=(), repr=False)   # per healthy row: its largest ULP error

    @property
    def failed_checks(self) -> NamedChecks:
        """The checks that ran and failed; ``"value" in result.failed_checks`` tests by name."""
        return NamedChecks(c for c in self.checks if c.ran and not c.passed)

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict:
        d = asdict(self)
        d["checks"] = [asdict(c) for c in self.checks]
        return json.loads(json.dumps(d, default=float, allow_nan=True))

    def summary(self) -> str:
        head = (f"{self.path} k={self.k} {self.dtype} [{self.batch}, {self.vocab}] on {self.device}: "
                f"{'PASS' if self.passed else 'FAIL'}")
        lines = [head] + ["  " + c.line() for c in self.checks]
        if not self.passed:
            lines.append(self.repro)
        return "\n".join(lines)

    __str__ = summary


def _fmt_rows(n: int, total: int, what: str = "rows") -> str:
    pct = 100.0 * n / total if total else 0.0
    return f"{n} / {total} {what} ({pct:.1f}%)"


def _contract(out, logits, k):
    """None if the output meets the contract, else the reason."""
    import torch

    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return f"returned {type(out).__name__}, expected a tuple (topk_p, topk_index)"
    topk_p, topk_index = out
    batch, vocab = logits.shape
    for name, t in (("topk_p", topk_p), ("topk_index", topk_index)):
        if not isinstance(t, torch.Tensor):
            return f"{name} is a {type(t).__name__}, expected a torch.Tensor"
        if tuple(t.shape) != (batch, k):
            return f"{name} has shape {list(t.shape)}, expected [{batch}, {k}]"
        if t.device != logits.device:
            return f"{name} is on {t.device}, expected the input's device {logits.device}"
    if topk_p.dtype not in (torch.float32, logits.dtype):
        return f"topk_p has dtype {topk_p.dtype}, expected torch.float32 or the input dtype {logits.dtype}"
    if topk_index.dtype != torch.int64:
        return f"topk_index has dtype {topk_index.dtype}, expected torch.int64"
    if batch:
        lo, hi = int(topk_index.min()), int(topk_index.max())
        if lo < 0 or hi >= vocab:
            bad = ((topk_index < 0) | (topk_index >= vocab)).any(dim=1)
            row = int(bad.nonzero()[0, 0])
            return (f"index out of range [0, {vocab}): {int(bad.sum())} / {batch} rows, "
                    f"first at row {row}: {topk_index[row].tolist()}")
    return None


def _untouched(logits, snapshot):
    """None if the call left its input as it was, else the reason (an in-place edit of the
    caller's logits corrupts whatever the engine does with them next)."""
    now = _to_numpy(logits)
    same = (now == snapshot) | (np.isnan(now) & np.isnan(snapshot))
    if same.all():
        return None
    return (f"modified its input logits in place: {int((~same).sum())} / {same.size} elements "
            f"changed, first at {tuple(int(i) for i in np.argwhere(~same)[0])}")


def _not_run(name: str) -> CheckResult:
    return CheckResult(name, passed=False, ran=False, detail="not run (contract failed)")


def _index_check(ref, idx, rtol) -> CheckResult:
    batch, k = idx.shape
    ok = ref.in_tie_set(idx, tie_rtol=rtol)
    if k > 1:
        s = np.sort(idx, axis=1)
        dup = (s[:, 1:] == s[:, :-1]).any(axis=1)
        ok &= ~dup[:, None]
    bad_rows = np.flatnonzero(~ok.all(axis=1))
    if bad_rows.size == 0:
        return CheckResult("index", True, f"all {batch} rows in the tie sets", failing=0, total=batch)
    row = int(bad_rows[0])
    rank = int(np.flatnonzero(~ok[row])[0])
    got = int(idx[row, rank])
    p_got = ref.prob_of(idx)[row, rank]          # prob_of reads row b of its input as row b
    ties = ref.tie_set(row, rank, rtol)
    shown = ", ".join(map(str, ties[:5])) + (f", ... ({ties.size} in all)" if ties.size > 5 else "")
    detail = (f"Mismatched indices: {_fmt_rows(bad_rows.size, batch)}; first at row {row} rank {rank}: "
              f"returned {got} (p*={p_got:.6g}), tie set {{{shown}}} (p*={ref.topk_p[row, rank]:.6g})")
    if k > 1 and len(set(idx[row].tolist())) < k:
        detail += f"; row {row} repeats an index: {idx[row].tolist()}"
    return CheckResult("index", False, detail, failing=int(bad_rows.size), total=batch, worst_row=row)


def _value_errors(ref, p, idx, tol):
    """(err, allowed, exact) on all rows; poisoned rows are masked out by the caller."""
    exact = ref.prob_of(idx)
    top1 = ref.topk_p[:, :1]
    with np.errstate(invalid="ignore"):
        err = np.abs(p - exact)
    err = np.where(np.isfinite(p), err, np.inf)
    return err, tol.allowed(exact, top1), exact


def _value_check(ref, p, idx, tol, out_fmt) -> tuple[CheckResult, float, float, tuple]:
    healthy = ~ref.poisoned
    batch, k = p.shape
    n = int(healthy.sum())
    if n == 0:
        return CheckResult("value", True, "no healthy rows", total=0), 0.0, 0.0, ()
    err, allowed, exact = _value_errors(ref, p, idx, tol)
    err, allowed, exact, ph = err[healthy], allowed[healthy], exact[healthy], p[healthy]
    rows = np.flatnonzero(healthy)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(exact > 0, err / exact, np.where(err == 0, 0.0, np.inf))
    ulps = ulp_error(ph, exact, out_fmt)
    bad = err > allowed
    if k > 1:                                    # descending order, up to the allowance
        rise = ph[:, 1:] - ph[:, :-1]
        bad[:, 1:] |= rise > allowed[:, 1:] + allowed[:, :-1]
    bad_rows = np.flatnonzero(bad.any(axis=1))
    max_ulp, max_rel = float(np.max(ulps)), float(np.max(rel))
    ratio = np.where(allowed > 0, err / np.maximum(allowed, 1e-300), np.where(err > 0, np.inf, 0.0))
    worst_local = int(np.unravel_index(np.argmax(ratio), ratio.shape)[0])
    worst_row = int(rows[worst_local])
    if bad_rows.size == 0:
        detail = (f"max {max_ulp:.3g} ulp ({out_fmt}), max rel err {max_rel:.3g} "
                  f"(up to {tol.rtol:.3g} rel + {tol.top1_atol:.3g} x p_top1 allowed)")
        return CheckResult("value", True, detail, total=n), max_ulp, max_rel, tuple(ulps.max(axis=1).tolist())
    r = int(bad_rows[np.argmax(ratio[bad_rows].max(axis=1))])
    c = int(np.argmax(ratio[r]))
    order_bad = k > 1 and err[r, c] <= allowed[r, c]
    if order_bad:
        what = f"topk_p not descending at row {rows[r]}: {ph[r].tolist()}"
    else:
        what = (f"Greatest error at row {rows[r]} rank {c}: topk_p={ph[r, c]:.9g} vs exact "
                f"{exact[r, c]:.9g} for index {int(idx[rows[r], c])}: {ulps[r, c]:.3g} ulp, rel err "
                f"{rel[r, c]:.3g} (up to {allowed[r, c] / max(exact[r, c], 1e-300):.3g} allowed)")
    detail = f"Mismatched values: {_fmt_rows(bad_rows.size, n, 'healthy rows')}; {what}"
    return (CheckResult("value", False, detail, failing=int(bad_rows.size), total=n,
                        worst_row=int(rows[r])), max_ulp, max_rel, tuple(ulps.max(axis=1).tolist()))


def _poison_check(ref, p, idx, tol) -> CheckResult:
    poisoned = ref.poisoned
    batch, k = p.shape
    n = int(poisoned.sum())
    problems = []
    for b in np.flatnonzero(poisoned):
        kind = ref.kind[b]
        row_p = p[b]
        if kind == reference.POISON_POSINF:
            inf_at = int(np.flatnonzero(np.asarray(ref.rows[b], dtype=np.float64) == np.inf)[0])
            limit = ref.prob_of(idx[b:b + 1])[0]
            ok = np.isnan(row_p) | (np.abs(row_p - limit) <= tol.allowed(limit, 1.0))
            if ok.all():
                continue
            problems.append((int(b), f"row {b} ({kind}, +inf at {inf_at}) returned topk_p="
                                     f"{row_p.tolist()} at {idx[b].tolist()}; allowed NaN or the "
                                     f"limit 1.0 at index {inf_at}"))
        elif not np.isnan(row_p).all():
            problems.append((int(b), f"row {b} ({kind}) returned topk_p={row_p.tolist()}; "
                                     f"only NaN is acceptable (NaN in, confident number out)"))
    leaks = 0
    if n:
        healthy = np.flatnonzero(~poisoned)
        leaked = healthy[~np.isfinite(p[healthy]).all(axis=1)]
        leaks = int(leaked.size)
        if leaks:
            problems.append((int(leaked[0]), f"{leaks} healthy rows beside poisoned ones returned "
                                             f"non-finite topk_p, first row {leaked[0]}: {p[leaked[0]].tolist()}"))
    if not problems:
        detail = f"all {n} poisoned rows NaN or at the limit" if n else "no poisoned rows"
        return CheckResult("poisoning", True, detail, total=n)
    failing = len(problems) - (1 if leaks else 0) + leaks
    detail = f"Poisoning violations: {failing} rows; " + problems[0][1]
    return CheckResult("poisoning", False, detail, failing=failing, total=batch, worst_row=problems[0][0])


def _to_numpy(t):
    import torch

    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()                             # exact: both embed in float32
    return t.detach().cpu().numpy()


def _baseline_rel_err(logits, k, ref, tol) -> float:
    from equiv.paths import get_path

    p, idx = get_path("softmax_topk")(logits, k)
    p, idx = _to_numpy(p).astype(np.float64), _to_numpy(idx)
    healthy = ~ref.poisoned
    if not healthy.any():
        return 0.0
    exact = ref.prob_of(idx)[healthy]
    err = np.abs(p[healthy] - exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(exact > 0, err / exact, 0.0)
    return float(np.nanmax(rel))


def _regression_check(logits, k, ref, tol, max_rel, is_baseline) -> CheckResult:
    if is_baseline:
        return CheckResult("regression", True, "this is the baseline")
    try:
        base = _baseline_rel_err(logits, k, ref, tol)
    except Exception as exc:                     # the baseline itself cannot run (e.g. k > V)
        return CheckResult("regression", True, f"baseline not comparable ({type(exc).__name__})")
    limit = tol.regression_factor * base + tol.regression_floor
    detail = (f"max rel err {max_rel:.3g} vs softmax_topk {base:.3g} "
              f"(up to {tol.regression_factor:g} x baseline + {tol.regression_floor:.3g} allowed)")
    return CheckResult("regression", max_rel <= limit, detail, failing=int(max_rel > limit), total=1)


def _repro(name: str, k: int, recipe, device: str) -> str:
    if recipe is not None:
        return f"REPRO: equiv check --candidate {name} --k {k} --device {device} --recipe '{recipe}'"
    return (f"REPRO: equiv.compare(equiv.load_candidate({name!r}), logits, k={k}) "
            f"(raw tensor input: build it from an equiv.Recipe for a replayable command)")


def compare(fn, logits, k: int = 1, tolerance: Tolerance | None = None, *, recipe=None,
            name: str | None = None, regression: bool = True,
            timeout: float | None = None) -> ComparisonResult:
    """Judge ``fn(logits, k)`` against the float64 reference; see the module docstring.

    ``fn`` is a callable, a built-in path name or a candidate spec. ``recipe`` (an
    ``equiv.Recipe``) is only used to write the ``REPRO:`` line and the result's ``seed``.
    ``timeout`` (seconds) bounds the candidate's call: a hang is a failed contract check."""
    import torch

    from equiv.candidate import load_candidate
    from equiv.validation import check_int, check_logits

    cand = load_candidate(fn)
    name = name or cand.spec
    k = check_int("k", k, min_value=1)
    logits = check_logits(logits)                # a [B, V] float tensor, or one-line InvalidArgument
    dtype = dtype_name(logits.dtype)
    tol = tolerance or tolerance_for(dtype)
    batch, vocab = logits.shape
    device = str(logits.device)
    recipe_str = str(recipe) if recipe is not None else None
    seed = getattr(recipe, "seed", None)
    repro = _repro(name, k, recipe_str, logits.device.type)

    def result(checks, *, max_ulp=0.0, max_rel=0.0, exception=None, row_ulp=()):
        failed = [c for c in checks if not c.passed]
        worst = next((c.worst_row for c in failed if c.worst_row is not None), None)
        get = {c.name: c for c in checks}
        return ComparisonResult(
            path=name, dtype=dtype, device=device, k=k, batch=batch, vocab=vocab,
            passed=not failed, checks=tuple(checks), worst_row=worst, max_ulp=max_ulp,
            max_rel_err=max_rel, index_mismatches=get["index"].failing,
            poisoning_violations=get["poisoning"].failing, repro=repro, seed=seed,
            recipe=recipe_str, exception=exception, row_ulp=row_ulp)

    snapshot = np.array(_to_numpy(logits), copy=True)   # the reference's input, safe from the call
    try:
        out = call_with_timeout(cand, (logits, k), timeout)
        if out is not None and logits.device.type == "cuda":
            torch.cuda.synchronize()             # an asynchronous kernel fault surfaces here
        problem = _contract(out, logits, k) or _untouched(logits, snapshot)
    except Exception as exc:
        tb = traceback.format_exc()
        detail = f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        checks = [CheckResult("contract", False, detail, failing=batch, total=batch)]
        return result(checks + [_not_run(n) for n in CHECKS[1:]], exception=tb)
    if problem is not None:
        checks = [CheckResult("contract", False, problem, failing=batch, total=batch)]
        return result(checks + [_not_run(n) for n in CHECKS[1:]])

    topk_p, topk_index = out
    out_fmt = dtype_name(topk_p.dtype)
    ref = reference.softmax_topk(snapshot, k)
    p = _to_numpy(topk_p).astype(np.float64)
    idx = _to_numpy(topk_index)
    checks = [CheckResult("contract", True, f"[{batch}, {k}] {out_fmt} / int64 on {device}",
                          total=batch)]
    checks.append(_index_check(ref, idx, tol.rtol))
    value, max_ulp, max_rel, row_ulp = _value_check(ref, p, idx, tol, out_fmt)
    checks.append(value)
    checks.append(_poison_check(ref, p, idx, tol))
    if regression:
        checks.append(_regression_check(logits, k, ref, tol, max_rel,
                                        cand.builtin and cand.spec == "softmax_topk"))
    else:
        checks.append(CheckResult("regression", True, "skipped by the caller", ran=False))
    return result(checks, max_ulp=max_ulp, max_rel=max_rel, row_ulp=row_ulp)
