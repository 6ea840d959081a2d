"""Re-run the candidate on one input and say, row by row, what is wrong: the diagnosis's only call site.

Plan
----
- ``Prober.observe(inputs)`` is the one function of the diagnosis that calls the candidate: the
  candidate's runner (``equiv.run.runner_for``: a user's code in its supervised worker, our own
  paths and the zoo in-process) answers the input (an ``equiv.Recipe``, or a ``RawInput`` sent
  as ``equiv.run.Raw``) once, and ``equiv.ops.draft_topk.compare`` judges that recorded answer (``_Replay``), so
  the verdict -- pass or fail, REPRO line, contract, time-out, abnormal end, input written -- is
  compare's own and the candidate is not called twice.
- The diagnosis needs more than compare's verdict: *which rows* fail and *how*, so that a
  failure can be explained by a defect already found. ``Observation.faults`` holds one bit set
  per row, read from the returned arrays with the reference's own primitives (tie set,
  ``prob_of``, poisoned rows) and the tolerance table: ``OOV`` (index outside ``[0, V)``),
  ``INDEX`` (outside the tie set, or repeated), ``VALUE`` (topk_p off for the index returned, or
  not descending), ``POISON`` (a poisoned row answered with a number), ``LEAK`` (a healthy row
  beside poisoned ones answered non-finite). These bits attribute rows; they never pass or fail
  an input (compare does).
- ``status`` is compare's contract outcome in one word: ``pass``, ``fail`` (rows are wrong),
  ``crash``, ``hang``, ``input`` (the input was written), ``format`` (shape / dtype / device),
  ``oov``.
- The prober counts calls and stops at its deadline (``exhausted``); observations are cached per
  input unless ``fresh=True`` (the call-order tests need real repeated calls).
- ``Prober.history(plan)`` runs a whole call history (``equiv.ops.draft_topk.history``) where the
  candidate runs, for the call-history defects (``equiv.ops.draft_topk.diagnose.calls``); the reply is judged
  there, in the verdict process.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from equiv import reference
from equiv.ops.draft_topk.compare import compare, underflow_atol
from equiv.ops.draft_topk.recipes import Recipe
from equiv.ops.draft_topk.tolerance import tolerance_for
from equiv.run import Array, Raw, runner_for
from equiv.run.timeouts import DEFAULT_TIMEOUT_S

OOV, INDEX, VALUE, POISON, LEAK = 1, 2, 4, 8, 16
FAULT_NAMES = {OOV: "oov", INDEX: "index", VALUE: "value", POISON: "poison", LEAK: "leak"}


@dataclass(frozen=True)
class RawInput:
    """Logits given element by element (small V): ``values`` float32-exact, cast to ``dtype``;
    ``pad > 0`` makes the rows non-contiguous slices of a wider buffer (as ``Recipe.pad``)."""

    values: np.ndarray = field(repr=False, compare=False)
    dtype: str = "float32"
    pad: int = 0
    label: str = "raw"

    @property
    def batch(self) -> int:
        return int(self.values.shape[0])

    @property
    def vocab(self) -> int:
        return int(self.values.shape[1])

    def key(self):
        return ("raw", self.values.tobytes(), self.values.shape, self.dtype, self.pad)

    def build(self, device="cpu"):
        x = torch.from_numpy(np.ascontiguousarray(self.values, dtype=np.float32)).to(getattr(torch, self.dtype))
        if self.pad:
            buf = torch.full((x.shape[0], x.shape[1] + self.pad), 1e4, dtype=x.dtype)
            buf[:, : x.shape[1]] = x
            return buf.to(device)[:, : x.shape[1]]
        return x.to(device)

    def __str__(self) -> str:
        return f"{self.label} [{self.batch}, {self.vocab}] {self.dtype}" + (f" pad={self.pad}" if self.pad else "")


def input_key(inputs):
    return inputs.key() if isinstance(inputs, RawInput) else ("recipe", str(inputs))


@dataclass(frozen=True)
class Observation:
    """One call of the candidate, judged by ``equiv.ops.draft_topk.compare``, with its rows attributed."""

    inputs: object                       # Recipe or RawInput
    k: int
    result: object = field(repr=False)   # equiv.ComparisonResult
    status: str = "pass"
    faults: np.ndarray = field(default=None, repr=False)   # [B] bit set per row
    p: np.ndarray = field(default=None, repr=False)        # [B, k] float64, or None
    idx: np.ndarray = field(default=None, repr=False)      # [B, k] int64, or None
    ref: object = field(default=None, repr=False)          # reference.ReferenceResult
    order: int = 0                        # the prober's call counter at this call

    @property
    def passed(self) -> bool:
        return bool(self.result.passed)

    @property
    def regression_failed(self) -> bool:
        return any(c.name == "regression" for c in self.result.failed_checks)

    def rows_with(self, bits: int) -> np.ndarray:
        if self.faults is None:
            return np.zeros(0, dtype=int)
        return np.flatnonzero(self.faults & bits)

    def symptom(self) -> str:
        """The first failing check's detail: the evidence line of this call."""
        failed = self.result.failed_checks
        return f"{failed[0].name}: {failed[0].detail}" if failed else "passes"


def _status(result) -> str:
    """compare's verdict in one word, from its data: pass, fail (rows are wrong), or what broke
    the contract (``CheckResult.cause``: an answer's format or range, or how the call ended)."""
    if result.passed:
        return "pass"
    cause = result.contract_cause
    if cause is None:
        return "fail"
    return {"oov": "oov", "format": "format"}.get(cause) or _OUTCOME_STATUS.get(cause, "crash")


# How an abnormal end of the call (``equiv.run.outcome.KINDS``) reads as an observation's status.
_OUTCOME_STATUS = {"raised": "crash", "interrupt": "crash", "exit": "crash", "signal": "crash",
                   "timeout": "hang", "not_called": "hang", "input": "input", "outputs": "outputs"}


def _host(a, dtype):
    return a.values.astype(dtype) if isinstance(a, Array) else None


class _Replay:
    """The answer the runner recorded, handed back to ``compare`` as a candidate: compare judges
    it (contract, index, value, poisoning, regression) without calling the candidate again. An
    abnormal end is raised again with its one-line problem, so compare reports it as it would."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.name = "replay"

    def __call__(self, logits, k):
        if not self.outcome.ok:
            raise _Abnormal(self.outcome.problem or self.outcome.kind)

        def back(v):
            if not isinstance(v, Array):
                return v
            t = torch.from_numpy(np.ascontiguousarray(v.values))
            return t.to(getattr(torch, v.dtype)).to(logits.device).reshape(v.shape)

        value = self.outcome.value
        return type(value)(back(v) for v in value) if isinstance(value, (tuple, list)) else back(value)


class _Abnormal(RuntimeError):
    pass


def row_faults(x, p, idx, k: int, dtype: str, out_fmt: str = "float32", rows=None) -> tuple[np.ndarray, object]:
    """``[B]`` fault bits of an answer ``(p, idx)`` to ``x`` (float32 values of an input of
    ``dtype``; ``out_fmt`` the format of ``p``), and the reference. ``rows``: the rows compare
    judged (a large batch is sampled); an index outside ``[0, V)`` is read on every row, the rest
    on those rows and the out-of-range ones (unjudged rows of the reference are blank)."""
    tol = tolerance_for(dtype)
    batch, vocab = x.shape
    faults = np.zeros(batch, dtype=np.int64)
    oov_all = ((idx < 0) | (idx >= vocab)).any(axis=1)
    faults[oov_all] |= OOV
    rows = np.arange(batch) if rows is None else np.union1d(rows, np.flatnonzero(oov_all)).astype(np.int64)
    ref, sub = _reference(x, k, rows)
    p, idx, oov = p[rows], idx[rows], oov_all[rows]
    safe = np.where((idx >= 0) & (idx < vocab), idx, 0)
    exact = sub.prob_of(safe)
    poisoned = sub.poisoned
    bad_index = ~sub.in_tie_set(safe, tie_rtol=tol.rtol, tie_atol=underflow_atol(out_fmt)).all(axis=1)
    if k > 1:
        s = np.sort(idx, axis=1)
        bad_index |= (s[:, 1:] == s[:, :-1]).any(axis=1)
    with np.errstate(invalid="ignore"):
        allowed = tol.allowed(exact, sub.topk_p[:, :1])
        off = ~(np.abs(p - exact) <= allowed)               # NaN p is off
        if k > 1:
            off[:, 1:] |= (p[:, 1:] - p[:, :-1]) > allowed[:, 1:] + allowed[:, :-1]
        limit_ok = np.isnan(p) | (np.abs(p - exact) <= tol.allowed(exact, 1.0))
    posinf = np.array([kd == reference.POISON_POSINF for kd in sub.kind], dtype=bool)
    bad_poison = np.where(posinf, ~limit_ok.all(axis=1), ~np.isnan(p).all(axis=1))
    leak = ~np.isfinite(p).all(axis=1) & ref.poisoned.any()
    part = np.zeros(rows.size, dtype=np.int64)
    part[~oov & ~poisoned & bad_index] |= INDEX
    part[~oov & ~poisoned & off.any(axis=1) & ~leak] |= VALUE
    part[~oov & ~poisoned & leak] |= LEAK
    part[~oov & poisoned & bad_poison] |= POISON
    if k > 1:                                   # a repeated index is wrong on any row
        part[~oov & (s[:, 1:] == s[:, :-1]).any(axis=1)] |= INDEX
    faults[rows] |= part
    return faults, ref


def _reference(x, k: int, rows):
    """The reference of the ``rows`` of ``x`` (``sub``), and one of the whole batch (``ref``) that
    holds it at those rows: unjudged rows have no exact answer (NaN, index -1) and count as
    healthy unless they hold a NaN or +inf or only -inf (then poisoned)."""
    sub = reference.softmax_topk(x[rows], k)
    if rows.size == x.shape[0]:
        return sub, sub
    batch = x.shape[0]
    topk_p = np.full((batch, k), np.nan)
    topk_index = np.full((batch, k), -1, dtype=np.int64)
    row_max, log_sum = np.full(batch, np.nan), np.full(batch, np.nan)
    poisoned = np.isnan(x).any(axis=1) | np.isposinf(x).any(axis=1) | np.isneginf(x).all(axis=1)
    kind = [reference.POISON_NAN if poisoned[b] else reference.HEALTHY for b in range(batch)]
    topk_p[rows], topk_index[rows] = sub.topk_p, sub.topk_index
    row_max[rows], log_sum[rows] = sub.row_max, sub.log_sum
    for i, b in enumerate(rows):
        kind[b] = sub.kind[i]
    return replace(sub, topk_p=topk_p, topk_index=topk_index, kind=tuple(kind), row_max=row_max,
                   log_sum=log_sum, rows=x), sub


def _agree_with(result, faults) -> np.ndarray:
    """Compare is the verdict: a check it failed shows at least on its worst row."""
    for name, bits in (("index", INDEX), ("value", VALUE), ("poisoning", POISON | LEAK)):
        c = result.check(name)
        if c.ran and not c.passed and not (faults & bits).any() and c.worst_row is not None:
            faults[c.worst_row] |= bits & (INDEX | VALUE | POISON)
    return faults


class Prober:
    """Calls the candidate ``spec`` on inputs, one ``equiv.ops.draft_topk.compare`` per call (module docstring)."""

    def __init__(self, spec, *, k: int, device: str = "cpu", timeout: float | None = DEFAULT_TIMEOUT_S,
                 deadline: float | None = None, max_calls: int = 400):
        self.runner = runner_for(spec, device, timeout)
        self.spec = self.runner.spec if not self.runner.isolated else str(spec)
        self.k, self.device, self.timeout = k, device, timeout
        self.deadline, self.max_calls = deadline, max_calls
        self.calls = 0
        self.hung = False
        self._cache: dict = {}
        self._shapes: set = set()
        self._answers: dict = {}

    def answers_at(self, obs) -> list:
        """Earlier observations of other inputs at the shape, dtype and k of ``obs``."""
        key = (obs.inputs.batch, obs.inputs.vocab, obs.inputs.dtype, obs.k)
        return [o for o in self._answers.get(key, ()) if o is not obs and o.p is not None
                and input_key(o.inputs) != input_key(obs.inputs)]

    def seen_shapes(self) -> set:
        """Every (batch, vocab) this prober has called the candidate on."""
        return set(self._shapes)

    @property
    def exhausted(self) -> bool:
        late = self.deadline is not None and time.perf_counter() > self.deadline
        return self.hung or late or self.calls >= self.max_calls

    def observe(self, inputs, k: int | None = None, *, fresh: bool = False,
                regression: bool = False) -> Observation:
        """``regression``: also judge the regression rule (it runs the baseline on the input,
        doubling the cost of a call; only a failure of that rule alone needs it)."""
        k = self.k if k is None else k
        key = (input_key(inputs), k, regression)
        if not fresh and key in self._cache:
            return self._cache[key]
        obs = self._call(inputs, k, regression)
        self._cache[key] = obs
        return obs

    def history(self, plan):
        """A call history (``equiv.ops.draft_topk.history_plan.HistoryPlan``) run where the candidate runs
        (its runner's probe): the reply (host arrays), or None when it did not answer. Counts its calls."""
        self.calls += plan.calls
        for text in plan.recipes:
            r = Recipe.parse(text)
            self._shapes.add((r.batch, r.vocab))
        outcome = self.runner.probe("equiv.ops.draft_topk.history:probe", plan.payload(), timeout=self.timeout)
        self.hung = self.hung or outcome.kind in ("timeout", "not_called")
        return outcome.value if outcome.ok else None

    def _call(self, inputs, k: int, regression: bool = False) -> Observation:
        """The one call site: the candidate's runner (``equiv.run``: a supervised worker for a
        user's code) answers once; ``equiv.ops.draft_topk.compare`` judges that answer, replayed in-process."""
        x = inputs.build("cpu")
        values = x.float().numpy().copy()
        run_input = inputs if isinstance(inputs, Recipe) else Raw.of(x)
        self.calls += 1
        self._shapes.add(tuple(x.shape))
        outcome = self.runner.call(run_input, k, timeout=self.timeout)
        status = _OUTCOME_STATUS.get(outcome.kind) if not outcome.ok else None
        self.hung = self.hung or outcome.kind in ("timeout", "not_called")
        recipe = inputs if isinstance(inputs, Recipe) else None
        result = compare(_Replay(outcome), x.to(self.device), k, recipe=recipe, name=self.spec,
                         regression=regression)
        status = status or _status(result)
        p = idx = faults = ref = None
        value = outcome.value if outcome.ok else None
        if isinstance(value, (tuple, list)) and len(value) == 2 and status in ("pass", "fail", "oov"):
            p, idx = _host(value[0], np.float64), _host(value[1], np.int64)
            if p is not None and idx is not None and p.shape == idx.shape == (x.shape[0], k):
                fmt = value[0].dtype if value[0].dtype in ("float16", "bfloat16", "float32") else "float32"
                judged = np.asarray(getattr(result, "judged_rows", ()) or range(x.shape[0]), dtype=np.int64)
                faults, ref = row_faults(values, p, idx, k, inputs.dtype, fmt, judged)
                faults = _agree_with(result, faults)
            else:
                p = idx = None
        obs = Observation(inputs, k, result, status, faults, p, idx, ref, order=self.calls)
        self._answers.setdefault((inputs.batch, inputs.vocab, inputs.dtype, k), []).append(obs)
        return obs
