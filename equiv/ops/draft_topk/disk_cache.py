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
- Key: one folder per code version, named by a hash of equiv's version, NumPy's and torch's
  versions and the source of every module that makes the values or the reference
  (``SOURCES``); a file per recipe (and k), named by a hash of the recipe's text.
- Where: ``EQUIV_CACHE_DIR``, else ``$XDG_CACHE_HOME/equiv``, else ``~/.cache/equiv``.
  ``EQUIV_CACHE=0`` turns it off. Safe to delete at any time.
- Size: at most ``EQUIV_CACHE_MAX_MB`` (default 2048) in all; after a write, the files read
  least recently go first (other versions' folders with them).
- Failure: a file written under a temporary name, synced and renamed (two gates writing the same
  entry leave one whole file; a crash leaves the old file or none); a file that does not read is made again; a write that fails (a full or
  read-only disk) is skipped, and the run goes on as without a cache.
"""
from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path

import numpy as np
import torch

from equiv import reference as oracle
from equiv._version import __version__

SOURCES = ("equiv.ops.draft_topk.recipes", "equiv.ops.draft_topk.confidence", "equiv.ops.draft_topk.space",
           "equiv.ops.draft_topk.coverage", "equiv.recipe_text", "equiv.reference.softmax_topk")
DEFAULT_MAX_MB = 2048
# how each recipe dtype is stored: bfloat16, which NumPy lacks, as its bits
_STORED = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(np.int16)}
_folder: Path | None = None


def enabled() -> bool:
    return os.environ.get("EQUIV_CACHE", "1").strip() not in ("0", "off", "no", "false")


def root() -> Path:
    """The cache's folder (module docstring, Where)."""
    env = os.environ.get("EQUIV_CACHE_DIR", "").strip()
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "equiv"


def folder() -> Path:
    """This code version's folder (module docstring, Key)."""
    global _folder
    if _folder is None or _folder.parent != root():
        h = hashlib.sha256(f"{__version__}|{np.__version__}|{torch.__version__}".encode())
        for name in SOURCES:
            h.update(Path(importlib.import_module(name).__file__).read_bytes())
        _folder = root() / f"draft_topk-{h.hexdigest()[:16]}"
    return _folder


def _name(recipe, suffix: str) -> Path | None:
    """The recipe's file, or None where no cache folder can be named (no home directory): then
    the run goes on without the cache."""
    try:
        return folder() / (hashlib.sha256(str(recipe).encode()).hexdigest()[:32] + suffix)
    except (OSError, RuntimeError, KeyError):
        return None


def values(recipe, make):
    """The recipe's host values: read, or ``make()`` and written (module docstring)."""
    path = _name(recipe, ".npy") if enabled() else None
    if path is None:
        return make()
    bits = recipe.dtype == "bfloat16"
    got = _read(path, lambda f: np.load(f, allow_pickle=False))
    if got is not None and got.shape == (recipe.batch, recipe.vocab) and got.dtype == _STORED[recipe.dtype]:
        x = torch.from_numpy(got)
        return x.view(torch.bfloat16) if bits else x
    x = make()
    arr = x.view(torch.int16).numpy() if bits else x.numpy()
    _write(path, lambda f: np.save(f, arr, allow_pickle=False))
    return x


def reference(recipe, k: int, judged: np.ndarray, make):
    """The reference (without its rows) of the recipe's ``judged`` rows at ``k``: read, or
    ``make()`` and written. ``make`` may raise: nothing is written then."""
    path = _name(recipe, f"-k{k}.npz") if enabled() else None
    if path is None:
        return make()
    got = _read(path, lambda f: dict(np.load(f, allow_pickle=False)))
    if got is not None and np.array_equal(got.get("judged"), judged):
        return oracle.ReferenceResult(k=k, topk_p=got["topk_p"], topk_index=got["topk_index"],
                                      kind=tuple(got["kind"].tolist()), row_max=got["row_max"],
                                      log_sum=got["log_sum"], rows=None)
    ref = make()
    _write(path, lambda f: np.savez(f, judged=judged, topk_p=ref.topk_p, topk_index=ref.topk_index,
                                    kind=np.array(ref.kind, dtype=str), row_max=ref.row_max,
                                    log_sum=ref.log_sum))
    return ref


def _read(path: Path, load):
    try:
        with open(path, "rb") as f:
            got = load(f)
        os.utime(path)                           # read now: the last to go (module docstring, Size)
        return got
    except FileNotFoundError:
        return None
    except Exception:                            # noqa: BLE001 - a torn or foreign file: made again
        try:
            path.unlink()
        except OSError:
            pass
        return None


def _write(path: Path, save) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            save(f)
            f.flush()
            os.fsync(f.fileno())                 # whole on disk before it has its name
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return
    prune()


def prune(limit_mb: float | None = None) -> None:
    """Delete the files read least recently until the cache holds at most ``limit_mb``
    (``EQUIV_CACHE_MAX_MB``, default 2048) MiB."""
    if limit_mb is None:
        try:
            limit_mb = float(os.environ.get("EQUIV_CACHE_MAX_MB", DEFAULT_MAX_MB))
        except ValueError:
            limit_mb = DEFAULT_MAX_MB
    files = []
    try:
        for d in root().iterdir():
            if d.is_dir() and d.name.startswith("draft_topk-"):
                for f in d.iterdir():
                    st = f.stat()
                    files.append((st.st_mtime, st.st_size, f))
    except (OSError, RuntimeError):
        return
    total = sum(s for _, s, _ in files)
    for _, size, f in sorted(files):
        if total <= limit_mb * 2 ** 20:
            break
        try:
            f.unlink()
            total -= size
        except OSError:
            pass
