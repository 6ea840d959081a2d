#!/usr/bin/env bash
# equiv as a stranger installs it: a wheel (not editable) in a fresh virtual environment, used
# from an unrelated project that has its own reference.py, properties.py, Hypothesis profile
# `ci` (500 examples, asserted by its tests) and `gpu` marker. Shows, in order:
#   1. the wheel installs, and the venv's equiv is the wheel's (equiv.__file__), not a checkout;
#   2. `equiv --version` works;
#   3. the project's own tests pass unchanged with equiv's plugins loaded (also with xdist off);
#   4. `equiv gate --candidate kernel.py:fn` and `PYTHONPATH=. equiv gate --candidate kernel:fn`
#      pass a correct kernel (quick budget) and leave nothing behind in the project;
#   5. `equiv gate --candidate hardcoded_one` fails with exit 1; the README's quick gates of the
#      chain and the tree verifier (`--op verify`, `--op verify_tree`) pass their built-ins;
#   6. the README's `pytest --pyargs equiv.properties --equiv-candidate ...`, run in the project
#      beside its own tests (whose loaded profile `ci` has a 200 ms deadline and 500 examples),
#      passes a correct kernel, fails hardcoded_one, and the project's tests still see `ci`.
# Logs go to a temporary folder and are printed only for a step that fails. Exit 0 when every
# step did what it should; otherwise 1. Usage: scripts/citizen_check.sh (from anywhere).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=python3
failures=0
t_start=$(date +%s)

step() {  # step NAME EXPECTED_RC COMMAND... (run in $project)
    local name=$1 want=$2; shift 2
    local t0=$(date +%s)
    (cd "$project" && "$@") >"$work/$name.log" 2>&1
    local rc=$?
    local dt=$(( $(date +%s) - t0 ))
    if [ "$rc" -eq "$want" ]; then
        echo "citizen: ok   $name (exit $rc, ${dt} s)"
    else
        echo "citizen: FAIL $name (exit $rc, expected $want, ${dt} s); its log:"
        tail -n 60 "$work/$name.log" | sed 's/^/    /'
        failures=$((failures + 1))
    fi
}

# 1. Build the wheel from a copy of the tree (tracked and new files), so the checkout stays clean.
mkdir -p "$work/src" "$work/dist"
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$work/src"
project="$work/src"
step build_wheel 0 $py -m pip wheel --quiet --no-deps --no-build-isolation -w "$work/dist" .
wheel=$(ls "$work"/dist/equiv-*.whl 2>/dev/null | head -n 1)
$py -m venv --system-site-packages "$work/venv"          # reuses the machine's torch, not its equiv
venv_py="$work/venv/bin/python"
project="$work"
step install_wheel 0 "$venv_py" -m pip install --quiet --no-deps --no-index --force-reinstall "${wheel:-missing.whl}"
step equiv_is_the_wheels 0 "$venv_py" -c "
import equiv, os, sys
where = os.path.realpath(equiv.__file__)
assert where.startswith(os.path.realpath(sys.prefix)), f'equiv imported from {where}, not the venv'
import equiv.reference, equiv.properties, equiv.fixtures
for name in ('reference', 'properties', 'fixtures'):
    assert not os.path.exists(os.path.join(os.path.dirname(os.path.dirname(where)), name)), name
print(where)"
step version 0 "$work/venv/bin/equiv" --version

# 2. An unrelated project.
project="$work/project"
mkdir -p "$project"
cat >"$project/conftest.py" <<'EOF'
import os

from hypothesis import settings

settings.register_profile("ci", max_examples=500, deadline=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: this project's own GPU marker")
EOF
cat >"$project/reference.py" <<'EOF'
def softmax_topk():
    return "this project's reference"
EOF
cat >"$project/properties.py" <<'EOF'
NAME = "this project's properties"
EOF
cat >"$project/kernel.py" <<'EOF'
import torch


def fn(logits, k):
    p = torch.softmax(logits.float(), dim=-1)
    return torch.topk(p, k, dim=-1)
EOF
cat >"$project/test_project.py" <<'EOF'
import pytest
from hypothesis import given, settings, strategies as st

import properties
import reference


def test_its_own_profile():
    assert settings.get_current_profile_name() == "ci" and settings.default.max_examples == 500
    assert settings.default.deadline.total_seconds() == 0.2


def test_its_own_modules():
    assert reference.softmax_topk() == "this project's reference"
    assert properties.NAME == "this project's properties"


@pytest.mark.gpu
def test_its_own_gpu_marker_skips_nothing():
    pass


@given(st.integers())
def test_a_property(x):
    assert isinstance(x, int)
EOF
step project_tests 0 env -u PYTHONPATH -u HYPOTHESIS_PROFILE "$venv_py" -m pytest -q -p no:cacheprovider
step project_tests_without_xdist 0 env -u PYTHONPATH -u HYPOTHESIS_PROFILE "$venv_py" -m pytest -q -p no:cacheprovider -p no:xdist
rm -rf "$project/.hypothesis" "$project/.benchmarks"       # what the project's own plugins wrote
before=$(cd "$project" && ls -A | sort | tr '\n' ' ')
step gate_file_spec 0 env -u PYTHONPATH "$work/venv/bin/equiv" gate --candidate kernel.py:fn --device cpu \
     --json gate.json --junit gate.xml
step gate_module_spec 0 env PYTHONPATH=. "$work/venv/bin/equiv" -q gate --candidate kernel:fn --device cpu \
     --stages properties
step gate_hardcoded_one 1 env -u PYTHONPATH "$work/venv/bin/equiv" gate --candidate hardcoded_one --device cpu \
     --stages tolerance
step gate_chain_verifier 0 env -u PYTHONPATH "$work/venv/bin/equiv" -q gate --op verify --candidate torch_sampler \
     --device cpu
step gate_tree_verifier 0 env -u PYTHONPATH "$work/venv/bin/equiv" -q gate --op verify_tree --candidate target_only \
     --device cpu
rm -rf "$project/.hypothesis"
rm -f "$project/gate.json" "$project/gate.xml"
after=$(cd "$project" && ls -A | sort | tr '\n' ' ')
if [ "$before" != "$after" ]; then
    echo "citizen: FAIL the gate left files in the project: before [$before] after [$after]"
    failures=$((failures + 1))
fi

# the host's own pytest runs next: its plugins (pytest-benchmark's .benchmarks) may write here
step pyargs_suite_beside_its_tests 0 env -u PYTHONPATH -u HYPOTHESIS_PROFILE "$venv_py" -m pytest -q \
     -p no:cacheprovider test_project.py --pyargs equiv.properties --equiv-candidate kernel.py:fn --equiv-device cpu
step pyargs_suite_hardcoded_one 1 env -u PYTHONPATH -u HYPOTHESIS_PROFILE "$venv_py" -m pytest -q \
     -p no:cacheprovider test_project.py --pyargs equiv.properties --equiv-candidate hardcoded_one --equiv-device cpu \
     --equiv-budget quick
echo "citizen: $failures step(s) failed in $(( $(date +%s) - t_start )) s"
[ "$failures" -eq 0 ]
