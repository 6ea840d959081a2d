"""Tree verifiers loaded by spec (so they run in the supervised worker): a correct one and one
whose answer is not a path of the tree it was given."""
import torch

from equiv.ops.verify_tree.paths import target_only


def correct(parents, draft_token_ids, draft_probs, target_probs, generator):
    return target_only(parents, draft_token_ids, draft_probs, target_probs, generator)


def jumps_to_a_grandchild(parents, draft_token_ids, draft_probs, target_probs, generator):
    """Accepts node 0 then the last node of the tree (a grandchild at best, never a child of the
    root when the tree is deeper than one level): not a chain of children."""
    path, out = target_only(parents, draft_token_ids, draft_probs, target_probs, generator)
    path = path.clone()
    path[:, 1] = parents.shape[1] - 1
    return path, out
