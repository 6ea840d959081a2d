"""equiv: does an optimized draft top-k compute the same thing as softmax-then-top-k?

The public API is this list of names; the work lives in the modules named after it.
"""
from equiv.candidate import Candidate, load_candidate
from equiv.compare import CheckResult, ComparisonResult, compare
from equiv.errors import (
    CandidateLoadError,
    EquivError,
    InvalidArgument,
    MissingDependency,
    NoDeviceError,
    UsageError,
)
from equiv.inputs import FAMILIES, Recipe
from equiv.paths import Path, get_path, path_names
from equiv.tolerance import TOLERANCES, Tolerance, tolerance_for

__version__ = "0.1.0"

__all__ = [
    "FAMILIES",
    "TOLERANCES",
    "Candidate",
    "CandidateLoadError",
    "CheckResult",
    "ComparisonResult",
    "EquivError",
    "InvalidArgument",
    "MissingDependency",
    "NoDeviceError",
    "Path",
    "Recipe",
    "Tolerance",
    "UsageError",
    "compare",
    "get_path",
    "load_candidate",
    "path_names",
    "tolerance_for",
]
