"""equiv inside someone else's project: the plugin stays out of the way, the gate works from there.

Plan: a host project in a temporary folder has its own ``reference.py`` and ``properties.py``, a
conftest that registers and loads its own Hypothesis profile ``ci`` (500 examples) and its own
``gpu`` marker, and tests that assert all of that. Run by pytest with equiv's plugins loaded (the
entry points of the installed equiv), its tests pass unchanged: with no option, with an
``--equiv-*`` option, and with pytest-xdist disabled (``-p no:xdist`` is how pytest sees an
environment without it). A second, hostile folder (a ``pytest.ini`` whose ``addopts`` pytest
cannot parse, a ``conftest.py`` that fails on import) is where the gate is run with a relative
file spec and with a ``PYTHONPATH=.`` module spec, and where its REPRO line is pasted: all pass a
correct kernel and leave no ``.hypothesis``/``.pytest_cache`` behind. Subprocesses see equiv
through ``equiv_only_path`` (tests/conftest.py), never the checkout's top-level folders.
"""
import os
import shlex
import subprocess
import sys

import pytest

HOST_CONFTEST = '''
import os
import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: the host's own GPU marker")
'''

HOST_TESTS = '''
import pytest
import torch
from hypothesis import given, settings, strategies as st

import properties
import reference


def test_the_hosts_profile_is_loaded():
    assert settings.get_current_profile_name() == "ci"
    assert settings.default.max_examples == 500


def test_the_hosts_modules_are_its_own():
    assert reference.softmax_topk() == "the host's reference"
    assert properties.NAME == "the host's properties"


def test_equiv_does_not_read_the_hosts_reference():
    import equiv

    assert equiv.compare("identity_top1", torch.randn(2, 50)).passed


@pytest.mark.gpu
def test_the_hosts_gpu_marker_does_not_skip():
    pass


@given(st.integers())
def test_a_hypothesis_test(x):
    assert isinstance(x, int)
'''

KERNEL = '''
import torch


def fn(logits, k):
    p = torch.softmax(logits.float(), dim=-1)
    return torch.topk(p, k, dim=-1)
'''


def _env(extra_path: str, **kw) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    env["PYTHONPATH"] = extra_path
    env.update(kw)
    return env


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    root = tmp_path_factory.mktemp("host")
    (root / "conftest.py").write_text(HOST_CONFTEST)
    (root / "test_host.py").write_text(HOST_TESTS)
    (root / "reference.py").write_text("def softmax_topk():\n    return \"the host's reference\"\n")
    (root / "properties.py").write_text("NAME = \"the host's properties\"\n")
    return root


@pytest.mark.parametrize("extra", [[], ["--equiv-report-json=r.json"], ["-p", "no:xdist"],
                                   ["-p", "no:xdist", "-n", "0"]], ids=["plain", "equiv-option", "no-xdist",
                                                                       "no-xdist-n"])
def test_host_tests_pass_unchanged(host, equiv_only_path, extra):
    if extra[-2:] == ["-n", "0"]:
        pytest.importorskip("xdist")
        extra = ["-n", "0"]                      # with xdist: our hook must not change -n
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=host, env=_env(equiv_only_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "5 passed" in proc.stdout


def test_host_profile_variable_is_not_equivs_business(host, equiv_only_path, tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=_env(equiv_only_path, HYPOTHESIS_PROFILE="mine"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option-anywhere\n")
    (root / "conftest.py").write_text("raise RuntimeError('the host conftest was loaded')\n")
    (root / "kernel.py").write_text(KERNEL)
    return root


def _gate(where, spec, path):
    return subprocess.run([sys.executable, "-m", "equiv", "gate", "--candidate", spec, "--device", "cpu",
                           "--stages", "properties"], cwd=where, env=_env(path), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("spec, on_path", [("kernel.py:fn", False), ("kernel:fn", True)])
def test_gate_takes_relative_specs_from_the_callers_folder(hostile, equiv_only_path, spec, on_path):
    path = equiv_only_path + (os.pathsep + "." if on_path else "")
    proc = _gate(hostile, spec, path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "PASS" in proc.stdout
    assert sorted(os.listdir(hostile)) == ["conftest.py", "kernel.py", "pytest.ini"]


def test_suite_repro_line_runs_from_the_callers_folder(hostile, equiv_only_path, monkeypatch):
    from equiv.options import RunOptions
    from equiv.run.suite import pytest_args, repro_line

    monkeypatch.chdir(hostile)
    args = pytest_args(RunOptions.make("kernel.py:fn", device="cpu", dtypes=("float32",), budget="quick"))
    line = repro_line(args, "quick")
    assert line.startswith("REPRO: PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 HYPOTHESIS_PROFILE=equiv-ci python -m pytest")
    assert "--pyargs equiv.properties" in line and shlex.split(line)    # one valid shell line
    command = f"PYTHONPATH={shlex.quote(equiv_only_path)} " + line.removeprefix("REPRO: ")
    proc = subprocess.run(["bash", "-c", command.replace(" python ", f" {shlex.quote(sys.executable)} ", 1)],
                          cwd=hostile, env=_env(equiv_only_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout and "failed" not in proc.stdout
