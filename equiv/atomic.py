"""Output files: checked before any work, written whole or not at all, never a device replaced.

Plan
----
- ``check_outputs({flag: path})`` runs before a command does any work and refuses, with one
  line naming the flag and the fix (``InvalidArgument``, exit 2): an empty name, a directory, a
  missing folder, a place where nothing can be written (the check creates and removes a probe
  file there: the only test that also holds for root, read-only mounts and ``/proc``), a
  read-only file, and two outputs naming one file. ``-`` means standard output.
- ``atomic_write(path, data)`` replaces only regular files (and creates absent ones): the data
  goes to a temporary file in the destination's folder (same file system), is flushed and
  fsync'ed, then ``os.replace``d over the destination, so a reader, a crash or a signal sees the
  old file or the whole new one. A failure or an interrupt midway removes the temporary file.
  A symbolic link keeps pointing where it did (its target is replaced).
- A target that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO, a
  terminal) is opened and written directly, never replaced: replacing ``/dev/null`` with a
  regular file would break every later user of the machine.
- ``write_json(path, doc)`` is the one JSON writer of the CLI and the plugins: it adds
  ``equiv_version`` and cleans every string (``equiv.sanitize``).
"""
from __future__ import annotations

import json
import os
import stat
import sys
import tempfile

from equiv.errors import InvalidArgument, OutputError
from equiv._version import __version__
from equiv.sanitize import clean_data

STDOUT = "-"


def _is_special(path: str) -> bool:
    """True for an existing target that is not a regular file (a device, a FIFO, a socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_writable(flag: str, path) -> str:
    """``path`` (or ``-``) if an output can be written there, else ``InvalidArgument``."""
    text = os.fspath(path) if path is not None else ""
    if not str(text).strip():
        raise InvalidArgument(f"{flag}={text!r} is invalid: give a file name (or - for standard output)")
    if text == STDOUT:
        return text
    if os.path.isdir(text):
        raise InvalidArgument(f"{flag}={text!r} is a directory: give a file name")
    if _is_special(text):
        if not os.access(text, os.W_OK):
            raise InvalidArgument(f"{flag}={text!r} is not writable: choose another output")
        return text
    folder = os.path.dirname(os.path.abspath(os.path.realpath(text)))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{flag}={text!r}: folder {folder!r} does not exist; create it first")
    if os.path.exists(text) and not os.access(text, os.W_OK):
        raise InvalidArgument(f"{flag}={text!r} is read-only: make it writable or choose another name")
    try:
        fd, probe = tempfile.mkstemp(prefix=".equiv-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InvalidArgument(f"{flag}={text!r}: cannot write in folder {folder!r} "
                              f"({exc.strerror or type(exc).__name__}): choose a writable place") from None
    return text


def _identity(path: str):
    if path == STDOUT:
        return STDOUT
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return os.path.realpath(path)


def check_outputs(outputs: dict) -> None:
    """Check every ``{flag: path}`` whose path is not None (see the module docstring)."""
    seen: dict = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        text = check_writable(flag, path)
        key = _identity(text)
        if key in seen:
            raise InvalidArgument(f"{flag}={text!r} names the same output as {seen[key]}: give each "
                                  f"output its own file")
        seen[key] = f"{flag}={text!r}"


def atomic_write(path, data, mode: str = "w") -> str:
    """Write ``data`` (str, or bytes with ``mode='wb'``) to ``path``; returns the path.

    An ``OSError`` (a full disk, a folder removed meanwhile) becomes one ``OutputError``."""
    path = os.fspath(path)
    try:
        return _write(path, data, mode)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(f"could not write {path!r}: {exc.strerror or exc}") from None


def _write(path: str, data, mode: str) -> str:
    if path == STDOUT:
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        stream.write(data)
        stream.flush()
        return path
    if _is_special(path):
        with open(path, mode) as f:
            f.write(data)
        return path
    path = os.path.realpath(path)                # a link keeps pointing where it did
    folder = os.path.dirname(path)
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


def json_text(doc) -> str:
    """The JSON text equiv writes: ``equiv_version`` first, clean strings, two-space indent."""
    if isinstance(doc, dict) and "equiv_version" not in doc:
        doc = {"equiv_version": __version__, **doc}
    return json.dumps(clean_data(doc), indent=2, default=str) + "\n"


def write_json(path, doc) -> str:
    return atomic_write(path, json_text(doc))
