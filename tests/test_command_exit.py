"""The command's own process leaves at once when its work is done (``equiv.cli``: no interpreter
teardown), and so does a gate's property-suite process (``equiv.pytest.plugin``): the exit code
is the verdict's, the outputs are whole, and no process it started is left behind."""
import json
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
CORRECT = os.path.join(HERE, "candidates", "verifiers.py") + ":correct"
WRITES = os.path.join(HERE, "candidates", "verifiers.py") + ":edits_target_probs"


def _marked(mark: str) -> list:
    """The pids of the processes whose environment holds ``mark``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _gate(tmp_path, candidate):
    mark = f"EQUIV_EXIT_TEST={uuid.uuid4().hex}"
    out = tmp_path / "v.json"
    got = subprocess.run([sys.executable, "-m", "equiv", "gate", "--op", "verify", "--candidate", candidate,
                          "--device", "cpu", "--stages", "properties", "--json", str(out)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, mark.split("=")[0]: mark.split("=")[1]})
    return got, json.loads(out.read_text()), _marked(mark)    # at once: closed, not orphaned


def test_a_pass_exits_0_with_its_outputs_whole_and_no_process_behind(tmp_path):
    got, doc, left = _gate(tmp_path, CORRECT)
    assert got.returncode == 0, got.stdout + got.stderr
    assert doc["verdict"] == "pass" and doc["stages"]["properties"]["status"] == "pass"
    assert got.stdout.splitlines()[0].startswith("equiv gate:") and "PASS" in got.stdout.splitlines()[0]
    assert not left, f"processes left behind: {left}"


def test_a_fail_exits_1_with_the_suites_failure_read(tmp_path):
    got, doc, left = _gate(tmp_path, WRITES)
    assert got.returncode == 1, got.stdout + got.stderr
    assert doc["verdict"] == "fail" and doc["stages"]["properties"]["status"] == "FAIL"
    assert any(not c["passed"] and c["stage"] == "properties" for c in doc["checks"])
    assert not left, f"processes left behind: {left}"
