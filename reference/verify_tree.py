"""Exact laws of a tree verifier's emitted text (NumPy only, float64; imports nothing of equiv).

Plan. A tree verifier reads a draft tree -- ``parents[i]`` (node 0 the root, ``-1``; absent nodes
``-2``), each node's token, and for each node ``i`` the target law ``p_i`` of the token *after*
the path to ``i`` -- and emits the accepted drafts along one root path, then exactly one drawn
token. What users rely on is *losslessness*: with a target ``T`` that maps every prefix to a law
over the vocabulary, the emitted text, continued with fresh draws from ``T`` to a fixed length
``L``, is a draw of ``T``'s sequence law ``T(y_0 | r) T(y_1 | r y_0) ... T(y_{L-1} | r y_<L-1)``
whatever tree was drafted (for any fixed tree; for a random tree, on average over the drafts when
the verifier's construction matches how the tree was drawn). This module states the laws a judge
compares against and computes them by enumeration, never by running a verifier's algorithm:

- ``tree_nodes``: the present nodes, each node's depth and its children in node order; a problem
  with the tree (a parent not before its child, an absent parent) is returned as text;
- ``sequence_law(target, root, V, L)``: the exact law of the continued text, every one of the
  ``V**L`` sequences enumerated (small V only), ``target(prefix) -> [V]`` the target law;
- ``greedy_text``: on one-hot targets (temperature 0) the text is deterministic: follow the child
  whose token is the target's argmax while there is one, then the argmax;
- ``optimum_accept_length``: the expected accepted length (accepted drafts + 1) of the best
  lossless verifier on a fixed tree: ``1 + sum`` over the distinct token prefixes of the tree (a
  trie: duplicate siblings count once) of the target probability of that prefix, the product of
  ``p`` along the path. No lossless verifier accepts more on average: an accepted draft is text,
  and text has the target's law.
"""
from __future__ import annotations

import itertools

import numpy as np

ABSENT = -2
ROOT_PARENT = -1


def tree_nodes(parents):
    """``(present, depth, children, problem)`` of one row of ``parents`` ([N] integers):
    ``present`` the node indices, ``depth[i]`` (-1 for absent nodes), ``children[i]`` a list of
    child indices in node order, ``problem`` one line of text or None."""
    parents = [int(v) for v in np.asarray(parents).tolist()]
    n = len(parents)
    depth = [-1] * n
    children = [[] for _ in range(n)]
    if n == 0 or parents[0] != ROOT_PARENT:
        return [], depth, children, "node 0 must be the root (parents[0] = -1)"
    depth[0] = 0
    for i in range(1, n):
        p = parents[i]
        if p == ABSENT:
            continue
        if not 0 <= p < i:
            return [], depth, children, f"node {i} has parent {p}: a parent is a node before it, or -2 (absent)"
        if depth[p] < 0:
            return [], depth, children, f"node {i} has parent {p}, which is absent"
        depth[i] = depth[p] + 1
        children[p].append(i)
    return [i for i in range(n) if depth[i] >= 0], depth, children, None


def normalised(law) -> np.ndarray:
    law = np.asarray(law, dtype=np.float64)
    total = law.sum()
    if not total > 0:
        raise ValueError("a target law must have positive mass")
    return law / total


def sequence_law(target, root: int, vocab: int, length: int) -> np.ndarray:
    """``[V] * length`` array: the probability of every text ``y_0 .. y_{L-1}`` after ``root``
    under ``target(prefix_tuple) -> [V]`` (prefix starts with the root token)."""
    if vocab ** length > 2 ** 22:
        raise ValueError(f"V**L = {vocab}**{length} sequences is too many to enumerate")
    law = np.zeros((vocab,) * length)
    for seq in itertools.product(range(vocab), repeat=length - 1):
        prob, prefix = 1.0, (int(root),)
        for y in seq:
            prob *= normalised(target(prefix))[y]
            prefix = prefix + (y,)
            if prob == 0.0:
                break
        if prob > 0.0:
            law[seq] = prob * normalised(target(prefix))
    return law


def greedy_text(parents, tokens, target_rows):
    """One-hot targets: ``(path, text)`` of greedy decoding through the tree: from the root, the
    first child whose token is the argmax of its node's target row, while there is one; then the
    argmax. ``target_rows[i]`` is node i's target law."""
    _, _, children, problem = tree_nodes(parents)
    if problem:
        raise ValueError(problem)
    node, path, text = 0, [0], []
    while True:
        best = int(np.argmax(np.asarray(target_rows[node], dtype=np.float64)))
        nxt = next((c for c in children[node] if int(tokens[c]) == best), None)
        text.append(best)
        if nxt is None:
            return path, text
        path.append(nxt)
        node = nxt


def optimum_accept_length(parents, tokens, target_rows) -> float:
    """The best lossless verifier's expected accept length on this fixed tree (module docstring)."""
    _, _, children, problem = tree_nodes(parents)
    if problem:
        raise ValueError(problem)
    total = 1.0
    stack = [((0,), 1.0)]
    while stack:
        group, reach = stack.pop()                  # nodes of one trie prefix (duplicates merged)
        law = normalised(target_rows[group[0]])     # duplicates share a prefix, so a law
        by_token: dict = {}
        for g in group:
            for c in children[g]:
                by_token.setdefault(int(tokens[c]), []).append(c)
        for tok, nodes in by_token.items():
            r = reach * law[tok]
            if r > 0.0:
                total += r
                stack.append((tuple(nodes), r))
    return total


def emitted_support(parents, tokens, target_rows, path, text) -> str | None:
    """A problem (text) when the emitted ``text`` holds a token of target probability 0 at its
    place on ``path``, else None; ``path`` the accepted nodes from the root."""
    for j, tok in enumerate(text):
        node = path[j] if j < len(path) else None
        if node is None:
            return None
        if not np.asarray(target_rows[node], dtype=np.float64)[int(tok)] > 0.0:
            return f"position {j} emitted token {int(tok)} whose target probability after node {node} is 0"
    return None
