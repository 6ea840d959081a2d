"""Inputs described as rows of a table (equiv.run.table_rows.TableRows), written into their guard
bands a chunk at a time: the guard must answer exactly as it does for the same input made whole --
the same buffer, the same write seen in every place and every chunk, the same line -- and the
other contents of a rewritten history must be the same bits."""
import numpy as np
import pytest
import torch

from equiv.run import table_rows
from equiv.run.guard import Guarded, first_problem
from equiv.run.seeded import Relabel, lay_out, rewrite
from equiv.run.table_rows import TableRows


def _devices():
    return ["cpu", pytest.param("cuda", marks=pytest.mark.equiv_gpu)]


def _rows(device, shape=(3, 5), V=29, seed=0):
    g = torch.Generator().manual_seed(seed)
    table = torch.rand((7, V), generator=g).to(device)
    index = torch.randint(0, 7, shape, generator=g).to(device)
    return TableRows(table, index)


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 2 rows of 29 float32 (several chunks an input, the last one short)."""
    monkeypatch.setattr(table_rows, "CHUNK_BYTES", {"cpu": 2 * 29 * 4, "cuda": 2 * 29 * 4})


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("layout", ["as built", "padded", "offset", "sliced"])
def test_the_buffer_is_the_one_of_the_input_made_whole(device, layout, small_chunks):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rows = _rows(device)
    whole = rows.materialize()
    assert tuple(rows.shape) == tuple(whole.shape) and rows.dtype == whole.dtype
    assert torch.equal(rows[1:3].materialize(), whole[1:3])
    a, b = lay_out(rows, "p", layout), lay_out(whole, "p", layout)
    assert torch.equal(a.buffer, b.buffer) and (a.lead, a.stride) == (b.lead, b.stride)
    assert first_problem([a], "now") is None and bool(a.unchanged_flag())
    assert torch.equal(a.snapshot, b.snapshot)


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("layout", ["as built", "padded"])
def test_a_write_in_any_chunk_or_band_is_seen_with_the_same_line(device, layout, small_chunks):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rows = _rows(device)
    probe = lay_out(rows, "p", layout)
    lead, stride, last = probe.lead, probe.stride, probe.last
    places = [0, lead, lead + stride * 8 + last - 1, lead + stride * 14 + 3, probe.buffer.numel() - 1]
    if stride > last:
        places.append(lead + 5 * stride + last)          # the padding of row 5
    for pos in places:
        a, b = lay_out(rows, "p", layout), lay_out(rows.materialize(), "p", layout)
        for g in (a, b):
            g.buffer[pos] = -1.0
        assert not bool(a.unchanged_flag())
        line = first_problem([a], "during the call")
        assert line is not None and line == b.problem("during the call"), pos


def test_the_other_contents_and_the_rewrite_back_are_the_same_bits(small_chunks):
    rows = _rows("cpu")
    whole = rows.materialize()
    tokens = torch.randint(-1, 29, (3, 5))
    relabel = Relabel(tokens=(0,), tables=(1,))
    a = [lay_out(tokens, "t", "as built"), lay_out(rows, "p", "padded")]
    b = [lay_out(tokens, "t", "as built"), lay_out(whole, "p", "padded")]
    relabel.write([g.tensor for g in a], [tokens, rows], bump=True)
    relabel.write([g.tensor for g in b], [tokens, whole], bump=True)
    assert torch.equal(a[1].buffer, b[1].buffer) and not torch.equal(a[1].tensor, whole)
    assert a[1].problem("now") is not None
    rewrite(a[1], rows, snapshot=False)
    assert a[1].problem("now") is None and torch.equal(a[1].tensor, whole)
    g = Guarded(rows, "p")
    rewrite(g, whole.flip(0))                            # other values, retaken
    assert g.problem("now") is None and torch.equal(g.tensor, whole.flip(0))


def test_a_bad_table_or_index_is_one_line():
    with pytest.raises(ValueError, match="int64 index"):
        TableRows(torch.zeros(3, 4), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"\[K, V\] table"):
        TableRows(torch.zeros(3), torch.zeros(2, dtype=torch.int64))
    rows = _rows("cpu")
    with pytest.raises(ValueError, match="not \\[3, 5, 29\\]"):
        list(rows.chunks(torch.zeros(3, 5, 28)))
    assert np.array_equal(np.asarray(rows.index.shape), [3, 5])


@pytest.mark.parametrize("memcmp", [True, False])
@pytest.mark.parametrize("layout", ["as built", "padded"])
def test_long_rows_are_compared_a_row_at_a_time_and_see_every_write(layout, memcmp, monkeypatch):
    """Rows past ``MIN_ROW_BYTES`` are compared with their table rows by ``memcmp`` (no gather);
    without libc's ``memcmp`` by torch: the same answer, a write in the last byte of a row too."""
    from equiv.run import same_bytes
    if not memcmp:
        monkeypatch.setattr(same_bytes, "_MEMCMP", None)
    V = same_bytes.MIN_ROW_BYTES // 4 + 3
    rows = _rows("cpu", shape=(2, 3), V=V)
    used = []
    real = same_bytes.same_rows
    monkeypatch.setattr(table_rows, "same_rows", lambda *a: used.append(real(*a)) or used[-1])
    probe = lay_out(rows, "p", layout)
    assert first_problem([probe], "now") is None and used[-1] is (True if memcmp else None)
    lead, stride = probe.lead, probe.stride
    for pos in (lead, lead + 3 * stride + V - 1, lead + 5 * stride + V // 2):
        a, b = lay_out(rows, "p", layout), lay_out(rows.materialize(), "p", layout)
        a.buffer[pos] = b.buffer[pos] = 2.0
        line = first_problem([a], "during the call")
        assert line is not None and line == b.problem("during the call")
        assert used[-1] is (False if memcmp else None)


def test_same_bytes_sees_one_bit_and_another_shape():
    from equiv.run.same_bytes import same_bytes
    a = torch.rand(1000)
    b = a.clone()
    assert same_bytes(a, b) and same_bytes(a[::2], b[::2])
    b.view(torch.int32)[999] ^= 1
    assert not same_bytes(a, b) and not same_bytes(a[1::2], b[1::2])
    assert not same_bytes(a, a[:999]) and not same_bytes(a, a.double())
    z = torch.tensor([0.0])
    assert not same_bytes(z, -z)                        # equal values, other bits


def test_a_write_into_the_padding_by_the_call_on_other_contents_is_seen_at_the_first_judged_call():
    """A rewritten history writes the other contents and then the case's rows back over the input:
    the rows alone, so a band the first call wrote into is seen, rows of a table as for a tensor."""
    from equiv.run.calling import Calling
    from equiv.run.seeded import run_calls
    rows = _rows("cpu", shape=(6, 2), V=9)
    calls = []

    def fn(d, q, p, gen):
        calls.append(1)
        if len(calls) == 1:                      # the call on other contents alone
            torch.as_strided(p, (1,), (1,), p.storage_offset() + 9).fill_(0.5)   # row 0's padding
        return torch.zeros(6, 2, dtype=torch.int64)
    for p in (rows, rows.materialize()):
        calls.clear()
        built = [torch.zeros(6, 1, dtype=torch.int64), p[:, :1] if isinstance(p, TableRows) else p[:, :1].contiguous(), p]
        c = Calling(("grad",) * 2, ("fresh",) * 2, "rewritten", ("as built", "as built", "padded"))
        _, problem, cause = run_calls(fn, built, ("d", "q", "p"), (1, 2), lambda out: None, c,
                                      relabel=Relabel(tokens=(0,), tables=(1, 2)))
        assert cause == "input write" and "wrote past its input p" in problem and "padding of row 0" in problem, problem
