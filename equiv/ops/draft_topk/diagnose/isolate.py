"""Isolate the trigger of one failure: vary one input feature at a time, confirm by the complement.

Plan
----
Given a failing observation whose failure no known defect explains, ``isolate`` picks its
*primary* symptom (the contract outcome -- hang, crash, input written, output format -- else the
first unexplained row fault in the order OOV, POISON, LEAK, INDEX, VALUE, else the regression
rule) and walks the input toward the blandest one (one Gaussian row, contiguous, float32),
keeping each simplification under which the primary symptom stays unexplained:

1. ``pad`` -> 0 (same values, contiguous rows); ``offset`` -> 0 (same values, base at the start
   of the storage);
2. family -> ``gaussian`` (same seed: a ``poison_mix`` batch keeps its healthy rows bit for bit);
   a ``masked`` recipe's -inf blocks moved to the tail of each row (``mask="tail"``);
3. dtype -> float32;
4. V: the smallest failing size on a ladder of tile edges (first of the sizes, so that later
   calls are small); a V off the 1024-tile whose aligned size passes is a tile edge, a smallest
   failing V above 33 a threshold, each only if two other seeds agree; a threshold with a
   larger V of the ladder passing on three seeds is size-specific, not a threshold;
5. call order: the same shape with another seed; an answer that does not follow its input is
   confirmed as stale on a fresh shape (first call right, second call gets the first's answer).
   It comes before anything that changes B (a cache keyed by shape answers a new shape right);
6. neighbours: the failing row with every other row replaced by a copy of it, by zeros, by
   constant rows above it (same B; a single row gets one neighbour); an answer that changes says
   the row depends on the values of its neighbours;
7. batch: B = 1, else the smallest failing B by bisection (not for the regression rule, which is
   one number per batch);
8. knobs: shift -> 0, scale -> 1, fewer specials, fewer ties, seed -> 0; then B = 1 once more.
A feature that could not be removed is *necessary*; the passing variant that showed it is kept
as its complement ("fails with pad = 1, passes with pad = 0 on the same values"), re-checked on
the final trigger. A raw array only varies its padding, dtype, magnitude and neighbours. The kind
follows ``equiv.ops.draft_topk.diagnose.taxonomy``: a contract symptom names it, else the first necessary
feature in the order above (magnitude only when the answer overflows: NaN, inf or 0; the
``confident`` family only when the failing rows answer exactly 1.0), else the
symptom on the bland input (placeholder probability when topk_p stays one constant while the
exact probabilities move).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from equiv.ops.draft_topk.diagnose.probe import INDEX, LEAK, OOV, POISON, VALUE, RawInput

VOCAB_LADDER = (1, 2, 3, 8, 33, 129, 1000, 1024, 1025, 2049, 4097, 8193, 16385, 32000, 32769,
                65537, 129280)
THRESHOLD_VOCAB = 33            # a smallest failing V above this is a shape threshold
ABOVE_VOCAB = 16385             # larger sizes tried to tell a threshold from a size-specific failure
STATUS_KIND = {"hang": "hang", "crash": "crash", "input": "input_write", "format": "output_format",
               "outputs": "output_reused"}
_MAGNITUDE_FAMILIES = ("huge", "subnormal")
_TIE_FAMILIES = ("ties_max", "near_ties", "bf16_quantized")


@dataclass(frozen=True)
class Residual:
    """What no known defect explains in one observation."""

    rows: np.ndarray                 # [B] unexplained fault bits (empty without rows)
    status: str | None = None        # an unexplained contract outcome (crash, hang, input, format)
    regression: bool = False

    @property
    def empty(self) -> bool:
        return self.status is None and not self.regression and not (self.rows != 0).any()

    def primary(self):
        if self.status is not None:
            return self.status
        for bit in (OOV, POISON, LEAK, INDEX, VALUE):
            if (self.rows & bit).any():
                return bit
        return "regression" if self.regression else None


@dataclass(frozen=True)
class Finding:
    """What the isolation found: a kind, the smallest failing input and what confirmed it."""

    kind: str
    primary: object
    trigger: object                              # Observation at the smallest failing input
    necessary: tuple = ()                        # (feature, complement Observation or None)
    facts: dict = field(default_factory=dict)    # numbers for the evidence and the scope
    before: object = None                        # for stale output: the call that primed it


def _has(residual: Residual, primary) -> bool:
    if isinstance(primary, str):
        return residual.status == primary if primary in STATUS_KIND else residual.regression
    if primary & LEAK:                           # without the poison, a healthy row still wrong
        primary = primary | INDEX | VALUE
    return bool((residual.rows & primary).any())


def _values(inputs) -> np.ndarray:
    return inputs.build("cpu").float().numpy()


class Isolation:
    """One isolation run (module docstring); ``residual`` says what known defects leave over."""

    def __init__(self, prober, residual, k: int):
        self.prober, self.residual, self.k = prober, residual, k

    def fails(self, inputs, primary) -> tuple[bool, object]:
        obs = self.prober.observe(inputs, regression=primary == "regression")
        return (not obs.passed and _has(self.residual(obs), primary)), obs

    # -- the walk -----------------------------------------------------------------------------
    def run(self, obs) -> Finding:
        primary = self.residual(obs).primary()
        if primary == "hang" or self.prober.exhausted:
            return Finding(self._kind(primary, {}, obs), primary, obs)
        cur, necessary, facts = obs, [], {}
        for feature, variant in self._simplifications(cur.inputs):
            if self.prober.exhausted:
                break
            if feature == "call order":
                stale = self.stale(cur, primary)
                if stale is not None:
                    return stale
                continue
            if feature in ("neighbours", "batch") and primary == "regression":
                continue                         # a rule over the whole batch: keep the batch
            if feature == "neighbours":
                found = self._neighbours(cur, primary)
                if found is not None:
                    necessary.append(("neighbours", found))
                continue
            if feature == "batch":
                cur = self._shrink_batch(cur, primary, necessary)
                continue
            if feature == "vocab":
                cur = self._shrink_vocab(cur, primary, necessary, facts)
                continue
            candidate = variant(cur.inputs)
            if candidate is None:
                continue
            ok, seen = self.fails(candidate, primary)
            if ok:
                cur = seen
            elif feature in ("pad", "offset", "family", "mask", "dtype", "shift", "scale"):
                necessary.append((feature, seen))
        if not isinstance(cur.inputs, RawInput) and cur.inputs.batch > 1 and not self.prober.exhausted:
            ok, seen = self.fails(cur.inputs.with_(batch=1), primary)   # later steps may free B
            if ok:
                cur, necessary = seen, [(f, c) for f, c in necessary if f != "batch"]
        if not isinstance(cur.inputs, RawInput):
            necessary = self._confirm(cur, necessary, primary)
        names = {f for f, _ in necessary}
        kind = self._kind(primary, names, cur)
        if kind in ("placeholder_probability", "value_error"):
            kind = self._placeholder(cur, facts) or kind
        if kind == "wrong_index" and self.k > 1 and rank_relation(cur) in ("ascending", "repeated"):
            kind = "rank_order"
        if kind == "wrong_index":
            facts["relation"] = self._relation(cur)
        return Finding(kind, primary, cur, tuple(necessary), facts)

    def _simplifications(self, inputs):
        if isinstance(inputs, RawInput):
            yield "pad", lambda r: RawInput(r.values, r.dtype, 0, r.label) if r.pad else None
            yield "dtype", lambda r: RawInput(r.values, "float32", r.pad, r.label) if r.dtype != "float32" else None
            yield "shift", _recentred
            yield "neighbours", None
            return
        yield "pad", lambda r: r.with_(pad=0) if r.pad else None
        yield "offset", lambda r: r.with_(offset=0) if r.offset else None
        yield "family", lambda r: (r.with_(family="gaussian", specials=0, ties=2, position="random")
                                   if r.family != "gaussian" else None)
        yield "mask", lambda r: r.with_(mask="tail") if r.family == "masked" and r.mask != "tail" else None
        yield "dtype", lambda r: r.with_(dtype="float32") if r.dtype != "float32" else None
        yield "vocab", None                      # first of the sizes: later calls get cheap
        yield "call order", None                 # before anything that changes the shape
        yield "neighbours", None
        yield "batch", None
        yield "shift", lambda r: r.with_(shift=0.0) if r.shift else None
        yield "scale", lambda r: r.with_(scale=1.0) if r.scale != 1.0 else None
        yield "specials", lambda r: r.with_(specials=1) if r.family == "poison_mix" and r.specials != 1 else None
        yield "specials", lambda r: r.with_(specials=2) if r.family == "poison_mix" and r.specials not in (1, 2) else None
        yield "ties", lambda r: r.with_(ties=2) if r.ties > 2 else None
        yield "seed", lambda r: r.with_(seed=0) if r.seed else None

    def _confirm(self, cur, necessary, primary) -> list:
        """Each necessary feature again at the final trigger: its complement (the trigger with
        that feature alone removed) must pass, else the feature is dropped."""
        r = cur.inputs
        undo = {"pad": lambda: r.with_(pad=0) if r.pad else None,
                "offset": lambda: r.with_(offset=0) if r.offset else None,
                "mask": lambda: r.with_(mask="tail") if r.family == "masked" and r.mask != "tail" else None,
                "family": lambda: (r.with_(family="gaussian", specials=0, ties=2, position="random")
                                   if r.family != "gaussian" else None),
                "dtype": lambda: r.with_(dtype="float32") if r.dtype != "float32" else None,
                "batch": lambda: r.with_(batch=r.batch - 1) if r.batch > 1 else None,
                "shift": lambda: r.with_(shift=0.0) if r.shift else None,
                "scale": lambda: r.with_(scale=1.0) if r.scale != 1.0 else None}
        out = []
        for feature, comp in necessary:
            if feature not in undo or self.prober.exhausted:
                out.append((feature, comp))
                continue
            variant = undo[feature]()
            if variant is None:
                continue
            ok, seen = self.fails(variant, primary)
            if not ok:
                out.append((feature, seen))
        return out

    # -- features that need more than one variant ---------------------------------------------
    def _shrink_batch(self, cur, primary, necessary):
        """B = 1, else the smallest failing B by bisection. A wrong answer on any healthy row
        counts here (a row past a grid cap may happen to hold the right index); the threshold is
        a feature only if two other seeds fail at it and pass below (not one unlucky row)."""
        r = cur.inputs
        if r.batch <= 1:
            return cur
        wrong = primary | INDEX | VALUE if primary in (INDEX, VALUE) else primary
        ok, seen = self.fails(r.with_(batch=1), wrong)
        if ok:
            return seen
        lo, hi, best, passing = 1, r.batch, cur, seen
        while hi - lo > 1 and not self.prober.exhausted:
            mid = (lo + hi) // 2
            ok, seen = self.fails(r.with_(batch=mid), wrong)
            if ok:
                hi, best = mid, seen
            else:
                lo, passing = mid, seen
        if self._holds(best.inputs, passing.inputs, wrong):
            necessary.append(("batch", passing))
        return best

    def _shrink_vocab(self, cur, primary, necessary, facts):
        """The smallest failing V on the ladder; a threshold above ``THRESHOLD_VOCAB`` counts only
        when two other seeds fail there too (a rare near-tie is not a threshold); a V off the
        1024-tile whose aligned neighbour passes is a tile edge."""
        r = cur.inputs
        passing, found = None, cur
        for v in VOCAB_LADDER:
            if v >= r.vocab or self.prober.exhausted:
                break
            if v < self.k:
                continue
            ok, seen = self.fails(r.with_(vocab=v), primary)
            if ok:
                found = seen
                break
            passing = seen
        v = found.inputs.vocab
        if v % 1024 and found.inputs.family != "poison_mix" and not self.prober.exhausted:
            aligned = found.inputs.with_(vocab=-(-v // 1024) * 1024)
            ok, seen = self.fails(aligned, primary)
            if not ok and self._holds(found.inputs, aligned, primary, any_fail=True):
                necessary.append(("tile", seen))
                return found
        if v > THRESHOLD_VOCAB and passing is not None and self._holds(found.inputs, passing.inputs, primary):
            necessary.append(("vocab", passing))
            above = self._passes_above(found, primary)
            if above is not None:
                necessary.append(("vocab above", above))
        return found

    def _passes_above(self, found, primary):
        """A larger V of the ladder (up to ``ABOVE_VOCAB``) that passes on three seeds where the
        threshold V fails: the failure is specific to some sizes, not a threshold."""
        r = found.inputs
        for v in [v for v in VOCAB_LADDER if r.vocab < v <= ABOVE_VOCAB][:2]:
            if self.prober.exhausted:
                return None
            ok, seen = self.fails(r.with_(vocab=v), primary)
            if not ok and not any(self.fails(r.with_(vocab=v, seed=r.seed + s), primary)[0] for s in (1, 2)):
                return seen
        return None

    def _holds(self, failing, passing, primary, any_fail: bool = False) -> bool:
        """Not one seed's accident: two other seeds pass at ``passing`` and fail at ``failing``
        (``any_fail``: one of them failing is enough, for failures that need a lucky row)."""
        fails = []
        for s in (1, 2):
            if self.prober.exhausted or self.fails(passing.with_(seed=passing.seed + s), primary)[0]:
                return False
            fails.append(self.fails(failing.with_(seed=failing.seed + s), primary)[0])
        return any(fails) if any_fail else all(fails)

    def _neighbours(self, cur, primary):
        rows = np.flatnonzero(self.residual(cur).rows) if cur.faults is not None else []
        return neighbours_matter(self.prober, cur, rows)

    def stale(self, cur, primary):
        """Does the answer follow the input? Another seed at the same shape must change it; if it
        does not, a fresh shape confirms: right at the first call, the first's answer at the second."""
        r = cur.inputs
        if cur.p is None or not answer_ignores_input(self.prober, cur):
            return None
        seen = self.prober.seen_shapes()
        vocab = next(v for v in range(max(r.vocab, 1000) + 1, max(r.vocab, 1000) + 10000)
                     if (r.batch, v) not in seen and v != 129280)
        first = self.prober.observe(r.with_(vocab=vocab), fresh=True)
        second = self.prober.observe(r.with_(vocab=vocab, seed=r.seed + 1), fresh=True)
        if first.passed and not second.passed and same_answer(first, second):
            return Finding("stale_output", primary, second, (("call order", first),),
                           {"first": str(first.inputs)}, before=first)
        return None

    # -- naming -------------------------------------------------------------------------------
    def _kind(self, primary, names, cur) -> str:
        if isinstance(primary, str) and primary in STATUS_KIND:
            return STATUS_KIND[primary]
        if primary == OOV:
            return "out_of_vocabulary_index"
        family = getattr(cur.inputs, "family", None)
        poison = (("family" in names and family == "poison_mix")
                  or (isinstance(cur.inputs, RawInput) and primary == LEAK))
        if "pad" in names:
            return "non_contiguous"
        if "offset" in names:
            return "misaligned_base"
        if primary == POISON:
            return "poison_made_finite"
        if "neighbours" in names and not poison:
            return "neighbour_rows"
        if poison:
            return "poison_leak"
        if "mask" in names:
            return "mask_position"
        if (("family" in names and family == "confident") or primary == "regression") and _only_rounded(cur):
            return "confident_rounding"
        if "dtype" in names:
            return "dtype_specific"
        if "batch" in names:
            return "batch_size"
        if "vocab above" in names:
            return "vocab_specific"
        if names & {"vocab", "tile"}:
            return "shape_threshold"
        if (names & {"shift", "scale"} or ("family" in names and family in _MAGNITUDE_FAMILIES)) \
                and _overflow_signature(cur):
            return "magnitude"
        if primary == INDEX:
            return "wrong_index"
        return "value_error"

    def _relation(self, cur) -> tuple:
        """How wrong indices relate to the exact ones, read on eight rows of the trigger's kind
        (one row cannot show a pattern)."""
        obs = cur
        if cur.rows_with(INDEX | OOV).size < 2 and not isinstance(cur.inputs, RawInput):
            wider = self.prober.observe(cur.inputs.with_(batch=8))
            obs = wider if wider.faults is not None and wider.rows_with(INDEX | OOV).size >= 2 else cur
        return index_relation(obs)

    def _placeholder(self, cur, facts):
        """topk_p one constant on every row of two inputs whose exact probabilities differ."""
        if cur.p is None or isinstance(cur.inputs, RawInput):
            return None
        other = self.prober.observe(cur.inputs.with_(scale=cur.inputs.scale * 4.0, seed=cur.inputs.seed + 7))
        if other.p is None:
            return None
        both = np.concatenate([cur.p.ravel(), other.p.ravel()])
        exact = np.concatenate([cur.ref.topk_p.ravel(), other.ref.topk_p.ravel()])
        if np.all(both == both[0]) and np.nanmax(exact) - np.nanmin(exact) > 1e-3:
            facts.update(constant=float(both[0]), exact_lo=float(np.nanmin(exact)),
                         exact_hi=float(np.nanmax(exact)), other=other)
            return "placeholder_probability"
        return None


CONFIDENT = 0.99                 # a top-1 probability above this is a confident row


def rounded_to_one(obs) -> np.ndarray:
    """[B] rows whose topk_p is off only by being written 1.0 where the exact probability is below
    1 (the confident rows' "close enough" shortcut): off by more than the value tolerance, or a
    confident row (within the value tolerance, such a row fails the regression rule instead)."""
    if obs.p is None or obs.faults is None:
        return np.zeros(0, dtype=bool)
    off = ((obs.faults & VALUE) != 0) | (obs.ref.topk_p[:, 0] > CONFIDENT)
    return off & ((obs.faults & ~VALUE) == 0) & (obs.p == 1.0).all(axis=1) & (obs.ref.topk_p < 1.0).all(axis=1)


def _only_rounded(obs) -> bool:
    """Some row is rounded to 1.0 and every row at fault is one of them."""
    rounded = rounded_to_one(obs)
    return bool(rounded.any()) and not ((obs.faults != 0) & ~rounded).any()


def _overflow_signature(obs) -> bool:
    """exp overflowed or underflowed: a failing healthy row answers NaN, inf or 0 where the exact
    probability is positive (a magnitude that only moves ties is a wrong index, not this)."""
    if obs.p is None or obs.faults is None:
        return obs.status in STATUS_KIND
    rows = obs.rows_with(VALUE | INDEX | LEAK)
    p, exact = obs.p[rows], obs.ref.topk_p[rows]
    return bool(rows.size) and bool((~np.isfinite(p) | ((p == 0) & (exact > 0))).any())


def _recentred(r):
    """The raw rows shifted so that their largest finite entry is 0 (None if they already are)."""
    v = r.values.astype(np.float64)
    finite = np.where(np.isfinite(v), v, -np.inf)
    top = finite.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    if not np.any(np.abs(top) > 64):
        return None
    return RawInput((v - top).astype(np.float32), r.dtype, r.pad, f"{r.label} recentred")


NEIGHBOURS = ("copies of it", "rows of zeros", "rows 10 above it")


def neighbours_matter(prober, cur, rows, first: int = 0):
    """Does the answer of the first of ``rows`` move when its neighbours change? Its neighbours
    become copies of it, rows of zeros, then constant rows 10 above its maximum (``first`` says
    which to try first; a single row gets one neighbour). Returns the observation where it moved
    (its ``how`` set to the variant's number), else None."""
    if len(rows) == 0 or cur.p is None:
        return None
    b = int(rows[0])
    x = _values(cur.inputs)
    batch = max(x.shape[0], 2)
    copies = np.repeat(x[b:b + 1], batch, axis=0)
    finite = x[b][np.isfinite(x[b])]
    above = np.full_like(copies, (finite.max() if finite.size else 0.0) + 10.0)
    zeros = np.zeros_like(copies)
    variants = (copies, zeros, above)
    for how in sorted(range(3), key=lambda i: i != first):
        values = variants[how]
        values[b] = x[b]
        obs = prober.observe(RawInput(values, cur.inputs.dtype, cur.inputs.pad,
                                      label=f"row {b} of {cur.inputs} among {NEIGHBOURS[how]}"))
        if obs.p is None:
            continue
        moved = (obs.idx[b] != cur.idx[b]).any() or not np.allclose(
            obs.p[b], cur.p[b], rtol=2.0 ** -13, atol=0.0, equal_nan=True)
        if moved:
            object.__setattr__(obs, "how", how)
            return obs
    return None


def answer_ignores_input(prober, obs) -> bool:
    """Other logits of the same shape get exactly the answer of ``obs``: an answer seen earlier
    at this shape for another input, else a call on a sister input (another seed, then the
    gaussian family; for a raw array its columns rolled) until the exact answers differ."""
    if obs.p is None or obs.ref is None:
        return False
    earlier = prober.answers_at(obs)
    if earlier:
        return any(same_answer(obs, o) and not same_answer_expected(obs, o) for o in earlier)
    for step in (1, 2, 3):
        if isinstance(obs.inputs, RawInput):
            values = np.roll(obs.inputs.values, step, axis=1)
            other_in = RawInput(values, obs.inputs.dtype, obs.inputs.pad, f"{obs.inputs.label} rolled")
        else:
            other_in = obs.inputs.with_(seed=obs.inputs.seed + step)
            if step == 3:
                other_in = other_in.with_(family="gaussian", specials=0)
        other = prober.observe(other_in, fresh=True)
        if other.p is None:
            return False
        if not same_answer_expected(obs, other):
            return same_answer(obs, other)
    return False


def same_answer(a, b) -> bool:
    return (a.p is not None and b.p is not None and a.p.shape == b.p.shape
            and np.array_equal(a.idx, b.idx) and np.array_equal(a.p, b.p, equal_nan=True))


def same_answer_expected(a, b) -> bool:
    """Two inputs whose exact answers agree too (then equal answers prove nothing)."""
    return (np.array_equal(a.ref.topk_index, b.ref.topk_index)
            and np.allclose(a.ref.topk_p, b.ref.topk_p, rtol=2.0 ** -13, equal_nan=True))


def rank_relation(obs) -> str:
    """How a k > 1 answer relates to the exact top-k: 'repeated' (an index twice), 'ascending'
    (the exact probabilities of the returned indices rise along the ranks) or 'other'."""
    if obs.idx is None or obs.k < 2:
        return "other"
    rows = obs.rows_with(INDEX | VALUE)
    if rows.size == 0:
        return "other"
    idx = obs.idx[rows]
    if any(len(set(r.tolist())) < r.size for r in idx):
        return "repeated"
    exact = obs.ref.prob_of(np.clip(obs.idx, 0, obs.ref.vocab - 1))[rows]   # row b reads row b
    with np.errstate(invalid="ignore"):
        rising = (np.diff(exact, axis=1) >= 0).all(axis=1) & (np.diff(exact, axis=1) > 0).any(axis=1)
    return "ascending" if rising.all() else "other"


def index_relation(obs) -> tuple:
    """('offset', d), ('rank', r) or ('any',) for the index faults of ``obs`` (two rows at least
    must show the same offset or rank)."""
    rows = obs.rows_with(INDEX | OOV)
    if rows.size < 2 or obs.idx is None:
        return ("any",)
    d = obs.idx[rows] - obs.ref.topk_index[rows]
    if np.all(d == d.flat[0]) and d.flat[0] != 0:
        return ("offset", int(d.flat[0]))
    ranks = _ranks(obs, rows)
    if ranks is not None and np.all(ranks == ranks[0]):
        return ("rank", int(ranks[0]))
    return ("any",)


def _ranks(obs, rows):
    """The rank (0 = best) of the returned rank-0 index in each row of ``rows``."""
    out = []
    for b in rows:
        j = int(obs.idx[b, 0])
        if not 0 <= j < obs.ref.vocab or obs.ref.kind[b] != "healthy":
            return None
        x = np.asarray(obs.ref.rows[b], dtype=np.float64)
        out.append(int((x > x[j]).sum()))
    return np.array(out)
