"""Candidates that run out of memory in their own call, one per op (tests/test_not_judged.py).

Whether that is the machine's failure (NOT JUDGED) or the candidate's defect (FAIL) depends on the
device's free memory at the call's start, which the tests replace with ``EQUIV_TEST_FAULT=free=``.
"""
import torch


def _out_of_memory():
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def draft_topk(logits, k):
    _out_of_memory()


def verify(draft_token_ids, draft_probs, target_probs, generator):
    _out_of_memory()


def verify_tree(parents, draft_token_ids, draft_probs, target_probs, generator):
    _out_of_memory()
