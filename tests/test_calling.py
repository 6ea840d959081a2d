"""The calling layer of every op (equiv/run/calling.py): its deal, layouts, rewrites and loop.

Test plan: which writes bump ``t._version`` in the installed torch (what the two rewritten
histories rest on), and that ``rewrite`` keeps the guard's rule; each layout gives the input its
values at the promised strides and offsets, inside a guard band that a write past it trips; the
deal rotates every class of every dimension through consecutive keys, keeps the replay in call
0's context with a fresh generator, alternates fresh and kept generators, and is the plain
calling under ``EQUIV_CALLING=plain``; the loop shares one generator between calls 0 and 1,
catches a reused output buffer and a write, and names the call's classes; ``reach`` says where
each class was judged.
"""
import numpy as np
import pytest
import torch

from equiv.run.calling import CONTEXTS, DIMENSIONS, Calling, deal, reach
from equiv.run.seeded import Relabel, lay_out, rewrite, run_calls
from equiv.run.context import available


def test_which_writes_bump_the_version_counter():
    buf = torch.zeros(64)
    t = buf[8:38].view(3, 10)
    new = torch.ones(3, 10)

    def bumps(write) -> bool:
        was = t._version
        write()
        return t._version != was

    def under(mode):
        def write():
            with mode():
                t.copy_(new)
        return write
    assert bumps(lambda: t.copy_(new)) and bumps(lambda: t.detach().copy_(new))     # detach shares it
    assert bumps(under(torch.no_grad)) and bumps(under(torch.inference_mode))
    assert not bumps(lambda: t.data.copy_(new)) and not bumps(lambda: t.numpy().__setitem__(..., 2.0))
    g = lay_out(new, "x", "as built")
    was = g.tensor._version
    rewrite(g, new * 3, bump=False)
    assert g.tensor._version == was and torch.equal(g.tensor, new * 3) and g.problem("now") is None
    rewrite(g, new * 4)
    assert g.tensor._version == was + 1 and g.problem("now") is None


@pytest.mark.parametrize("layout", DIMENSIONS["layout"])
def test_each_layout_keeps_the_values_inside_a_guard_band(layout):
    t = torch.arange(3 * 5 * 7, dtype=torch.float32).view(3, 5, 7)
    g = lay_out(t, "x", layout)
    assert torch.equal(g.tensor, t) and g.problem("laid out") is None
    x = g.tensor
    if layout == "padded":
        assert x.stride()[1] == 128 and x.stride()[0] == 5 * 128
    if layout == "offset":
        assert x.storage_offset() % 4 == 3            # 3 elements past an aligned start: not 16 B aligned
    if layout == "sliced":                             # rows of a wider batch: the rows around are rows of t
        wide = torch.as_strided(x, (3 + 2 + 3, 5, 7), x.stride(), x.storage_offset() - 2 * x.stride(0))
        assert torch.equal(wide[:2], t[[1, 2]]) and torch.equal(wide[5:], t)
    torch.as_strided(x, (1,), (1,), x.storage_offset() - 1).fill_(5.0)    # one element before the input
    assert "its input x now" in g.problem("now")      # sliced: a row of the wider batch, which it was not given


def test_the_deal_rotates_every_class_and_keeps_the_replay_plain():
    n = {d: len(available("cpu") if d == "context" else c) for d, c in DIMENSIONS.items()}
    for start in range(0, 40, 7):
        got = [deal(k, 3, 4) for k in range(start, start + max(n.values()))]
        seen = {d: set().union(*(c.classes()[d] for c in got)) for d in DIMENSIONS}
        assert seen == {d: set(available("cpu") if d == "context" else c) for d, c in DIMENSIONS.items()}
    c = deal(5, 5, 3)
    assert c.contexts[-1] == c.contexts[0] and c.generators == ("fresh", "kept", "fresh", "kept", "fresh")
    assert deal(5, 5, 3) == c and "side_stream" in deal(0, 2, 1, "cuda:0").contexts + tuple(
        deal(k, 2, 1, "cuda:0").contexts[0] for k in range(5))
    assert set(CONTEXTS) - set(available("cpu")) == {"side_stream"}


def test_plain_calling_from_the_environment(monkeypatch):
    monkeypatch.setenv("EQUIV_CALLING", "plain")
    assert deal(3, 3, 2) == Calling.plain(3, 2)


def _tokens(d, q, p, gen):
    return torch.randint(0, p.shape[-1], (p.shape[0], 2), generator=gen)


def _built():
    p = torch.softmax(torch.randn(6, 2, 9, generator=torch.Generator().manual_seed(0)), -1)
    return [torch.zeros(6, 1, dtype=torch.int64), p[:, :1].contiguous(), p]


def test_calls_0_and_1_share_a_generator_and_the_replay_is_fresh():
    seen = []

    def fn(d, q, p, gen):
        seen.append(gen)
        return _tokens(d, q, p, gen)
    c = Calling(("grad", "no_grad", "grad"), ("fresh", "kept", "fresh"), "rewritten", ("padded", "sliced", "offset"))
    outs, problem, cause = run_calls(fn, _built(), ("d", "q", "p"), (10, 11, 10), lambda out: None, c,
                                     relabel=Relabel(tokens=(0,), tables=(1, 2)))
    assert problem is None and len(outs) == 3 and len(seen) == 4            # the call on other contents first
    assert seen[1] is seen[2] and seen[3] is not seen[2] and torch.equal(outs[0], outs[2])
    assert not torch.equal(outs[0], outs[1])


def test_a_reused_output_buffer_and_a_write_are_named_with_the_call_s_classes():
    buf = torch.zeros(6, 2, dtype=torch.int64)

    def static(d, q, p, gen):
        return buf.copy_(_tokens(d, q, p, gen))

    def writes(d, q, p, gen):
        if not torch.is_grad_enabled():
            p.data[0, 0, 0] += 1.0
        return _tokens(d, q, p, gen)
    c = Calling(("grad", "no_grad", "grad"), ("fresh", "kept", "fresh"), "fresh", ("as built",) * 3)
    _, problem, cause = run_calls(static, _built(), ("d", "q", "p"), (1, 2, 1), lambda out: None, c)
    assert cause == "output reused" and "call 2 under no_grad; kept generator" in problem    # call 3 replays 1
    _, problem, cause = run_calls(writes, _built(), ("d", "q", "p"), (1, 2, 1), lambda out: None, c)
    assert cause == "input write" and "modified its input p" in problem and "call 2 under no_grad" in problem


def test_reach_says_where_each_class_was_judged():
    line = reach([(deal(k, 2, 3), False) for k in range(4)] + [(deal(k, 3, 3), True) for k in range(1)])
    stat, exact_only, missed = (part.split(": ", 1)[1] for part in line.split(" | "))
    c = deal(0, 3, 3)
    assert c.contexts[0] in stat and c.history in stat and "kept" in stat
    assert c.contexts[0] not in exact_only and "thread" in exact_only + stat
    assert missed.startswith("none") and "side_stream" in missed
    assert np.all([d in line for d in DIMENSIONS])
