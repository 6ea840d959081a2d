"""Live decoding on a real model: the prompt set, the sizes, and the end-to-end figures.

Plan. ``run_mtp(model="smollm2")`` builds a ``RealLM`` here (``build``) over the shipped prompt
set (``fixtures/prompts/smollm2.json``: plain and chat-formatted word problems, code and prose;
``load_prompts``), sized by ``REAL_BUDGETS``: ``sequences`` is the number of prompts (the first
ones of the set), ``rounds`` the verify rounds, and ``replicas`` the seeds each prompt is
sampled with under ``target_only`` (greedy replicas would be one computation), raised where
needed so that ``target_only`` emits at least ``MIN_SAMPLED_TOKENS`` for its PIT test. Beside the
per-record checks the harness makes for every model, a real model gets the figures the incident
was judged by (``end_to_end``): per path, the prompts whose greedy-verified text is
token-identical to plain greedy decoding, the invalid-output rate, and under sampling the
emitted text's law against plain sampling from the target over independent seeds
(``equiv.stats.text_law_test``), plus the texts themselves in the JSON. ``top1_distribution``
measures the target's top-1 probability in real decoding (the draft gate's ``confident``
weights); ``record_lm`` records a trace with the model's KV cache, one batched step a token.
"""
from __future__ import annotations

import json

import numpy as np
import torch

from equiv.errors import InvalidArgument
from equiv.fixtures import path as fixture
from equiv.mtp.compact import DEFAULT_K, CompactTrace, top_rows, validate_compact
from equiv.mtp.decoding import greedy_reference, sample_reference
from equiv.mtp.real import RealLM
from equiv.mtp.smollm2 import chat_prompt
from equiv.mtp.traces import Trace
from equiv.ops import ROLES, get_op

MODELS = ("synthetic", "smollm2")
REAL_BUDGETS = {
    "quick": {"cpu": {"sequences": 8, "rounds": 6, "replicas": 4},
              "cuda": {"sequences": 8, "rounds": 16, "replicas": 16}},
    "default": {"cpu": {"sequences": 8, "rounds": 8, "replicas": 4},
                "cuda": {"sequences": 8, "rounds": 32, "replicas": 32}},
}
TEXT_LAW_POSITIONS = 8
MIN_SAMPLED_TOKENS = 160           # replicas grow so target_only emits >= this many


def load_prompts(path=None) -> list:
    """``[{"name", "kind", "topic", "text"}]`` of the prompt file; a ``chat`` prompt's ``text`` is
    wrapped in the model's chat template (``prompt`` key: what the model reads)."""
    file = path or fixture("prompts", "smollm2.json")
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"prompts {str(file)!r} are not readable JSON: {exc}") from None
    out = []
    for p in data["prompts"]:
        prompt = chat_prompt(p["text"]) if p["kind"] == "chat" else p["text"]
        out.append(dict(p, prompt=prompt))
    return out


def build(draft, device, sequences, prompts_file=None):
    """``(RealLM, prompt records)`` over the first ``sequences`` prompts."""
    prompts = load_prompts(prompts_file)
    if sequences > len(prompts):
        raise InvalidArgument(f"sequences={sequences} is more than the {len(prompts)} shipped prompts")
    prompts = prompts[:sequences]
    return RealLM([p["prompt"] for p in prompts], draft=draft, device=device), prompts


def end_to_end(records, model, prompts, plain, greedy_tokens) -> dict:
    """Per path: greedy text identical to plain greedy (prompts), invalid-output rate, sampling law."""
    out = {"prompts": [p["name"] for p in prompts],
           "plain_greedy_text": [model.decode_text(t) for t in greedy_tokens]
           if greedy_tokens is not None else None,
           "plain_sampling_text": [model.decode_text(t) for t in plain[:len(prompts)]]
           if plain is not None else None,
           "paths": {}}
    for r in records:
        if not r.applicable or r.metrics is None:
            continue
        row = out["paths"].setdefault(r.path, {"invalid_output_rate": 0.0})
        row["invalid_output_rate"] = max(row["invalid_output_rate"], r.metrics.invalid_output_rate)
        if r.consumer == "greedy" and r.lossless_detail is not None and hasattr(r.lossless_detail, "identical"):
            d = r.lossless_detail
            row["greedy_identical_prompts"] = f"{d.sequences - d.mismatched_sequences}/{d.sequences}"
        if r.sampling_law is not None:           # target_only's; a tree's verified by a sampler beside it
            key = "sampling_law" if r.consumer == "target_only" else f"{r.consumer}_sampling_law"
            row[key] = r.sampling_law.to_json()
    return out


def format_end_to_end(e2e) -> str:
    lines = ["end to end (per path): greedy text == plain greedy (prompts), invalid output, "
             "sampled text vs plain sampling (min p over prompt x position, Bonferroni)"]
    def law_s(law):
        return "-" if law is None else (
            f"{'same law' if law['same_law'] else 'DIFFERENT'} (min p {law['min_p_value']:.3g} "
            f"over {law['tests']} tables)" if law["min_p_value"] is not None else "no table to test")

    for path, row in e2e["paths"].items():
        tree = row.get("tree_sampling_law")            # a tree verified by a user's sampler
        lines.append(f"  {path}: greedy identical {row.get('greedy_identical_prompts', '-')}, "
                     f"invalid {row['invalid_output_rate']:.2%}, sampling: {law_s(row.get('sampling_law'))}"
                     + ("" if tree is None else f", tree sampling: {law_s(tree)}"))
    return "\n".join(lines)


def top1_distribution(lm, sequences: int, length: int, replicas: int = 0, seed: int = 0) -> dict:
    """The target's top-1 probability at every position of greedy decoding (and of plain
    sampling with ``replicas`` seeds a prompt) of ``lm``'s first ``sequences`` prompts, binned in
    the draft gate's ``confident`` bands (the draft op's ``features("confidence_bands")``)."""
    def walk(tokens):
        ctx, out = lm.initial_contexts(tokens.shape[0]), []
        with torch.inference_mode():
            for j in range(tokens.shape[1]):
                out.append(torch.softmax(lm.target_logits(ctx).double(), -1).max(-1).values.cpu().numpy())
                ctx = lm.next_context(ctx, torch.from_numpy(tokens[:, j]).to(ctx.device))
        return np.concatenate(out)

    result = {}
    runs = [("greedy", greedy_reference(lm, sequences, length))]
    if replicas:
        runs.append(("sampling", sample_reference(lm, sequences * replicas, length, seed)))
    for name, tokens in runs:
        p = walk(tokens)
        q = 1.0 - p                              # the bands partition p (BANDS' order)
        band = np.select([p < 0.1, p < 0.9, q > 1e-3, q >= 1e-5], [0, 1, 2, 3], 4)
        shares = np.bincount(band, minlength=len(get_op(ROLES["draft"]).features("confidence_bands"))) / max(p.size, 1)
        result[name] = {"positions": int(p.size), "band_shares": [round(s, 4) for s in shares],
                        "above_0.999": round(float((p > 0.999).mean()), 4),
                        "quantiles": {q: round(float(np.quantile(p, q)), 4) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}}
    return result


def record_lm(lm, sequences: int, length: int, steps: int = 3, *, full: bool = False, k: int = DEFAULT_K,
              meta: dict | None = None):
    """Record ``length`` greedy tokens of each of ``lm``'s first ``sequences`` prompts with its
    KV cache (an ``equiv.mtp.real.RealLM``: one batched step a token): a ``CompactTrace``, or the
    full ``Trace`` (float32) with ``full=True``. A self-draft's row at depth ``j`` of a round at
    ``t`` is its row after position ``t + j``."""
    with torch.inference_mode():
        ctx = lm.initial_contexts(sequences)
        targets, drafts, tokens = [], [], []
        for _ in range(length):
            tl = lm.target_logits(ctx)
            targets.append(tl if full else top_rows(tl, k))
            dl = lm.draft_logits(ctx, 0)
            drafts.append(dl if full else top_rows(dl, k))
            tok = tl.argmax(-1)
            tokens.append(tok.cpu().numpy())
            ctx = lm.next_context(ctx, tok)
    tok = np.stack(tokens, 1).astype(np.int64)
    lens = np.full(sequences, length, dtype=np.int64)
    meta = dict(meta or {}, **{"source": f"equiv.mtp.live.record_lm: {lm.kind}, draft {lm.draft_name}"})
    if full:
        t = torch.stack(targets, 1).cpu()
        d_pos = torch.stack(drafts, 1).cpu()                           # [N, T, V]
        d = torch.zeros(sequences, length, steps, lm.vocab)
        for j in range(steps):
            d[:, :length - j, j] = d_pos[:, j:]
        return Trace(tok, lens, t.numpy(), d.numpy(), "float32", meta)
    ti = np.stack([r[0] for r in targets], 1)
    tv = np.stack([r[1] for r in targets], 1)
    tl_ = np.stack([r[2] for r in targets], 1)
    di = np.concatenate([r[0] for r in drafts])                      # row = t * N + b
    dv = np.concatenate([r[1] for r in drafts])
    dl_ = np.concatenate([r[2] for r in drafts])
    index = np.full((sequences, length, steps), -1, dtype=np.int32)
    for j in range(steps):
        t = np.arange(length - j)
        index[:, t, j] = ((t + j)[None, :] * sequences + np.arange(sequences)[:, None])
    return validate_compact(CompactTrace(tok, lens, lm.vocab, ti, tv, tl_, di, dv, dl_, index,
                                         dict(meta, k=int(min(k, lm.vocab)))))
