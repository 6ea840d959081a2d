"""Tree verifiers whose only difference is where their coins come from (loaded by spec, so they
run in the supervised worker): a target-only verifier for ``topk`` trees written from scratch
(every law exact), fed by one coin source each.

- ``correct``: ``torch.rand(B, generator=generator)``;
- ``numpy_stream_permuted`` (correct): a NumPy stream seeded by one draw of ``generator``, the rows
  walked in a permuted order -- another random stream, still independent across rows and calls;
- ``pair_shared_coins`` (hostile): rows ``2k`` and ``2k+1`` read the same coin (index ``b // 2``,
  a wrong stride): two identical requests in one batch get identical texts;
- ``ignores_generator`` (hostile): a private generator of fixed seed: every call replays the same
  coins, so different generator seeds give the same text.
"""
import numpy as np
import torch


def _depths(parents):
    d = torch.zeros_like(parents)
    par = parents.clamp(min=0)
    for _ in range(parents.shape[1]):
        d = torch.where(parents >= 0, d.gather(1, par) + 1, d)
    return torch.where(parents == -2, torch.full_like(d, -1), d)


def _draw(w, u):
    """Inverse CDF of non-negative weights ``w`` [b, V] (float64) at uniforms ``u`` [b]."""
    c = w.cumsum(1)
    tot = c[:, -1:]
    x = torch.searchsorted(c, u[:, None] * tot, right=True).squeeze(1).clamp(max=w.shape[1] - 1)
    return torch.where(tot.squeeze(1) > 0, x, w.argmax(1))


def _walk(parents, tok, p, coins):
    """Target-only verification of every row: at each level the first child ``i`` (node order)
    with ``u < p(children up to i)``, else a draw from ``p`` without the children; ``coins(B)``
    gives ``B`` float64 uniforms, one per row."""
    B, N, V = p.shape
    dev = p.device
    D = int(_depths(parents).max())
    rows = torch.arange(B, device=dev)
    nidx = torch.arange(N, device=dev)
    path = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    out = torch.full_like(path, -1)
    path[:, 0] = 0
    cur = torch.zeros(B, dtype=torch.int64, device=dev)
    live = torch.ones(B, dtype=torch.bool, device=dev)
    for d in range(D + 1):
        kids = (parents == cur[:, None]) & live[:, None]
        pr = p[rows, cur].double()
        pr = pr / pr.sum(1, keepdim=True)
        cum = (pr.gather(1, tok) * kids).cumsum(1)
        u, v = coins(B), coins(B)
        hit = kids & (u[:, None] < cum)
        moved = hit.any(1)
        first = torch.where(hit, nidx, torch.full_like(nidx, N)).min(1).values.clamp(max=N - 1)
        stop = live & ~moved
        ban = torch.zeros(B, V, dtype=torch.float64, device=dev).scatter_add_(1, tok, kids.double())
        x = _draw(torch.where(ban > 0, torch.zeros_like(pr), pr), v)
        out[:, d] = torch.where(moved, tok[rows, first], torch.where(stop, x, out[:, d]))
        if d < D:
            path[:, d + 1] = torch.where(moved, first, path[:, d + 1])
        cur = torch.where(moved, first, cur)
        live = moved
        if not bool(live.any()):
            break
    return path, out


def _torch_coins(generator, dev):
    return lambda n: torch.rand(n, generator=generator, device=dev, dtype=torch.float64)


def correct(parents, draft_token_ids, draft_probs, target_probs, generator):
    return _walk(parents, draft_token_ids, target_probs, _torch_coins(generator, target_probs.device))


def numpy_stream_permuted(parents, draft_token_ids, draft_probs, target_probs, generator):
    rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, (1,), generator=generator).item()))
    dev = target_probs.device
    perm = torch.from_numpy(rng.permutation(parents.shape[0])).to(dev)
    path, out = _walk(parents[perm], draft_token_ids[perm], target_probs[perm],
                      lambda n: torch.from_numpy(rng.random(n)).to(dev))
    inv = torch.argsort(perm)
    return path[inv].contiguous(), out[inv].contiguous()


def pair_shared_coins(parents, draft_token_ids, draft_probs, target_probs, generator):
    coins = _torch_coins(generator, target_probs.device)
    half = torch.arange(parents.shape[0], device=parents.device) // 2
    return _walk(parents, draft_token_ids, target_probs, lambda n: coins((n + 1) // 2)[half])


def ignores_generator(parents, draft_token_ids, draft_probs, target_probs, generator):
    private = torch.Generator(device=target_probs.device).manual_seed(1234)
    return _walk(parents, draft_token_ids, target_probs, _torch_coins(private, target_probs.device))


for _fn in (correct, numpy_stream_permuted, pair_shared_coins, ignores_generator):
    _fn.drafts = "topk"
