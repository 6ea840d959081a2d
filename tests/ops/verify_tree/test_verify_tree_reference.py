"""The tree verifier's reference (reference/verify_tree.py) and recipes, checked by enumeration.

Test plan: the tree helpers reject malformed trees; ``sequence_law`` is a law (sums to 1) and is
the product of the target's conditionals; ``optimum_accept_length`` equals, on every row of
small recipes of every construction, the expected longest tree prefix of a text drawn from the
exact sequence law (enumerated), plus one; ``greedy_text`` follows the argmax; the recipes'
targets depend on the whole path (a node's row differs from its parent's and siblings').
"""
import numpy as np
import pytest

from equiv.ops.verify_tree.judge import _target_fn, optimum
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.reference import verify_tree as ref


def test_tree_nodes_rejects_malformed_trees():
    assert ref.tree_nodes([0, 0])[3] is not None
    assert "parent 2" in ref.tree_nodes([-1, 2, 0])[3]
    assert "absent" in ref.tree_nodes([-1, -2, 1])[3]
    present, depth, children, problem = ref.tree_nodes([-1, 0, 0, 1, -2])
    assert problem is None and present == [0, 1, 2, 3] and depth[3] == 2 and children[0] == [1, 2]


def test_sequence_law_is_the_product_of_conditionals():
    r = TreeRecipe.parse("flat:batch=1,vocab=3,nodes=3,depth=2,fanout=2")
    target = _target_fn(r.model())
    law = ref.sequence_law(target, 1, 3, 3)
    assert abs(law.sum() - 1) < 1e-12
    y = (2, 0, 1)
    want = target((1,))[2] * target((1, 2))[0] * target((1, 2, 0))[1]
    assert abs(law[y] - want) < 1e-15


@pytest.mark.parametrize("drafts", ["topk", "iid", "wor"])
def test_optimum_is_the_expected_longest_tree_prefix(drafts):
    r = TreeRecipe.parse(f"flat:batch=12,vocab=3,nodes=7,depth=3,fanout=2,drafts={drafts},ragged=1")
    t, m = r.trees(), r.model()
    target = _target_fn(m)
    L = t.max_depth + 1
    for b in range(r.batch):
        law = ref.sequence_law(target, int(t.tokens[b, 0]), 3, L)
        _, _, children, _ = ref.tree_nodes(t.parents[b])
        expected = 0.0
        for y in np.ndindex(law.shape):
            frontier, depth = [0], 0
            for tok in y:
                frontier = [c for n in frontier for c in children[n] if t.tokens[b, c] == tok]
                if not frontier:
                    break
                depth += 1
            expected += law[y] * (depth + 1)
        got = ref.optimum_accept_length(t.parents[b], t.tokens[b], m.target[t.index[b]])
        assert abs(got - expected) < 1e-12, (b, got, expected)
        assert abs(optimum(r)[b] - expected) < 1e-12


def test_greedy_text_follows_the_argmax():
    rows = np.array([[0.1, 0.9, 0.0], [0.0, 0.2, 0.8], [1.0, 0.0, 0.0], [0.3, 0.3, 0.4]])
    path, text = ref.greedy_text([-1, 0, 0, 1], [5, 0, 1, 2], rows)
    assert path == [0, 2] and text == [1, 0]


def test_targets_depend_on_the_whole_path():
    r = TreeRecipe.parse("realistic:batch=64,vocab=1024,nodes=12,depth=4,fanout=3")
    t = r.trees()
    b, i = np.nonzero(t.parents > 0)
    same_as_parent = (t.index[b, i] == t.index[b, t.parents[b, i]]).mean()
    assert same_as_parent < 0.2                                # 1/16 expected
    assert t.max_depth == 4 and (t.parents[:, 0] == -1).all()


def test_constructions_draw_children_as_declared():
    topk = TreeRecipe.parse("realistic:batch=32,vocab=64,nodes=10,depth=2,fanout=4,drafts=topk").trees()
    wor = TreeRecipe.parse("realistic:batch=32,vocab=64,nodes=10,depth=2,fanout=4,drafts=wor").trees()
    iid = TreeRecipe.parse("flat:batch=256,vocab=3,nodes=8,depth=1,fanout=4,drafts=iid").trees()
    assert not topk.duplicates.any() and not wor.duplicates.any() and iid.duplicates.any()
    m = TreeRecipe.parse("realistic:batch=32,vocab=64,nodes=10,depth=2,fanout=4").model()
    kids = topk.children[0, 0]
    kids = kids[kids >= 0]
    assert list(topk.tokens[0, kids]) == list(m.draft_order[topk.index[0, 0], :len(kids)])


def test_recipe_round_trips_and_rejects_bad_values():
    r = TreeRecipe.parse("truncated:seed=3,batch=5,vocab=33,nodes=9,depth=3,fanout=2,drafts=wor,ragged=1")
    assert TreeRecipe.parse(str(r)) == r
    with pytest.raises(ValueError, match="drafts"):
        TreeRecipe.parse("realistic:drafts=beam")
