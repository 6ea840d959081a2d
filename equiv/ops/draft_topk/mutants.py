"""The mutant zoo: deliberately broken draft top-k implementations the property suite must kill.

Each mutant is a realistic bug of a hand-written or fused softmax-then-top-k, one bug class per
mutant, written as plain torch so it runs on any device. Each is a module attribute, so it loads
as the candidate spec ``equiv.ops.draft_topk.mutants:NAME``; ``MUTANTS`` maps name -> ``Mutant`` (name,
bug_class, description, the k it is judged at). ``LEGAL_VARIANTS`` are implementations that
differ from the baseline where the contract allows it (exact ties broken toward the last index,
float64 arithmetic): the suite must pass them, or it is raising false alarms.

``tests/ops/draft_topk/test_mutants.py`` proves the suite kills every mutant under the ``ci`` profile and
passes every legal variant; docs/property-suite.md has the kill table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

BLOCK = 1024                      # the tile width the blocked mutants pretend to use


@dataclass(frozen=True)
class Mutant:
    name: str
    bug_class: str
    description: str
    fn: Callable = None
    k: int = 1                    # the k it is judged at (k > 1 for the ordering bugs)

    def __call__(self, logits, k):
        return self.fn(logits, k)


MUTANTS: dict[str, Mutant] = {}
LEGAL_VARIANTS: dict[str, Mutant] = {}


def _register(table, bug_class: str, description: str, k: int = 1):
    def wrap(fn):
        m = Mutant(fn.__name__, bug_class, description, fn, k)
        table[m.name] = m
        return m
    return wrap


def mutant(bug_class: str, description: str, k: int = 1):
    return _register(MUTANTS, bug_class, description, k)


def _top(probs, k):
    return torch.max(probs, -1, keepdim=True) if k == 1 else torch.topk(probs, k, dim=-1)


def _correct(x, k):
    """What the mutants start from: float32 softmax, then top-k."""
    return _top(torch.softmax(x.float(), dim=-1), k)


def _blocks(x, fill):
    """``[B, nblocks, BLOCK]`` view of the rows padded to a multiple of BLOCK with ``fill``."""
    batch, vocab = x.shape
    n = -(-vocab // BLOCK)
    padded = torch.full((batch, n * BLOCK), fill, dtype=x.dtype, device=x.device)
    padded[:, :vocab] = x
    return padded.view(batch, n, BLOCK)


@mutant("hardcoded probability", "the incident's shortcut: argmax of the logits with topk_p = 1.0")
def constant_probability(logits, k):
    idx = torch.argmax(logits, -1, keepdim=True)
    return torch.ones(idx.shape, dtype=torch.float32, device=logits.device), idx


@mutant("index off by one", "returns the token id + 1 (a 1-based index leaking out)")
def index_off_by_one(logits, k):
    p, idx = _correct(logits, k)
    return p, idx + 1


@mutant("wrong rank", "returns the second-best token and its probability (rank 1 for rank 0)")
def second_best_index(logits, k):
    if logits.shape[1] < 2:
        return _correct(logits, k)
    p, idx = torch.topk(torch.softmax(logits.float(), -1), 2, dim=-1)
    return p[:, 1:], idx[:, 1:]


@mutant("unmasked padding lane", "pads the row to a multiple of 1024 with 0.0 instead of -inf: the "
        "padding enters the sum and wins the argmax of an all-negative row (index >= V)")
def padding_lane_wins(logits, k):
    padded = _blocks(logits.float(), 0.0).flatten(1)
    return _top(torch.softmax(padded, -1), k)


@mutant("no max-subtraction", "p = exp(x_max) / sum(exp(x)) without subtracting the max: overflows")
def no_max_subtraction(logits, k):
    e = torch.exp(logits.float())
    top, idx = _top(e, k)
    return top / e.sum(-1, keepdim=True), idx


@mutant("NaN masked", "sanitises the input with nan_to_num: a NaN row gets a confident probability")
def nan_masked(logits, k):
    return _correct(torch.nan_to_num(logits.float(), nan=-float("inf"), posinf=3e38), k)


@mutant("rows never written", "the launch grid covers 4 rows: rows 4.. keep the zeros of the output")
def rows_past_four_unwritten(logits, k):
    p = torch.zeros((logits.shape[0], k), dtype=torch.float32, device=logits.device)
    idx = torch.zeros((logits.shape[0], k), dtype=torch.int64, device=logits.device)
    p[:4], idx[:4] = _correct(logits[:4], k)
    return p, idx


@mutant("wrong reduction axis", "softmax over dim 0 (the batch) instead of the vocabulary")
def wrong_axis_softmax(logits, k):
    return _top(torch.softmax(logits.float(), dim=0), k)


@mutant("probability rounded to bfloat16", "the probability is stored through a bfloat16 buffer")
def bf16_probabilities(logits, k):
    p, idx = _correct(logits, k)
    return p.to(torch.bfloat16).float(), idx


@mutant("index dtype", "indices returned as int32 (what a kernel writes), not int64")
def int32_indices(logits, k):
    p, idx = _correct(logits, k)
    return p, idx.int()


@mutant("output shape", "squeezes the k dimension: [B] instead of [B, k]")
def squeezed_output(logits, k):
    p, idx = _correct(logits, k)
    return p.squeeze(-1), idx.squeeze(-1)


@mutant("tail of the row ignored", "the loop covers whole 1024-blocks only: the ragged tail of the "
        "row (V % 1024 entries) is never read")
def tail_ignored(logits, k):
    vocab = logits.shape[1]
    n = (vocab // BLOCK) * BLOCK if vocab > BLOCK else vocab
    return _correct(logits[:, :n], k)


@mutant("stride assumed contiguous", "indexes the storage as row * V + column: rows of a strided "
        "(non-contiguous) batch are read from the wrong place")
def contiguous_stride_assumed(logits, k):
    batch, vocab = logits.shape
    flat = torch.as_strided(logits, (batch, vocab), (vocab, 1), logits.storage_offset())
    return _correct(flat, k)


_CACHE: dict = {}


@mutant("stale cached result", "caches the answer by (shape, dtype, device): a later input of the "
        "same shape gets the earlier input's answer")
def cached_by_shape(logits, k):
    key = (tuple(logits.shape), logits.dtype, str(logits.device), k)
    if key not in _CACHE:
        _CACHE[key] = tuple(t.clone() for t in _correct(logits, k))
    return tuple(t.clone() for t in _CACHE[key])


@mutant("batch-global max", "subtracts the max of the whole batch, not of each row: rows far below "
        "it underflow, and one NaN row poisons every row")
def global_max_subtraction(logits, k):
    x = logits.float()
    e = torch.exp(x - x.max())
    top, idx = _top(e, k)
    return top / e.sum(-1, keepdim=True), idx


@mutant("low-precision accumulator", "the running sum over 1024-blocks is kept in the input dtype "
        "(bfloat16 / float16 rounding at every block)")
def input_dtype_accumulator(logits, k):
    x = logits.float()
    top, idx = torch.topk(x, k, -1)
    blocks = _blocks(torch.exp(x - top[:, :1]), 0.0).sum(-1)          # [B, nblocks], float32
    acc = torch.zeros_like(top[:, :1]).to(logits.dtype)
    for b in range(blocks.shape[1]):
        acc = (acc.float() + blocks[:, b:b + 1]).to(logits.dtype)
    return torch.exp(top - top[:, :1]) / acc.float(), idx


@mutant("ascending order", "returns the top-k sorted ascending (smallest of the k first)", k=4)
def topk_ascending(logits, k):
    p, idx = _correct(logits, k)
    return p.flip(-1), idx.flip(-1)


@mutant("duplicate index", "the running top-k inserts the new best without evicting it from rank 1",
        k=4)
def duplicate_indices(logits, k):
    p, idx = _correct(logits, k)
    if k > 1:
        p, idx = p.clone(), idx.clone()
        p[:, 1], idx[:, 1] = p[:, 0], idx[:, 0]
    return p, idx


@mutant("writes its input", "subtracts the row max in place to save memory: the caller's logits change")
def input_modified_in_place(logits, k):
    logits.sub_(logits.max(-1, keepdim=True).values.nan_to_num(0.0, 0.0, 0.0))
    return _correct(logits, k)


@mutant("division guard hides poison", "guards 1/sum with 'sum is NaN or 0 -> 0': an all -inf "
        "or NaN row answers a finite 0.0 instead of NaN")
def guarded_division(logits, k):
    x = logits.float()
    top, idx = torch.topk(x, k, -1)
    s = torch.exp(x - top[:, :1]).sum(-1, keepdim=True).nan_to_num(nan=0.0)
    scale = torch.where(s > 0, 1.0 / s, torch.zeros_like(s))
    return (torch.exp(top - top[:, :1]) * scale).nan_to_num(nan=0.0), idx


@mutant("argmax of a downcast copy", "takes the argmax of a bfloat16 copy of the logits: values that "
        "round together tie, and the lowest index wins although it is not the max")
def argmax_of_downcast(logits, k):
    probs = torch.softmax(logits.float(), -1)
    _, idx = _top(logits.to(torch.bfloat16).float(), k)
    return probs.gather(-1, idx), idx


@mutant("online rescale missing", "online softmax over 1024-blocks adds each block's sum relative to "
        "its own max, never rescaled to the running max")
def online_rescale_missing(logits, k):
    x = _blocks(logits.float(), -float("inf"))
    block_max = x.amax(-1, keepdim=True)
    s = torch.exp(x - block_max).nan_to_num(nan=0.0).sum(-1).sum(-1, keepdim=True)
    flat = x.flatten(1)[:, : logits.shape[1]]
    top, idx = _top(flat, k)
    return torch.exp(top - top[:, :1]) / s, idx


# -- one mutant per dimension of equiv.ops.draft_topk.space (issue 23): each is right on the old
# catalogue and wrong only along its dimension ----------------------------------------------------
_TUNED_VOCABS = (1, 2, 33, 1023, 1025, 4097, 8193, 32000, 129280, 151936, 151666, 128256)


@mutant("generic vocabulary path", "tuned kernels for the listed vocabularies; the generic path "
        "for any other V drops the last 1024-block of the row")
def generic_vocab_broken(logits, k):
    vocab = logits.shape[1]
    if vocab in _TUNED_VOCABS or vocab <= BLOCK:
        return _correct(logits, k)
    return _correct(logits[:, : ((vocab - 1) // BLOCK) * BLOCK], k)


@mutant("grid capped at 1024 rows", "the launch grid has at most 1024 programs: rows 1024.. of a "
        "larger batch (a draft tree of 256 x 5) keep the zeros of the output")
def rows_past_1024_unwritten(logits, k):
    p = torch.zeros((logits.shape[0], k), dtype=torch.float32, device=logits.device)
    idx = torch.zeros((logits.shape[0], k), dtype=torch.int64, device=logits.device)
    p[:1024], idx[:1024] = _correct(logits[:1024], k)
    return p, idx


@mutant("16-byte aligned base assumed", "vector loads from the base rounded down to 16 bytes: a "
        "tensor that starts 1-15 elements into its storage (logits[1:]) is read shifted")
def aligned_base_assumed(logits, k):
    size = logits.element_size()
    back = (logits.data_ptr() % 16) // size
    if back == 0:
        return _correct(logits, k)
    shifted = torch.as_strided(logits, logits.shape, logits.stride(), logits.storage_offset() - back)
    return _correct(shifted, k)


@mutant("-inf only at the end", "trims each row at its first -inf (vocab padding is assumed to be "
        "at the end): a mask at the front or inside the row hides the rest of it")
def trims_at_first_neginf(logits, k):
    x = logits.float()
    vocab = x.shape[1]
    neginf = x == -float("inf")
    first = torch.where(neginf.any(-1), neginf.float().argmax(-1), torch.full_like(neginf[:, 0], vocab,
                                                                              dtype=torch.int64))
    first = torch.where(first == 0, torch.full_like(first, vocab), first)      # never an empty row
    cols = torch.arange(vocab, device=x.device)
    return _correct(torch.where(cols[None, :] < first[:, None], x, -float("inf")), k)


@mutant("confident rows rounded to 1.0", "writes topk_p = 1.0 where p > 0.999 ('close enough'), "
        "the seed incident's shortcut on confident rows only")
def confident_rounded_to_one(logits, k):
    p, idx = _correct(logits, k)
    return torch.where(p > 0.999, torch.ones_like(p), p), idx


_RING: dict = {}


@mutant("output buffers recycled", "returns views of two output buffers per shape used in turn: "
        "the outputs of a call are overwritten two calls later")
def recycled_output_ring(logits, k):
    p, idx = _correct(logits, k)
    key = (tuple(p.shape), str(p.device))
    ring = _RING.setdefault(key, {"turn": 0, "bufs": [(torch.empty_like(p), torch.empty_like(idx))
                                                      for _ in range(2)]})
    buf = ring["bufs"][ring["turn"] % 2]
    ring["turn"] += 1
    buf[0].copy_(p)
    buf[1].copy_(idx)
    return buf


_BY_ADDRESS: dict = {}


@mutant("answers keyed by input address", "caches the answer by the input's data_ptr and shape, "
        "as a CUDA-graph capture keys its static input: the same storage rewritten in place "
        "gets the earlier values' answer")
def keyed_by_data_ptr(logits, k):
    key = (logits.data_ptr(), tuple(logits.shape), logits.dtype, k)
    if key not in _BY_ADDRESS:
        _BY_ADDRESS[key] = tuple(t.clone() for t in _correct(logits, k))
    return tuple(t.clone() for t in _BY_ADDRESS[key])


_CALLS_PER_SHAPE: dict = {}


@mutant("changes after 48 calls", "after 48 calls of a shape an autotuner switches to a tuned "
        "config that stores the probability through bfloat16")
def changes_after_48_calls(logits, k):
    key = (tuple(logits.shape), logits.dtype)
    _CALLS_PER_SHAPE[key] = _CALLS_PER_SHAPE.get(key, 0) + 1
    if _CALLS_PER_SHAPE[key] <= 48:
        return _correct(logits, k)
    return bf16_probabilities.fn(logits, k)


class _ReportedTensor(torch.Tensor):
    """A tensor subclass: a caller reading it through torch functions could be shown anything."""


@mutant("tensor subclass output", "returns its outputs as a torch.Tensor subclass, whose torch "
        "functions (how a caller reads the values) it could override")
def tensor_subclass_output(logits, k):
    p, idx = _correct(logits, k)
    return p.as_subclass(_ReportedTensor), idx.as_subclass(_ReportedTensor)


# -- legal variants: the contract allows these; the suite must pass them ------------------------
@_register(LEGAL_VARIANTS, "legal: tie-break", "breaks exact ties toward the highest index")
def ties_to_last_index(logits, k):
    p, idx = _correct(logits.flip(-1), k)
    return p, logits.shape[1] - 1 - idx


@_register(LEGAL_VARIANTS, "legal: more precise", "computes in float64 and returns float32")
def float64_compute(logits, k):
    p, idx = _top(torch.softmax(logits.double(), -1), k)
    return p.float(), idx


# -- GPU-only mutants (issue 14): bugs the CPU property suite cannot see -------------------------
# They answer every single call correctly, so the suite passes them; the GPU probes of
# equiv/ops/draft_topk/gpu_probes.py (properties/test_gpu.py) kill them. ``GPU_MUTANTS`` keeps them out of the
# CPU kill table of tests/ops/draft_topk/test_mutants.py.
GPU_MUTANTS: dict[str, Mutant] = {}
_STATIC_OUT: dict = {}


@_register(GPU_MUTANTS, "static output buffer", "writes every answer into one buffer per (device, "
           "k) and returns views of it: a CUDA graph's outputs alias it, so the next eager call "
           "overwrites them before they are read (killed by graph_replay)")
def static_output_buffer(logits, k):
    p, idx = _correct(logits, k)
    batch, key = logits.shape[0], (str(logits.device), k)
    buf = _STATIC_OUT.get(key)
    if buf is None or buf[0].shape[0] < batch:
        buf = (torch.empty((batch, k), dtype=torch.float32, device=logits.device),
               torch.empty((batch, k), dtype=torch.int64, device=logits.device))
        _STATIC_OUT[key] = buf
    buf[0][:batch].copy_(p)
    buf[1][:batch].copy_(idx)
    return buf[0][:batch], buf[1][:batch]


@_register(GPU_MUTANTS, "batch-size-dependent reduction order", "sums exp(x - max) in a number of "
           "chunks that depends on B (more for small batches, as a split-V kernel does): each "
           "answer is within tolerance, but a row's bits change with its batch (passes "
           "batch_invariance, killed by it with --equiv-require batch-invariant)")
def batch_dependent_reduction(logits, k):
    x = logits.float()
    top, idx = torch.topk(x, k, -1)
    chunks = max(1, 64 // max(x.shape[0], 1))
    batch, vocab = x.shape
    width = -(-vocab // chunks)
    e = torch.zeros((batch, chunks * width), dtype=torch.float32, device=x.device)
    e[:, :vocab] = torch.exp(x - top[:, :1])
    s = e.view(batch, chunks, width).sum(-1).sum(-1, keepdim=True)
    return torch.exp(top - top[:, :1]) / s, idx
# -- multi-defect mutants: two or three independent bugs in one kernel (equiv.ops.draft_topk.diagnose must name
# each of them once; docs/diagnosis.md has the table) -------------------------------------------
def _first_valid_argmax(x):
    """A greedy block argmax as kernels write it: ``best = -inf, index = V``, then ``x > best``
    per 1024-block and across blocks. A row with no entry above -inf (all NaN, all -inf) keeps
    the index V; a NaN entry is skipped."""
    batch, vocab = x.shape
    valid = x > -float("inf")                                   # False for NaN and -inf
    blocks = _blocks(torch.where(valid, x, -float("inf")), -float("inf"))
    block_max, local = blocks.max(-1)                           # [B, nblocks]
    best_block = torch.argmax(block_max, -1, keepdim=True)
    idx = best_block * BLOCK + local.gather(-1, best_block)
    return torch.where(valid.any(-1, keepdim=True), idx, torch.full_like(idx, vocab))


@mutant("three defects: split-vocabulary argmax", "the split-vocabulary argmax of an early engine "
        "kernel: topk_p is a constant 1.0; rows are addressed as row * V (a non-contiguous batch "
        "reads another row); a row with no finite maximum (all NaN, all -inf) returns the index V")
def split_vocab_argmax(logits, k):
    batch, vocab = logits.shape
    flat = torch.as_strided(logits, (batch, vocab), (vocab, 1), logits.storage_offset())
    idx = _first_valid_argmax(flat.float())
    return torch.ones(idx.shape, dtype=torch.float32, device=logits.device), idx


@mutant("two defects: ragged tail and NaN masking", "the loop covers whole 1024-blocks only (the "
        "ragged tail of the row is never read) and the input is sanitised with nan_to_num (a NaN "
        "row answers a confident probability)")
def tail_ignored_nan_masked(logits, k):
    return tail_ignored.fn(torch.nan_to_num(logits.float(), nan=-float("inf"), posinf=3e38), k)


@mutant("two defects: grid cap and half-precision sum", "the launch grid covers 16 rows (rows 16.. "
        "keep the zeros of the output) and the sum over 1024-blocks is kept in the input dtype")
def grid_cap_half_sum(logits, k):
    p = torch.zeros((logits.shape[0], k), dtype=torch.float32, device=logits.device)
    idx = torch.zeros((logits.shape[0], k), dtype=torch.int64, device=logits.device)
    p[:16], idx[:16] = input_dtype_accumulator.fn(logits[:16], k)
    return p, idx
