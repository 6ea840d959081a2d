"""equiv: does an optimized path of speculative decoding compute the same thing as its reference?

The public API is the list of names in ``__all__``; the work lives in the modules named in
``_EXPORTS``. Names are imported on first use: this package is imported by its pytest plugin in
every pytest run of an environment where equiv is installed, and must not load torch or NumPy
into a run that never asks for equiv.
"""
import importlib as _importlib
import os as _os
import sys as _sys
import types as _types

from equiv._version import __version__

# Installed, ``equiv.reference``, ``equiv.properties`` and ``equiv.fixtures`` are sub-packages
# (setup.py maps the repository's top-level folders there). Run from a checkout without an
# install, the same names resolve to those top-level folders through this package's path.
_root = _os.path.dirname(_os.path.dirname(_os.path.realpath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "reference")) and _os.path.isfile(
        _os.path.join(_root, "reference", "__init__.py")):
    __path__.append(_root)

# The registry's default op (the draft top-k) has its public names here too; naming its package
# through the registry keeps every op's name inside ``equiv/ops`` (equiv.ops imports no torch).
from equiv.ops import DEFAULT_OP as _DEFAULT_OP  # noqa: E402

_OWN = f"equiv.ops.{_DEFAULT_OP}"
_EXPORTS = {
    "assert_equivalent": f"{_OWN}.assertion",
    "check": "equiv.api",
    "gate": "equiv.gate:run_gate",
    "report": "equiv.api",
    "CandidateSpec": "equiv.run.spec",
    "RunOptions": "equiv.options",
    "Candidate": "equiv.candidate",
    "load_candidate": "equiv.candidate",
    "CheckResult": f"{_OWN}.compare",
    "ComparisonResult": f"{_OWN}.compare",
    "compare": f"{_OWN}.compare",
    "CandidateLoadError": "equiv.errors",
    "EquivError": "equiv.errors",
    "EquivalenceError": "equiv.errors",
    "InvalidArgument": "equiv.errors",
    "MissingDependency": "equiv.errors",
    "NoDeviceError": "equiv.errors",
    "UsageError": "equiv.errors",
    "FAMILIES": f"{_OWN}.recipes",
    "Recipe": f"{_OWN}.recipes",
    "Path": f"{_OWN}.paths",
    "get_path": f"{_OWN}.paths",
    "path_names": f"{_OWN}.paths",
    "TOLERANCES": f"{_OWN}.tolerance",
    "Tolerance": f"{_OWN}.tolerance",
    "tolerance_for": f"{_OWN}.tolerance",
}
_MODULES = ("strategies",)                       # public sub-modules, also loaded on first use

__all__ = sorted([*_EXPORTS, *_MODULES, "__version__"])


def __getattr__(name):
    if name in _EXPORTS:
        module, _, attr = _EXPORTS[name].partition(":")
        value = getattr(_importlib.import_module(module), attr or name)
    elif name in _MODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'equiv' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return __all__


class _Front(_types.ModuleType):
    """``equiv.gate`` is a function, although ``equiv/gate.py`` is also a sub-module:
    importing a sub-module binds it on its package,
    which would hide the function the first time anything imports it. An exported name keeps
    its exported value."""

    def __setattr__(self, name, value):
        if name in _EXPORTS and isinstance(value, _types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            module, _, attr = _EXPORTS[name].partition(":")
            value = getattr(_importlib.import_module(module), attr or name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Front
