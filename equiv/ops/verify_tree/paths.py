"""Built-in tree verifiers, written from the algorithms' descriptions (torch, batched over rows).

Every verifier is ``fn(parents, draft_token_ids, draft_probs, target_probs, generator) ->
(accepted_path [B, D+1] int64, output_token_ids [B, D+1] int64)``. It walks the tree from the
root one level at a time for every row at once: at the current node it tries the node's
children in node order, moves to the accepted one, and when none is accepted (or at a leaf)
draws the one token that ends the text. Each declares the draft constructions it is lossless
for with the attribute ``drafts`` (``equiv.ops.verify_tree.judge``):

| name | rule at a node | ``drafts`` |
|---|---|---|
| ``greedy`` | accept the child that is the target's argmax; else emit the argmax | temperature 0 only (``targets = "onehot"``) |
| ``target_only`` | one coin per level; child ``k`` accepted when the coin falls under the target mass of children 1..k; else draw from the target without the children (SGLang's rule, both thresholds 1) | ``topk`` |
| ``eagle_onehot`` | a coin per child: accept with ``p(x)`` (the draft taken as one-hot), else zero ``x`` and renormalise; draw from what is left | ``any`` |
| ``specinfer`` | multi-step speculative sampling: accept with ``min(1, p(x) / q(x))``, else ``p <- norm(max(0, p - q))`` | ``iid`` |
| ``recursive_rejection`` | as specinfer, and after a rejection ``q`` loses ``x`` (renormalised) | ``wor`` |

``target_only`` sums the mass of duplicate siblings twice, so it is not lossless for ``iid``
trees (whose siblings repeat); ``eagle_onehot`` zeroes a rejected token, so a repeat is never
accepted, and it is lossless for any tree drawn independently of its coins.
"""
from __future__ import annotations

import torch


def tree_layout(parents):
    """``(children [B, N, F] int64 (-1 padding), F, D)``: each node's children in node order, the
    widest fan-out and the deepest node, from ``parents`` alone. One synchronisation on a GPU (F
    and D read together); the depths by pointer doubling, log2(N) steps instead of N."""
    B, N = parents.shape
    dev = parents.device
    if N == 0:
        return torch.full((B, 0, 1), -1, dtype=torch.int64, device=dev), 1, 0
    present = parents >= 0
    par = parents.clamp(min=0)
    onehot = torch.zeros(B, N, N, dtype=torch.int64, device=dev)
    onehot.scatter_(2, par.unsqueeze(-1), present.long().unsqueeze(-1))
    slot = onehot.cumsum(1).gather(2, par.unsqueeze(-1)).squeeze(-1) - 1
    node = torch.arange(N, device=dev).expand(B, N)
    up, steps = torch.where(present, par, node), present.long()   # a node's depth: edges up to a node without a parent
    for _ in range(max(1, N.bit_length())):
        steps = steps + steps.gather(1, up)
        up = up.gather(1, up)
    depth = steps + torch.where(parents == -2, -1, 0).gather(1, up)     # an absent node's subtree counts from -1
    widest, D = torch.stack([slot.masked_fill(~present, -1).max(), depth.max()]).tolist()
    F = max(int(widest) + 1, 1)
    # each node into its parent's slot; the nodes without a parent into a column that is dropped
    flat = torch.full((B, N * F + 1), -1, dtype=torch.int64, device=dev)
    flat.scatter_(1, torch.where(present, par * F + slot, N * F), node)
    return flat[:, :N * F].reshape(B, N, F), F, int(D)


def _walk(parents, tokens, q, p, gen, rule, draw, *, rows64: bool = True):
    """The common walk, level by level over the rows still walking: ``rule(state, child_tokens,
    valid) -> accepted slot (-1 none)``, then ``draw(state, child_tokens, valid, stop) -> token``
    on the rows that stop there (``state``: their target row ``p``, draft row ``q``, indices
    ``rows``, node ``cur``, ``parents``; a rule may leave more in it for its draw; the draw's
    state holds the stopping rows, each tensor subset when first read). ``rows64``: ``p`` and
    ``q`` as float64 copies; False: copies in the inputs' dtype, the rule reading in float64 what
    it needs (the built-ins: a float64 copy of every walking row a level, and its normalisation,
    were most of a call at V ~ 150000). One synchronisation a level on a GPU (how many rows
    move on)."""
    B, N, V = p.shape
    dev = p.device
    children, F, D = tree_layout(parents)
    path = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    out = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    path[:, 0] = 0
    act = torch.arange(B, device=dev)
    cur = torch.zeros(B, dtype=torch.int64, device=dev)
    for d in range(D + 1):
        kids = children[act, cur]                                         # [b, F]
        valid = kids >= 0
        kid_tok = tokens[act].gather(1, kids.clamp(min=0))
        rows_of = (lambda t: t[act, cur].double()) if rows64 else (lambda t: t[act, cur])
        state = {"p": rows_of(p), "q": None if q is None else rows_of(q),
                 "depth": d, "rows": act, "cur": cur, "parents": parents[act]}
        slot = rule(state, kid_tok, valid)
        moved = slot >= 0
        nxt = kids.gather(1, slot.clamp(min=0)[:, None]).squeeze(1)
        n = act.shape[0]
        # the rows that move on, then those that stop, each in row order (a stable sort)
        order = torch.sort((~moved).to(torch.uint8), stable=True).indices
        m = int(moved.sum())
        go, stay = order[:m], order[m:]
        act_go, nxt_go = act[go], nxt[go]
        out[act_go, d] = tokens[act_go, nxt_go]
        if m < n:
            out[act[stay], d] = draw(_Stopping(state, stay, n), kid_tok[stay], valid[stay],
                                     torch.ones(n - m, dtype=torch.bool, device=dev))
        if d + 1 <= D:
            path[act_go, d + 1] = nxt_go
        act, cur = act_go, nxt_go
        if m == 0:
            break
    return path, out


class _Stopping(dict):
    """The walk's state for the rows that stop at a level: each entry of the level's ``n`` rows
    (a tensor whose first dimension is ``n``) subset to those rows when first read, not before
    (a draw reads one or two of them; copying every ``[n, V]`` row of ``p`` and ``q`` was a
    whole pass over them)."""

    def __init__(self, state, stay, n):
        super().__init__(state)
        self._stay, self._n, self._done = stay, n, set()

    def __getitem__(self, key):
        v = super().__getitem__(key)
        if key not in self._done and isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == self._n:
            v = v[self._stay]
            super().__setitem__(key, v)
        self._done.add(key)
        return v

    def __setitem__(self, key, value):           # a draw's own entry is the stopping rows' already
        super().__setitem__(key, value)
        self._done.add(key)

    def get(self, key, default=None):
        return self[key] if key in self else default


def _sample(weights, gen):
    """One token per row from non-negative ``weights`` [B, V] (rows of zero mass: a token drawn
    uniformly, a legal fallback never used by a lossless rule): the inverse of the row's float64
    cumulative sum at one uniform per row. One pass over the row (``torch.multinomial`` took 78 ms
    a call over the CPU tree gate's rows, 31 s of a 117 s gate on a busy 2-core host)."""
    V = weights.shape[1]
    cum = weights.clamp(min=0).double().cumsum_(1)
    total = cum[:, -1:]
    r = torch.rand(weights.shape[0], 1, generator=gen, device=weights.device, dtype=torch.float64)
    u = torch.minimum(r * total, torch.nextafter(total, torch.zeros_like(total)))   # u < total: a positive weight
    got = torch.searchsorted(cum, u, right=True).squeeze(1).clamp(max=V - 1)
    # a dead row: the token under ``r`` of the uniform law, as the cumulative sum 1..V would give
    # it (no [B, V] of that sum made for every row)
    uniform = (r.squeeze(1) * V).floor().long().clamp(max=V - 1)
    return torch.where(total.squeeze(1) <= 0, uniform, got)


def _zero(w, kid_tok, mask):
    """``w`` (a copy) with the tokens ``kid_tok[mask]`` set to 0 (per row)."""
    return _zero_(w.clone(), kid_tok, mask)


def _zero_(w, kid_tok, mask):
    """``_zero`` in place, on a ``w`` the caller owns (a copy a child, [B, V] float64, was most of
    ``eagle_onehot``'s time at V ~ 150000)."""
    # a product with 0 where masked and 1 elsewhere: an unused slot's padding token may equal a
    # tried child's token, and the product keeps the zero in any order (no synchronisation)
    keep = (~mask).expand_as(kid_tok).to(w.dtype)
    return w.scatter_reduce_(1, kid_tok, keep, reduce="prod")


def greedy(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        best = s["p"].argmax(1, keepdim=True)
        hit = valid & (kid_tok == best)
        return _first(hit)

    def draw(s, kid_tok, valid, stop):
        return s["p"].argmax(1)
    return _walk(parents, draft_token_ids, None, target_probs, generator, rule, draw, rows64=False)


greedy.targets = "onehot"
greedy.drafts = "any"


def _first(hit):
    F = hit.shape[1]
    idx = torch.arange(F, device=hit.device).expand_as(hit)
    first = torch.where(hit, idx, torch.full_like(idx, F)).min(1).values
    return torch.where(first < F, first, torch.full_like(first, -1))


def _uniform(generator, B: int, device):
    return torch.rand(B, generator=generator, device=device, dtype=torch.float64)


def _children_in_turn(kid_tok, valid, state, coin, *, accept, rejected):
    """Try a node's children in order, one ``coin(B)`` each: the rows that have chosen none yet
    take child ``k`` where ``accept(u, state, token)``; the rows that tried and did not take it go
    on with ``rejected(state, token, rows)``. Returns ``(child per row, -1 for none; the state)``."""
    B, F = kid_tok.shape
    chosen = torch.full((B,), -1, dtype=torch.int64, device=kid_tok.device)
    for k in range(F):
        u = coin(B)
        tok = kid_tok[:, k:k + 1]
        try_ = valid[:, k] & (chosen < 0)
        take = try_ & accept(u, state, tok)
        chosen = torch.where(take, torch.full_like(chosen, k), chosen)
        state = rejected(state, tok, (try_ & ~take)[:, None])
    return chosen, state


def target_only_rule(generator):
    """The target-only walk's choice among a node's children: one uniform per row against the
    running sum of the target's (renormalised) mass on the valid children, in their order."""
    def rule(s, kid_tok, valid):
        p = s["p"]
        u = torch.rand(p.shape[0], generator=generator, device=p.device, dtype=torch.float64)
        # the children's renormalised mass in float64 (each gathered element divided by the row's
        # float64 sum: not the whole row)
        cum = (p.gather(1, kid_tok).double() / p.sum(1, keepdim=True, dtype=torch.float64) * valid.double()).cumsum(1)
        return _first(valid & (u[:, None] < cum))
    return rule


def target_only(parents, draft_token_ids, draft_probs, target_probs, generator):
    def draw(s, kid_tok, valid, stop):
        return _sample(_zero_(s["p"], kid_tok, valid), generator)      # the walk's own copy of the rows
    return _walk(parents, draft_token_ids, None, target_probs, generator, target_only_rule(generator), draw,
                 rows64=False)


target_only.drafts = "topk"


def eagle_onehot(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        # the rows as given (float32), zeroed in place: the walk's own copy; sums in float64
        chosen, s["residual"] = _children_in_turn(
            kid_tok, valid, s["p"], lambda B: _uniform(generator, B, kid_tok.device),
            accept=lambda u, p, tok: u * p.sum(1, dtype=torch.float64) < p.gather(1, tok).squeeze(1).double(),
            rejected=_zero_)
        return chosen

    def draw(s, kid_tok, valid, stop):
        return _sample(s["residual"], generator)
    return _walk(parents, draft_token_ids, None, target_probs, generator, rule, draw, rows64=False)


eagle_onehot.drafts = "any"


def _speculative(parents, tokens, q, target, generator, without_replacement: bool):
    if q is None:
        raise ValueError("this verifier needs draft_probs (the law the children were drawn from)")

    # p and q are the walk's own float32 copies of the rows; the tests divide gathered elements by
    # the rows' float64 sums (``sp``, ``sq``), and a residual is made, in float64, for the rows that
    # rejected a child alone (``res`` rows, ``has`` set): whole-row float64 copies and
    # normalisations of every row, per level and per child, were most of this built-in's time
    def accept(u, s, tok):
        pt = s["p"].gather(1, tok).squeeze(1).double() / s["sp"]
        if s["res"] is not None:
            pt = torch.where(s["has"], s["res"].gather(1, tok).squeeze(1), pt)
        return u * (s["q"].gather(1, tok).squeeze(1).double() / s["sq"]) < pt

    def rejected(s, tok, rows):
        hit = rows.squeeze(1).nonzero().squeeze(1)
        if not hit.numel():
            return s
        p, qq, sp, sq, res, has = (s[k] for k in ("p", "q", "sp", "sq", "res", "has"))
        now = p[hit].double() / sp[hit, None]
        if res is None:                   # the first rejection at this node: no row has a residual yet
            res = s["res"] = torch.empty(p.shape, dtype=torch.float64, device=p.device)
        else:
            now = torch.where(has[hit, None], res[hit], now)
        r = (now - qq[hit].double() / sq[hit, None]).clamp_(min=0)
        mass = r.sum(1, keepdim=True)
        res.index_copy_(0, hit, torch.where(mass > 0, r / mass.clamp(min=1e-300), now))
        has[hit] = True
        if without_replacement:           # q loses the rejected token, its sum that token's mass (a
            t = tok[hit, 0]               # row whose whole mass is tried keeps it: no child is left)
            gone = qq[hit, t]
            left = sq[hit] - gone.double()
            live = left > 0
            qq[hit, t] = torch.where(live, torch.zeros_like(gone), gone)
            sq[hit] = torch.where(live, left, sq[hit])
        return s

    def rule(s, kid_tok, valid):
        s["sp"], s["sq"] = s["p"].sum(1, dtype=torch.float64), s["q"].sum(1, dtype=torch.float64)
        s["res"], s["has"] = None, torch.zeros(kid_tok.shape[0], dtype=torch.bool, device=kid_tok.device)
        chosen, _ = _children_in_turn(kid_tok, valid, s, lambda B: _uniform(generator, B, kid_tok.device),
                                      accept=accept, rejected=rejected)
        return chosen

    def draw(s, kid_tok, valid, stop):
        p, res = s["p"], s["res"]
        if res is None:
            return _sample(p, generator)
        return _sample(torch.where(s["has"][:, None], res, p.double() / s["sp"][:, None]), generator)
    return _walk(parents, tokens, q, target, generator, rule, draw, rows64=False)


def specinfer(parents, draft_token_ids, draft_probs, target_probs, generator):
    return _speculative(parents, draft_token_ids, draft_probs, target_probs, generator, False)


specinfer.drafts = "iid"


def recursive_rejection(parents, draft_token_ids, draft_probs, target_probs, generator):
    return _speculative(parents, draft_token_ids, draft_probs, target_probs, generator, True)


recursive_rejection.drafts = "wor"

VERIFIERS = {"greedy": greedy, "target_only": target_only, "eagle_onehot": eagle_onehot,
             "specinfer": specinfer, "recursive_rejection": recursive_rejection}


def verifier_names() -> tuple:
    return tuple(VERIFIERS)
