"""The memory budget of a gate (equiv.memory, issue 44): ``--max-gpu-memory`` and its pytest twin
parse or stop with one line; the rows a call may hold follow the budget; each call of every op's
quick plan fits the default budget; the gate's JSON carries each stage's peaks per process; a
device short of memory is NOT JUDGED before any work.
"""
import importlib
import json
import os
import subprocess
import sys

import pytest

from equiv import memory
from equiv.checks import Check, Stage, stage_of
from equiv.errors import InvalidArgument
from equiv.options import RunOptions
from equiv.ops.verify_tree.plans import contract_cases, statistical_cases

gate_module = importlib.import_module("equiv.gate")     # ``equiv.gate`` the attribute is the function


@pytest.fixture
def budget():
    yield memory.use_budget
    memory.use_budget(None)


@pytest.mark.parametrize("text, want", [("8GiB", 8 * 2 ** 30), ("512MiB", 512 * 2 ** 20), ("1.5GB", 1_500_000_000),
                                        ("1048576", 2 ** 20), (3 * 2 ** 30, 3 * 2 ** 30), (" 2 gib ", 2 * 2 ** 30)])
def test_a_budget_reads_units_and_plain_bytes(text, want):
    assert memory.parse_memory(text) == want
    assert memory.parse_memory(memory.memory_text(want)) == want


@pytest.mark.parametrize("text", ["lots", "8XB", "-1GiB", "100", "0", "GiB", ""])
def test_a_bad_budget_is_one_line_naming_the_value(text):
    with pytest.raises(InvalidArgument) as err:
        memory.parse_memory(text, "--max-gpu-memory")
    assert "\n" not in str(err.value) and repr(text) in str(err.value) and "8GiB" in str(err.value)


def test_the_cli_refuses_a_bad_budget_in_one_line():
    got = subprocess.run([sys.executable, "-m", "equiv", "gate", "--op", "verify", "--candidate", "torch_sampler",
                          "--device", "cpu", "--max-gpu-memory", "8XB"], capture_output=True, text=True, timeout=300)
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == [
        "equiv gate: error: --max-gpu-memory='8XB' is not an amount of memory: give bytes or a number with a unit, "
        "such as 8GiB, 512MiB or 16GB"]


def test_the_plugin_refuses_a_bad_budget_in_one_line(tmp_path, capfd):
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    assert True\n")
    code = pytest.main([str(tmp_path), "-q", "-p", "no:cacheprovider", "--equiv-max-gpu-memory=lots"])
    err = capfd.readouterr().err
    assert code == pytest.ExitCode.USAGE_ERROR
    lines = [ln for ln in err.splitlines() if "--equiv-max-gpu-memory='lots' is not an amount of memory" in ln]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), err


def test_the_budget_reaches_the_suite_as_the_plugin_option():
    opts = RunOptions.make("torch_sampler", op="verify", max_gpu_memory="512MiB")
    assert opts.max_gpu_memory == 2 ** 29 and "--equiv-max-gpu-memory=512MiB" in opts.pytest_args()
    assert not any("max-gpu-memory" in a for a in RunOptions.make("torch_sampler", op="verify").pytest_args(every=False))

    class Config:                                # what RunOptions.from_pytest reads
        def getoption(self, name, default=None):
            return {"equiv_candidate": "torch_sampler", "equiv_op": "verify", "equiv_device": "cpu",
                    "equiv_max_gpu_memory": "512MiB"}.get(name, default)
    assert RunOptions.from_pytest(Config()).max_gpu_memory == 2 ** 29


def test_rows_per_call_follow_the_budget_and_the_device(budget):
    row = 10 * 2 ** 20                           # 10 MiB of inputs a row: 60 MiB with the working copies
    assert memory.rows_per_call(row, "cuda") == 8 * 1024 // 60
    assert memory.rows_per_call(row, "cpu") == 1024 // 60          # the host's call budget: 1 GiB
    budget(512 * 2 ** 20)
    assert memory.rows_per_call(row, "cuda") == memory.rows_per_call(row, "cpu") == 8
    assert memory.rows_per_call(2 ** 30, "cuda") == 1              # a row larger than the budget: one a call


@pytest.mark.parametrize("batch, cap, sizes", [(4096, 395, {372, 373}), (10, 10, {10}), (10, 3, {2, 3}),
                                               (7, 100, {7}), (1, 1, {1})])
def test_row_windows_cover_the_batch_in_balanced_calls(batch, cap, sizes):
    w = memory.row_windows(batch, cap)
    assert w[0][0] == 0 and w[-1][1] == batch and all(a[1] == b[0] for a, b in zip(w, w[1:]))
    assert {b - a for a, b in w} == sizes and len(w) == -(-batch // cap)


@pytest.mark.parametrize("budget_name", ["quick", "full"])
def test_every_call_of_the_tree_plan_fits_the_default_budget(budget_name, device="cuda"):
    # the tree plan's calls are small (the wide vocab slot's ~4500 rows past V = 100000 come in
    # calls of 65-127): the tree verifier sends no windows; this fails when a case outgrows a
    # call's budget on a GPU (the largest now: 0.7 GiB of inputs in a contract case, 1 GiB in the
    # full plan's tail slot; over the CPU's 2 GiB call budget with the working copies)
    cases = contract_cases("any", 0) + statistical_cases(budget_name, "any", 0)
    worst = max(cases, key=lambda c: c.recipe.batch * c.recipe.nodes * c.recipe.vocab)
    r = worst.recipe
    assert memory.WORKING_COPIES * r.batch * r.nodes * (r.vocab * 4 * 2 + 16) <= memory.call_budget(device), r


def test_a_stage_records_its_peaks_per_process():
    def run(name, earlier):
        grow = bytearray(64 * 2 ** 20)           # 64 MiB held during the stage
        checks = [Check(name, f"{name}:x", True, "held", duration_s=float(len(grow) > 0))]
        return checks, stage_of(name, checks)
    asked = []
    _, st = memory.measured(run, lambda: asked.append(1) or {"gpu_peak_bytes": 5, "host_peak_bytes": 7})("s", [])
    assert len(asked) == 2                       # reset before, read after
    mem = st.to_json()["memory"]
    assert mem["processes"]["worker"] == {"gpu_peak_bytes": 5, "host_peak_bytes": 7}
    assert mem["processes"]["gate"]["host_peak_bytes"] >= 64 * 2 ** 20
    assert mem["host_peak_bytes"] == mem["processes"]["gate"]["host_peak_bytes"] + 7
    assert mem["gpu_peak_bytes"] == 5            # the gate process used no GPU (None), the worker 5


def test_the_properties_stage_gets_the_suite_process_peaks(monkeypatch):
    def fake_gate():
        subprocess.run([sys.executable, "-c", "from equiv.memory import write_suite_peaks; "
                        "write_suite_peaks({'gpu_peak_bytes': 3, 'host_peak_bytes': 4})"], check=True, timeout=120)
        return gate_module.GateResult(candidate="c", passed=True, checks=(), k=(), device="cpu", dtypes=(),
                                      budget="quick", seed=0, duration_s=1.0,
                                      stages=(Stage("properties", "pass", 1, 1), Stage("statistics", "pass", 1, 1)))
    opts = RunOptions.make("torch_sampler", op="verify", device="cpu")
    result = gate_module._within_memory(opts, ("properties", "statistics"), fake_gate)
    props = result.to_json()["stages"]["properties"]["memory"]
    assert props["processes"]["suite_worker"] == {"gpu_peak_bytes": 3, "host_peak_bytes": 4}
    assert props["processes"]["suite"]["host_peak_bytes"] > 10 * 2 ** 20 and props["gpu_peak_bytes"] == 3
    assert result.to_json()["stages"]["statistics"]["memory"] == {}
    assert memory.PEAKS_ENV not in os.environ


def test_a_device_short_of_memory_is_not_judged(monkeypatch):
    monkeypatch.setattr(gate_module, "resolve_device", lambda d: "cuda")
    monkeypatch.setattr(gate_module, "short_of_memory",
                        lambda d: "cuda has 3.0 GiB free of 80.0 GiB (other processes hold the rest), under the "
                                  "memory budget of 8.0 GiB (--max-gpu-memory 8GiB): free the device or lower the budget")
    ran = []

    def op_gate():                               # an op's gate asks once its suite has started
        memory.admit()
        ran.append(1)

    opts = RunOptions.make("torch_sampler", op="verify", device="auto")
    result = gate_module._within_memory(opts, ("properties", "statistics"), op_gate)
    assert not ran and result.verdict == "not judged" and not result.passed and result.exit_code == 3
    assert "3.0 GiB free" in result.not_judged[0] and "NOT JUDGED" in result.summary()
    assert {s.status for s in result.stages} == {"not run"}
    assert json.loads(json.dumps(result.to_json()))["verdict"] == "not judged"


@pytest.mark.parametrize("op, candidate, stages", [("draft_topk", "softmax_topk", ("properties", "tolerance")),
                                                   ("verify", "torch_sampler", ("properties", "statistics")),
                                                   ("verify_tree", "target_only", ("properties", "statistics"))])
def test_every_ops_gate_asks_the_device_once_its_suite_started_and_calls_nothing(op, candidate, stages,
                                                                                  monkeypatch):
    """The check imports torch (~1 s), so each op's gate makes it after its suite has started
    (``equiv.memory.admit``): short, the suite is killed, nothing is loaded or called."""
    from equiv.run import suite as suite_module

    asked, spawned = [], []
    monkeypatch.setattr(gate_module, "_short_of_memory",
                        lambda d: asked.append(len(spawned)) or "cuda has 3.0 GiB free of 80.0 GiB, under the budget")
    real_handle = suite_module.SuiteHandle

    class Handle(real_handle):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            spawned.append(self)

    monkeypatch.setattr(suite_module, "SuiteHandle", Handle)

    def no(*a, **kw):
        raise AssertionError("the gate went on past a device short of memory")

    for module, name in (("equiv.ops.verify.gate", "load_target"), ("equiv.ops.verify_tree.gate", "load_target"),
                         ("equiv.ops.draft_topk.gate_stages", "judge")):
        monkeypatch.setattr(importlib.import_module(module), name, no)
    result = gate_module.run_gate(candidate, op=op, device="auto", stages=stages,
                                  **({"k": 1} if op == "draft_topk" else {}))
    assert result.verdict == "not judged" and result.exit_code == 3 and "3.0 GiB free" in result.not_judged[0]
    assert {s.status for s in result.stages} == {"not run"}
    assert asked and asked[0] >= 1                 # asked after the suite was spawned
    assert spawned and all(h.proc.poll() is not None for h in spawned) and not suite_module._LIVE


def test_short_of_memory_says_nothing_on_the_cpu():
    assert memory.short_of_memory("cpu") is None


HOST = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2 ** 31 - 1), "MALLOC_ARENA_MAX": "1"}


def test_equivs_processes_use_expandable_segments_and_keep_a_users_setting():
    assert memory.allocator_environment({}) == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", **HOST}
    mine = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128", "MALLOC_ARENA_MAX": "4"}
    assert memory.allocator_environment(mine) == {**HOST, "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128",
                                                  "MALLOC_ARENA_MAX": "4"}
    from equiv.run.suite import environment
    env = environment("quick", base={})
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and env["MALLOC_MMAP_MAX_"] == "0"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings are Linux's")
def test_the_commands_process_reuses_freed_host_memory_and_gives_it_back_past_the_bound():
    # a 64 MiB tensor: with the settings it lies in malloc's heap (no mapped block: glibc's
    # mallinfo2 hblkhd 0), so its memory is reused once freed; with a user's own MALLOC_MMAP_MAX_
    # (kept) it is a mapping of its own, unmapped when freed; past HOST_RESIDENT_BYTES trim()
    # gives the free memory back
    code = ("import ctypes, os, sys, torch; from equiv import memory\n"
            "class Info(ctypes.Structure): _fields_ = [(n, ctypes.c_size_t) for n in 'abcdefghij']\n"
            "libc = ctypes.CDLL(None); libc.mallinfo2.restype = Info\n"
            "ok = memory.host_allocator(); was = libc.mallinfo2().e\n"
            "x = torch.ones(2 ** 24); mapped = libc.mallinfo2().e - was; del x\n"
            "held = memory._resident(); memory.HOST_RESIDENT_BYTES = 0; memory.trim()\n"
            "print(ok, mapped, held - memory._resident())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    ok, mapped, given_back = out.stdout.split()
    assert ok == "True" and int(mapped) == 0, out.stdout + out.stderr
    assert int(given_back) > 32 * 2 ** 20, out.stdout
    env["MALLOC_MMAP_MAX_"] = "65536"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert int(out.stdout.split()[1]) >= 2 ** 26, out.stdout + out.stderr


def test_the_command_owns_its_process_but_an_in_process_call_does_not():
    code = ("import contextlib, os, sys; from equiv import cli, memory\n"
            "with contextlib.suppress(SystemExit): cli.main(['--version'])\n"
            "print(memory._OWN[0], os.environ.get('PYTORCH_CUDA_ALLOC_CONF')); sys.argv = ['equiv', '--version']\n"
            "with contextlib.suppress(SystemExit): cli.main()\n"
            "print(memory._OWN[0], os.environ.get('PYTORCH_CUDA_ALLOC_CONF'))")
    env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith(("True", "False"))]
    assert lines == ["False None", "True expandable_segments:True"]


def test_the_owned_process_is_capped_at_the_budget_less_the_others_and_its_context(monkeypatch):
    import torch
    calls = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: type("P", (), {"total_memory": 80 * 2 ** 30}))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, i: calls.append((round(f, 6), i)))
    monkeypatch.setattr(memory, "_OWN", [False])
    monkeypatch.setattr(memory, "_CAPPED", [False])
    memory.cap_process("cuda")
    assert calls == [] and memory._CAPPED == [False]     # a user's process (the plugin, the API)
    monkeypatch.setattr(memory, "_OWN", [True])
    memory.cap_process("cpu")
    assert calls == []
    memory.use_budget(None)
    memory.cap_process("cuda")
    memory.use_budget(16 * 2 ** 30)
    memory.cap_process("cuda:0")
    memory.use_budget(None)
    assert calls == [(round(5.75 / 80, 6), 0), (round(13.75 / 80, 6), 0)]   # 8 and 16 GiB less 1.5 and 0.75
    assert memory._CAPPED == [True]


def test_trim_empties_the_cache_past_its_bytes_but_not_in_a_capped_process(monkeypatch):
    emptied = []
    cuda = type("Cuda", (), {"memory_reserved": staticmethod(lambda: 2 * memory.TRIM_BYTES),
                             "empty_cache": staticmethod(lambda: emptied.append(1))})
    monkeypatch.setattr(memory, "_cuda", lambda: type("Torch", (), {"cuda": cuda}))
    monkeypatch.setattr(memory, "_CAPPED", [False])
    memory.trim()
    assert emptied == [1]
    monkeypatch.setattr(memory, "_CAPPED", [True])      # the allocator frees its cache at the cap
    memory.trim()
    assert emptied == [1]
