"""What the command line prints, and how: one ``Console`` per command.

Plan
----
- ``out(text)``: the command's result on standard output (or on standard error when the JSON
  goes to standard output, ``--json -``, so that stdout stays parseable). Every line is cleaned
  (``equiv.sanitize``: a candidate's message may hold escapes or lone surrogates). A reader that
  closes the pipe early (``equiv check ... | head -3``) ends the output quietly: the rest of
  stdout goes to ``os.devnull`` and the command still finishes its work (its files, its exit code).
- ``note(text)``: remarks on standard error, silenced by ``-q``.
- ``progress(desc)``: a tqdm bar on standard error for work that can run past a few seconds;
  off when standard error is not a terminal or with ``-q``. It is called as the library's
  ``progress(done, total, label)`` callbacks are.
- Verbosity: ``-q`` is -1, default 0, ``-v`` 1 (commands show more of each failure).
"""
from __future__ import annotations

import os
import sys

from tqdm import tqdm

from equiv.sanitize import clean_text


class Console:
    def __init__(self, verbosity: int = 0, *, json_to_stdout: bool = False):
        self.verbosity = verbosity
        self.json_to_stdout = json_to_stdout
        self.pipe_closed = False

    @property
    def quiet(self) -> bool:
        return self.verbosity < 0

    @property
    def verbose(self) -> bool:
        return self.verbosity > 0

    def _write(self, stream, text: str) -> None:
        try:
            stream.write(clean_text(text) + "\n")
            stream.flush()
        except BrokenPipeError:
            self.close_stdout()

    def close_stdout(self) -> None:
        """The reader went away: point stdout at /dev/null so that no later write (nor the
        interpreter's own flush at exit) raises again."""
        self.pipe_closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)

    def out(self, text: str) -> None:
        self._write(sys.stderr if self.json_to_stdout else sys.stdout, text)

    def note(self, text: str) -> None:
        if not self.quiet:
            self._write(sys.stderr, text)

    def error(self, text: str) -> None:
        self._write(sys.stderr, text)

    def progress(self, desc: str, unit: str = "it") -> "Progress":
        live = not self.quiet and _is_terminal(sys.stderr)
        return Progress(desc, unit, live)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A tqdm bar fed by ``(done, total, label)`` calls; a no-op when not live."""

    def __init__(self, desc: str, unit: str, live: bool):
        self.desc, self.unit, self.live = desc, unit, live
        self.bar = None

    def __call__(self, done: int, total: int | None = None, label: str = "") -> None:
        if not self.live:
            return
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, file=sys.stderr,
                            leave=False, dynamic_ncols=True)
        if total is not None and self.bar.total != total:
            self.bar.total = total
        self.bar.n = done
        self.bar.set_postfix_str(clean_text(str(label))[:40], refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
