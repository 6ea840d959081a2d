"""equiv: does an optimized draft top-k compute the same thing as softmax-then-top-k?

The public API is the list of names in ``__all__``; the work lives in the modules named in
``_EXPORTS``. Names are imported on first use: this package is imported by its pytest plugin in
every pytest run of an environment where equiv is installed, and must not load torch or NumPy
into a run that never asks for equiv.
"""
import importlib as _importlib
import os as _os

from equiv._version import __version__

# Installed, ``equiv.reference``, ``equiv.properties`` and ``equiv.fixtures`` are sub-packages
# (setup.py maps the repository's top-level folders there). Run from a checkout without an
# install, the same names resolve to those top-level folders through this package's path.
_root = _os.path.dirname(_os.path.dirname(_os.path.realpath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "reference")) and _os.path.isfile(
        _os.path.join(_root, "reference", "__init__.py")):
    __path__.append(_root)

_EXPORTS = {
    "assert_equivalent": "equiv.api",
    "Candidate": "equiv.candidate",
    "load_candidate": "equiv.candidate",
    "CheckResult": "equiv.ops.draft_topk.compare",
    "ComparisonResult": "equiv.ops.draft_topk.compare",
    "compare": "equiv.ops.draft_topk.compare",
    "CandidateLoadError": "equiv.errors",
    "EquivError": "equiv.errors",
    "EquivalenceError": "equiv.errors",
    "InvalidArgument": "equiv.errors",
    "MissingDependency": "equiv.errors",
    "NoDeviceError": "equiv.errors",
    "UsageError": "equiv.errors",
    "FAMILIES": "equiv.ops.draft_topk.recipes",
    "Recipe": "equiv.ops.draft_topk.recipes",
    "Path": "equiv.ops.draft_topk.paths",
    "get_path": "equiv.ops.draft_topk.paths",
    "path_names": "equiv.ops.draft_topk.paths",
    "TOLERANCES": "equiv.ops.draft_topk.tolerance",
    "Tolerance": "equiv.ops.draft_topk.tolerance",
    "tolerance_for": "equiv.ops.draft_topk.tolerance",
}
_MODULES = ("strategies",)                       # public sub-modules, also loaded on first use

__all__ = sorted([*_EXPORTS, *_MODULES, "__version__"])


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(_EXPORTS[name]), name)
    elif name in _MODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'equiv' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return __all__
