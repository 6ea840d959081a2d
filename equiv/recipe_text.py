"""One recipe grammar for every op: ``family:key=value,...``, what ``REPRO:`` lines carry.

Plan. An op's recipe is a frozen dataclass that subclasses ``RecipeText`` and declares only its
fields, ``family`` first, each with its default and its bounds: ``choice(default, options)``,
``integer(default, min=, max=)``, ``real(default, min=, exclusive_min=)`` (a bound may be a
function of the recipe, for a bound that depends on another field), and two class attributes:
``ALWAYS`` (the fields ``str`` writes even at their default) and ``WHAT`` (how an error names the
recipe). ``RecipeText`` gives it the rest, the same for every op:
- ``__post_init__``: every field checked in order; a bad value is one ``InvalidArgument`` line
  naming the value and the fix (``equiv.validation``);
- ``str(recipe)``: the family, the ``ALWAYS`` fields and every other field that differs from its
  default; ``Recipe.parse(text)`` reads it back (every key optional), converting each value by
  its field's type; a malformed item is one line naming the item and saying what to write;
- ``with_(**changes)`` and the one-line form Hypothesis prints a failing example with.
"""
from __future__ import annotations

import difflib
from dataclasses import field, fields, replace

from equiv.errors import InvalidArgument
from equiv.validation import check_choice, check_float, check_int

_KINDS = {"int": (int, "an integer"), "float": (float, "a number"), "str": (str, "a word")}


def _bound(value, recipe):
    return value(recipe) if callable(value) else value


def choice(default: str, options):
    """A field whose value is one of ``options`` (or ``options(recipe)``)."""
    return field(default=default, metadata={
        "check": lambda name, value, r: check_choice(name, value, _bound(options, r))})


def integer(default: int, *, min=None, max=None):
    """An integer field within ``[min, max]`` (either one absent, or a function of the recipe)."""
    return field(default=default, metadata={
        "check": lambda name, value, r: check_int(name, value, min_value=_bound(min, r),
                                                  max_value=_bound(max, r))})


def real(default: float, *, min=None, exclusive_min: bool = False):
    """A number field, not NaN, ``>= min`` (``> min`` with ``exclusive_min``)."""
    return field(default=default, metadata={
        "check": lambda name, value, r: check_float(name, value, min_value=_bound(min, r),
                                                    exclusive_min=exclusive_min)})


class RecipeText:
    """The grammar every op's recipe shares (module docstring); a subclass declares its fields."""

    ALWAYS: tuple = ("seed",)
    WHAT = "recipe"

    def __post_init__(self):
        for f in fields(self):
            check = f.metadata.get("check")
            if check is not None:
                check(f.name, getattr(self, f.name), self)

    def __str__(self) -> str:
        return recipe_str(self, self.ALWAYS)

    @classmethod
    def parse(cls, text: str):
        """Inverse of ``str``: ``family:key=value,...`` (every key optional)."""
        return recipe_parse(cls, text, what=cls.WHAT)

    def with_(self, **changes):
        return replace(self, **changes)

    def _repr_pretty_(self, printer, cycle):
        # Hypothesis prints failing examples with this: one replayable line, not a dozen fields.
        printer.text(f"{type(self).__name__}.parse({str(self)!r})")


def recipe_str(recipe, always=()) -> str:
    """The family, the fields in ``always`` and every other field that differs from its default."""
    defaults = type(recipe)()
    parts = [f"{f.name}={getattr(recipe, f.name)}" for f in fields(recipe) if f.name != "family" and (
        f.name in always or getattr(recipe, f.name) != getattr(defaults, f.name))]
    return f"{recipe.family}:" + ",".join(parts)


def recipe_parse(cls, text: str, *, what: str = "recipe"):
    """``cls`` from ``family:key=value,...`` (every key optional), each value converted by its
    field's type; a malformed item is one line naming it and what to write."""
    text = str(text).strip()
    family, _, rest = text.partition(":")
    keys = {f.name: getattr(f.type, "__name__", str(f.type)) for f in fields(cls) if f.name != "family"}
    kwargs: dict = {"family": family.strip() or cls().family}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in keys:
            near = difflib.get_close_matches(key, list(keys), n=1) if eq else []
            hint = f"did you mean {near[0]}={value}? " if near else ""
            raise InvalidArgument(f"{what} item {item!r} in {text!r} is invalid: {hint}write key=value "
                                  f"with key one of {', '.join(keys)}")
        convert, kind = _KINDS.get(keys[key], _KINDS["str"])
        try:
            kwargs[key] = convert(value)
        except ValueError:
            raise InvalidArgument(f"{what} item {item!r} in {text!r} is invalid: {key} must be {kind}, "
                                  f"e.g. {key}={getattr(cls(), key)}") from None
    return cls(**kwargs)
