"""Compare one path to the float64 reference: the comparison pipeline (README, "The reference and its rules").

Plan (each stage reports a ``CheckResult`` of the same shape: what differs, where, by how much,
what was allowed)
1. ``contract``: the call returns two tensors, ``topk_p [B, k]`` floating (float32, float64 or
   the input dtype; any strides), ``topk_index [B, k]`` int64, on the input's device, every index
   in ``[0, V)`` on every row, and leaves its input logits unchanged. A call that raises (or
   outlives ``timeout``) is a failed contract check carrying the traceback, never a crash. If the
   contract fails, the later stages are reported as not run.
   Stages 2-5 need the float64 reference, so on a large batch they judge the rows that
   ``equiv.ops.draft_topk.coverage.judged_rows`` picks (``rows=``: all rows up to 2**24 elements, else the
   first, the last, the power-of-two edges 31-33 ... 255-257 and 32 rows drawn with the recipe's
   seed); the result lists them (``judged_rows``) and the contract line says how many.
2. ``index``: each index is in the reference's tie set for its rank (exact ties, near-ties
   within twice the tolerance's ``rtol``: ``tie_width``, and probabilities within half the output format's smallest
   subnormal, which all round to the same value or to 0); with k > 1 the indices of a row are
   distinct.
3. ``value``: on healthy rows, ``|topk_p - p*(returned index)|`` within ``Tolerance.allowed``,
   finite, and non-increasing across ranks (up to the same allowance). Reported in ULPs of the
   output dtype (of float32 for a float64 output: the contract promises float32 accuracy, and
   float64 ULPs would make every correct float32 computation look a billion ULPs off) and as
   relative error.
4. ``poisoning``: on poisoned rows (NaN, +inf, all -inf) the probability is NaN, or, for a
   single +inf, the limit (1.0 at the +inf index, 0 elsewhere); and a poisoned row does not leak
   non-finite values into its healthy neighbours.
5. ``regression``: the candidate's largest relative error on healthy rows is at most
   ``regression_factor`` x that of ``softmax_topk`` on the same input plus ``regression_floor``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import NamedTuple

import numpy as np
import torch

from equiv import reference
from equiv.checks import NamedChecks
from equiv.ops.draft_topk import disk_cache
from equiv.ops.draft_topk.coverage import judged_rows
from equiv.ops.draft_topk.paths import check_logits, get_path
from equiv.ops.draft_topk.recipes import Recipe, host, keep
from equiv.ops.draft_topk.tolerance import Tolerance, dtype_name, tolerance_for
from equiv.ops.draft_topk.ulp import get_format, ulp_error
from equiv.run import Array, Opaque, Raw, runner_for
from equiv.validation import check_int

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
    cause: str | None = None      # a failed contract's: "format", "oov", or how the call ended (CallOutcome.kind);
                                  # a regression rule that could not compare: "not_comparable"

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
    row_ulp: tuple = field(default=(), repr=False)   # per healthy judged row: its largest ULP error
    row_rel_err: tuple = field(default=(), repr=False)   # per healthy judged row: its largest relative error
    rel_err_allowed: float = 0.0   # the relative error allowed where max_rel_err occurred
    judged_rows: tuple = field(default=(), repr=False)   # the rows stages 2-5 judged
    call_kind: str | None = None                  # how the call ended when not normally (equiv.run)
    context: str | None = None                    # the calling context (equiv.run.context); None: the caller's

    @property
    def failed_checks(self) -> NamedChecks:
        """The checks that ran and failed; ``"value" in result.failed_checks`` tests by name."""
        return NamedChecks(c for c in self.checks if c.ran and not c.passed)

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    @property
    def contract_cause(self) -> str | None:
        """Why the contract failed, as data (``CheckResult.cause``); None when it held."""
        contract = self.check("contract")
        return None if contract.passed else contract.cause

    def to_json(self) -> dict:
        d = asdict(self)
        d["checks"] = [asdict(c) for c in self.checks]
        return json.loads(json.dumps(d, default=float, allow_nan=True))

    def summary(self) -> str:
        head = (f"{self.path} k={self.k} {self.dtype} [{self.batch}, {self.vocab}] on {self.device}"
                f"{f' under {self.context}' if self.context else ''}: "
                f"{'PASS' if self.passed else 'FAIL'}")
        lines = [head] + ["  " + c.line() for c in self.checks]
        if not self.passed:
            lines.append(self.repro)
        return "\n".join(lines)

    __str__ = summary


# The contract a path is judged by, as ``equiv paths`` and the README state it; ``_contract``
# enforces the first three lines, the stages after it the rest.
CONTRACT = (
    "fn(logits, k) -> (topk_p, topk_index) (a tuple, named tuple or list), k >= 1 and k <= V",
    "logits: [B, V] float32, bfloat16 or float16, on any device; last dimension of stride 1, any "
    "row stride >= V (not necessarily a multiple of 16 bytes), any element-aligned start in the "
    "storage (no 16-byte alignment promised); fn must not modify them nor write outside them",
    "outputs: plain torch.Tensors (a tensor subclass is a contract failure naming its type)",
    "topk_p: [B, k] float32, float64 or the input dtype, on the input's device, any strides: the "
    "softmax probability of each returned index, non-increasing across ranks (a float64 topk_p is "
    "judged in float32 ULPs)",
    "topk_index: [B, k] int64, on the input's device, any strides: every entry in [0, V), distinct "
    "within a row; at a tie any index of the tie set (exact ties, near-ties within rtol, "
    "probabilities under half the output format's smallest subnormal)",
    "poisoned rows (holding NaN or +inf, or all -inf): topk_p NaN, or for a single +inf the limit "
    "1.0 at its index; healthy rows of the batch unaffected",
)


def _fmt_rows(n: int, total: int, what: str = "rows") -> str:
    pct = 100.0 * n / total if total else 0.0
    return f"{n} / {total} {what} ({pct:.1f}%)"


ALLOWED_P_DTYPES = ("float32", "float64")      # or the input dtype


class ContractBreak(NamedTuple):
    """Why an answer breaks the output contract: ``cause`` is ``format`` (type, shape, device,
    dtype) or ``oov`` (an index outside [0, V)); ``message`` says it for people."""

    cause: str
    message: str


def _contract(out, batch: int, vocab: int, k: int, in_dtype: str, device: str) -> str | None:
    """None if the returned value meets the contract, else the reason (``contract_break``'s text)."""
    broken = contract_break(out, batch, vocab, k, in_dtype, device)
    return None if broken is None else broken.message


def contract_break(out, batch: int, vocab: int, k: int, in_dtype: str, device: str) -> ContractBreak | None:
    """None if the returned value (host ``Array``s from ``equiv.run``) meets the contract, else
    why not, as data. ``topk_p`` may be float32, float64 or the input dtype; outputs may be
    non-contiguous."""
    broken = _format_problem(out, batch, k, in_dtype, device)
    if broken is not None:
        return ContractBreak("format", broken)
    idx_out = out[1]
    if batch:
        idx = idx_out.values
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= vocab:
            bad = ((idx < 0) | (idx >= vocab)).any(axis=1)
            row = int(np.flatnonzero(bad)[0])
            return ContractBreak("oov", f"index out of range [0, {vocab}): {int(bad.sum())} / {batch} rows, "
                                        f"first at row {row}: {idx[row].tolist()}")
    return None


def _format_problem(out, batch: int, k: int, in_dtype: str, device: str) -> str | None:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return f"returned {_type_name(out)}, expected a tuple (topk_p, topk_index)"
    p_out, idx_out = out
    for name, t in (("topk_p", p_out), ("topk_index", idx_out)):
        if not isinstance(t, Array):
            return f"{name} is a {_type_name(t)}, expected a torch.Tensor"
        if tuple(t.shape) != (batch, k):
            return f"{name} has shape {list(t.shape)}, expected [{batch}, {k}]"
        if t.device_type != device.split(":")[0]:
            return f"{name} is on {t.device}, expected the input's device {device}"
    allowed = ALLOWED_P_DTYPES + ((in_dtype,) if in_dtype not in ALLOWED_P_DTYPES else ())
    if p_out.dtype not in allowed:
        return (f"topk_p has dtype {p_out.dtype}, expected one of {', '.join(allowed)} "
                f"(float32, float64 or the input dtype)")
    if idx_out.dtype != "int64":
        return f"topk_index has dtype {idx_out.dtype}, expected int64"
    return None


def _type_name(value) -> str:
    return value.type_name if isinstance(value, Opaque) else type(value).__name__


def underflow_atol(fmt: str) -> float:
    """Half the smallest subnormal of ``fmt``: every probability below it rounds to 0.0, so a
    correct kernel cannot order them (the tie set's absolute term)."""
    return get_format(fmt).min_spacing / 2


def _not_run(name: str) -> CheckResult:
    return CheckResult(name, passed=False, ran=False, detail="not run (contract failed)")


def tie_width(tol) -> float:
    """The near-tie width: two exact probabilities each within ``rtol`` of one output value (a
    bfloat16 output rounds both to the same number when they lie up to one ulp, 2**-7 relative,
    apart) cannot be told apart by the output, so a correct path may return either: ``2 rtol``
    (half of it let ``softmax_topk`` itself fail at rank 6 of a bfloat16 row, 0.58 % apart)."""
    return 2.0 * tol.rtol


def _index_check(ref, idx, rtol, atol, row_ids) -> CheckResult:
    batch, k = idx.shape
    ok = ref.in_tie_set(idx, tie_rtol=rtol, tie_atol=atol)
    if k > 1:
        s = np.sort(idx, axis=1)
        dup = (s[:, 1:] == s[:, :-1]).any(axis=1)
        ok &= ~dup[:, None]
    bad_rows = np.flatnonzero(~ok.all(axis=1))
    if bad_rows.size == 0:
        return CheckResult("index", True, f"all {batch} rows in the tie sets", failing=0, total=batch)
    row = int(bad_rows[0])
    at = int(row_ids[row])
    rank = int(np.flatnonzero(~ok[row])[0])
    got = int(idx[row, rank])
    p_got = ref.prob_of(idx)[row, rank]          # prob_of reads row b of its input as row b
    ties = ref.tie_set(row, rank, rtol, atol)
    shown = ", ".join(map(str, ties[:5])) + (f", ... ({ties.size} in all)" if ties.size > 5 else "")
    detail = (f"Mismatched indices: {_fmt_rows(bad_rows.size, batch)}; first at row {at} rank {rank}: "
              f"returned {got} (p*={p_got:.6g}), tie set {{{shown}}} (p*={ref.topk_p[row, rank]:.6g})")
    if k > 1 and len(set(idx[row].tolist())) < k:
        detail += f"; row {at} repeats an index: {idx[row].tolist()}"
    return CheckResult("index", False, detail, failing=int(bad_rows.size), total=batch, worst_row=at)


def _value_errors(ref, p, idx, tol):
    """(err, allowed, exact) on all rows; poisoned rows are masked out by the caller."""
    exact = ref.prob_of(idx)
    top1 = ref.topk_p[:, :1]
    with np.errstate(invalid="ignore"):
        err = np.abs(p - exact)
    err = np.where(np.isfinite(p), err, np.inf)
    return err, tol.allowed(exact, top1), exact


_NO_ERRORS = {"max_ulp": 0.0, "max_rel": 0.0, "row_ulp": (), "row_rel_err": (), "rel_err_allowed": 0.0}


def _value_check(ref, p, idx, tol, out_fmt, row_ids) -> tuple[CheckResult, dict]:
    """The value check, and the error statistics a result carries (``_NO_ERRORS`` keys)."""
    healthy = ~ref.poisoned
    batch, k = p.shape
    n = int(healthy.sum())
    if n == 0:
        return CheckResult("value", True, "no healthy rows", total=0), _NO_ERRORS
    err, allowed, exact = _value_errors(ref, p, idx, tol)
    err, allowed, exact, ph, ih = err[healthy], allowed[healthy], exact[healthy], p[healthy], idx[healthy]
    rows = row_ids[healthy]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(exact > 0, err / exact, np.where(err == 0, 0.0, np.inf))
    ulps = ulp_error(ph, exact, out_fmt)
    bad = err > allowed
    if k > 1:                                    # descending order, up to the allowance
        rise = ph[:, 1:] - ph[:, :-1]
        bad[:, 1:] |= rise > allowed[:, 1:] + allowed[:, :-1]
    bad_rows = np.flatnonzero(bad.any(axis=1))
    max_ulp, max_rel = float(np.max(ulps)), float(np.max(rel))
    at = np.unravel_index(np.argmax(rel), rel.shape)
    stats = {"max_ulp": max_ulp, "max_rel": max_rel, "row_ulp": tuple(ulps.max(axis=1).tolist()),
             "row_rel_err": tuple(rel.max(axis=1).tolist()),
             "rel_err_allowed": float(allowed[at] / exact[at]) if exact[at] > 0 else 0.0}
    ratio = np.where(allowed > 0, err / np.maximum(allowed, 1e-300), np.where(err > 0, np.inf, 0.0))
    if bad_rows.size == 0:
        detail = (f"max {max_ulp:.3g} ulp ({out_fmt}), max rel err {max_rel:.3g} "
                  f"(up to {tol.rtol:.3g} rel + {tol.top1_atol:.3g} x p_top1 allowed)")
        return CheckResult("value", True, detail, total=n), stats
    r = int(bad_rows[np.argmax(ratio[bad_rows].max(axis=1))])
    c = int(np.argmax(ratio[r]))
    order_bad = k > 1 and err[r, c] <= allowed[r, c]
    if order_bad:
        what = f"topk_p not descending at row {rows[r]}: {ph[r].tolist()}"
    else:
        what = (f"Greatest error at row {rows[r]} rank {c}: topk_p={ph[r, c]:.9g} vs exact "
                f"{exact[r, c]:.9g} for index {int(ih[r, c])}: {ulps[r, c]:.3g} ulp, rel err "
                f"{rel[r, c]:.3g} (up to {allowed[r, c] / max(exact[r, c], 1e-300):.3g} allowed)")
    detail = f"Mismatched values: {_fmt_rows(bad_rows.size, n, 'healthy rows')}; {what}"
    return (CheckResult("value", False, detail, failing=int(bad_rows.size), total=n,
                        worst_row=int(rows[r])), stats)


def _poison_check(ref, p, idx, tol, row_ids) -> CheckResult:
    poisoned = ref.poisoned
    batch, k = p.shape
    n = int(poisoned.sum())
    problems = []
    limits = ref.prob_of(idx) if n else None     # row b of idx is row b of ref
    for b in np.flatnonzero(poisoned):
        kind, at = ref.kind[b], int(row_ids[b])
        row_p = p[b]
        if kind == reference.POISON_POSINF:
            inf_at = int(np.flatnonzero(np.asarray(ref.rows[b], dtype=np.float64) == np.inf)[0])
            limit = limits[b]
            ok = np.isnan(row_p) | (np.abs(row_p - limit) <= tol.allowed(limit, 1.0))
            if ok.all():
                continue
            problems.append((at, f"row {at} ({kind}, +inf at {inf_at}) returned topk_p="
                                     f"{row_p.tolist()} at {idx[b].tolist()}; allowed NaN or the "
                                     f"limit 1.0 at index {inf_at}"))
        elif not np.isnan(row_p).all():
            problems.append((at, f"row {at} ({kind}) returned topk_p={row_p.tolist()}; "
                                     f"only NaN is acceptable (NaN in, confident number out)"))
    leaks = 0
    if n:
        healthy = np.flatnonzero(~poisoned)
        leaked = healthy[~np.isfinite(p[healthy]).all(axis=1)]
        leaks = int(leaked.size)
        if leaks:
            first = int(row_ids[leaked[0]])
            problems.append((first, f"{leaks} healthy rows beside poisoned ones returned non-finite "
                                    f"topk_p, first row {first}: {p[leaked[0]].tolist()}"))
    if not problems:
        detail = f"all {n} poisoned rows NaN or at the limit" if n else "no poisoned rows"
        return CheckResult("poisoning", True, detail, total=n)
    failing = len(problems) - (1 if leaks else 0) + leaks
    detail = f"Poisoning violations: {failing} rows; " + problems[0][1]
    return CheckResult("poisoning", False, detail, failing=failing, total=batch, worst_row=problems[0][0])


def _to_numpy(t):
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()                             # exact: both embed in float32
    return t.detach().cpu().numpy()


def _baseline_rel_err(logits, k, ref, tol) -> float:
    """softmax_topk's largest relative error on the rows of ``logits`` (those ``ref`` judged)."""
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


def _judge_ahead(logits, k, tolerance, rows, recipe, runner, device, regression, done=None, cached=False):
    """What ``compare`` needs besides the candidate's answer, computed while it runs: the
    tolerance, the judged rows, the float64 reference and the baseline's error (``_baseline``).
    The candidate never sees ``logits`` (its input is built from a description), so the
    reference reads them as they are. An exception of the reference is kept in its place and
    raised where the reference is first used (after a failed contract: not at all). ``done``:
    ``(judged rows, reference without its rows)`` computed elsewhere from the same values
    (``ahead.prepare``). ``cached``: ``logits`` are the values of ``recipe`` (``compare`` was given
    the recipe), so the reference may come from the disk cache (``disk_cache``)."""
    x = np.ascontiguousarray(_to_numpy(logits))   # a padded tensor: one copy, then fast row reads
    tol = tolerance or tolerance_for(dtype_name(logits.dtype))
    batch, vocab = logits.shape
    if done is not None:
        judged, ref = done
        if isinstance(ref, Exception):
            return tol, judged, ref, None
        ref = replace(ref, rows=x if judged.size == batch else x[judged])
    else:
        judged = judged_rows(batch, vocab, rows=rows, seed=getattr(recipe, "seed", None) or 0)
        sub = x if judged.size == batch else x[judged]
        try:
            if cached and rows is None:
                ref = replace(disk_cache.reference(
                    recipe, k, judged, lambda: replace(reference.softmax_topk(sub, k), rows=None)), rows=sub)
            else:
                ref = reference.softmax_topk(sub, k)
        except Exception as exc:                 # noqa: BLE001 - raised where it is used
            return tol, judged, exc, None
    base = None
    if regression:
        own = runner.candidate
        is_baseline = not runner.isolated and own.builtin and own.target == "softmax_topk"
        base = _baseline(logits, k, ref, tol, is_baseline, judged, device)
    return tol, judged, ref, base


def _baseline(logits, k, ref, tol, is_baseline, judged, device):
    """The baseline's max relative error on the judged rows (on ``device``), or the passing
    regression check that says why there is none (this is the baseline; it cannot run, e.g.
    k > V)."""
    if is_baseline:
        return CheckResult("regression", True, "this is the baseline")
    try:
        if judged.size < logits.shape[0]:        # the baseline on the same (judged) rows only
            logits = logits.index_select(0, torch.as_tensor(judged, device=logits.device))
        return _baseline_rel_err(logits.to(device), k, ref, tol)
    except Exception as exc:                     # noqa: BLE001 - reported in the check
        return CheckResult("regression", True, f"baseline not comparable ({type(exc).__name__})",
                           cause="not_comparable")


def _regression_check(base, tol, max_rel) -> CheckResult:
    if isinstance(base, CheckResult):
        return base
    limit = tol.regression_factor * base + tol.regression_floor
    detail = (f"max rel err {max_rel:.3g} vs softmax_topk {base:.3g} "
              f"(up to {tol.regression_factor:g} x baseline + {tol.regression_floor:.3g} allowed)")
    return CheckResult("regression", max_rel <= limit, detail, failing=int(max_rel > limit), total=1)


def _repro(name: str, k: int, recipe, device: str, context=None) -> str:
    if recipe is not None:
        return (f"REPRO: equiv check --candidate {name} --k {k} --device {device} --recipe '{recipe}'"
                + (f" --context {context}" if context else ""))
    return (f"REPRO: equiv.compare(equiv.load_candidate({name!r}), logits, k={k}) "
            f"(raw tensor input: build it from an equiv.Recipe for a replayable command)")


def compare(fn, logits, k: int = 1, tolerance: Tolerance | None = None, *, recipe=None,
            name: str | None = None, regression: bool = True,
            timeout: float | None = None, device: str | None = None, rows=None,
            context: str | None = None, prepared=None) -> ComparisonResult:
    """Judge ``fn(logits, k)`` against the float64 reference; see the module docstring.

    ``fn`` is a callable (called in this process), a built-in path name or a candidate spec (a
    user's spec is called in a supervised worker process, ``equiv.run``). ``logits`` is a tensor
    or an ``equiv.Recipe`` (then the worker builds it on ``device``, default cpu). ``recipe`` (an
    ``equiv.Recipe``) describing a tensor is used for the ``REPRO:`` line and the result's ``seed``.
    ``timeout`` (seconds, None or inf for none) bounds the candidate's call: a hang, an exit, a
    signal or a write to the input is a failed contract check.
    ``rows``: which rows stages 2-5 judge (``equiv.ops.draft_topk.coverage.judged_rows``: None for all rows up
    to 2**24 elements and a seeded sample beyond, ``"all"``, a number of random rows, or a list of
    row indices); the sample is drawn with the recipe's seed.
    ``context``: the calling context of the call (``equiv.run.context``: grad, no_grad,
    inference_mode, thread, side_stream), applied where the candidate runs; None: the caller's
    (the worker's main thread, grad enabled). A failure names it, and its REPRO passes it on.
    ``prepared``: the recipe's ``(host values, judged rows, reference)`` computed ahead in
    another process (``equiv.ops.draft_topk.ahead``; the default rows only), used in place of
    this process's own build and reference: the same functions, the same bits."""

    k = check_int("k", k, min_value=1)
    if isinstance(logits, Recipe):
        recipe = logits if recipe is None else recipe
        inputs, logits = logits, None            # built below, while the candidate runs
        device = str(device or "cpu")
    else:
        logits = check_logits(logits)            # a [B, V] float tensor, or one-line InvalidArgument
        inputs, device = Raw.of(logits), str(logits.device)
    runner = runner_for(fn, device, timeout)
    done = None
    if prepared is not None and logits is None and rows is None:
        keep(inputs, prepared[0])                # this process's builds (an in-process call's too) read it
        done = prepared[1:]
    # The call goes out first: a worker builds its input and runs the candidate while this
    # process reads the values and computes the reference (an in-process call waits).
    pending = runner.submit(inputs, k, timeout=timeout, context=context)
    try:
        if logits is None:                       # the values, as judged: no padded copy of them
            logits = host(inputs)
        early = _judge_ahead(logits, k, tolerance, rows, recipe, runner, device, regression, done,
                             cached=isinstance(inputs, Recipe))
    except BaseException:
        pending.result()                         # no reply may be left unread
        raise
    tol, judged, ref, base = early
    name = name or runner.spec
    dtype = dtype_name(logits.dtype)
    batch, vocab = logits.shape
    recipe_str = str(recipe) if recipe is not None else None
    seed = getattr(recipe, "seed", None)
    repro = _repro(name, k, recipe_str, device.split(":")[0], context)
    call_kind = None

    def result(checks, *, exception=None, max_ulp=0.0, max_rel=0.0, row_ulp=(), row_rel_err=(),
               rel_err_allowed=0.0):
        failed = [c for c in checks if not c.passed]
        worst = next((c.worst_row for c in failed if c.worst_row is not None), None)
        get = {c.name: c for c in checks}
        return ComparisonResult(
            path=name, dtype=dtype, device=device, k=k, batch=batch, vocab=vocab,
            passed=not failed, checks=tuple(checks), worst_row=worst, max_ulp=max_ulp,
            max_rel_err=max_rel, index_mismatches=get["index"].failing,
            poisoning_violations=get["poisoning"].failing, repro=repro, seed=seed,
            recipe=recipe_str, exception=exception, row_ulp=row_ulp, row_rel_err=row_rel_err,
            rel_err_allowed=rel_err_allowed, judged_rows=tuple(int(r) for r in judged),
            call_kind=call_kind, context=context)

    outcome = pending.result()
    call_kind = outcome.kind
    problem, cause = (outcome.problem, outcome.kind) if not outcome.ok else (None, None)
    if problem is None:
        broken = contract_break(outcome.value, batch, vocab, k, dtype, device)
        if broken is not None:
            problem, cause = broken.message, broken.cause
    if problem is not None:
        detail = problem + (f" (called under {context})" if context else "")
        if outcome.log_tail:
            detail += f"; its last output: {outcome.log_tail.splitlines()[-1][:200]}"
        checks = [CheckResult("contract", False, detail, failing=batch, total=batch, cause=cause)]
        return result(checks + [_not_run(n) for n in CHECKS[1:]], exception=outcome.traceback)
    out = outcome.value
    topk_p, topk_index = out
    out_name = topk_p.dtype
    ulp_fmt = "float32" if out_name == "float64" else out_name   # module docstring, stage 3
    every = judged.size == batch
    if isinstance(ref, BaseException):
        raise ref
    p = topk_p.values.astype(np.float64)
    idx = topk_index.values
    if not every:
        p, idx = p[judged], idx[judged]
    shown = f"[{batch}, {k}] {out_name} / int64 on {device}"
    if not every:
        shown += (f"; index range on all {batch} rows, the rest on {judged.size} rows (the first, the "
                  f"last, the power-of-two edges and a sample drawn with seed {seed or 0})")
    checks = [CheckResult("contract", True, shown, total=batch)]
    checks.append(_index_check(ref, idx, tie_width(tol), underflow_atol(ulp_fmt), judged))
    value, errors = _value_check(ref, p, idx, tol, ulp_fmt, judged)
    checks.append(value)
    checks.append(_poison_check(ref, p, idx, tol, judged))
    if regression:
        checks.append(_regression_check(base, tol, errors["max_rel"]))
    else:
        checks.append(CheckResult("regression", True, "skipped by the caller", ran=False))
    return result(checks, **errors)


def answer_problem(value, logits, k: int, device: str = "cpu") -> str | None:
    """One answer (host ``Array``s, as ``equiv.run`` returns them) judged on every row against the
    float64 reference of ``logits``: None, or the first failing stage's one-line detail. For
    answers judged outside ``compare`` (``equiv.ops.draft_topk.history``)."""
    failed = answer_stage(value, logits, k, device)
    return None if failed is None else f"{failed[0]}: {failed[1]}"


def answer_stage(value, logits, k: int, device: str = "cpu") -> tuple | None:
    """``answer_problem`` as data: None, or (the first failing stage's name, its detail)."""
    batch, vocab = logits.shape
    dtype = dtype_name(logits.dtype)
    problem = _contract(value, batch, vocab, k, dtype, device)
    if problem is not None:
        return ("contract", problem)
    p_out, idx_out = value
    p, idx = p_out.values.astype(np.float64), idx_out.values
    ref = reference.softmax_topk(np.ascontiguousarray(_to_numpy(logits)), k)
    tol, rows = tolerance_for(dtype), np.arange(batch)
    fmt = "float32" if p_out.dtype == "float64" else p_out.dtype
    for check in (_index_check(ref, idx, tie_width(tol), underflow_atol(fmt), rows),
                  _value_check(ref, p, idx, tol, fmt, rows)[0], _poison_check(ref, p, idx, tol, rows)):
        if not check.passed:
            return (check.name, check.detail)
    return None
