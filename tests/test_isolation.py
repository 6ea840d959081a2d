"""The supervised worker (equiv.run): no exit, signal, interrupt or hang of a candidate can end
or fake a verdict, and one rule decides "modified its input".

Each test names the class of issue 10 it guards; each was seen failing before the worker existed
(the gate exited 0 on an exiting candidate, counted a KeyboardInterrupt as a pass, hung on a
C spin, and let a late input write or a static output buffer through).
"""
from __future__ import annotations

import os

import pytest
import torch

from equiv import Recipe, compare
from equiv.errors import CandidateLoadError
from equiv.run import Raw, close_all, runner_for

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(HERE, "candidates", "hostile.py")
SMALL = Recipe(family="gaussian", seed=0, batch=3, vocab=50)


def spec(name: str) -> str:
    return f"{HOSTILE}:{name}"


def _hostile():
    """The hostile candidates as a module of this process (to call them directly)."""
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location("equiv_test_hostile", HOSTILE)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _fresh_runners():
    yield
    close_all()


@pytest.mark.parametrize("name, kind, words", [
    ("exits_zero", "interrupt", "SystemExit"),
    ("os_exits_zero", "exit", "exited with code 0"),
    ("keyboard_interrupt", "interrupt", "KeyboardInterrupt"),
    ("custom_base_exception", "interrupt", "_Custom"),
    ("generator_exit", "interrupt", "GeneratorExit"),
    ("segfaults", "signal", "SIGSEGV"),
])
def test_an_abnormal_end_is_an_outcome_and_the_run_goes_on(name, kind, words):
    runner = runner_for(spec(name), "cpu", timeout=30)
    out = runner.call(SMALL, 1)
    assert not out.ok and out.kind == kind and words in out.problem
    res = compare(spec(name), SMALL, 1, timeout=30)      # the same through compare: a failed contract
    assert not res.passed and words in res.check("contract").detail
    good = compare(spec("k1_only"), SMALL, 1, timeout=30)  # and this process goes on judging
    assert good.passed, good.summary()


@pytest.mark.parametrize("name", ["sleeps", "spins_in_c"])
def test_a_hang_costs_one_time_out_then_later_calls_are_not_made(name):
    import time

    runner = runner_for(spec(name), "cpu", timeout=2)
    t0 = time.perf_counter()
    first = runner.call(SMALL, 1)
    second = runner.call(SMALL, 1)
    assert first.kind == "timeout" and "did not return within 2 s" in first.problem
    assert second.kind == "not_called" and "hung on an earlier call" in second.problem
    assert time.perf_counter() - t0 < 15


def test_the_workers_last_output_is_reported_and_its_log_leaves_no_file(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # where the worker's log would go
    runner = runner_for(spec("prints_then_exits"), "cpu", timeout=30)
    for _ in range(2):                                         # two workers, one after the other
        out = runner.call(SMALL, 1)
        assert out.kind == "exit" and "exited with code 5" in out.problem
        assert "marker 7f3a" in (out.log_tail or "")
        assert os.listdir(tmp_path) == []                      # the log has no name while it lives
    close_all()
    assert os.listdir(tmp_path) == []


def test_a_submitted_call_runs_while_the_caller_works_and_its_time_out_counts_from_the_send():
    import time

    from equiv.run import load_check

    assert load_check(spec("sleeps"), "cpu", timeout=3) is None   # the worker is up before the clock
    runner = runner_for(spec("sleeps"), "cpu", timeout=3)
    t0 = time.perf_counter()
    pending = runner.submit(SMALL, 1)
    time.sleep(4)                                              # the caller's own work, past the limit
    out = pending.result()
    assert out.kind == "timeout" and "did not return within 3 s" in out.problem
    # counted from the send: over at once (a kill, ~1 s at most); from the wait, 4 + 3 s or more
    assert time.perf_counter() - t0 < 6.5
    good = runner_for(spec("k1_only"), "cpu", timeout=30)
    first = good.submit(SMALL, 1)
    assert good.call(SMALL, 1).ok and first.result().ok        # a second request collects the first


def test_an_import_that_raises_is_a_usage_error_and_one_that_exits_is_a_failure(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("raise ImportError('no such kernel library')\n")
    with pytest.raises(CandidateLoadError, match="no such kernel library"):
        runner_for(f"{bad}:fn", "cpu").call(SMALL, 1)
    out = runner_for(os.path.join(HERE, "candidates", "exits_at_import.py") + ":draft_topk", "cpu").call(SMALL, 1)
    assert not out.ok and out.kind == "interrupt" and "SystemExit while importing" in out.problem


@pytest.mark.parametrize("name, words", [
    ("edits_input", "modified its input logits during the call"),
    ("writes_past_row", "wrote past its input logits"),
    ("rewrites_nan", "0x7fc00001"),
])
def test_one_rule_for_a_modified_input(name, words):
    x = Recipe(family="poison_mix", seed=1, batch=6, vocab=40).build()
    res = compare(spec(name), x, 1, timeout=30)
    assert not res.passed and words in res.check("contract").detail, res.summary()


def test_a_late_write_is_seen_at_the_end_of_the_stage():
    runner = runner_for(spec("edits_input_later"), "cpu", timeout=30)
    assert runner.call(SMALL, 1).ok                # the write comes 50 ms after the return
    late = runner.settle()
    assert late is not None and "after returning" in late and "123" in late


def test_a_static_output_buffer_is_caught_on_the_next_call():
    runner = runner_for(spec("static_output_buffer"), "cpu", timeout=30)
    assert runner.call(SMALL, 1).ok
    out = runner.call(SMALL.with_(seed=1), 1)
    assert out.kind == "outputs" and "overwrote the outputs of its previous call" in out.problem


@pytest.mark.parametrize("name", ["k1_only", "float64_probs", "non_contiguous_outputs"])
def test_correct_awkward_candidates_pass(name):
    for recipe in (SMALL, SMALL.with_(dtype="bfloat16", pad=3), SMALL.with_(family="poison_mix", batch=8)):
        res = compare(spec(name), recipe, 1, timeout=30)
        assert res.passed, res.summary()


def test_inputs_cross_as_descriptions_and_arrive_bit_identical():
    x = Recipe(family="near_ties", seed=2, batch=4, vocab=33, dtype="bfloat16", pad=2).build()
    raw = Raw.of(x)
    y = raw.build("cpu")
    assert raw.pad == 2 and y.stride() == x.stride()
    assert torch.equal(x.view(torch.int16), y.view(torch.int16))


# -- a red-team pass over the isolated gate: each of these passed or broke the verdict before -------

def test_inputs_sit_at_a_nonzero_storage_offset_after_a_canary_band():
    # before: every input started at offset 0, so code that reads from the storage's base passed
    res = compare(spec("ignores_storage_offset"), SMALL, 1, timeout=30)
    assert not res.passed and not res.check("index").passed, res.summary()
    res = compare(spec("writes_before_row"), SMALL, 1, timeout=30)
    assert not res.passed and "before the first row" in res.check("contract").detail, res.summary()


def test_the_verdict_process_never_runs_code_named_by_a_reply():
    import pickle

    from equiv.run.invoke import to_host
    from equiv.run.wire import ReplyError, loads

    # before: the reply was unpickled as it came, and this object's __reduce__ (os._exit(0)) ended
    # the verdict process with status 0: a PASS-looking exit and no verdict
    res = compare(spec("exits_when_unpickled"), SMALL, 1, timeout=30)
    assert not res.passed and "_ExitWhenRead" in res.check("contract").detail, res.summary()
    res = compare(spec("returns_own_object"), SMALL, 1, timeout=30)
    assert not res.passed and "_OwnRecord" in res.check("contract").detail, res.summary()
    hostile = _hostile()
    forged = pickle.dumps(("outcome", hostile._ExitWhenRead(0)))
    with pytest.raises(ReplyError, match="_exit"):
        loads(forged)
    with pytest.raises(ReplyError, match="not a well-formed reply"):
        loads(b"not a pickle")
    assert isinstance(to_host(hostile._ExitWhenRead(3)), type(to_host(object())))   # Opaque
    ok = loads(pickle.dumps(to_host((torch.zeros(2, 1), torch.zeros(2, 1, dtype=torch.int64), 3, "s"))))
    assert ok[0].shape == (2, 1) and ok[2:] == (3, "s")


@pytest.mark.parametrize("name", ["returns_list", "returns_topk_result"])
def test_lists_and_named_tuples_are_outputs_everywhere(name):
    from equiv.mtp.decoding import call_path

    res = compare(spec(name), SMALL, 1, timeout=30)
    assert res.passed, res.summary()
    hostile = _hostile()
    # before: the MTP decoder required a tuple, so a list failed the gate's MTP stage only
    p, idx = call_path(getattr(hostile, name), SMALL.build(), 1, name)
    assert p.dtype == torch.float32 and idx.dtype == torch.int64


def test_an_int32_index_fails_the_contract_and_the_mtp_decoder_alike():
    from equiv.errors import EquivError
    from equiv.mtp.decoding import call_path

    res = compare(spec("int32_index"), SMALL, 1, timeout=30)
    assert not res.passed and "int64" in res.check("contract").detail
    hostile = _hostile()
    # before: the decoder converted it and went on, so MTP passed what the contract failed
    with pytest.raises(EquivError, match="int64"):
        call_path(hostile.int32_index, SMALL.build(), 1, "int32_index")


def test_an_approximate_top_k_fails_on_strided_top_entries():
    strided = Recipe.parse("near_ties:seed=7,batch=10,vocab=129280,dtype=float32,ties=6,position=strided")
    assert compare(spec("approximate_top_k"), strided, 1, timeout=60).passed       # exact at k = 1
    res = compare(spec("approximate_top_k"), strided, 4, timeout=60)
    assert not res.passed and not res.check("index").passed, res.summary()


def test_cuda_and_cuda0_are_one_runner_and_one_worker():
    # the suite's equivalence properties call through a tensor's device ("cuda:0") and the
    # plugin's load check through "cuda": two keys started a second worker (seconds on a GPU)
    first = runner_for(spec("k1_only"), "cuda", timeout=30)
    assert runner_for(spec("k1_only"), "cuda:0", timeout=30) is first
    assert runner_for(spec("k1_only"), "cpu", timeout=30) is not first
    assert first.proc is None                                  # made, not started


def test_a_worker_started_before_the_device_is_known_is_the_one_the_runner_returns(tmp_path):
    # a gate starts the worker of a user's candidate (and of the MTP stage's lane) before it
    # imports torch: the two imports of torch side by side, not one after the other
    from equiv.run import load_check, prestart

    prestart(spec("k1_only"), "draft_topk", timeout=30)
    prestart(spec("k1_only"), "draft_topk", timeout=30, lane="mtp")
    prestart(spec("k1_only"), "draft_topk", timeout=30)           # asked again: still one
    prestart("softmax_topk", "draft_topk", timeout=30)             # ours, in this process: none
    from equiv.run import supervisor
    started = dict(supervisor._PRESTARTED)
    assert len(started) == 2 and all(r.proc is not None and r.device is None for r in started.values())
    runner = runner_for(spec("k1_only"), "cpu", timeout=30)
    assert runner in started.values() and runner.device == "cpu"
    assert load_check(spec("k1_only"), "cpu", timeout=30) is None    # the load's reply, read now
    assert runner_for(spec("k1_only"), "cpu", timeout=30, lane="mtp") in started.values()
    assert not supervisor._PRESTARTED
    assert compare(spec("k1_only"), SMALL, 1, timeout=30).passed
    assert runner.calls == 1 and runner.proc is not None


def test_a_worker_started_ahead_that_no_runner_took_is_ended_when_the_gate_stops(tmp_path):
    from equiv.run import prestart, supervisor
    from equiv.run.suite import killed_on_error

    prestart(spec("k1_only"), "draft_topk", timeout=30)
    proc = next(iter(supervisor._PRESTARTED.values())).proc
    with pytest.raises(KeyboardInterrupt), killed_on_error(None):
        raise KeyboardInterrupt
    assert not supervisor._PRESTARTED and proc.poll() is not None


def test_a_worker_started_ahead_still_makes_an_import_that_raises_a_usage_error(tmp_path):
    from equiv.run import load_check, prestart

    bad = tmp_path / "raises_on_import.py"
    bad.write_text("raise ImportError('no such kernel')\ndef f(logits, k):\n    return None\n")
    prestart(f"{bad}:f", "draft_topk", timeout=30)
    with pytest.raises(CandidateLoadError, match="no such kernel"):
        load_check(f"{bad}:f", "cpu", timeout=30)
