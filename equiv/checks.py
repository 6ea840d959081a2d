"""A list of checks that a test can query by name: ``"value" in result.failed_checks``.

``NamedChecks`` is a tuple of check objects (anything with a ``.name``); ``in`` accepts a name
as well as a check, ``checks["value"]`` returns the check of that name, ``.names`` lists them.
"""
from __future__ import annotations


class NamedChecks(tuple):
    @property
    def names(self) -> tuple:
        return tuple(c.name for c in self)

    def __contains__(self, item) -> bool:
        if isinstance(item, str):
            return item in self.names
        return tuple.__contains__(self, item)

    def __getitem__(self, key):
        if isinstance(key, str):
            for c in self:
                if c.name == key:
                    return c
            raise KeyError(f"no check named {key!r} here; the names are {', '.join(self.names) or 'none'}")
        return tuple.__getitem__(self, key)
