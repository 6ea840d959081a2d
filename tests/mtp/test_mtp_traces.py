"""Recorded traces (equiv/mtp/traces.py): record, save, load, replay.

Plan: a trace recorded from a tiny torch model built here round-trips through the file format
in every logits dtype; the loader refuses malformed files with one clear message (missing keys,
wrong format tag, a token that is not the target's argmax); replaying a trace is lossless under
greedy verification, its acceptance matches a direct count from the arrays, and the consumers a
trace cannot replay are marked not applicable; the committed fixture loads and replays.
"""
import os

import numpy as np
import pytest
import torch

from equiv.errors import InvalidArgument
from equiv.fixtures import path as fixture_path
from equiv.mtp import Trace, load_trace, record_trace, run_mtp, save_trace

FIXTURE = fixture_path("traces", "tiny_v64.npz")
V = 32


class Bigram(torch.nn.Module):
    """Causal by construction: the logits at position i depend on ids[i] only."""

    def __init__(self, seed, noise=0.0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(torch.randn(V, V, generator=g) * 4)
        self.noise = torch.randn(V, V, generator=g) * noise

    def forward(self, ids):
        return (self.table + self.noise)[ids]                     # [1, L, V]


class DepthDraft(Bigram):
    def forward(self, ids, depth=0):
        return (self.table + (1 + depth) * self.noise)[ids]


@pytest.fixture(scope="module")
def trace():
    target = Bigram(0)
    draft = DepthDraft(0, noise=1.5)
    return record_trace(target, draft, [[1], [2, 3], [7], [30]], length=24, steps=3)


def test_recorded_trace_is_greedy_and_indexed_as_documented(trace):
    assert trace.tokens.shape == (4, 24) and trace.vocab == V and trace.steps == 3
    table = Bigram(0).table.detach()
    prev = [1, 3, 7, 30]
    for b in range(4):
        for t in range(24):
            assert trace.tokens[b, t] == int(table[prev[b]].argmax())
            prev[b] = int(trace.tokens[b, t])
    # draft depth j of a round starting at t predicts tokens[t + j] from tokens[t + j - 1]
    noise = DepthDraft(0, noise=1.5).noise
    row = (table + 3 * noise)[int(trace.tokens[0, 9])]
    assert np.allclose(trace.draft_logits[0, 8, 2], row.numpy(), atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_file_round_trip(tmp_path, dtype):
    t = record_trace(Bigram(1), Bigram(1, noise=1.0), [[4], [5]], length=10, steps=2,
                     logits_dtype=dtype, meta={"source": "test"})
    path = save_trace(t, tmp_path / "t.npz")
    back = load_trace(path)
    assert back.logits_dtype == dtype and back.meta == {"source": "test"}
    assert np.array_equal(back.tokens, t.tokens) and np.array_equal(back.draft_logits, t.draft_logits)
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]       # no temporary file left


def test_loader_refuses_malformed_files(tmp_path, trace):
    bad = tmp_path / "bad.npz"
    np.savez(bad, tokens=trace.tokens)
    with pytest.raises(InvalidArgument, match="lacks format, meta, lengths"):
        load_trace(bad)
    tokens = trace.tokens.copy()
    tokens[2, 5] = (tokens[2, 5] + 1) % V
    nongreedy = Trace(tokens, trace.lengths, trace.target_logits, trace.draft_logits)
    with pytest.raises(InvalidArgument, match="sequence 2 position 5: .*greedy decoding"):
        save_trace(nongreedy, tmp_path / "x.npz")
    with pytest.raises(InvalidArgument, match="no such file"):
        load_trace(tmp_path / "missing.npz")
    np.savez(bad, format=np.array("other/2"), meta=np.array("{}"), tokens=trace.tokens,
             lengths=trace.lengths, target_logits=trace.target_logits, draft_logits=trace.draft_logits)
    with pytest.raises(InvalidArgument, match="format 'other/2'"):
        load_trace(bad)


def _direct_greedy_accepts(trace, steps):
    """Accepted drafts per round, counted straight from the arrays (softmax_topk = argmax)."""
    accepted = []
    for b in range(trace.sequences):
        t, n = 0, int(trace.lengths[b])
        while t + steps < n:
            a = 0
            while a < steps and trace.draft_logits[b, t, a].argmax() == trace.tokens[b, t + a]:
                a += 1
            accepted.append(a)
            t += a + 1
    return accepted


def test_replay_is_lossless_and_counts_what_the_arrays_say(trace):
    res = run_mtp(None, ["greedy", "target_only", "tree"], trace=trace, device="cpu")
    greedy = res.record("softmax_topk", "greedy")
    direct = _direct_greedy_accepts(trace, 3)
    assert greedy.lossless and greedy.metrics.rounds == len(direct)
    assert greedy.metrics.accepted_tokens == sum(direct)
    assert 0 < greedy.metrics.accept_rate < 1
    for consumer in ("target_only", "tree"):
        r = res.record("identity_top1", consumer)
        assert not r.applicable and "trace" in r.reason
    with pytest.raises(InvalidArgument, match="steps=4 is more than the trace's 3"):
        run_mtp(None, ["greedy"], trace=trace, steps=4, device="cpu")


def test_committed_fixture_loads_and_replays():
    t = load_trace(FIXTURE)
    assert (t.sequences, t.vocab, t.steps, t.logits_dtype) == (4, 64, 3, "float16")
    assert os.path.getsize(FIXTURE) < 100_000
    res = run_mtp(["softmax_topk", "hardcoded_one"], ["greedy", "confidence"], trace=FIXTURE,
                  device="cpu")
    g = res.record("softmax_topk", "greedy")
    assert g.lossless and g.metrics.accept_length == pytest.approx(2.69, abs=0.01)
    assert res.record("hardcoded_one", "greedy").tokens_match_reference
    assert res.config["trace"] == FIXTURE
