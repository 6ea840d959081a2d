"""The compact trace format equiv-mtp-trace/2 (equiv/mtp/compact.py).

Plan: a full trace converted to compact replays with exactly the full trace's acceptance figures
(the committed tiny_v64 trace, old format, still read; and the shipped SmolLM2 traces against the
full-trace figures recorded when they were made); a self-draft's repeated rows are stored once;
the size per position is the documented formula; a file round-trips; a corrupted file is refused
with the position named.
"""
import json
import os

import numpy as np
import pytest

from equiv.errors import InvalidArgument
from equiv.fixtures import path as fixture_path
from equiv.mtp import Trace, load_trace, run_mtp, save_trace
from equiv.mtp.compact import CompactTrace, bytes_per_position, compact, stored_bytes

TINY = fixture_path("traces", "tiny_v64.npz")
SHIPPED = [fixture_path("traces", f"smollm2_{d}.npz") for d in ("bf16", "exit24")]
PATHS, CONSUMERS = ["softmax_topk", "hardcoded_one"], ["greedy", "confidence"]
KEYS = ("accept_length", "per_position", "histogram", "drafted_per_emitted")


def figures(trace) -> dict:
    run = run_mtp(PATHS, CONSUMERS, trace=trace, device="cpu")
    return {f"{r.path} x {r.consumer}": {k: r.metrics.to_json()[k] for k in KEYS} for r in run.records}


def test_old_format_is_still_read_and_compacts_to_the_same_figures():
    full = load_trace(TINY)
    assert isinstance(full, Trace)
    small = compact(full, k=8)
    assert figures(small) == figures(full)


@pytest.mark.parametrize("path", SHIPPED, ids=os.path.basename)
def test_shipped_smollm2_trace_replays_as_the_full_trace_it_was_made_from(path):
    tr = load_trace(path)
    assert isinstance(tr, CompactTrace) and tr.vocab == 49152 and os.path.getsize(path) <= 5_000_000
    want = tr.meta["full_replay"]
    got = figures(tr)
    assert got == json.loads(json.dumps(want)) or _close(got, want)
    assert tr.draft_lse.shape[0] == int(tr.lengths.sum())         # one draft row a position


def _close(got, want):
    for key, row in want.items():
        for k in KEYS:
            assert np.allclose(np.asarray(got[key][k], float), np.asarray(row[k], float), rtol=0, atol=1e-9), key
    return True


def _self_draft_trace(N=2, T=12, S=3, V=40, seed=0):
    rng = np.random.default_rng(seed)
    target = rng.normal(size=(N, T, V)).astype(np.float32)
    per_pos = rng.normal(size=(N, T, V)).astype(np.float32)
    draft = np.zeros((N, T, S, V), np.float32)
    for j in range(S):
        draft[:, :T - j, j] = per_pos[:, j:]
    return Trace(target.argmax(-1).astype(np.int64), np.full(N, T), target, draft, "float32", {})


def test_repeated_draft_rows_are_stored_once():
    tr = _self_draft_trace()
    small = compact(tr, k=4)
    assert small.draft_lse.shape[0] == 2 * 12                       # not 2 * 12 * 3
    assert (small.draft_index[:, :10, 2] == small.draft_index[:, 2:, 0]).all()
    assert figures(small) == figures(tr)


def test_bytes_per_position_formula_and_measured():
    assert bytes_per_position(49152) == 276 and bytes_per_position(129280) == 404
    small = compact(_self_draft_trace(V=40), k=4)
    positions = int(small.lengths.sum())
    per_pos = (stored_bytes(small) - 8 * (small.tokens.size + small.lengths.size + 1)) / positions
    assert per_pos == bytes_per_position(40, k=4)


def test_round_trip_and_corruption_is_refused(tmp_path):
    small = compact(load_trace(TINY), k=8)
    out = tmp_path / "c.npz"
    save_trace(small, out)
    back = load_trace(out)
    for k, a in small.arrays().items():
        assert np.array_equal(a, back.arrays()[k]), k
    with np.load(out) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["target_topi"] = arrays["target_topi"].copy()
    arrays["target_topi"][1, 3, [0, 1]] = arrays["target_topi"][1, 3, [1, 0]]   # argmax moves
    bad = tmp_path / "bad.npz"
    np.savez_compressed(bad, **arrays)
    with pytest.raises(InvalidArgument, match="sequence 1 position 3"):
        load_trace(bad)
    arrays["draft_index"] = arrays["draft_index"] + 10 ** 6
    np.savez_compressed(bad, **arrays)
    with pytest.raises(InvalidArgument, match="draft_index"):
        load_trace(bad)
