"""MTP acceptance statistics: what each draft path does downstream of the draft step.

The public names of this package; the work lives in the modules named after them:
``models`` (synthetic target LM and draft), ``traces`` and ``compact`` (recorded logits, full
and top-k), ``smollm2``, ``llama``, ``real`` and ``live`` (a real model decoding live), ``decoding`` (the
speculative-decoding loop and its consumers), ``metrics`` and ``harness``; the statistics are ``equiv.stats``
(``run_mtp``). docs/mtp.md describes the whole.
"""
from equiv.mtp.compact import CompactTrace, compact
from equiv.mtp.decoding import CONSUMERS, DecodeOutcome, decode, greedy_reference, sample_reference
from equiv.mtp.live import record_lm
from equiv.mtp.harness import BUDGETS, EXPECTED_FAILURES, MtpRecord, MtpRun, run_mtp
from equiv.mtp.metrics import AcceptanceMetrics, acceptance_metrics
from equiv.mtp.models import SyntheticLM
from equiv.mtp.real import RealLM
from equiv.stats import (EquivalenceResult, GreedyIdentityResult, SamplingFitResult,
                                  equivalence_test, greedy_identity, pit, sampling_fit)
from equiv.mtp.traces import Trace, TraceLM, load_trace, record_trace, save_trace

__all__ = [
    "BUDGETS",
    "CONSUMERS",
    "EXPECTED_FAILURES",
    "AcceptanceMetrics",
    "CompactTrace",
    "DecodeOutcome",
    "EquivalenceResult",
    "GreedyIdentityResult",
    "MtpRecord",
    "MtpRun",
    "RealLM",
    "SamplingFitResult",
    "SyntheticLM",
    "Trace",
    "TraceLM",
    "acceptance_metrics",
    "compact",
    "decode",
    "equivalence_test",
    "greedy_identity",
    "greedy_reference",
    "load_trace",
    "pit",
    "record_lm",
    "record_trace",
    "run_mtp",
    "sample_reference",
    "sampling_fit",
    "save_trace",
]
