"""Judgments as data: a verdict's checks and stages, and a list of checks queried by name.

``Check`` is one judgment of a verdict (a gate stage's test, a tolerance recipe, an MTP
consumer): its name, pass or fail, the evidence as text for people, and as data for diagnosis
(``outcome``: how the candidate's call ended when it did not answer, the ``CallOutcome.kind`` of
``equiv.run``, so that no reader has to parse the wording). ``Stage`` is one stage of a gate run,
with what ran. ``NamedChecks`` is a tuple of check objects (anything with a ``.name``); ``in``
accepts a name as well as a check, ``checks["value"]`` returns the check of that name, ``.names``
lists them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


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


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    counterexample: str | None = None
    repro: str | None = None
    duration_s: float = 0.0
    outcome: str | None = None       # the CallOutcome.kind of a call that did not answer (timeout, exit, ...)
    recipe: str | None = None        # the input that failed, as a recipe (a tolerance check's)
    parts: tuple = ()                # the comparison's failed stages (contract, index, value, ...)
    cause: str | None = None         # what broke the contract: format, oov or the CallOutcome.kind

    def to_json(self) -> dict:
        d = asdict(self)
        for key in ("outcome", "recipe", "parts", "cause"):
            if not d[key]:
                d.pop(key)
        if "parts" in d:
            d["parts"] = list(d["parts"])
        if self.passed:
            d.pop("counterexample")
            d.pop("repro")
        return d


@dataclass(frozen=True)
class Stage:
    """One stage of a gate run: ``status`` is ``pass``, ``FAIL``, ``not applicable`` or ``not run``;
    ``ran`` says what ran (calls, examples, shapes, dtypes, k), ``why`` the reason when it did not."""

    name: str
    status: str
    passed: int = 0
    total: int = 0
    why: str = ""
    ran: dict = field(default_factory=dict)
    seconds: float = 0.0                        # its wall time (where a slow gate spends it)

    @property
    def effective(self) -> bool:
        return self.status in ("pass", "FAIL") and self.total > 0

    def to_json(self) -> dict:
        return asdict(self)


def stage_of(name: str, checks: list[Check], ran: dict | None = None, why: str = "") -> Stage:
    n_pass = sum(c.passed for c in checks)
    return Stage(name, "pass" if n_pass == len(checks) else "FAIL", n_pass, len(checks), why, ran or {})
