"""The statistics behind every verdict, in one place low in the house.

The operations and the features (mtp) import these; none imports another for them.
``equivalence`` holds the paired TOST of accept lengths and the greedy identity; ``fit`` the
goodness-of-fit tests of drawn tokens against exact laws (randomized PIT, binned chi-square,
Bernstein); ``labels`` the tokens' group labels as codes (what a per-group test selects by); each
function's docstring names its source, and its calibration lives in the docs
named there.
"""
from equiv.stats.equivalence import (ACCEPT_LENGTH_MARGIN, EQUIVALENCE_ALPHA, EquivalenceResult,
                                     GreedyIdentityResult, equivalence_test, greedy_identity)
from equiv.stats.fit import (MIN_EXPECTED, PIT_BINS, SAMPLING_ALPHA, TVD_FLOOR, BoundTest, PitTest,
                             SamplingFitResult, above_bound, bernstein_p, cells_test, pit, sampling_fit)
from equiv.stats.labels import Labels

__all__ = [
    "ACCEPT_LENGTH_MARGIN",
    "BoundTest",
    "EQUIVALENCE_ALPHA",
    "MIN_EXPECTED",
    "PIT_BINS",
    "SAMPLING_ALPHA",
    "TVD_FLOOR",
    "EquivalenceResult",
    "GreedyIdentityResult",
    "Labels",
    "PitTest",
    "SamplingFitResult",
    "above_bound",
    "bernstein_p",
    "cells_test",
    "equivalence_test",
    "greedy_identity",
    "pit",
    "sampling_fit",
]
