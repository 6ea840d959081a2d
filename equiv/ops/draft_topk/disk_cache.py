"""The tolerance stage's work that does not depend on the candidate, kept on disk between runs:
each recipe's host values and each ``(recipe, k)``'s float64 reference.

Plan
----
- Why: a warm gate judges the same plan again (the same seed gives the same recipes). Drawing a
  recipe's values (NumPy normals, the family's edits) and computing its reference cost most of
  the stage's host time, in the worker that builds the candidate's input and in this process
  that judges it; reading them back costs a file read.
- What: ``values(recipe, make)`` gives the recipe's ``[batch, vocab]`` host tensor, read from the
  cache or made by ``make()`` and written; ``reference(recipe, k, judged, make)`` the same for
  the reference of the judged rows (without its ``rows``: the caller adds the values). The bits
  are those ``make`` gives: a file whose shape, dtype or judged rows differ is made again, so a
  cached run is never judged differently from a fresh one.
- Key, place, size and failure: ``equiv.disk_cache`` (every op's cache): this op's folder is
  ``draft_topk-<hash>`` of the modules in ``SOURCES`` and torch's version; a file per recipe (and
  k), named by a hash of the recipe's text.
"""
from __future__ import annotations

import numpy as np
import torch

from equiv import disk_cache as shared
from equiv import reference as oracle

SOURCES = ("equiv.ops.draft_topk.recipes", "equiv.ops.draft_topk.confidence", "equiv.ops.draft_topk.space",
           "equiv.ops.draft_topk.coverage", "equiv.recipe_text", "equiv.reference.softmax_topk")
# how each recipe dtype is stored: bfloat16, which NumPy lacks, as its bits
_STORED = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(np.int16)}
TAG = "draft_topk"


def folder():
    """This code version's folder (``equiv.disk_cache.folder``)."""
    return shared.folder(TAG, SOURCES, torch.__version__)


def _name(recipe, suffix: str):
    """The recipe's file, or None where the cache is off or no folder can be named."""
    return shared.entry(TAG, SOURCES, str(recipe), suffix, torch.__version__)


def values(recipe, make):
    """The recipe's host values: read, or ``make()`` and written (module docstring)."""
    path = _name(recipe, ".npy")
    if path is None:
        return make()
    bits = recipe.dtype == "bfloat16"
    got = shared.read(path, lambda f: np.load(f, allow_pickle=False))
    if got is not None and got.shape == (recipe.batch, recipe.vocab) and got.dtype == _STORED[recipe.dtype]:
        x = torch.from_numpy(got)
        return x.view(torch.bfloat16) if bits else x
    x = make()
    arr = x.view(torch.int16).numpy() if bits else x.numpy()
    shared.write(path, lambda f: np.save(f, arr, allow_pickle=False))
    return x


def reference(recipe, k: int, judged: np.ndarray, make):
    """The reference (without its rows) of the recipe's ``judged`` rows at ``k``: read, or
    ``make()`` and written. ``make`` may raise: nothing is written then."""
    path = _name(recipe, f"-k{k}.npz")
    if path is None:
        return make()
    got = shared.read(path, lambda f: dict(np.load(f, allow_pickle=False)))
    if got is not None and np.array_equal(got.get("judged"), judged):
        return oracle.ReferenceResult(k=k, topk_p=got["topk_p"], topk_index=got["topk_index"],
                                      kind=tuple(got["kind"].tolist()), row_max=got["row_max"],
                                      log_sum=got["log_sum"], rows=None)
    ref = make()
    shared.write(path, lambda f: np.savez(f, judged=judged, topk_p=ref.topk_p, topk_index=ref.topk_index,
                                    kind=np.array(ref.kind, dtype=str), row_max=ref.row_max,
                                    log_sum=ref.log_sum))
    return ref
