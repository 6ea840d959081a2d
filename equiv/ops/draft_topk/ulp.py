"""ULPs of float32, float16 and bfloat16, from bit patterns.

NumPy's ``spacing``/``nextafter`` know no bfloat16, so every format here is described by its
bit layout (exponent bits, stored mantissa bits) and handled the same way:

- ``ulp_distance(a, b, fmt)``: how many representable values of ``fmt`` lie between two values
  that are already representable (the integer distance of their sign-magnitude bit patterns,
  mapped to a monotone integer line; +0 and -0 are 0 apart).
- ``ulp_error(value, exact, fmt)``: ``|value - exact|`` in units of the spacing of ``fmt`` at
  ``exact`` (a float64 that need not be representable); subnormal spacing is the format's minimum.
- ``round_to(x, fmt)``: round-to-nearest-even of float64 values into ``fmt`` (for bfloat16 via
  float32 bit manipulation, as hardware does).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.errors import InvalidArgument


@dataclass(frozen=True)
class FloatFormat:
    name: str
    exponent_bits: int
    mantissa_bits: int          # stored bits, without the implicit one

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def min_exponent(self) -> int:   # exponent of the smallest normal number
        return 1 - self.bias

    @property
    def eps(self) -> float:          # spacing just above 1.0
        return 2.0 ** -self.mantissa_bits

    @property
    def min_spacing(self) -> float:  # spacing of the subnormals
        return 2.0 ** (self.min_exponent - self.mantissa_bits)


FORMATS = {
    "float32": FloatFormat("float32", 8, 23),
    "float16": FloatFormat("float16", 5, 10),
    "bfloat16": FloatFormat("bfloat16", 8, 7),
}


def get_format(name: str) -> FloatFormat:
    try:
        return FORMATS[str(name).replace("torch.", "")]
    except KeyError:
        raise InvalidArgument(
            f"dtype={name!r} has no ULP definition here: use one of {', '.join(FORMATS)}") from None


def round_to(x, fmt: str) -> np.ndarray:
    """Round float64 values to the nearest value of ``fmt`` (ties to even), returned as float64."""
    x = np.asarray(x, dtype=np.float64)
    f = get_format(fmt)
    if f.name == "float32":
        return x.astype(np.float32).astype(np.float64)
    if f.name == "float16":
        return x.astype(np.float16).astype(np.float64)
    # bfloat16: the high 16 bits of a float32. Round float64 -> float32 first would double-round,
    # so round the float64 directly: keep 8 significant bits with round-half-even.
    with np.errstate(over="ignore", invalid="ignore"):
        m, e = np.frexp(x)                       # x = m * 2**e, 0.5 <= |m| < 1
        scaled = np.ldexp(m, 8)                  # 8 significant bits into the integer part
        r = np.ldexp(np.rint(scaled), e - 8)     # rint rounds half to even
        r = np.where(np.isfinite(x), r, x)
        big = np.abs(r) > float(np.float32(3.3895313892515355e38))   # bf16 max finite
        r = np.where(big & np.isfinite(x), np.copysign(np.inf, x), r)
        tiny = np.abs(x) < 2.0 ** -126              # subnormal range: fixed spacing
        r = np.where(tiny, np.rint(x / f.min_spacing) * f.min_spacing, r)
    return r


def spacing_at(exact, fmt: str) -> np.ndarray:
    """Spacing of ``fmt`` at the magnitude of ``exact`` (float64); the ULP unit of ulp_error."""
    f = get_format(fmt)
    a = np.abs(np.asarray(exact, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        _, e = np.frexp(a)                       # a = m * 2**e with 0.5 <= m < 1
        exp2 = np.maximum(e - 1, f.min_exponent)  # binade exponent, floored at the normals
        sp = np.ldexp(np.ones_like(a), exp2 - f.mantissa_bits)
    sp = np.where(a == 0, f.min_spacing, sp)
    return sp


def ulp_error(value, exact, fmt: str) -> np.ndarray:
    """``|value - exact|`` in ULPs of ``fmt`` at ``exact``; inf where either is non-finite and
    they differ, 0 where both are the same non-finite value."""
    v = np.asarray(value, dtype=np.float64)
    x = np.asarray(exact, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(v - x) / spacing_at(x, fmt)
    same_nonfinite = (np.isnan(v) & np.isnan(x)) | ((v == x) & ~np.isfinite(x))
    return np.where(same_nonfinite, 0.0, np.where(np.isnan(err), np.inf, err))


def _ordered_bits(x: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Map representable values onto a monotone int64 line using their bit patterns."""
    if fmt.name == "float16":
        bits = np.asarray(x, dtype=np.float64).astype(np.float16).view(np.uint16).astype(np.int64)
        sign_bit = 1 << 15
    else:
        bits = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.int64)
        sign_bit = 1 << 31
        if fmt.name == "bfloat16":
            bits = bits >> 16
            sign_bit = 1 << 15
    magnitude = bits & (sign_bit - 1)
    return np.where(bits & sign_bit, -magnitude, magnitude)


def ulp_distance(a, b, fmt: str) -> np.ndarray:
    """Number of ``fmt`` values between two arrays of representable values (int64).

    Raises ``InvalidArgument`` when an input is not representable in ``fmt`` or is NaN."""
    f = get_format(fmt)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    for name, arr in (("a", a), ("b", b)):
        if np.isnan(arr).any():
            raise InvalidArgument(f"{name} holds NaN: ulp_distance is defined for non-NaN values only")
        if not np.array_equal(round_to(arr, f.name), arr):
            raise InvalidArgument(
                f"{name} holds values not representable in {f.name}: round them with round_to first")
    return np.abs(_ordered_bits(a, f) - _ordered_bits(b, f))
