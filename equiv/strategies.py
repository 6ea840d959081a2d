"""Hypothesis strategies for a user's own ``@given`` tests: equiv's input recipes and raw logits.

    from hypothesis import given
    import equiv, equiv.strategies as es

    @given(es.recipes(dtypes=("bfloat16",), max_vocab=32000))
    def test_my_kernel(recipe):
        equiv.assert_equivalent("my_engine.sampling:fast_topk", recipe)

``recipes(families, dtypes, *, max_vocab, min_vocab, max_batch, ...)`` draws an ``equiv.Recipe``
(full-size rows are cheap, and a failure shrinks to the smallest recipe that still fails);
``raw_logits(*, max_vocab=40, ...)`` draws small float32 arrays element by element (specials
included); ``vocabs``, ``elements``, ``exact_shifts`` and ``permutations`` are the pieces the
property suite builds on. They live in the ``strategies`` module of the registry's default op; this
module is their public name. Importing it imports Hypothesis.
"""
import importlib as _importlib

from equiv.ops import DEFAULT_OP as _DEFAULT_OP

__all__ = ["VOCABS", "elements", "exact_shifts", "permutations", "raw_logits", "recipes", "vocabs"]

_impl = _importlib.import_module(f"equiv.ops.{_DEFAULT_OP}.strategies")
VOCABS, elements, exact_shifts, permutations, raw_logits, recipes, vocabs = (getattr(_impl, n) for n in __all__)
