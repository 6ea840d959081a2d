"""The kinds of defect a draft top-k can have, each with the line a kernel engineer recognizes.

Plan
----
A defect's kind is decided by two things the isolation finds (``equiv.ops.draft_topk.diagnose.isolate``): the
*symptom* on the failing rows (an exception, an index outside ``[0, V)``, an index outside the
tie set, a probability off, a poisoned row answered with a number, ...) and the *trigger*, the
input features without which the failure goes away (padding of the row stride, the batch size,
V, the dtype, poisoned rows, the logits' magnitude, neighbouring rows, an earlier call).

- A symptom that breaks the process or the contract names the kind whatever the trigger
  (``crash``, ``hang``, ``input_write``, ``output_format``, ``out_of_vocabulary_index``): the
  trigger then says when it happens.
- Otherwise a necessary feature names it (``non_contiguous``, ``misaligned_base``, ``batch_size``,
  ``neighbour_rows``, ``mask_position``, ``confident_rounding``, ``dtype_specific``,
  ``vocab_specific``, ``shape_threshold``, ``magnitude``, ``stale_output``, the poison kinds).
- A failing call history (``equiv.ops.draft_topk.diagnose.calls``) is named by what its smallest history shows:
  ``output_reused`` (a kept output changed), ``stale_output`` (the storage rewritten in place
  got the earlier values' answer), ``after_n_calls`` (right for the first N calls of a shape).
- A failure that depends on the call rather than the input (``equiv.ops.draft_topk.diagnose.dimensions``)
  is named by the dimension: ``k_dependent`` (right at the smallest k, wrong at a larger one),
  ``context_dependent`` (right in one calling context, wrong in another).
- A failure on the blandest input (one Gaussian row, contiguous, float32) is named by its
  symptom: ``placeholder_probability`` when topk_p does not follow the logits, ``wrong_index``,
  ``rank_order`` (k > 1), ``value_error``.

``severity`` orders the report: what ends the process or corrupts memory first, then what
changes emitted tokens, then what changes only probabilities (the incident's lesson: a reader
who learns "it returns 1.0" first misses the bugs that corrupt tokens).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    explanation: str
    severity: int                # lower is reported first
    affects: str                 # "process", "memory", "tokens" or "probabilities"


_KINDS = (
    Kind("hang", "hang", "the call does not return within the time-out", 0, "process"),
    Kind("crash", "crash", "the call raises (or the process dies) instead of answering", 1, "process"),
    Kind("input_write", "write to the input or past it",
         "the call changes the caller's logits (or the memory after them)", 2, "memory"),
    Kind("output_format", "output breaks the contract",
         "topk_p / topk_index have the wrong shape, dtype or device, or are not plain tensors", 3,
         "process"),
    Kind("out_of_vocabulary_index", "out-of-vocabulary index",
         "an index outside [0, V): the engine will read or emit a token that does not exist", 4, "tokens"),
    Kind("output_reused", "outputs overwritten by later calls",
         "the tensors a call returned change when the path is called again (output buffers "
         "recycled across calls): a caller that keeps earlier draft steps reads other values", 5, "tokens"),
    Kind("stale_output", "stale or cached output",
         "the answer depends on earlier calls (a cache keyed by shape or pointer, state left behind)",
         6, "tokens"),
    Kind("after_n_calls", "changes after the first calls",
         "the first N calls of a shape are right, later ones are not (an autotuner's switch, a "
         "warm-up path, a cache that fills)", 7, "tokens"),
    Kind("k_dependent", "k-dependent answer",
         "right at the smallest k judged, wrong at larger k on the same input (a top-1 fast path "
         "the general path does not share, a sort or a normalization sized for k entries)", 7, "tokens"),
    Kind("context_dependent", "calling-context-dependent answer",
         "right in some calling contexts and wrong in others on the same input (a path keyed on "
         "grad or inference mode, state kept per thread, a launch on another stream)", 7, "tokens"),
    Kind("non_contiguous", "non-contiguous input misread",
         "rows of a padded (strided) batch are read as if the row stride were V", 8, "tokens"),
    Kind("misaligned_base", "misaligned base misread",
         "logits that start a few elements into their storage (a base not 16-byte aligned) are "
         "read from the wrong place (vector loads from an assumed-aligned base)", 9, "tokens"),
    Kind("neighbour_rows", "answer depends on neighbouring rows",
         "a row's answer changes with the values of other rows (a reduction over the batch)", 10, "tokens"),
    Kind("batch_size", "batch-size-dependent answer",
         "rows are answered wrongly from some batch size on (a grid cap, a split heuristic)", 11, "tokens"),
    Kind("poison_leak", "poison leaking into other rows",
         "a NaN / inf row changes the answer of healthy rows in the same batch", 12, "tokens"),
    Kind("mask_position", "-inf mask position",
         "rows with -inf entries before finite ones (a mask at the front or inside the row) are "
         "answered wrongly; the same mask at the end of the row is right", 13, "tokens"),
    Kind("wrong_index", "wrong index",
         "an index outside the tie set: the runner-up, an offset, a tie broken outside the tie set",
         14, "tokens"),
    Kind("rank_order", "ranks out of order",
         "at k > 1 the top-k is not descending or repeats an index (running top-k insertion)", 15, "tokens"),
    Kind("vocab_specific", "vocabulary-specific",
         "fails at some vocabulary sizes and not at larger ones (a generic path behind kernels "
         "tuned to listed sizes)", 16, "tokens"),
    Kind("shape_threshold", "shape threshold",
         "fails only from some vocabulary size on, or at a tile edge (V % BLOCK != 0)", 17, "tokens"),
    Kind("dtype_specific", "dtype-specific",
         "fails only for a reduced-precision input dtype (its own accumulator or load path)", 18, "tokens"),
    Kind("magnitude", "magnitude-dependent",
         "fails only at large or tiny logits (exp overflows without the max-subtraction)", 19, "tokens"),
    Kind("poison_made_finite", "poisoned row made finite",
         "a row holding NaN / +inf / only -inf answers a finite, confident probability", 20,
         "probabilities"),
    Kind("placeholder_probability", "placeholder probability",
         "topk_p does not depend on the logits (a constant such as 1.0)", 21, "probabilities"),
    Kind("confident_rounding", "confident rows rounded to 1.0",
         "topk_p is written as 1.0 on confident rows (1 - p around 1e-3) where it is not 1 within "
         "the tolerance; other rows are right (a \"close enough\" shortcut)", 22, "probabilities"),
    Kind("value_error", "value drift",
         "topk_p is off by more than the tolerance for the index returned (lost precision)", 23,
         "probabilities"),
)

KINDS: dict[str, Kind] = {k.name: k for k in _KINDS}

# Symptoms that name the kind whatever the trigger (see the module docstring).
CONTRACT_KINDS = ("hang", "crash", "input_write", "output_format", "out_of_vocabulary_index")


def kind(name: str) -> Kind:
    return KINDS[name]
