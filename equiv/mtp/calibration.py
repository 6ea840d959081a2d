"""How often the sampling-losslessness statistic fails a correct sampler, and what it catches.

Plan. ``sampling_power(n, bias, strength)`` draws ``n`` tokens from the synthetic target's exact
rank law (each token at a level chosen uniformly, as the model chooses them), optionally through
a biased sampler, maps them to PIT values, splits them into round-offset groups in the
proportions a steps = 3 ``target_only`` run produces, and runs ``statistics.sampling_fit``
``reps`` times. It returns the failure rate and the sampler's true total-variation distance from
the target (averaged over levels). Biases:

- ``none``: the target itself (the failure rate is the false-positive rate);
- ``temperature``: sampling at temperature ``strength`` instead of 1;
- ``argmax_mix``: with probability ``strength`` emit the argmax instead of a sample;
- ``residual_bug``: the classic verifier bug, resampling a rejected draft from the target instead
  of the residual (``strength`` is ignored; the draft is the argmax).

``python -m equiv.mtp.calibration`` prints the table that docs/mtp.md quotes.
"""
from __future__ import annotations

import numpy as np

from equiv.errors import InvalidArgument
from equiv.mtp.models import SyntheticLM
from equiv.stats import pit, sampling_fit

BIASES = ("none", "temperature", "argmax_mix", "residual_bug")
OFFSET_SHARES = (0.41, 0.28, 0.18, 0.13)      # tokens per round offset, target_only at steps=3


def biased_law(probs, bias: str, strength: float):
    """The ``[L, V]`` rank law a sampler with ``bias`` produces from the target law ``probs``."""
    if bias == "none":
        return probs
    if bias == "temperature":
        logq = np.log(np.maximum(probs, 1e-300)) / strength
        q = np.exp(logq - logq.max(1, keepdims=True))
        return q / q.sum(1, keepdims=True)
    if bias == "argmax_mix":
        q = probs * (1 - strength)
        q[:, 0] += strength
        return q
    if bias == "residual_bug":
        p0 = probs[:, :1]
        q = probs * (1 - p0)          # rejected (1 - p0): a sample from the target, not the residual
        q[:, 0] += p0[:, 0]           # accepted with p0
        return q
    raise InvalidArgument(f"bias={bias!r} is unknown: choose from {', '.join(BIASES)}")


def _draw(law, n, rng):
    levels = rng.integers(0, law.shape[0], n)
    ranks = np.empty(n, dtype=np.int64)
    cdf = np.cumsum(law, axis=1)
    u = rng.random(n)
    for lv in range(law.shape[0]):
        sel = levels == lv
        ranks[sel] = np.minimum(np.searchsorted(cdf[lv], u[sel] * cdf[lv, -1], side="right"),
                                law.shape[1] - 1)
    return levels, ranks


def sampling_power(n: int, bias: str = "none", strength: float = 0.0, *, reps: int = 100,
                   vocab: int = 32000, seed: int = 0) -> dict:
    """Failure rate of ``sampling_fit`` over ``reps`` samples of ``n`` tokens (module docstring)."""
    probs = SyntheticLM(vocab, seed=seed).rank_probabilities.numpy()
    law = biased_law(probs, bias, strength)
    tvd = float(0.5 * np.abs(law - probs).sum(1).mean())
    failures = 0
    for r in range(reps):
        rng = np.random.default_rng([seed, r, n])
        levels, ranks = _draw(law, n, rng)
        groups = rng.choice(len(OFFSET_SHARES), size=n, p=OFFSET_SHARES)
        failures += not sampling_fit(pit(probs, levels, ranks, rng), groups).passed
    return {"n": n, "bias": bias, "strength": strength, "tvd": round(tvd, 4),
            "failure_rate": failures / reps, "reps": reps}


def main() -> None:
    rows = []
    for n in (200, 10000, 80000):            # ~ quick, CPU default, GPU default target_only tokens
        rows.append(sampling_power(n, "none", reps=1000, seed=1))
        for t in (0.98, 0.95, 0.9, 0.8):
            rows.append(sampling_power(n, "temperature", t))
        for eps in (0.05, 0.1, 0.2):
            rows.append(sampling_power(n, "argmax_mix", eps))
        rows.append(sampling_power(n, "residual_bug"))
    print(f"{'n':>6}  {'bias':<13} {'strength':>8}  {'TVD':>6}  failure rate")
    for r in rows:
        print(f"{r['n']:>6}  {r['bias']:<13} {r['strength']:>8}  {r['tvd']:>6.4f}  "
              f"{r['failure_rate']:.3f} ({r['reps']} reps)")


if __name__ == "__main__":
    main()
