"""equiv: does an optimized draft top-k compute the same thing as softmax-then-top-k?

The public API is this list of names; the work lives in the modules named after it.
"""
import os as _os

# Installed, ``equiv.reference``, ``equiv.properties`` and ``equiv.fixtures`` are sub-packages
# (pyproject maps the repository's top-level folders there). Run from a checkout without an
# install, the same names resolve to those top-level folders through this package's path.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "reference")) and _os.path.isfile(
        _os.path.join(_root, "reference", "__init__.py")):
    __path__.append(_root)
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
