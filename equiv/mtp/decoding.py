"""The speculative-decoding loop: draft with the path under test, verify against the target.

Plan. ``decode(model, path, consumer, ...)`` runs ``rounds`` verify rounds for ``sequences``
sequences at once, everything on the model's device with no host synchronisation inside a round
(a trace-backed model syncs once a round to stop when every sequence has run out of trace). Each
round:

- *chain* consumers (``greedy``, ``target_only``, ``confidence``) draft ``steps`` tokens one at a
  time: draft logits at depth ``j`` -> ``path(logits, 1)`` -> token ``d_j``, appended to the
  context before the next depth. That is SGLang's ``--speculative-num-steps 3
  --speculative-eagle-topk 1 --speculative-num-draft-tokens 4``: 3 proposed tokens, 4 tokens per
  verify (the 3 plus the verified root), so at most 4 tokens are emitted per round.
- ``tree`` drafts with ``topk = tree_topk``: depth 0 expands the root into ``K`` children; each
  later depth expands the ``K`` best frontier nodes into ``K`` children each and keeps the ``K``
  best of the ``K * K`` by score, a node's score being the product of ``topk_p`` along its path
  (EAGLE-2 / SGLang). The ``tree_tokens - 1`` best-scored nodes of the whole pool are verified
  (``tree_tokens`` counts the root, as ``--speculative-num-draft-tokens`` does). A selected node
  whose parent was not selected is unreachable and never accepted. With ``tree_verify`` (a user's
  tree verifier, the tree verifier op's ``features("caller")``) that verifier decides instead: it
  gets the selected nodes as a tree (``_verified_tree``), ``draft_probs=None`` (top-k drafts are
  deterministic) and the target's probabilities at every node, with a generator seeded from
  (seed, round); its path gives the accepted count and its last token the drawn one.

Verification (the target's logits at every drafted context come in one batched call):
- ``greedy``, ``confidence``, ``tree``: accept while the drafted token equals the target's argmax;
  the bonus token is the target's argmax after the last accepted token.
- ``target_only``: the draft is one-hot: token ``d_j`` is accepted when ``u_j < p_target(d_j)``;
  at the first rejection a token is drawn from the residual, the target with ``d_j``'s mass
  removed; if all are accepted the bonus is drawn from the target. Uniforms come from
  ``models.uniforms(seed, row, position)``, keyed by the sequence position, so two paths that
  draft the same tokens emit the same tokens. With ``verify`` (a user's verifier, see
  the chain verifier op) that verifier decides instead: it gets the drafts (clamped into
  ``[0, V)``), ``draft_probs=None`` and the target's probabilities, with a generator seeded from
  (seed, round), and its output row gives the accepted count and the emitted token.
- ``confidence``: token ``j`` is proposed only while the running product of ``topk_p`` up to it
  stays ``>= threshold`` (a NaN product stops drafting); tokens past the stop are computed (the
  batch drafts in lock-step) but neither proposed nor verified.

A drafted index outside ``[0, V)`` is never accepted (it cannot equal the target's argmax and has
target probability 0); it and a NaN ``topk_p`` are counted as invalid outputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from equiv.errors import EquivError
from equiv.mtp.models import uniforms
from equiv.ops import ROLES, get_op
from equiv.run.seeded import exception_line

CONSUMERS = ("greedy", "target_only", "confidence", "tree")
GREEDY_VERIFIED = ("greedy", "confidence", "tree")
CONFIDENCE_THRESHOLD = 0.3
TREE_TOPK = 4
TREE_TOKENS = 8
_PURPOSE_ACCEPT, _PURPOSE_RESAMPLE, _PURPOSE_PLAIN = 1, 2, 3


@dataclass(frozen=True)
class DecodeOutcome:
    """Raw counts of one decode, on the CPU. ``accepted``/``proposed``/``active`` are
    ``[sequences, rounds]``; ``tokens[b, :lengths[b]]`` are the tokens sequence ``b`` emitted."""

    consumer: str
    steps: int
    accepted: np.ndarray
    proposed: np.ndarray
    active: np.ndarray
    tokens: np.ndarray
    lengths: np.ndarray
    invalid_outputs: int
    draft_outputs: int
    optimum: np.ndarray | None = None    # [sequences, rounds]: a user verifier's lossless optimum


def call_path(path, logits, k: int, name: str):
    """``path(logits, k)`` with its outputs checked by the same contract as the draft op's comparison
    (a tuple or list ``(topk_p, topk_index)`` of shape ``[N, k]`` on the logits' device;
    ``topk_p`` float32, float64 or the input dtype; ``topk_index`` int64; any strides), returned
    as fresh dense ``(float32, int64)`` copies: the rounds below ``view`` and keep the outputs
    across calls."""
    out = path(logits, k)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise EquivError(f"path {name!r} returned {type(out).__name__}, not (topk_p, topk_index)")
    p, idx = out
    want = (logits.shape[0], k)
    for what, t in (("topk_p", p), ("topk_index", idx)):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise EquivError(f"path {name!r} returned {what} of shape {shape}, expected {want}")
        if t.device.type != logits.device.type:
            raise EquivError(f"path {name!r} returned {what} on {t.device}, expected the input's device "
                             f"{logits.device}")
    p_dtype, in_dtype = str(p.dtype).removeprefix("torch."), str(logits.dtype).removeprefix("torch.")
    if p_dtype not in tuple(get_op(ROLES["draft"]).features("output_dtypes")) + (in_dtype,):
        raise EquivError(f"path {name!r} returned topk_p of dtype {p_dtype}, expected float32, float64 "
                         f"or the input dtype {in_dtype}")
    if idx.dtype != torch.int64:
        raise EquivError(f"path {name!r} returned topk_index of dtype {idx.dtype}, expected int64")
    dense = {"memory_format": torch.contiguous_format, "copy": True}
    return p.to(torch.float32, **dense), idx.to(torch.int64, **dense)


def _invalid(p, idx, vocab):
    return ((idx < 0) | (idx >= vocab) | torch.isnan(p)).sum()


def _chain_round(model, path, name, ctx, consumer, steps, threshold, seed, rows, pos, verify=None, rnd=0):
    V = model.vocab
    drafts, probs, ctxs, invalid = [], [], [ctx], 0
    c = ctx
    for depth in range(steps):
        p, idx = call_path(path, model.draft_logits(c, depth), 1, name)
        invalid = invalid + _invalid(p, idx, V)
        drafts.append(idx[:, 0])
        probs.append(p[:, 0])
        c = model.next_context(c, idx[:, 0])
        ctxs.append(c)
    D, Q, C = torch.stack(drafts, 1), torch.stack(probs, 1), torch.stack(ctxs, 1)
    B = ctx.shape[0]
    tlogits = model.target_logits(C.reshape(-1)).view(B, steps + 1, V)
    if consumer == "confidence":
        proposed = torch.cumprod((torch.cumprod(Q, 1) >= threshold).to(torch.int64), 1).bool()
    else:
        proposed = torch.ones_like(D, dtype=torch.bool)
    n_proposed = proposed.sum(1)
    valid = (D >= 0) & (D < V)
    optimum = None                               # a user's verifier: the lossless optimum a row
    if consumer == "target_only" and verify is not None:
        tprobs = torch.softmax(tlogits, dim=-1)
        out = _user_call("verifier", verify, D.clamp(0, V - 1), None, tprobs, seed * 100_003 + rnd)
        a = torch.cumprod((out[:, :steps] == D).to(torch.int64), 1).sum(1)
        bonus = out.gather(1, a[:, None])[:, 0]
        p_draft = tprobs[:, :steps].gather(2, D.clamp(0, V - 1)[..., None])[..., 0] * valid
        optimum = torch.cumprod(p_draft.double(), 1).sum(1)        # sample-then-match's expectation
    elif consumer == "target_only":
        tprobs = torch.softmax(tlogits, dim=-1)
        p_draft = tprobs[:, :steps].gather(2, D.clamp(0, V - 1)[..., None])[..., 0] * valid
        offsets = torch.arange(steps, device=D.device)
        u = uniforms(seed, rows[:, None], pos[:, None] + offsets, _PURPOSE_ACCEPT)
        match = (u < p_draft) & proposed
        a = torch.cumprod(match.to(torch.int64), 1).sum(1)
        row_p = tprobs[torch.arange(B, device=D.device), a]                     # [B, V]
        rejected = a < n_proposed
        d_at = D.gather(1, a.clamp(max=steps - 1)[:, None])[:, 0]
        drop = rejected & (d_at >= 0) & (d_at < V)
        row_p = row_p.scatter(1, d_at.clamp(0, V - 1)[:, None],
                              torch.where(drop[:, None], 0.0, row_p.gather(1, d_at.clamp(0, V - 1)[:, None])))
        cdf = torch.cumsum(row_p.double(), dim=1)
        total = cdf[:, -1]
        u2 = uniforms(seed, rows, pos + a, _PURPOSE_RESAMPLE) * total
        sampled = torch.searchsorted(cdf, u2[:, None], right=True)[:, 0].clamp(max=V - 1)
        bonus = torch.where(total > 0, sampled, row_p.argmax(1))
    else:
        targ = tlogits.argmax(-1)
        match = (D == targ[:, :steps]) & proposed
        a = torch.cumprod(match.to(torch.int64), 1).sum(1)
        bonus = targ.gather(1, a[:, None])[:, 0]
    last_ctx = C.gather(1, a[:, None])[:, 0]
    return a, n_proposed, D, bonus, last_ctx, invalid, B * steps, optimum


def _tree_round(model, path, name, ctx, steps, topk, tree_tokens, tree_verify=None, seed=0, rnd=0,
                root_token=None):
    V, B, K = model.vocab, ctx.shape[0], topk
    dev = ctx.device
    p, idx = call_path(path, model.draft_logits(ctx, 0), K, name)
    invalid, outputs = _invalid(p, idx, V), B * K
    pool_tok, pool_score = [idx], [p]
    pool_parent = [torch.full((B, K), -1, dtype=torch.int64, device=dev)]
    pool_ctx = [model.next_context(ctx[:, None].expand(B, K), idx)]
    front = torch.arange(K, device=dev).expand(B, K)
    f_score, f_ctx, offset = p, pool_ctx[0], K
    for depth in range(1, steps):
        p, idx = call_path(path, model.draft_logits(f_ctx.reshape(-1), depth), K, name)
        invalid, outputs = invalid + _invalid(p, idx, V), outputs + B * K * K
        score = (f_score[:, :, None] * p.view(B, K, K)).reshape(B, K * K)
        tok = idx.view(B, K * K)
        child_ctx = model.next_context(f_ctx[:, :, None].expand(B, K, K).reshape(B, K * K), tok)
        pool_tok.append(tok)
        pool_score.append(score)
        pool_parent.append(front[:, :, None].expand(B, K, K).reshape(B, K * K))
        pool_ctx.append(child_ctx)
        best = torch.topk(score, K, dim=1)
        front, f_score = offset + best.indices, best.values
        f_ctx = child_ctx.gather(1, best.indices)
        offset += K * K
    tok, score = torch.cat(pool_tok, 1), torch.cat(pool_score, 1)
    parent, node_ctx = torch.cat(pool_parent, 1), torch.cat(pool_ctx, 1)
    n_sel = min(tree_tokens - 1, tok.shape[1])
    sel = torch.topk(score, n_sel, dim=1).indices
    if tree_verify is not None:                  # the op's node order: a parent before its children
        sel = sel.sort(1).values
    sel_tok, sel_ctx = tok.gather(1, sel), node_ctx.gather(1, sel)
    where_sel = torch.full_like(tok, -2).scatter(1, sel, torch.arange(n_sel, device=dev).expand(B, n_sel))
    sel_parent_pool = parent.gather(1, sel)
    sel_parent = torch.where(sel_parent_pool < 0, -1, where_sel.gather(1, sel_parent_pool.clamp(min=0)))
    contexts = torch.cat([ctx[:, None], sel_ctx], 1)
    if tree_verify is not None:
        tlogits = model.target_logits(contexts.reshape(-1)).view(B, n_sel + 1, V)
        a, drafted, bonus, node, optimum = _verified_tree(tree_verify, sel_parent, sel_tok, tlogits, steps,
                                                          seed * 100_003 + rnd, root_token)
        last_ctx = torch.where(node > 0, sel_ctx.gather(1, (node - 1).clamp(min=0)[:, None])[:, 0], ctx)
        n_proposed = torch.full((B,), n_sel, dtype=torch.int64, device=dev)
        return a, n_proposed, drafted, bonus, last_ctx, invalid, outputs, optimum
    targ = model.target_logits(contexts.reshape(-1)).argmax(-1).view(B, n_sel + 1)
    cur = torch.full((B,), -1, dtype=torch.int64, device=dev)
    a = torch.zeros(B, dtype=torch.int64, device=dev)
    alive = torch.ones(B, dtype=torch.bool, device=dev)
    path_tokens = []
    for _ in range(steps):
        want = targ.gather(1, (cur + 1)[:, None])
        match = (sel_parent == cur[:, None]) & (sel_tok == want) & alive[:, None]
        found = match.any(1)
        cur = torch.where(found, match.to(torch.int64).argmax(1), cur)
        a, alive = a + found, alive & found
        path_tokens.append(want[:, 0])
    bonus = targ.gather(1, (cur + 1)[:, None])[:, 0]
    last_ctx = torch.where(cur >= 0, sel_ctx.gather(1, cur.clamp(min=0)[:, None])[:, 0], ctx)
    n_proposed = torch.full((B,), n_sel, dtype=torch.int64, device=dev)
    return a, n_proposed, torch.stack(path_tokens, 1), bonus, last_ctx, invalid, outputs, None


def _user_call(what: str, fn, *args):
    """A user's verifier called in this process: what it raises becomes one ``EquivError`` line
    (a failed record), never a traceback; one in its worker already answers so."""
    try:
        return fn(*args)
    except EquivError:
        raise
    except Exception as exc:                     # the verifier's own failure is a verdict
        raise EquivError(f"the {what} {exception_line(exc)}") from None


def _verified_tree(tree_verify, sel_parent, sel_tok, tlogits, steps, seed, root_token):
    """A tree round decided by a tree verifier (the tree verifier op's contract): node 0 the root,
    nodes ``1..n`` the selected drafts in pool order (parents first; a node whose parent was not
    selected, and its descendants, absent: ``-2``), the drafts deterministic (``draft_probs=None``),
    the target's probabilities at every node. Its answer is checked before it is used: a path of
    real children from the root, the drafts' tokens along it, then one token in ``[0, V)``.
    Returns ``(accepted, drafted [B, steps], bonus, last accepted node, optimum)``, ``optimum`` the
    expected count of the optimal lossless rule on this tree."""
    B, n = sel_tok.shape
    V = tlogits.shape[-1]
    dev = sel_tok.device
    par = torch.where(sel_parent == -1, 0, torch.where(sel_parent < 0, -2, sel_parent + 1))
    parents = torch.cat([torch.full((B, 1), -1, dtype=torch.int64, device=dev), par], 1)
    reach = torch.ones(B, n + 1, dtype=torch.bool, device=dev)
    for _ in range(steps):                       # absent parents make absent descendants
        reach = (parents == -1) | ((parents >= 0) & reach.gather(1, parents.clamp(min=0)))
    parents = torch.where(reach, parents, -2)
    root = torch.zeros(B, dtype=torch.int64, device=dev) if root_token is None else root_token
    tokens = torch.cat([root[:, None], sel_tok.clamp(0, V - 1)], 1)
    probs = torch.softmax(tlogits.float(), dim=-1)
    # the most a lossless verifier accepts on this tree: the sum over nodes of the target's
    # probability of the node's path (sample-then-match's expectation; ``equiv.stats.above_bound``)
    present = parents >= 0
    edge = probs[torch.arange(B, device=dev)[:, None], parents.clamp(min=0), tokens].double()
    reach_p = torch.ones(B, n + 1, dtype=torch.float64, device=dev)
    for _ in range(steps):
        reach_p = torch.where(present, reach_p.gather(1, parents.clamp(min=0)) * edge, reach_p)
    optimum = (reach_p * present)[:, 1:].sum(1)
    got = _user_call("tree verifier", tree_verify, parents, tokens, None, probs, seed)
    if not (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):
        raise EquivError(f"the tree verifier returned {type(got).__name__}, not (accepted_path, "
                         f"output_token_ids)")
    path, out = (t.to(dev, torch.int64) for t in got)
    if path.dim() != 2 or path.shape != out.shape or path.shape[0] != B or path.shape[1] < 1:
        raise EquivError(f"the tree verifier returned shapes {list(path.shape)} and {list(out.shape)}, "
                         f"not [B={B}, D+1] each")
    w = path.shape[1]
    live = path >= 0
    a = torch.cumprod(live.to(torch.int64), 1).sum(1) - 1
    col = torch.arange(w, device=dev)
    problem = None
    if bool((path[:, 0] != 0).any()):
        problem = "an accepted_path that does not start at the root (node 0)"
    elif bool((live & (col > a[:, None])).any()) or bool((path >= n + 1).any()):
        problem = "an accepted_path with a node after a -1, or a node past the tree"
    else:
        node = path.clamp(0, n)
        prev = torch.cat([torch.full((B, 1), -1, dtype=torch.int64, device=dev), node[:, :-1]], 1)
        child = parents.gather(1, node) == prev
        emitted = tokens.gather(1, node.roll(-1, 1))           # the token of the next node on the path
        upto = (col[None, :] >= 1) & (col[None, :] <= a[:, None])
        x = out.gather(1, a[:, None])[:, 0]
        if bool((upto & ~child).any()):
            problem = "an accepted_path whose next node is not a child of the one before"
        elif bool(((col[None, :] < a[:, None]) & (out != emitted)).any()):
            problem = "output_token_ids that differ from the accepted nodes' tokens"
        elif bool(((x < 0) | (x >= V)).any()):
            problem = f"a drawn token outside [0, {V})"
    if problem:
        raise EquivError(f"the tree verifier returned {problem}")
    drafted = torch.zeros(B, steps, dtype=torch.int64, device=dev)
    take = min(steps, w - 1)
    drafted[:, :take] = torch.where(col[None, :take] < a[:, None], out[:, :take], 0)
    node = path.gather(1, a[:, None])[:, 0]
    return a, drafted, out.gather(1, a[:, None])[:, 0], node, optimum


def decode(model, path, consumer: str, *, steps: int, rounds: int, sequences: int, seed: int,
           name: str = "path", threshold: float = CONFIDENCE_THRESHOLD, tree_topk: int = TREE_TOPK,
           tree_tokens: int = TREE_TOKENS, verify=None, tree_verify=None) -> DecodeOutcome:
    """Run ``rounds`` verify rounds of ``consumer`` with ``path`` drafting (module docstring)."""
    with torch.inference_mode():
        ctx = model.initial_contexts(sequences)
        dev, B = ctx.device, ctx.shape[0]
        rows = torch.arange(B, device=dev)
        width = rounds * (steps + 1)
        tokens = torch.zeros(B, width + 1, dtype=torch.int64, device=dev)   # last column: sink
        pos = torch.zeros(B, dtype=torch.int64, device=dev)
        accepted = torch.zeros(B, rounds, dtype=torch.int64, device=dev)
        proposed = torch.zeros_like(accepted)
        active = torch.zeros(B, rounds, dtype=torch.bool, device=dev)
        invalid, outputs = torch.zeros((), dtype=torch.int64, device=dev), 0
        offsets = torch.arange(steps + 1, device=dev)
        last_tok = torch.zeros(B, dtype=torch.int64, device=dev)          # the root's token, once known
        optimum = None                           # with a user's verifier: the lossless optimum a round
        for r in range(rounds):
            act = model.active(ctx, steps)
            if act is None:
                act = torch.ones(B, dtype=torch.bool, device=dev)
            elif not bool(act.any()):
                break
            if consumer == "tree":
                a, n_prop, drafted, bonus, last_ctx, bad, n_out, opt = _tree_round(
                    model, path, name, ctx, steps, tree_topk, tree_tokens, tree_verify, seed, r, last_tok)
            else:
                a, n_prop, drafted, bonus, last_ctx, bad, n_out, opt = _chain_round(
                    model, path, name, ctx, consumer, steps, threshold, seed, rows, pos, verify, r)
            invalid, outputs = invalid + bad, outputs + n_out
            a, n_prop = a * act, n_prop * act
            emitted = torch.cat([drafted, bonus[:, None]], 1)
            emitted = emitted.scatter(1, a[:, None], bonus[:, None])        # bonus right after
            keep = (offsets[None, :] <= a[:, None]) & act[:, None]
            where = torch.where(keep, pos[:, None] + offsets, width)
            tokens.scatter_(1, where, emitted)
            accepted[:, r], proposed[:, r], active[:, r] = a, n_prop, act
            if opt is not None:
                optimum = torch.zeros(B, rounds, dtype=torch.float64, device=dev) if optimum is None else optimum
                optimum[:, r] = opt * act
            pos = pos + (a + 1) * act
            ctx = torch.where(act, model.next_context(last_ctx, bonus), ctx)
            last_tok = torch.where(act, bonus, last_tok)
        return DecodeOutcome(
            consumer=consumer, steps=steps, accepted=accepted.cpu().numpy(),
            proposed=proposed.cpu().numpy(), active=active.cpu().numpy(),
            tokens=tokens[:, :width].cpu().numpy(), lengths=pos.cpu().numpy(),
            invalid_outputs=int(invalid), draft_outputs=int(outputs),
            optimum=None if optimum is None else optimum.cpu().numpy())


def greedy_reference(model, sequences: int, length: int):
    """Plain target-only greedy decoding: ``[sequences, length]`` tokens (CPU numpy)."""
    with torch.inference_mode():
        ctx = model.initial_contexts(sequences)
        out = []
        for _ in range(length):
            tok = model.target_logits(ctx).argmax(-1)
            out.append(tok)
            ctx = model.next_context(ctx, tok)
        if not out:
            return np.zeros((sequences, 0), dtype=np.int64)
        return torch.stack(out, 1).cpu().numpy()


def sample_reference(model, sequences: int, length: int, seed: int):
    """Plain sampling from the target: ``[sequences, length]`` tokens (CPU numpy), each drawn by
    inverse CDF with uniforms keyed (seed, row, position) on a stream of their own, so they are
    independent of every speculative decode's."""
    with torch.inference_mode():
        ctx = model.initial_contexts(sequences)
        rows = torch.arange(sequences, device=ctx.device)
        out = []
        for j in range(length):
            cdf = torch.cumsum(torch.softmax(model.target_logits(ctx).double(), dim=-1), dim=-1)
            u = uniforms(seed, rows, torch.full_like(rows, j), _PURPOSE_PLAIN) * cdf[:, -1]
            tok = torch.searchsorted(cdf, u[:, None], right=True)[:, 0].clamp(max=model.vocab - 1)
            out.append(tok)
            ctx = model.next_context(ctx, tok)
        if not out:
            return np.zeros((sequences, 0), dtype=np.int64)
        return torch.stack(out, 1).cpu().numpy()
