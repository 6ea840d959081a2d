"""A file candidate imports as a script does: its own folder first (issue 42, part 4).

``equiv gate --candidate path/to/mine.py:fn``, where ``mine.py`` does ``from reference import
helper`` (its sibling ``reference.py``), failed to import when run from a folder with a
``reference/`` package (this checkout's root): the worker put the working folder first. Seen
failing before the fix: ``ImportError: cannot import name 'helper' from 'reference'``.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from equiv import Recipe
from equiv.run import close_all, runner_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = Recipe(family="gaussian", seed=0, batch=3, vocab=50)

MINE = '''
from reference import helper
from properties import SCALE


def draft_topk(logits, k):
    return helper(logits, k, SCALE)
'''
REFERENCE = '''
import torch


def helper(logits, k, scale):
    return torch.topk(torch.softmax(logits.float() * scale, dim=-1), k, dim=-1)
'''


@pytest.fixture(autouse=True)
def _fresh_runners():
    yield
    close_all()


@pytest.fixture
def candidate(tmp_path):
    """``mine.py`` beside its own ``reference.py`` and ``properties.py``: names this checkout's
    root also holds (``reference/``, ``properties/``)."""
    (tmp_path / "mine.py").write_text(MINE)
    (tmp_path / "reference.py").write_text(REFERENCE)
    (tmp_path / "properties.py").write_text("SCALE = 1.0\n")
    return f"{tmp_path / 'mine.py'}:draft_topk"


def test_the_root_shadows_the_siblings_names():
    """The premise: run from the root, ``reference`` and ``properties`` name the root's packages."""
    assert os.path.isdir(os.path.join(ROOT, "reference")) and os.path.isdir(os.path.join(ROOT, "properties"))


def test_a_file_candidate_loads_its_siblings_from_the_projects_root(candidate, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = runner_for(candidate, "cpu", timeout=60).call(SMALL, 2)
    assert out.ok, out.problem
    assert out.value[0].shape == (3, 2)


def test_equiv_check_from_the_root_judges_it(candidate):
    """The same through the command line (a subprocess from the root, as a user runs it)."""
    got = subprocess.run([sys.executable, "-m", "equiv", "check", "--candidate", candidate, "--k", "2",
                          "--recipe", "gaussian:seed=0,batch=3,vocab=50", "--device", "cpu"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
