"""The Python API for users' own tests: ``equiv.assert_equivalent``, ``equiv.strategies``, errors.

Plan: ``import equiv`` is cheap (no torch: the plugin imports it in every pytest run); every
name of ``__all__`` resolves; bad arguments are one-line ``InvalidArgument``s (also
``ValueError``); ``assert_equivalent`` returns the result of a correct path and raises an
``AssertionError`` for a wrong one, with the failed checks by name and a ``REPRO:`` line that,
pasted into a shell in another folder, replays the same failure -- for a recipe, a small raw
tensor (values in the line), a large raw tensor (saved once) and a module-level callable; the
strategies drive a user's ``@given`` test.
"""
import importlib
import shlex
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings

import equiv
import equiv.strategies as es
from equiv.ops import get_op

KERNEL = '''
import torch


def one_hot(logits, k):
    return torch.ones_like(logits[:, :k], dtype=torch.float32), logits.argmax(-1, keepdim=True)
'''


def test_import_equiv_loads_no_torch():
    code = "import sys, equiv, equiv.pytest.plugin; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


@pytest.mark.parametrize("op, name", [("draft_topk", "softmax_topk"), ("verify", "torch_sampler"),
                                      ("verify_tree", "specinfer")])
def test_naming_a_builtin_path_loads_no_torch(op, name):
    # the gate parses the candidate's name before it starts its property suite: torch there
    # would hold the suite back by its import time (~1.6 s on a GPU host)
    code = (f"import sys; from equiv.options import RunOptions; RunOptions.make({name!r}, op={op!r}); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False"], out.stderr


def test_the_gate_loads_no_torch_before_its_suite():
    # equiv.mtp (the draft gate's mtp stage) imports torch at its top: the gate imports it when
    # the stage runs, so that the property suite starts without waiting for torch
    code = "import sys, equiv.gate, equiv.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False"], out.stderr


@pytest.mark.parametrize("op", ["draft_topk", "verify", "verify_tree"])
def test_an_ops_builtin_names_are_its_paths(op):
    # the op declares its built-in names (no torch); its paths module holds the functions
    paths = importlib.import_module(f"equiv.ops.{op}.paths")
    names = paths.path_names() if op == "draft_topk" else paths.VERIFIERS
    assert get_op(op).builtin_names() == tuple(names)


def test_every_public_name_resolves():
    for name in equiv.__all__:
        assert getattr(equiv, name) is not None
    from equiv.ops.draft_topk import compare as module  # importing the module never hides the function
    assert callable(equiv.compare) and equiv.compare is module.compare


@pytest.mark.parametrize("logits, k, needle", [
    (torch.randn(10), 1, "logits has shape [10]: give a [B, V] tensor"),
    (torch.randn(2, 3, dtype=torch.float64), 1, "logits has dtype float64: give float32"),
    (torch.zeros(2, 0), 1, "the vocabulary is empty"),
    (torch.randn(2, 3), 5, "k=5 is invalid: k must be <= 3"),
])
def test_bad_arguments_are_one_line_errors(logits, k, needle):
    with pytest.raises(equiv.InvalidArgument) as info:
        equiv.assert_equivalent("softmax_topk", logits, k=k)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, (ValueError, equiv.EquivError))
    if k == 1:
        with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            equiv.compare("softmax_topk", logits)


def test_a_correct_path_returns_its_result():
    res = equiv.assert_equivalent("identity_top1", "ties_max:batch=3,vocab=1000", device="cpu")
    assert res.passed and not res.failed_checks and "value" not in res.failed_checks


def _replay(repro, cwd):
    import os

    line = repro.removeprefix("REPRO: ")
    words = shlex.split(line)
    assert words[0] in ("equiv", "python")
    words[0:1] = [sys.executable, "-m", "equiv"] if words[0] == "equiv" else [sys.executable]
    env = dict(os.environ, TMPDIR=str(cwd))      # a replay that fails saves its input there
    return subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("logits", ["gaussian:batch=2,vocab=500",
                                    torch.tensor([[1.0, 2.0, float("nan")], [0.0, 0.5, 1.0]]),
                                    torch.randn(3, 700).bfloat16()],
                         ids=["recipe", "small-raw", "large-raw"])
def test_a_failure_names_its_checks_and_replays(logits, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))     # a large input is saved there
    with pytest.raises(AssertionError) as info:
        equiv.assert_equivalent("hardcoded_one", logits, device="cpu")
    err = info.value
    assert isinstance(err, equiv.EquivalenceError) and "value" in err.failed and "index" not in err.failed
    assert err.result.failed_checks["value"].failing >= 1
    lines = str(err).splitlines()
    assert lines[0].startswith("hardcoded_one k=1") and lines[0].endswith(f"FAIL ({', '.join(err.failed)})")
    assert lines[1].startswith("  value: Mismatched values") and lines[-1].startswith("REPRO: ")
    again = _replay(lines[-1], tmp_path)
    assert again.returncode == 1 and "value" in again.stdout + again.stderr, again.stderr[-2000:]


def test_a_module_level_callable_replays_by_its_file(tmp_path, monkeypatch):
    import tempfile

    (tmp_path / "my_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    import my_kernel

    with pytest.raises(equiv.EquivalenceError) as info:
        equiv.assert_equivalent(my_kernel.one_hot, torch.randn(2, 100), device="cpu")
    repro = str(info.value).splitlines()[-1]
    assert f"{tmp_path / 'my_kernel.py'}:one_hot" in repro
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert _replay(repro, other).returncode == 1


def test_a_lambda_says_why_it_cannot_replay():
    with pytest.raises(equiv.EquivalenceError, match="REPRO: not available: the candidate is a lambda"):
        equiv.assert_equivalent(lambda x, k: (torch.ones(x.shape[0], k), x.argmax(-1, keepdim=True)),
                                torch.randn(2, 50), device="cpu")


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(es.recipes(dtypes=("bfloat16", "float32"), max_vocab=2000, max_batch=4))
def test_strategies_drive_a_users_given_test(recipe):
    assert isinstance(recipe, equiv.Recipe)
    equiv.assert_equivalent("softmax_topk", recipe, device="cpu")
