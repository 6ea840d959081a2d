"""The guard band's one rule (equiv.run.guard): any bit of the buffer that differs from the input
as laid out is a write, named with where it landed. The snapshot is the caller's tensor plus the
known canaries (no third copy of every input); these tests write one element in each place of
buffers of every dtype and layout and ask for the answer a whole-buffer copy gives."""
import numpy as np
import pytest
import torch

from equiv.run.guard import Guarded
from equiv.run.seeded import lay_out, rewrite

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool)


def _input(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 100, shape, generator=g, dtype=dtype)


def _flip(buf, pos):
    """Change the element at ``pos`` of ``buf`` (every bit pattern differs after)."""
    if buf.dtype == torch.bool:
        buf[pos] = not bool(buf[pos])
    elif buf.dtype.is_floating_point:
        buf[pos] = -buf[pos] if buf[pos] != 0 else 1.0
    else:
        buf[pos] = buf[pos] + 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["as built", "padded", "offset", "sliced"])
def test_a_write_anywhere_is_seen_and_placed(dtype, layout):
    t = _input(dtype, (5, 37))
    probe = lay_out(t, "x", layout)
    assert probe.problem("now") is None                  # as laid out: no write
    n = probe.buffer.numel()
    lead, end = probe.lead, probe.lead + probe.rows * probe.stride
    rows_at = [lead + r * probe.stride + c for r in range(probe.rows) for c in range(probe.last)]
    places = {"a row": rows_at[len(rows_at) // 2], "before": 0, "after": n - 1}
    if probe.stride > probe.last:
        places["padding"] = lead + probe.last
    for where, pos in places.items():
        g = lay_out(t, "x", layout)
        _flip(g.buffer, pos)
        line = g.problem("during the call")
        assert line is not None, (where, layout)
        is_row = lead <= pos < end and (pos - lead) % g.stride < g.last
        assert ("modified its input x" in line) == is_row, line
        assert ("wrote past its input x" in line) == (not is_row), line
        assert torch.equal(t, _input(dtype, (5, 37)))    # the caller's tensor: never written


def test_a_rewrite_that_keeps_the_value_is_a_write():
    g = Guarded(torch.tensor([[0.0, 1.0, 2.0]]), "x")
    g.tensor[0, 0] = -0.0                                # == 0.0, another bit pattern
    assert "modified its input x" in g.problem("now")
    t = torch.tensor([[0.0, 1.0, float("nan")]])
    g = Guarded(t, "x")
    assert g.problem("now") is None                      # a NaN left as it was: no write
    bits = g.tensor.view(torch.int32)
    bits[0, 2] = bits[0, 2] ^ 1                          # another NaN payload
    assert "modified its input x" in g.problem("now")


def test_retaken_and_rewritten_snapshots():
    t = _input(torch.float32, (4, 9))
    g = Guarded(t, "x")
    rewrite(g, t + 1)                                    # other values, the snapshot retaken
    assert g.problem("now") is None
    g.tensor[1, 1] += 1
    assert "modified its input x" in g.problem("now")
    g = Guarded(t, "x")
    rewrite(g, t + 1, snapshot=False)                    # not retaken: the values differ from it
    assert "modified its input x" in g.problem("now")
    rewrite(g, t, snapshot=False)                        # the laid-out values again, bit for bit
    assert g.problem("now") is None
    assert np.array_equal(g.snapshot.numpy(), Guarded(t, "y").snapshot.numpy())


def _devices():
    return ["cpu"] + [pytest.param("cuda", marks=pytest.mark.equiv_gpu)]


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["as built", "padded", "sliced"])
def test_one_read_of_every_guard_sees_each_write(device, dtype, layout):
    """``first_problem``: every guard of a call read at once (one synchronisation on a GPU), the
    same answer as asking each guard in turn; ``unchanged_flag`` is False exactly where
    ``problem`` has a line, a retaken snapshot too."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from equiv.run.guard import first_problem
    t = _input(dtype, (5, 37)).to(device)
    guards = [lay_out(t, "x", layout), None, Guarded(_input(dtype, (3, 8), seed=1).to(device), "y")]
    assert first_problem(guards, "now") is None
    assert all(bool(g.unchanged_flag()) for g in guards if g is not None)
    retaken = Guarded(t, "z")
    rewrite(retaken, t.flip(0))
    assert bool(retaken.unchanged_flag()) and first_problem([retaken], "now") is None
    for pos in (0, guards[0].lead + 3, guards[0].buffer.numel() - 1):
        for victim in (0, 2):
            gs = [lay_out(t, "x", layout), None, Guarded(_input(dtype, (3, 8), seed=1).to(device), "y")]
            _flip(gs[victim].buffer, min(pos, gs[victim].buffer.numel() - 1))
            assert not bool(gs[victim].unchanged_flag())
            line = first_problem(gs, "during the call")
            assert line is not None and line == gs[victim].problem("during the call")
            assert f"input {'x' if victim == 0 else 'y'}" in line
    _flip(retaken.buffer, 1)
    assert not bool(retaken.unchanged_flag()) and "input z" in first_problem([retaken], "now")
