"""Argument checks shared by the library and the CLI.

Each message names the argument, shows the value it got and says the fix, e.g.
``k=0 is invalid: k must be an integer >= 1``.
"""
from __future__ import annotations

import difflib

from equiv.errors import InvalidArgument


def check_int(name: str, value, *, min_value: int | None = None, max_value: int | None = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidArgument(f"{name}={value!r} is invalid: {name} must be an integer")
    value = int(value)
    if min_value is not None and value < min_value:
        raise InvalidArgument(f"{name}={value} is invalid: {name} must be >= {min_value}")
    if max_value is not None and value > max_value:
        raise InvalidArgument(f"{name}={value} is invalid: {name} must be <= {max_value}")
    return value


def check_ints(name: str, text, *, min_value: int | None = None, example: str = "1,4") -> list:
    """``"1,4"`` (or a list or tuple of integers) as a list of integers, each checked by
    ``check_int``, in the order given; else one ``InvalidArgument`` saying the fix."""
    if isinstance(text, (list, tuple)):
        text = ",".join(map(str, text))
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if not items:
        raise InvalidArgument(f"{name}={text!r} is empty: give comma-separated integers such as {example}")
    out = []
    for s in items:
        try:
            value = int(s)
        except ValueError:
            raise InvalidArgument(f"{name}={text!r} is invalid: {s!r} is not an integer") from None
        out.append(check_int(name, value, min_value=min_value))
    return out


def check_float(name: str, value, *, min_value: float | None = None, max_value: float | None = None,
                exclusive_min: bool = False) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name}={value!r} is invalid: {name} must be a number") from None
    if f != f:
        raise InvalidArgument(f"{name}={value!r} is invalid: {name} must not be NaN")
    if min_value is not None and (f < min_value or (exclusive_min and f == min_value)):
        op = ">" if exclusive_min else ">="
        raise InvalidArgument(f"{name}={value!r} is invalid: {name} must be {op} {min_value}")
    if max_value is not None and f > max_value:
        raise InvalidArgument(f"{name}={value!r} is invalid: {name} must be <= {max_value}")
    return f


def check_choice(name: str, value, choices) -> str:
    choices = list(choices)
    if value in choices:
        return value
    hint = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise InvalidArgument(
        f"{name}={value!r} is unknown{did_you_mean}: choose from {', '.join(map(str, choices))}")


def check_choices(name: str, values, choices) -> list:
    """A comma-separated string or a list, each item checked against ``choices``."""
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    values = list(values)
    if not values:
        raise InvalidArgument(f"{name} is empty: give at least one of {', '.join(map(str, choices))}")
    return [check_choice(name, v, choices) for v in values]
