"""Write output files atomically: a reader sees the old file or the whole new one, never half.

The text goes to a temporary file in the destination's folder (same file system), is flushed and
fsync'ed, then ``os.replace``d over the destination. A failure midway removes the temporary file
and leaves any previous output untouched.
"""
from __future__ import annotations

import os
import tempfile

from equiv.errors import InvalidArgument


def atomic_write(path, data, mode: str = "w") -> str:
    """Write ``data`` (str, or bytes with ``mode='wb'``) to ``path`` atomically; returns the path."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"output file {path!r}: folder {folder!r} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=".equiv-", suffix=".tmp", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)            # mkstemp's 0600 would surprise a CI artifact reader
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
