"""Two samples of emitted text: do they follow one law? (chi-square homogeneity, Bonferroni)

Plan. ``text_law_test(a, b, prompts_a, prompts_b, positions)`` compares text emitted under
sampling by two decoders (speculative decoding with a path, and plain sampling from the target)
over independent seeds. For every prompt and every position ``t < positions`` it builds the 2 x K
table of the token emitted at ``t`` by each side (the marginal law of position ``t`` given the
prompt, which both sides must share when the speculative decoder is lossless), merges the tokens
seen fewer than ``MIN_CELL`` times in both samples together into one cell, and runs Pearson's
chi-square test of homogeneity (Agresti, *Categorical Data Analysis*, 3rd ed., section 3.2);
a table left with one cell says nothing and is skipped. The tables of one prompt are dependent
(a position conditions the next), so the p-values are combined by Bonferroni: the two samples
differ when the smallest p-value is under ``alpha / tests`` (family-wise ``alpha = 0.001``,
valid under any dependence). The test needs no model: it sees only text.

Calibration (``python -m equiv.stats.twosample``; its table is in docs/mtp.md): both samples
drawn from one random Markov chain (false-positive rate) and one side drawn at temperature
< 1 or with its argmax mixed in (power), at the sizes ``equiv mtp --model smollm2`` runs.
It is a coarse test: it sees a large change of the law (greedy text served as sampling,
temperature 0.5) at those sizes, not a 1 % shift; the exact one-sample PIT test of each token
against the target's law (``equiv.stats.fit``) is the fine one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.stats.values import chi2_sf

TEXT_LAW_ALPHA = 0.001
MIN_CELL = 5


@dataclass(frozen=True)
class TextLawResult:
    """``tests`` tables were judged; the smallest p-value (``worst``: prompt, position, p) and
    the verdict ``same_law`` (no table significant at ``alpha / tests``)."""

    tests: int
    samples_a: int
    samples_b: int
    alpha: float
    min_p_value: float | None
    worst: dict | None
    same_law: bool

    def to_json(self) -> dict:
        return asdict(self)


def _homogeneity(x, y):
    """Chi-square of homogeneity of two categorical samples; None when one cell is left."""
    cats, inv = np.unique(np.concatenate([x, y]), return_inverse=True)
    ca = np.bincount(inv[:len(x)], minlength=len(cats))
    cb = np.bincount(inv[len(x):], minlength=len(cats))
    rare = (ca + cb) < MIN_CELL
    if rare.any():
        ca = np.append(ca[~rare], ca[rare].sum())
        cb = np.append(cb[~rare], cb[rare].sum())
        keep = (ca + cb) > 0
        ca, cb = ca[keep], cb[keep]
    if len(ca) < 2:
        return None
    table = np.stack([ca, cb]).astype(np.float64)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    chi2 = float(((table - expected) ** 2 / expected).sum())
    return chi2_sf(chi2, len(ca) - 1)


def text_law_test(a, b, prompts_a, prompts_b, positions: int, *, lengths_a=None, lengths_b=None,
                  alpha: float = TEXT_LAW_ALPHA) -> TextLawResult:
    """Compare texts ``a [n_a, T]`` and ``b [n_b, T]`` (token ids; row ``i`` decoded from prompt
    ``prompts_a[i]``) at positions ``0..positions-1`` (module docstring). Rows shorter than
    ``positions`` (``lengths_*``) count only at the positions they reached."""
    a, b = np.asarray(a), np.asarray(b)
    pa, pb = np.asarray(prompts_a), np.asarray(prompts_b)
    if a.ndim != 2 or b.ndim != 2 or pa.shape != a.shape[:1] or pb.shape != b.shape[:1]:
        raise InvalidArgument(f"texts {a.shape}, {b.shape} must be [n, T] with one prompt per row")
    if positions < 1 or positions > min(a.shape[1], b.shape[1]):
        raise InvalidArgument(f"positions={positions} must lie in 1..{min(a.shape[1], b.shape[1])}")
    if not 0 < alpha < 1:
        raise InvalidArgument(f"alpha={alpha!r} is invalid: it must be in (0, 1)")
    la = np.full(len(a), a.shape[1]) if lengths_a is None else np.asarray(lengths_a)
    lb = np.full(len(b), b.shape[1]) if lengths_b is None else np.asarray(lengths_b)
    results = []
    for p in np.intersect1d(pa, pb):
        for t in range(positions):
            x = a[(pa == p) & (la > t), t]
            y = b[(pb == p) & (lb > t), t]
            if len(x) < 2 or len(y) < 2:
                continue
            pv = _homogeneity(x, y)
            if pv is not None:
                results.append((pv, int(p), t))
    if not results:
        return TextLawResult(0, int(len(a)), int(len(b)), alpha, None, None, True)
    pv, p, t = min(results)
    return TextLawResult(len(results), int(len(a)), int(len(b)), alpha, pv,
                         {"prompt": p, "position": t, "p_value": pv}, pv >= alpha / len(results))


# -- calibration ----------------------------------------------------------------------------
def _chain_sample(rng, logits, n, length, temperature=1.0, argmax_mix=0.0):
    V = logits.shape[0]
    out = np.zeros((n, length), dtype=np.int64)
    state = np.zeros(n, dtype=np.int64)
    for t in range(length):
        z = logits[state] / temperature
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        draw = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
        greedy = p.argmax(1)
        state = np.where(rng.random(n) < argmax_mix, greedy, draw)
        out[:, t] = state
    return out


def calibrate(trials: int = 200, prompts: int = 8, replicas: int = 16, positions: int = 16,
              vocab: int = 200, seed: int = 0) -> list:
    """Failure rate of ``text_law_test`` on Markov-chain text (``prompts`` chains of Zipf-like
    rows, ``replicas`` samples a side per prompt): the null, then biased samplers."""
    rng = np.random.default_rng(seed)
    settings = [("same law (false positives)", 1.0, 0.0), ("temperature 0.8", 0.8, 0.0),
                ("temperature 0.5", 0.5, 0.0), ("argmax mixed in at 50 %", 1.0, 0.5),
                ("greedy text (argmax always)", 1.0, 1.0)]
    rows = []
    for name, temp, mix in settings:
        fails = 0
        for _ in range(trials):
            xs, ys, pa, pb = [], [], [], []
            for p in range(prompts):
                logits = rng.gumbel(size=(vocab, vocab)) * 2.0
                xs.append(_chain_sample(rng, logits, replicas, positions))
                ys.append(_chain_sample(rng, logits, replicas, positions, temp, mix))
                pa += [p] * replicas
                pb += [p] * replicas
            r = text_law_test(np.concatenate(xs), np.concatenate(ys), pa, pb, positions)
            fails += not r.same_law
        rows.append((name, fails / trials))
    return rows


if __name__ == "__main__":
    for name, rate in calibrate():
        print(f"| {name} | {rate:.3f} |")
