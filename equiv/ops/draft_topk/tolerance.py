"""The tolerance table: what error a correct draft top-k may show, keyed by input dtype.

A returned probability ``p`` for index ``j`` of row ``b`` passes the value check when

    |p - p*_j| <= rtol * p*_j + top1_atol * p*_top1(b)

where ``p*`` are the reference's exact probabilities. The second term is an absolute allowance in
units of the row's largest probability: it covers the ranks far below the top, whose relative
error is dominated by the rounding of ``x_j - max`` and does not matter to any consumer.
Twice ``rtol`` is the near-tie width (``compare.tie_width``): an index whose exact probability is
within ``2 rtol`` of the rank's exact probability may legally stand at that rank (both may round
to one output value, so the output format cannot tell them apart and a correct path may pick
either; with ``rtol`` alone the baseline failed at rank 6 of a bfloat16 row, issue 43).

Derivations (u = unit roundoff of float32 = 2**-24; V <= 2**18 for real vocabularies):

| input dtype | rtol | top1_atol | why |
|---|---|---|---|
| float32  | 2**-11 (8192 u, 4.9e-4) | 2**-24 | The sum of V exponentials dominates. A tree sum errs by log2(V) u = 17 u, but the baseline itself, torch's CPU softmax, accumulates in SIMD lanes sequentially, and on a ``dominant`` row the lane that holds the top term (~1) adds ~V/8 terms of ~100 u, each rounded to the lane sum's spacing: worst case (V / 8) u/2, 9496 u at V = 151936. Measured (AVX2): up to 4104 u (2.4e-4) on ``dominant`` rows at V = 151936 (scale 1.05; 3814 u over 384 rows at scale 1, p99 3164 u), 3564 u at V = 129280, 783 u at 32000; 47 u on ``zipf`` and ``gaussian``. (The table's first rtol, 2**-13, came from 160 rows of [4, 129280]; the coverage plan's larger batches and vocabularies found the baseline above it.) The table admits the baseline with 2x margin and stays 4x under bfloat16 rounding (2**-9), which it must catch. exp (<= 2 ulp) and the division (0.5 ulp) are noise beside it. The rounding of ``d = x - max`` costs ``|d| u`` relative in ``exp(d)``, and ``|d| e**d <= 1/e``, so its absolute effect is at most ``u/e * p_top1`` (top1_atol). |
| float16  | 2**-11 + 2**-11 | 2**-24 | a float16 output (the baseline returns the input dtype) is rounded to nearest: half a float16 ulp, at most 2**-11 relative, on top of the float32 computation (the row above). Probabilities under 2**-14 are float16 subnormals with fixed spacing 2**-24: ``subnormal_atol`` = 2**-25 absorbs their rounding. |
| bfloat16 | 2**-8 + 2**-11 | 2**-24 | a bfloat16 output is rounded to nearest: half a bfloat16 ulp, at most 2**-8 relative (8 significant bits), on top of the float32 computation. |

``subnormal_atol`` is the half-spacing of the output format's subnormals (float16: 2**-25), an
absolute allowance that only matters for probabilities in that range.

The regression rule guards against a candidate that stays inside the table but is much worse
than the baseline: on the same healthy rows, the candidate's largest relative error may not exceed
``regression_factor`` (4) times ``softmax_topk``'s largest relative error plus a floor of
``regression_floor`` (64 u = 2**-18), so that an exactly-rounded baseline does not make every
candidate fail on a difference of summation order. Error model: a float32 sum of V positive
terms errs by at most d u relative, d the depth of the additions behind the result. A pairwise
tree (d = log2 V <= 18), SIMD lanes or blocks stay under the floor; a single accumulator over the
row (d = V - 1) does not, and is not meant to: measured 1.1e-5 on gaussian rows at V = 129280
(a regression) and 1.7e-3 on dominant rows at V = 151936 (over rtol, the size of bfloat16
rounding). ``tests/ops/draft_topk/test_tolerance_claims.py`` shows both.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from equiv.validation import check_choice, check_float

_U = 2.0 ** -24


@dataclass(frozen=True)
class Tolerance:
    """Allowed error for one input dtype (see the module docstring for each derivation)."""

    dtype: str
    rtol: float
    top1_atol: float
    subnormal_atol: float = 0.0
    regression_factor: float = 4.0
    regression_floor: float = 64 * _U

    def allowed(self, exact, exact_top1):
        """Largest allowed ``|p - exact|`` (elementwise, broadcasts over NumPy arrays)."""
        return self.rtol * exact + self.top1_atol * exact_top1 + self.subnormal_atol

    def with_(self, **changes) -> "Tolerance":
        for name in ("rtol", "top1_atol", "subnormal_atol", "regression_factor", "regression_floor"):
            if name in changes:
                changes[name] = check_float(name, changes[name], min_value=0.0)
        return replace(self, **changes)

    def to_json(self) -> dict:
        return asdict(self)


TOLERANCES = {
    "float32": Tolerance("float32", rtol=2.0 ** -11, top1_atol=_U),
    "float16": Tolerance("float16", rtol=2.0 ** -11 + 2.0 ** -11, top1_atol=_U, subnormal_atol=2.0 ** -25),
    "bfloat16": Tolerance("bfloat16", rtol=2.0 ** -8 + 2.0 ** -11, top1_atol=_U),
}


def dtype_name(dtype) -> str:
    """'float32' for torch.float32, numpy float32 or the string; other dtypes are rejected."""
    name = str(dtype).replace("torch.", "")
    return check_choice("dtype", name, TOLERANCES)


def tolerance_for(dtype) -> Tolerance:
    """The table row for an input dtype (torch dtype, NumPy dtype or name)."""
    return TOLERANCES[dtype_name(dtype)]
