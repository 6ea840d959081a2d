"""Candidates that are wrong only where a fixed [4, V] check never looks, and correct ones written
the way users write them (float64 topk_p, non-contiguous outputs). Used by tests/ops/draft_topk/test_coverage.py
and tests/ops/draft_topk/test_output_contract.py."""
import torch


def _correct(logits, k):
    return torch.topk(torch.softmax(logits.float(), -1), k, -1)


def value_error_past_33_rows(logits, k):
    """1% value error on every row when B > 33."""
    p, idx = _correct(logits, k)
    return (p * 1.01 if logits.shape[0] > 33 else p), idx


def runner_up_on_odd_rows(logits, k):
    """Odd rows return the runner-up (index and its probability) when B >= 64."""
    probs = torch.softmax(logits.float(), -1)
    p, idx = torch.topk(probs, k, -1)
    if logits.shape[0] >= 64 and logits.shape[1] > k:
        odd = torch.arange(logits.shape[0], device=logits.device) % 2 == 1
        alt_p, alt_i = torch.topk(probs, k + 1, -1)
        p[odd, 0], idx[odd, 0] = alt_p[odd, 1], alt_i[odd, 1]
    return p, idx


def value_error_large_vocab(logits, k):
    """0.1% value error on rows >= 4 when V > 32000 and B > 4."""
    p, idx = _correct(logits, k)
    if logits.shape[1] > 32000 and logits.shape[0] > 4:
        p = p.clone()
        p[4:] *= 1.001
    return p, idx


def float64_probabilities(logits, k):
    """Correct, computed and returned in float64 (the most natural reference-like code)."""
    return torch.topk(torch.softmax(logits.double(), -1), k, -1)


def transposed_outputs(logits, k):
    """Correct; both outputs are transposes of [k, B] buffers (strides (1, B))."""
    p, idx = _correct(logits, k)
    return p.t().contiguous().t(), idx.t().contiguous().t()


def strided_outputs(logits, k):
    """Correct; both outputs are every other column of a [B, 2k] buffer (strides (2k, 2))."""
    p, idx = _correct(logits, k)
    b = logits.shape[0]
    return torch.stack([p, p], -1).reshape(b, 2 * k)[:, ::2], torch.stack([idx, idx], -1).reshape(b, 2 * k)[:, ::2]
