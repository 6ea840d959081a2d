"""A small batched torch Llama forward over a shared KV pool with tree attention.

Plan. ``LlamaRunner`` holds one copy of the weights (float32 or bfloat16, any device) and a KV
pool: per layer ``[capacity, kv_heads, head_dim]`` keys and values, one slot per *node* (a token
at a position of some prefix). ``forward(tokens, positions, slots, ancestors, mask)`` runs any set
of new nodes at once: at every layer it writes the new nodes' keys and values into their slots,
then each node attends over its ancestor slots (``ancestors[n]``, itself included, padded and
masked). Ancestors are either computed earlier or in the same call (their keys are written before
the attention of the same layer), so a chain of drafted tokens, a tree of them or a batch of
prompts is one call, as an engine's verification pass is. The pool grows on demand.

Numbers: RMSNorm, rotary embedding on adjacent pairs (GGUF's row order), grouped-query attention,
SwiGLU MLP, tied output embedding; every matmul in the runner's dtype, norms and softmax in
float32. ``exit_layers`` names layers whose normalised hidden state is also returned (an early
exit at layer L: the first L blocks, then the final norm and the output embedding).
``logits(hidden)`` multiplies in fixed blocks of ``LOGIT_BLOCK`` rows, so a row's logits do not
depend on which other rows share the call.
"""
from __future__ import annotations

import math

import torch

LOGIT_BLOCK = 64


def _rms(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)


class LlamaRunner:
    """Weights plus a KV pool; see the module docstring."""

    def __init__(self, cfg, tensors, *, dtype="float32", device="cpu", exit_layers=(), capacity=1024):
        self.cfg = cfg
        self.dtype = getattr(torch, dtype)
        self.device = torch.device(device)
        self.exit_layers = tuple(sorted(set(int(x) for x in exit_layers)))
        for e in self.exit_layers:
            if not 1 <= e <= cfg.layers:
                raise ValueError(f"exit layer {e} outside 1..{cfg.layers}")
        t = lambda name: torch.from_numpy(tensors[name]).to(self.device, self.dtype)   # noqa: E731
        f32 = lambda name: torch.from_numpy(tensors[name]).to(self.device, torch.float32)  # noqa: E731
        self.embed = t("token_embd.weight")
        self.head = t("output.weight") if "output.weight" in tensors else self.embed
        self.out_norm = f32("output_norm.weight")
        self.blocks = []
        for i in range(cfg.layers):
            p = f"blk.{i}."
            qkv = torch.cat([t(p + "attn_q.weight"), t(p + "attn_k.weight"), t(p + "attn_v.weight")])
            gate_up = torch.cat([t(p + "ffn_gate.weight"), t(p + "ffn_up.weight")])
            self.blocks.append((f32(p + "attn_norm.weight"), qkv.T.contiguous(),
                                t(p + "attn_output.weight").T.contiguous(), f32(p + "ffn_norm.weight"),
                                gate_up.T.contiguous(), t(p + "ffn_down.weight").T.contiguous()))
        hd = cfg.head_dim
        self.inv_freq = 1.0 / (cfg.rope_base ** (torch.arange(0, hd, 2, device=self.device,
                                                                 dtype=torch.float64) / hd))
        self.capacity = 0
        self.pool_k, self.pool_v = [], []
        self._grow(capacity)

    def _grow(self, capacity):
        cfg = self.cfg
        new = max(capacity, 2 * self.capacity)
        shape = (new, cfg.kv_heads, cfg.head_dim)
        for store in (self.pool_k, self.pool_v):
            for i in range(cfg.layers):
                fresh = torch.zeros(shape, dtype=self.dtype, device=self.device)
                if i < len(store):
                    fresh[:self.capacity] = store[i][:self.capacity]
                    store[i] = fresh
                else:
                    store.append(fresh)
        self.capacity = new

    def _rope(self, x, positions):
        ang = positions.to(torch.float64)[:, None] * self.inv_freq[None, :]         # [N, hd/2]
        cos, sin = ang.cos().float()[:, None, :], ang.sin().float()[:, None, :]
        xf = x.float()
        a, b = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
        return out.to(x.dtype)

    def forward(self, tokens, positions, slots, ancestors, mask):
        """Run new nodes. ``tokens``, ``positions``, ``slots``: ``[N]`` int64; ``ancestors``:
        ``[N, L]`` slots (itself included), ``mask`` ``[N, L]`` bool (False: padding). Returns
        ``{"final": [N, D], L: [N, D] for L in exit_layers}`` normalised hidden states."""
        cfg = self.cfg
        need = int(slots.max()) + 1 if slots.numel() else 0
        if need > self.capacity:
            self._grow(need)
        N, H, KV, hd = tokens.shape[0], cfg.heads, cfg.kv_heads, cfg.head_dim
        G = H // KV
        x = self.embed[tokens]
        bias = torch.where(mask, 0.0, float("-inf")).to(torch.float32)[:, None, None, :]   # [N,1,1,L]
        scale = 1.0 / math.sqrt(hd)
        out = {}
        for i, (n1, wqkv, wo, n2, wgu, wd) in enumerate(self.blocks):
            h = _rms(x, n1, cfg.norm_eps)
            qkv = h @ wqkv
            q = self._rope(qkv[:, :H * hd].view(N, H, hd), positions)
            k = self._rope(qkv[:, H * hd:(H + KV) * hd].view(N, KV, hd), positions)
            v = qkv[:, (H + KV) * hd:].view(N, KV, hd)
            self.pool_k[i][slots] = k
            self.pool_v[i][slots] = v
            K = self.pool_k[i][ancestors].float()                                   # [N, L, KV, hd]
            V = self.pool_v[i][ancestors].float()
            qg = q.float().view(N, KV, G, hd)
            scores = torch.einsum("nkgd,nlkd->nkgl", qg, K) * scale + bias
            att = torch.softmax(scores, dim=-1)
            o = torch.einsum("nkgl,nlkd->nkgd", att, V).reshape(N, H * hd).to(self.dtype)
            x = x + o @ wo
            h = _rms(x, n2, cfg.norm_eps)
            gu = h @ wgu
            x = x + (torch.nn.functional.silu(gu[:, :cfg.ffn]) * gu[:, cfg.ffn:]) @ wd
            if i + 1 in self.exit_layers:
                out[i + 1] = _rms(x, self.out_norm, cfg.norm_eps)
        out["final"] = _rms(x, self.out_norm, cfg.norm_eps)
        return out

    def logits(self, hidden):
        """``[N, V]`` float32 logits of normalised hidden states, in blocks of ``LOGIT_BLOCK`` rows
        (row results independent of the other rows of the call)."""
        n = hidden.shape[0]
        pad = (-n) % LOGIT_BLOCK
        h = torch.cat([hidden.to(self.dtype), hidden.new_zeros((pad, hidden.shape[1]), dtype=self.dtype)])
        head_t = self.head.T
        rows = [(h[i:i + LOGIT_BLOCK] @ head_t).float() for i in range(0, n + pad, LOGIT_BLOCK)]
        return torch.cat(rows)[:n] if rows else torch.zeros((0, self.head.shape[0]), device=self.device)
