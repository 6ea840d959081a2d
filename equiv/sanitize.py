"""Text that reaches a console, a JSON file or a JUnit file, made safe to write and to read.

Candidates are untrusted: an exception message may hold ANSI escapes (which rewrite a terminal
or a CI log), NUL and other control characters (which XML 1.0 forbids even escaped, so one of
them makes a JUnit file unreadable), or lone surrogates (which no UTF-8 encoder accepts, so
printing one raises ``UnicodeEncodeError`` and writes nothing). ``clean_text`` escapes every
control character except newline and tab as ``\\xNN`` (visible, and one meaning), and replaces
each lone surrogate and the two XML non-characters U+FFFE/U+FFFF with U+FFFD.
``clean_data`` applies it to every string of a JSON-like structure, keys included.
"""
from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNENCODABLE = re.compile("[\ud800-\udfff\ufffe\uffff]")


def clean_text(text) -> str:
    """``text`` with control characters escaped and lone surrogates replaced (see above)."""
    text = _UNENCODABLE.sub("\ufffd", str(text))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean_data(obj):
    """A copy of a JSON-like structure (dict, list, tuple, str, numbers) with clean strings."""
    if isinstance(obj, str):
        return clean_text(obj)
    if isinstance(obj, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_data(v) for v in obj]
    return obj
