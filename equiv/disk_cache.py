"""Work that does not depend on the candidate, kept on disk between runs: one folder per
operation's code version, one file per entry; every op's cache goes through this module.

Plan
----
- Why: a warm gate judges the same plan again (the same seed gives the same recipes), and the
  host work that makes a recipe's inputs and laws (NumPy draws over the vocabulary, softmaxes,
  sorts) is the same every time; reading it back costs a file read.
- Key: ``folder(tag, sources)`` is ``<root>/<tag>-<hash>``, the hash of equiv's and NumPy's
  versions, the extra ``salt`` (torch's version, where the values pass through it) and the source
  of every module named in ``sources`` (the modules that make the entry and the text of its key):
  a change of any of them is another folder. An entry's file is named by a hash of its key text.
- ``arrays(tag, sources, key, make, want)``: a dict of NumPy arrays (``.arrays``: their names,
  then each array in NumPy's ``.npy`` format, one after another; an ``.npz`` archive read 4 times
  slower, its zip layer checking a CRC of every byte: 2.4 against 0.6 s for 1.1 GB of the
  verifiers' entries, 2-core CPU, page cache warm), read, or ``make()`` and written. ``want`` is what ``make`` gives, ``{name: (shape, dtype)}``: a
  file with other names, shapes or dtypes, one that does not read, or a torn one is made again,
  so a cached run is never judged differently from a fresh one.
- Where: ``EQUIV_CACHE_DIR``, else ``$XDG_CACHE_HOME/equiv``, else ``~/.cache/equiv``.
  ``EQUIV_CACHE=0`` turns it off. Safe to delete at any time.
- Size: at most ``EQUIV_CACHE_MAX_MB`` (default 4096) in all; after a write, the files read
  least recently go first, in every op's folders and every version's.
- Failure: a file written under a temporary name, synced and renamed (two gates writing the same
  entry leave one whole file; a crash leaves the old file or none); a write that fails (a full or
  read-only disk) is skipped, and the run goes on as without a cache.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import re
from pathlib import Path

import numpy as np

from equiv._version import __version__

DEFAULT_MAX_MB = 4096                            # the three CPU quick plans of one seed: ~2.0 GB
_FOLDER = re.compile(r"^[a-z_]+-[0-9a-f]{16}$")    # <tag>-<hash>: what prune may delete from
_folders: dict = {}


def enabled() -> bool:
    return os.environ.get("EQUIV_CACHE", "1").strip() not in ("0", "off", "no", "false")


def root() -> Path:
    """The cache's folder (module docstring, Where)."""
    env = os.environ.get("EQUIV_CACHE_DIR", "").strip()
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "equiv"


def folder(tag: str, sources, salt: str = "") -> Path:
    """The folder of ``tag``'s entries for this code version (module docstring, Key)."""
    base = root()
    key = (tag, tuple(sources), salt, str(base))
    if key not in _folders:
        h = hashlib.sha256(f"{__version__}|{np.__version__}|{salt}".encode())
        for name in sources:
            h.update(Path(importlib.import_module(name).__file__).read_bytes())
        _folders[key] = base / f"{tag}-{h.hexdigest()[:16]}"
    return _folders[key]


def entry(tag: str, sources, key: str, suffix: str, salt: str = "") -> Path | None:
    """The file of ``key`` (its text), or None where the cache is off or no folder can be named
    (no home directory): the run goes on without the cache."""
    if not enabled():
        return None
    try:
        return folder(tag, sources, salt) / (hashlib.sha256(key.encode()).hexdigest()[:32] + suffix)
    except (OSError, RuntimeError, KeyError):
        return None


def arrays(tag: str, sources, key: str, make, want: dict, salt: str = "") -> dict:
    """``make()``'s dict of NumPy arrays, read from the cache when a file of ``key`` holds exactly
    the arrays of ``want`` (``{name: (shape, dtype)}``; module docstring), else made and written."""
    path = entry(tag, sources, key, ".arrays", salt)
    if path is not None:
        got = read(path, load_arrays)
        if got is not None and set(got) == set(want) and all(
                got[k].shape == tuple(shape) and got[k].dtype == np.dtype(dtype) for k, (shape, dtype) in want.items()):
            return got
    made = make()
    if path is not None:
        write(path, lambda f: save_arrays(f, made))
    return made


def save_arrays(f, named: dict) -> None:
    """``named`` (``{name: array}``) into the file ``f``: the names (an array of str), then each
    array in NumPy's format (module docstring); ``load_arrays`` reads it back."""
    np.lib.format.write_array(f, np.array(list(named), dtype=str), allow_pickle=False)
    for value in named.values():
        np.lib.format.write_array(f, np.asarray(value), allow_pickle=False)


def load_arrays(f) -> dict:
    """``{name: array}`` of a file ``save_arrays`` wrote; a torn one raises (``read`` then deletes it)."""
    names = np.lib.format.read_array(f, allow_pickle=False)
    return {str(n): np.lib.format.read_array(f, allow_pickle=False) for n in names.tolist()}


def read(path: Path, load):
    """``load(file)`` of ``path``, or None where it is missing or does not load (then deleted)."""
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


def write(path: Path, save) -> None:
    """``save(file)`` into ``path`` whole or not at all (module docstring, Failure), then prune."""
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
    (``EQUIV_CACHE_MAX_MB``, default 4096) MiB, over every op's folders."""
    if limit_mb is None:
        try:
            limit_mb = float(os.environ.get("EQUIV_CACHE_MAX_MB", DEFAULT_MAX_MB))
        except ValueError:
            limit_mb = DEFAULT_MAX_MB
    files = []
    try:
        for d in root().iterdir():
            if d.is_dir() and _FOLDER.match(d.name):
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
