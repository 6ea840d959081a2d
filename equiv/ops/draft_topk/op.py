"""The draft top-k as an ``Op``: ``fn(logits, k) -> (topk_p, topk_index)`` (the contract: docs/draft_topk.md).

Each field imports its module when called: the registry holds every op, and holding one must not
import torch, NumPy or Triton (``equiv --help`` and the pytest plugin read the registry; importing
the gate plan pulls NumPy and the reference in, ~0.3 s measured on the 2-core CPU).
"""
from __future__ import annotations

import importlib

from equiv.ops import Op, OpOption, lazy_attr, signature_check
from equiv.run.context import CONTEXTS

_HERE = __name__.rpartition(".")[0]


def _lazy(module: str, attr: str):
    def call(*args, **kwargs):
        return getattr(importlib.import_module(f"{_HERE}.{module}"), attr)(*args, **kwargs)

    call.__name__ = attr
    return call


def _attr(module: str, attr: str):
    return lazy_attr(_HERE, module, attr)


# the built-in paths' names (``paths.path_names()``, which imports torch: 2.9 s a spec check need not pay)
BUILTIN_NAMES = ("softmax_topk", "hardcoded_one", "identity_top1", "fused_triton")


_FEATURES = {"output_dtypes": ("compare", "ALLOWED_P_DTYPES"), "confidence_bands": ("confidence", "BANDS")}


def _feature(name: str):
    return _attr(*_FEATURES[name])()


def _budget_dtypes(budget: str) -> tuple:
    return _attr("gate", "BUDGETS")()[budget]["dtypes"]


OP = Op(name="draft_topk", signature="fn(logits, k) -> (topk_p, topk_index)",
        summary="the draft step: softmax over the vocabulary, then top-k",
        mutants_module=f"{_HERE}.mutants", builtin_names=lambda: BUILTIN_NAMES, builtin=_lazy("paths", "get_path"),
        check_signature=signature_check("candidate", "fn(logits, k)"), mutants=_attr("mutants", "MUTANTS"),
        legal_variants=_attr("mutants", "LEGAL_VARIANTS"), parse_recipe=lambda text: _attr("recipes", "Recipe")().parse(text),
        default_recipe="gaussian:seed=0,batch=4,vocab=129280,dtype=float32",
        stages=("properties", "tolerance", "mtp"), gate=_lazy("gate", "run_draft_gate"),
        check=_lazy("check", "check"), ledger=_attr("ledger", "KNOWN_FAILURES"), takes_k=True,
        budget_dtypes=_budget_dtypes, coverage_lines=_lazy("space", "table_lines"),
        selftest_stages=("properties", "tolerance"), correct_paths=_lazy("selftest", "correct_paths"),
        false_positive_run=_lazy("selftest", "false_positive_run"), report=_lazy("check", "report"),
        listing=_lazy("listing", "listing"), reply_modules=(f"{_HERE}.gpu_probes",), features=_feature, bench=_lazy("bench_command", "run_command"),
        options=(OpOption("context", ("drawn",) + CONTEXTS, "drawn",
                          "the calling context of every call: drawn (each stage deals grad, no_grad, "
                          "inference_mode, a thread other than the main one and, on a GPU, a side "
                          "stream over its calls) or one of them for all calls"),))
