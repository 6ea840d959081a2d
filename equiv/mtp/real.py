"""A real model in the decoding loop: SmolLM2 target and self-drafts behind the model interface.

Plan. The decoding loop (``equiv.mtp.decoding``) sees a model through ``initial_contexts``,
``next_context``, ``target_logits``, ``draft_logits``, ``active``, ``supports`` and ``describe``,
with one int64 *context* per sequence. ``RealLM`` makes a context a node of a prefix trie: node
``n`` is a token at a position whose parent is the node before it; ``next_context`` finds or
adds the child, so two decodes (two paths, two consumers) that reach the same text share the
node. A node's work is done once per model: ``_ensure`` collects the requested nodes that are
not computed and their uncomputed ancestors and runs them in one ``LlamaRunner.forward`` (tree
attention over a KV pool whose slot is the node id), then keeps the node's normalised hidden
state; logits are made from it on request in fixed row blocks, so a prefix's logits are the
same whichever call asks (the last ``LOGIT_CACHE`` rows are kept: the paths after the first
read the same prefixes). An engine that verifies in a batch computes a prefix's logits with a
different GEMM order than one-token decoding; this model, like a batch-invariant engine, does
not, so the greedy identity below checks the decoding, not the GEMM order.

Model configurations (``CONFIGS``): ``target`` (float32), the drafts ``bf16`` (the bfloat16
copy of the weights, its own KV pool) and ``exit:L`` (the target's first L blocks, then the
final norm and the output embedding: the same forward, so no extra pass). A self-draft's logits
at depth ``j`` are its next-token logits after the context, whatever ``j``.

Sequences: ``initial_contexts(n)`` gives sequence ``b`` the prompt ``b % P`` (``P`` prompts), so
``n = P * R`` holds ``R`` replicas of each prompt; greedy replicas are one computation, and
under sampling each replica has its own uniforms (the decoding loop keys them by row).
``token_pit`` gives each emitted token's randomized probability integral transform under the
target's exact law after its context (the vocabulary order), for ``equiv.stats.sampling_fit``.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from equiv.errors import InvalidArgument
from equiv.mtp.llama import LlamaRunner
from equiv.mtp.smollm2 import Tokenizer, load_weights

DRAFTS = ("bf16", "exit:L")
DEFAULT_DRAFT = "bf16"
LOGIT_CACHE = 2048                 # logits rows kept (about 400 MB at V = 49152)


def parse_draft(draft: str, layers: int) -> tuple:
    """``("bf16", None)`` or ``("exit", L)``; a bad name is an ``InvalidArgument``."""
    text = str(draft).strip()
    if text == "bf16":
        return "bf16", None
    if text.startswith("exit:"):
        try:
            layer = int(text[5:])
        except ValueError:
            layer = None
        if layer is not None and 1 <= layer < layers:
            return "exit", layer
    raise InvalidArgument(f"draft={draft!r} is unknown: use bf16 or exit:L with 1 <= L < {layers} "
                          f"(e.g. exit:24)")


class RealLM:
    """The decoding loop's model interface over a real Llama (module docstring)."""

    kind = "smollm2"

    def __init__(self, prompts, *, draft: str = DEFAULT_DRAFT, device: str = "cpu", path=None,
                 tokenizer=None):
        if not prompts:
            raise InvalidArgument("prompts is empty: give at least one prompt")
        cfg, tensors = load_weights(path)
        self.cfg = cfg
        self.vocab = cfg.vocab
        self.device = torch.device(device)
        self.draft_name = str(draft)
        kind, layer = parse_draft(draft, cfg.layers)
        self.tokenizer = tokenizer or Tokenizer.from_gguf(path)
        self.target = LlamaRunner(cfg, tensors, device=device, exit_layers=() if layer is None else (layer,))
        self.draft = self.target if kind == "exit" else LlamaRunner(cfg, tensors, dtype="bfloat16",
                                                                   device=device)
        self._draft_key = layer if kind == "exit" else "final"
        self.prompt_texts = [p if isinstance(p, str) else None for p in prompts]
        self.prompt_ids = [self.tokenizer.encode(p) if isinstance(p, str) else [int(t) for t in p]
                           for p in prompts]
        if any(not ids for ids in self.prompt_ids):
            raise InvalidArgument("a prompt encodes to no tokens: every prompt needs text")
        # the trie: parent, token, position, ancestors (node ids, root first, itself last)
        self._parent, self._token, self._pos, self._anc = [], [], [], []
        self._children = {}
        self._hidden = {}                     # (runner id, key) -> {node: hidden [D]}
        self._logit_cache = OrderedDict()     # ((runner id, key), node) -> logits [V]
        self._done = {id(self.target): set(), id(self.draft): set()}
        self.forward_calls = 0
        self.nodes_computed = 0
        self._prompt_nodes = []
        for ids in self.prompt_ids:
            node = -1
            for t in ids:
                node = self._child(node, t)
            self._prompt_nodes.append(node)

    # -- the trie --------------------------------------------------------------------------
    def _child(self, parent: int, token: int) -> int:
        key = (parent, token)
        node = self._children.get(key)
        if node is None:
            node = len(self._token)
            self._children[key] = node
            self._parent.append(parent)
            self._token.append(token)
            self._pos.append(0 if parent < 0 else self._pos[parent] + 1)
            self._anc.append(([] if parent < 0 else self._anc[parent]) + [node])
        return node

    def text_of(self, node: int) -> list:
        """Token ids of a node's prefix."""
        return [self._token[n] for n in self._anc[int(node)]]

    @property
    def prompts(self) -> int:
        return len(self.prompt_ids)

    # -- computing nodes -------------------------------------------------------------------
    def _ensure(self, runner, nodes) -> None:
        done = self._done[id(runner)]
        todo, seen = [], set()
        for n in nodes:
            n = int(n)
            while n >= 0 and n not in done and n not in seen:
                seen.add(n)
                todo.append(n)
                n = self._parent[n]
        if not todo:
            return
        todo.sort(key=lambda n: self._pos[n])
        L = max(len(self._anc[n]) for n in todo)
        anc = np.zeros((len(todo), L), dtype=np.int64)
        mask = np.zeros((len(todo), L), dtype=bool)
        for i, n in enumerate(todo):
            a = self._anc[n]
            anc[i, :len(a)] = a
            mask[i, :len(a)] = True
        dev = self.device
        ids = torch.tensor(todo, dtype=torch.int64, device=dev)
        out = runner.forward(torch.tensor([self._token[n] for n in todo], device=dev),
                             torch.tensor([self._pos[n] for n in todo], device=dev), ids,
                             torch.from_numpy(anc).to(dev), torch.from_numpy(mask).to(dev))
        for key, hidden in out.items():
            store = self._hidden.setdefault((id(runner), key), {})
            for i, n in enumerate(todo):
                store[n] = hidden[i]
        done.update(todo)
        self.forward_calls += 1
        self.nodes_computed += len(todo)

    def _logits(self, runner, key, ctx):
        """Logits rows of the nodes ``ctx``; the last ``LOGIT_CACHE`` rows made are kept, so the
        paths and consumers that read a prefix after the first do not multiply again."""
        nodes = ctx.reshape(-1).tolist()
        self._ensure(runner, nodes)
        tag = (id(runner), key)
        cache = self._logit_cache
        missing = sorted({n for n in nodes if (tag, n) not in cache})
        if missing:
            store = self._hidden[tag]
            made = runner.logits(torch.stack([store[n] for n in missing]).float())
            for n, row in zip(missing, made):
                cache[(tag, n)] = row
        rows = []
        for n in nodes:
            cache.move_to_end((tag, n))
            rows.append(cache[(tag, n)])
        while len(cache) > LOGIT_CACHE:
            cache.popitem(last=False)
        if not rows:
            return torch.zeros((*ctx.shape, self.vocab), device=self.device)
        return torch.stack(rows).view(*ctx.shape, self.vocab)

    # -- the model interface ---------------------------------------------------------------
    def supports(self, consumer: str) -> bool:
        return True

    def initial_contexts(self, n: int):
        return torch.tensor([self._prompt_nodes[b % self.prompts] for b in range(n)],
                            dtype=torch.int64, device=self.device)

    def next_context(self, ctx, tokens):
        c, t = ctx.reshape(-1).tolist(), tokens.reshape(-1).clamp(0, self.vocab - 1).tolist()
        out = [self._child(a, b) for a, b in zip(c, t)]
        return torch.tensor(out, dtype=torch.int64, device=ctx.device).view(ctx.shape)

    def active(self, ctx, depth: int):
        return None

    def target_logits(self, ctx):
        return self._logits(self.target, "final", ctx)

    def draft_logits(self, ctx, depth: int):
        return self._logits(self.draft, self._draft_key, ctx)

    def token_pit(self, outcome, rng) -> np.ndarray:
        """Randomized PIT ``F(token - 1) + U * p(token)`` of every emitted token under the target
        after its context, in emission order per sequence (``outcome``: a ``DecodeOutcome``)."""
        tokens, lengths = outcome.tokens, outcome.lengths
        ctx = self.initial_contexts(tokens.shape[0])
        out = []
        with torch.inference_mode():
            for j in range(int(lengths.max(initial=0))):
                live = np.flatnonzero(lengths > j)
                rows = torch.from_numpy(live).to(ctx.device)
                tok = torch.from_numpy(tokens[live, j]).to(ctx.device)
                p = torch.softmax(self.target_logits(ctx[rows]).double(), dim=-1)
                before = torch.cumsum(p, dim=-1).gather(1, tok[:, None])[:, 0] - p.gather(1, tok[:, None])[:, 0]
                u = before + torch.from_numpy(rng.random(len(live))).to(p) * p.gather(1, tok[:, None])[:, 0]
                col = np.full(tokens.shape[0], np.nan)
                col[live] = u.clamp(0, 1).cpu().numpy()
                out.append(col)
                ctx = ctx.clone()
                ctx[rows] = self.next_context(ctx[rows], tok)
        if not out:
            return np.zeros(0)
        u = np.stack(out, 1)
        return u[np.arange(u.shape[1])[None, :] < lengths[:, None]]

    def decode_text(self, ids) -> str:
        return self.tokenizer.decode([int(t) for t in ids])

    def describe(self) -> dict:
        return {"kind": self.kind, "vocab": self.vocab, "draft": self.draft_name,
                "prompts": self.prompts, "architecture": self.cfg.to_json(),
                "target_dtype": "float32",
                "draft_dtype": "bfloat16" if self.draft is not self.target else "float32",
                "forward_calls": self.forward_calls, "nodes_computed": self.nodes_computed}
