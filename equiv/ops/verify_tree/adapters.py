"""Adapters: engines' tree layouts to and from equiv's, so an engine's kernel is judged as it ships.

Plan. equiv's layout is ``parents [B, N]`` (node 0 the root, -2 absent), ``draft_token_ids
[B, N]`` (node 0's token is the last committed one) and per-node laws; the result is
``(accepted_path [B, D+1], output_token_ids [B, D+1])``.

*SGLang* (EAGLE tree, ``--speculative-eagle-topk > 1``): the tree of each row as linked lists --
``retrive_next_token[b, i]`` the first child of node ``i`` and ``retrive_next_sibling[b, i]`` the
next sibling (-1 none), ``retrive_index[b, i] = b * N + i`` the node's flat index and
``candidates[b, i]`` its token; the verifier fills ``predicts`` (flat ``[B * N]``: the token
emitted *after* each accepted node), ``accept_index [B, D+1]`` (flat indices of the root and the
accepted nodes, -1 after) and ``accept_token_num [B]`` (accepted drafts), from coins
``uniform_samples [B, N]`` (one per node it stands at) and ``uniform_samples_for_final_sampling
[B]``. Its kernel writes into ``draft_probs`` (the law it draws the last token from is built
there), so the adapter hands it a scratch copy: the inputs stay unchanged.
``sglang_verifier(kernel)`` wraps a kernel of that signature (``SGLANG_KERNEL_ARGS``);
``sglang_target_only_kernel`` is one written here in that layout (the target-only rule, both
thresholds 1), and ``sglang_target_only`` the two together: a tree verifier the gate judges.

*vLLM* (tree drafting with a tree-attention backend): one static tree for the batch, given as
the list of its non-root nodes, each the tuple of child ranks on its path (``(0,), (1,), (0, 0)``:
the first two children of the root and the first child of the first); draft tokens ``[B, n]`` in
that order, target laws ``[B, n + 1, V]`` (the root first); the sampler returns
``output_token_ids [B, D+1]`` (accepted drafts, one drawn token, -1 after). ``vllm_verifier``
wraps such a sampler (rows of equal shape are called together; the accepted path is recovered
from the tokens, the first matching child); ``vllm_eagle_onehot`` wraps the built-in
``eagle_onehot`` run on the tree rebuilt from the tuples.
"""
from __future__ import annotations

import numpy as np
import torch

from equiv.ops.verify_tree import paths as P

SGLANG_KERNEL_ARGS = ("predicts", "accept_index", "accept_token_num", "candidates", "retrive_index",
                      "retrive_next_token", "retrive_next_sibling", "uniform_samples",
                      "uniform_samples_for_final_sampling", "target_probs", "draft_probs",
                      "threshold_single", "threshold_acc")


def to_sglang(parents):
    """``(retrive_index, retrive_next_token, retrive_next_sibling)`` [B, N] int64 of ``parents``."""
    B, N = parents.shape
    children, F, D = P.tree_layout(parents)
    rows = torch.arange(B, device=parents.device)
    first = children[:, :, 0]
    nxt = torch.full((B, N), -1, dtype=torch.int64, device=parents.device)
    for s in range(F - 1):
        kid, sib = children[:, :, s], children[:, :, s + 1]
        b, i = torch.nonzero(kid >= 0, as_tuple=True)
        nxt[b, kid[b, i]] = sib[b, i]
    index = rows[:, None] * N + torch.arange(N, device=parents.device)
    return index, first, nxt


def from_sglang(accept_index, accept_token_num, predicts, N, D):
    """``(accepted_path, output_token_ids)`` [B, D+1] from SGLang's outputs."""
    B = accept_index.shape[0]
    path = torch.full((B, D + 1), -1, dtype=torch.int64, device=accept_index.device)
    out = torch.full((B, D + 1), -1, dtype=torch.int64, device=accept_index.device)
    k = accept_token_num.long()
    for j in range(D + 1):
        at = j <= k
        flat = accept_index[:, j].clamp(min=0)
        path[:, j] = torch.where(at, flat % N, path[:, j])
        out[:, j] = torch.where(at, predicts[flat], out[:, j])
    return path, out


def sglang_verifier(kernel):
    """A tree verifier that calls ``kernel`` (SGLang's layout) on scratch copies."""
    def verifier(parents, draft_token_ids, draft_probs, target_probs, generator):
        B, N, V = target_probs.shape
        dev = target_probs.device
        index, first, nxt = to_sglang(parents)
        _, _, D = P.tree_layout(parents)
        predicts = torch.full((B * N,), -1, dtype=torch.int64, device=dev)
        accept_index = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
        accept_token_num = torch.zeros(B, dtype=torch.int64, device=dev)
        coins = torch.rand(B, N, generator=generator, device=dev)
        final = torch.rand(B, generator=generator, device=dev)
        scratch = torch.zeros_like(target_probs) if draft_probs is None else draft_probs.clone()
        kernel(predicts, accept_index, accept_token_num, draft_token_ids.clone(), index, first, nxt, coins,
               final, target_probs, scratch, 1.0, 1.0)
        return from_sglang(accept_index, accept_token_num, predicts, N, D)
    return verifier


def sglang_target_only_kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
                              retrive_next_token, retrive_next_sibling, uniform_samples,
                              uniform_samples_for_final_sampling, target_probs, draft_probs,
                              threshold_single, threshold_acc):
    """The target-only rule in SGLang's layout, one row at a time (NumPy on the host): at the
    node it stands at, one coin; children in sibling order, each accepted when the coin falls
    under the target mass of the children tried so far over ``threshold_acc``, or when its own
    mass reaches ``threshold_single``; a tried child's mass is written into ``draft_probs`` at the
    node, and the last token is drawn from ``max(0, p - draft_probs)`` with the final coin."""
    B, N, V = target_probs.shape
    cand, first, sib = (t.cpu().numpy() for t in (candidates, retrive_next_token, retrive_next_sibling))
    index = retrive_index.cpu().numpy()
    coins, final = uniform_samples.cpu().numpy(), uniform_samples_for_final_sampling.cpu().numpy()
    p_all = target_probs.cpu().numpy()
    q_all = draft_probs.cpu().numpy()
    q_all[:] = 0.0
    pred = np.full(B * N, -1, dtype=np.int64)
    acc = np.full(accept_index.shape, -1, dtype=np.int64)
    num = np.zeros(B, dtype=np.int64)
    for b in range(B):
        cur, k = 0, 0
        acc[b, 0] = index[b, 0]
        while True:
            p = p_all[b, cur].astype(np.float64)
            p = p / p.sum()
            coin, mass, child, moved = float(coins[b, cur]), 0.0, int(first[b, cur]), False
            while child != -1:
                tok = int(cand[b, child])
                single = p[tok]
                mass += single
                if coin < mass / threshold_acc or single >= threshold_single:
                    pred[index[b, cur]] = tok
                    k += 1
                    acc[b, k] = index[b, child]
                    cur, moved = child, True
                    break
                q_all[b, cur, tok] = single
                child = int(sib[b, child])
            if not moved:
                break
        p = p_all[b, cur].astype(np.float64)
        res = np.maximum(p / p.sum() - q_all[b, cur], 0.0)
        cdf = np.cumsum(res)
        last = int(np.searchsorted(cdf, cdf[-1], side="left"))
        pred[index[b, cur]] = min(int(np.searchsorted(cdf, final[b] * cdf[-1], side="right")), last)
        num[b] = k
    dev = predicts.device
    predicts.copy_(torch.from_numpy(pred).to(dev))
    accept_index.copy_(torch.from_numpy(acc).to(dev))
    accept_token_num.copy_(torch.from_numpy(num).to(dev))
    draft_probs.copy_(torch.from_numpy(q_all).to(dev))


sglang_target_only = sglang_verifier(sglang_target_only_kernel)
sglang_target_only.drafts = "topk"


def to_vllm(parents_row) -> list:
    """The non-root nodes of one row as tuples of child ranks, in node order."""
    parents_row = [int(v) for v in parents_row]
    rank, tuples = {0: ()}, []
    seen: dict = {}
    for i in range(1, len(parents_row)):
        p = parents_row[i]
        if p < 0:
            continue
        r = seen.get(p, 0)
        seen[p] = r + 1
        rank[i] = rank[p] + (r,)
        tuples.append(rank[i])
    return tuples


def from_vllm(tree: list) -> list:
    """``parents`` (a list, root first) of a tree given as vLLM's tuples."""
    where = {(): 0}
    parents = [-1]
    for i, t in enumerate(tree, start=1):
        parents.append(where[tuple(t[:-1])])
        where[tuple(t)] = i
    return parents


def vllm_verifier(sampler):
    """A tree verifier that calls ``sampler(tree, draft_token_ids [b, n], target_probs [b, n+1, V],
    draft_probs or None, generator) -> output_token_ids [b, D+1]`` once per group of rows of one
    shape (absent nodes dropped)."""
    def verifier(parents, draft_token_ids, draft_probs, target_probs, generator):
        B, N, V = target_probs.shape
        dev = target_probs.device
        children, F, D = P.tree_layout(parents)
        path = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
        out = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
        host = parents.cpu().numpy()
        groups: dict = {}
        for b in range(B):
            groups.setdefault(tuple(host[b].tolist()), []).append(b)
        for key, rows in groups.items():
            keep = torch.tensor([i for i, p in enumerate(key) if p != -2], device=dev)
            tree = to_vllm(key)
            r = torch.tensor(rows, device=dev)
            toks = draft_token_ids[r][:, keep]
            got = sampler(tree, toks[:, 1:], target_probs[r][:, keep],
                          None if draft_probs is None else draft_probs[r][:, keep], generator)
            d = got.shape[1]
            out[r, :d] = got
            # the path: from the root, the first child whose token was emitted
            kids = children[r]
            node = torch.zeros(len(rows), dtype=torch.int64, device=dev)
            path[r, 0] = 0
            alive = torch.ones(len(rows), dtype=torch.bool, device=dev)
            for j in range(d - 1):
                tok = got[:, j]
                nxt = kids[torch.arange(len(rows), device=dev), node]            # [b, F]
                hit = (nxt >= 0) & (draft_token_ids[r].gather(1, nxt.clamp(min=0)) == tok[:, None]) \
                    & (got[:, j + 1] != -1)[:, None] & alive[:, None]
                slot = P._first(hit)
                alive = slot >= 0
                node = torch.where(alive, nxt.gather(1, slot.clamp(min=0)[:, None]).squeeze(1), node)
                path[r, j + 1] = torch.where(alive, node, torch.full_like(node, -1))
        return path, out
    return verifier


def _eagle_on_tuples(tree, draft_token_ids, target_probs, draft_probs, generator):
    b = draft_token_ids.shape[0]
    parents = torch.tensor(from_vllm(tree), device=target_probs.device).expand(b, -1).contiguous()
    root = torch.zeros(b, 1, dtype=torch.int64, device=target_probs.device)
    _, out = P.eagle_onehot(parents, torch.cat([root, draft_token_ids], 1), draft_probs, target_probs, generator)
    return out


vllm_eagle_onehot = vllm_verifier(_eagle_on_tuples)
vllm_eagle_onehot.drafts = "any"


def chain_verifier(verify_fn):
    """A chain verifier of ``--op verify`` (``fn(draft_token_ids [B, n], draft_probs [B, n, V] or
    None, target_probs [B, n+1, V], generator) -> tokens [B, n+1]``) as a tree verifier of chains
    (``parents = [-1, 0, 1, ..]`` in every row): the draft tokens are the nodes 1..n, node ``j``'s
    draft row is the law token ``j+1`` was drawn from, and the path is ``[0, 1, .., k]``. A tree
    that is not one chain of ``N`` nodes raises ``ValueError`` (judge it on ``fanout=1`` recipes)."""
    def verifier(parents, draft_token_ids, draft_probs, target_probs, generator):
        B, N = parents.shape
        chain = torch.arange(-1, N - 1, device=parents.device).expand(B, -1)
        if not torch.equal(parents, chain):
            raise ValueError("chain_verifier: every row must be one chain of N nodes (parents = -1, 0, 1, ..)")
        n = N - 1
        out = verify_fn(draft_token_ids[:, 1:], None if draft_probs is None else draft_probs[:, :n],
                        target_probs, generator)
        k = (out != -1).sum(1) - 1
        steps = torch.arange(n + 1, device=out.device).expand(B, -1)
        path = torch.where(steps <= k[:, None], steps, torch.full_like(steps, -1))
        return path, out
    return verifier
