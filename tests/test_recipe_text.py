"""One recipe grammar for every op (``equiv.recipe_text``).

Plan: for each registered op, its default recipe reads back to itself; a misspelt key, a value of
the wrong type and an item without ``=`` are each one ``InvalidArgument`` line that names the item
and says what to write; every op's recipe class is a ``RecipeText`` that declares only fields.
"""
import dataclasses

import pytest

from equiv.errors import InvalidArgument
from equiv.ops import OP_NAMES, get_op
from equiv.recipe_text import RecipeText, choice, integer


@pytest.mark.parametrize("op", OP_NAMES)
def test_every_op_reads_its_own_recipe_text_back(op):
    recipe = get_op(op).parse_recipe(get_op(op).default_recipe)
    assert isinstance(recipe, RecipeText)
    assert type(recipe).parse(str(recipe)) == recipe


@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("item, says", [("sed=1", "did you mean seed=1?"), ("seed=x", "seed must be an integer, e.g. seed="),
                                        ("seed", "write key=value with key one of seed")])
def test_a_bad_item_is_one_line_naming_it_and_the_fix(op, item, says):
    family = get_op(op).default_recipe.partition(":")[0]
    with pytest.raises(InvalidArgument) as err:
        get_op(op).parse_recipe(f"{family}:{item}")
    message = str(err.value)
    assert "\n" not in message and f"item {item!r}" in message and says in message, message


def test_a_recipe_declares_fields_and_gets_the_grammar():
    @dataclasses.dataclass(frozen=True)
    class Toy(RecipeText):
        ALWAYS = ("seed",)
        WHAT = "toy recipe"
        family: str = choice("plain", ("plain", "odd"))
        seed: int = integer(0, min=0)
        size: int = integer(4, min=1, max=lambda r: 8 if r.family == "plain" else 3)

    assert str(Toy(size=5)) == "plain:seed=0,size=5" and Toy.parse("odd:size=2") == Toy("odd", 0, 2)
    with pytest.raises(InvalidArgument, match="size=5 is invalid: size must be <= 3"):
        Toy.parse("odd:size=5")                        # a bound that depends on another field
    with pytest.raises(InvalidArgument, match="family='even' is unknown"):
        Toy.parse("even:seed=1")
    with pytest.raises(InvalidArgument, match="toy recipe item 'colour=red'"):
        Toy.parse("plain:colour=red")
