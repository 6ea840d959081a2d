"""The string form of an input recipe: ``family:key=value,...``, what ``REPRO:`` lines carry.

A recipe is a frozen dataclass whose first field is ``family``. ``recipe_str`` writes the family,
the fields named in ``always`` and every other field that differs from its default;
``recipe_parse`` reads that back (every key optional), converting each value by its field's
annotation, and says which keys exist when an item is malformed.
"""
from __future__ import annotations

from dataclasses import fields

from equiv.errors import InvalidArgument


def recipe_str(recipe, always=()) -> str:
    defaults = type(recipe)()
    parts = [f"{f.name}={getattr(recipe, f.name)}" for f in fields(recipe)
             if f.name != "family" and (f.name in always or getattr(recipe, f.name) != getattr(defaults, f.name))]
    return f"{recipe.family}:" + ",".join(parts)


def recipe_parse(cls, text: str, *, what: str = "recipe"):
    text = str(text).strip()
    family, _, rest = text.partition(":")
    kwargs: dict = {"family": family.strip() or cls().family}
    types = {f.name: f.type for f in fields(cls)}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in types or key == "family":
            raise InvalidArgument(f"{what} item {item!r} in {text!r} is invalid: write key=value with key one "
                                  f"of {', '.join(n for n in types if n != 'family')}")
        conv = {"int": int, "float": float}.get(str(types[key]), str)
        try:
            kwargs[key] = conv(value.strip())
        except ValueError:
            raise InvalidArgument(f"{what} item {item!r}: {key} must be {types[key]}, got {value!r}") from None
    return cls(**kwargs)
