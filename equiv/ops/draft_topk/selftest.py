"""The draft top-k's part of ``equiv selftest``: which paths are correct, and how one is judged.

A correct path's false-positive run is the gate's tolerance stage on every input family at one
seed, ``[4, V]`` rows, every dtype of the full budget: fresh inputs each seed, no property suite
(the kill-rate half runs the suite on every mutant already).
"""
from __future__ import annotations

from equiv.ops.draft_topk.gate import BUDGETS
from equiv.ops.draft_topk.gate_stages import tolerance_checks
from equiv.ops.draft_topk.paths import path_names
from equiv.ops.draft_topk.report.rows import CORRECT_PATHS


def correct_paths() -> tuple:
    return tuple(p for p in path_names() if p in CORRECT_PATHS)


def false_positive_run(path: str, *, seed: int, device: str, vocab: int, timeout: float) -> list:
    checks, _ = tolerance_checks(path, ks=(1,), device=device, dtypes=BUDGETS["full"]["dtypes"], batch=4,
                                 seeds=1, seed=seed, vocab=vocab, timeout=timeout)
    return [(c.name, c.detail) for c in checks if not c.passed]
