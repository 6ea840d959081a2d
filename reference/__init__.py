"""Float64 NumPy reference for softmax-then-top-k. Imports nothing of the project."""
from .softmax_topk import (
    HEALTHY,
    POISON_ALL_NEGINF,
    POISON_KINDS,
    POISON_MULTI_POSINF,
    POISON_NAN,
    POISON_POSINF,
    ReferenceResult,
    softmax_topk,
)

__all__ = [
    "HEALTHY",
    "POISON_ALL_NEGINF",
    "POISON_KINDS",
    "POISON_MULTI_POSINF",
    "POISON_NAN",
    "POISON_POSINF",
    "ReferenceResult",
    "softmax_topk",
]
