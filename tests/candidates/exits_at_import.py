"""A module that exits while it is imported."""
import sys

sys.exit(0)


def draft_topk(logits, k):                       # never reached
    raise AssertionError
