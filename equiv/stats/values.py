"""Input checks shared by the statistics: a test raises on malformed input, never returns NaN."""
from __future__ import annotations

import numpy as np

from equiv.errors import InvalidArgument


def finite_1d(name, values):
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgument(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InvalidArgument(f"{name}[{bad}]={arr[bad]} is not finite: statistics need finite values")
    return arr
