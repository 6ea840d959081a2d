"""Reading the worker's replies without running the worker's code in the verdict process.

Plan
----
The worker is the candidate's process: whatever it sends may have been shaped by the candidate
(``to_host`` keeps plain values, and a pickled object names the function that rebuilds it).
An ordinary ``pickle.loads`` would call that function here, so a returned object whose
``__reduce__`` is ``os._exit`` would end the verdict process with status 0, and an instance of
a class from the candidate's module would import that module (and run its top level) here.
``loads`` resolves only what our replies are made of: the dataclasses of two of ``equiv``'s own
modules (outcomes and arrays, GPU probe results), NumPy arrays, dtypes and scalars, and a few builtin
containers. Anything else is a ``ReplyError``: the call's outcome is then "its reply could not
be read", a failed check like any other. (The worker can still lie in a well-formed reply: the
isolation guards the verdict against a candidate's accidents and ends, not against code written
to forge equiv's own results in its process; docs/trust.md says so.)
"""
from __future__ import annotations

import dataclasses
import importlib
import io
import pickle
from equiv.ops import get_op, op_names

_NUMPY_MODULES = ("numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric",
                  "numpy._core.numeric", "numpy.dtypes")
_NUMPY_NAMES = ("ndarray", "dtype", "_reconstruct", "scalar", "_frombuffer")
_BUILTINS = ("set", "frozenset", "complex", "slice", "range", "bytearray")
_RUN_MODULES = ("equiv.run.outcome",)           # where the replies' record types live, with each op's


def _our_modules() -> tuple:
    """``equiv.run``'s record modules and each registered op's (``Op.reply_modules``)."""
    return _RUN_MODULES + tuple(m for n in op_names() for m in get_op(n).reply_modules)


class ReplyError(Exception):
    """A reply that names something outside the allow-list (or is not a pickle at all); the
    message completes "the reply ..."."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if "." in name:
            raise ReplyError(f"names {module}.{name}, which is not an output type")
        if module in _NUMPY_MODULES and (name in _NUMPY_NAMES or (module == "numpy.dtypes"
                                                                  and name.endswith("DType"))):
            return super().find_class(module, name)
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if module in _RUN_MODULES or module in _our_modules():
            found = getattr(importlib.import_module(module), name, None)
            if isinstance(found, type) and dataclasses.is_dataclass(found):
                return found
        raise ReplyError(f"names {module}.{name}, which is not an output type")


def loads(data: bytes):
    """The reply in ``data``; ``ReplyError`` if it needs anything but our own record types."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except ReplyError:
        raise
    except Exception as exc:                     # a truncated or forged stream
        raise ReplyError(f"is not a well-formed reply ({type(exc).__name__})") from exc
