"""The property suite: Hypothesis over equiv's input recipes, metamorphic relations, a mutant zoo.

Run it against every built-in path (``python -m pytest properties``) or against one candidate
from any directory (``python -m pytest --pyargs equiv.properties --equiv-candidate SPEC``). The test
plan is the docstring of each ``test_*.py``; ``subjects`` says what is judged, ``strategies``
what inputs are drawn, ``relations`` what the metamorphic properties compare, ``runner`` how a
property runs and reports (the ledger of accepted failures of built-in paths is ``equiv.ops.draft_topk.ledger``).
"""
