"""Outputs and signals (issue 10, point 8): what equiv writes, where, and how it ends.

Plan: ``atomic_write`` replaces regular files only -- a character device (copies of the nodes of
/dev/null and /dev/full made in a temporary folder, so that a regression cannot replace the
machine's) and a FIFO
are written to directly and keep their type; every unusable output (a directory, a missing
folder, a place where nothing can be created, two outputs naming one file) stops the command
with exit 2 and one line before any work (the candidate writes a marker file when it is imported:
the marker must not exist); text from a candidate with ANSI escapes, NUL and a lone surrogate is
printed, written as JSON and as well-formed JUnit; SIGINT and SIGTERM while the MTP stage calls
the candidate end with 130 and 143 (not an abort), and leave no output file, whole or half; so
do they inside a call of a built-in in the gate's own process (no FAIL of the candidate).
"""
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from equiv.atomic import atomic_write, check_outputs
from equiv.errors import InvalidArgument, OutputError
from equiv.sanitize import clean_data, clean_text

NASTY = '''
def fn(logits, k):
    raise RuntimeError("boom \\x1b[31mred\\x1b[0m \\x00 nul \\ud800 surrogate \\x07 bell")
'''

MARKED = '''
import os
open(os.path.join(os.path.dirname(__file__), "imported.marker"), "w").close()

def fn(logits, k):
    import torch
    p = torch.softmax(logits.float(), dim=-1)
    return torch.topk(p, k, dim=-1)
'''

SLOW = '''
import os, time, torch

def fn(logits, k):
    open(os.path.join(os.path.dirname(__file__), "called.marker"), "w").close()
    x, end = torch.randn(256, 256), time.time() + 60
    while time.time() < end:                     # busy in torch's C++ code when the signal comes
        x = torch.tanh(x @ x)
    p = torch.softmax(logits.float(), dim=-1)
    return torch.topk(p, k, dim=-1)
'''


def cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, errors="replace")


def test_a_character_device_is_written_not_replaced(tmp_path):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))     # the node of /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs root")
    atomic_write(node, "discarded\n")
    assert stat.S_ISCHR(os.stat(node).st_mode)
    assert os.listdir(tmp_path) == ["null"]


def test_a_fifo_is_written_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    atomic_write(fifo, "through the pipe\n")
    reader.join(10)
    assert got == ["through the pipe\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_regular_file_is_replaced_whole_and_a_link_kept(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "out.json"]


def test_a_failed_write_is_one_output_error(tmp_path):
    full = tmp_path / "full"                     # a copy of /dev/full's node, never the machine's
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    with pytest.raises(OutputError, match="could not write .*full.*No space left on device"):
        atomic_write(full, "x" * 100_000)
    assert stat.S_ISCHR(os.stat(full).st_mode)


@pytest.mark.parametrize("outputs, needle", [
    (lambda d: {"--json": str(d)}, "is a directory"),
    (lambda d: {"--json": str(d / "no" / "such.json")}, "does not exist; create it first"),
    (lambda d: {"--json": "/proc/equiv-never.json"}, "cannot write in folder '/proc'"),
    (lambda d: {"--json": str(d / "a"), "--junit": str(d / "a")}, "names the same output as --json"),
    (lambda d: {"--json": "-", "--plot": "-"}, "names the same output as --json"),
    (lambda d: {"--json": ""}, "give a file name"),
])
def test_unusable_outputs_are_refused(tmp_path, outputs, needle):
    with pytest.raises(InvalidArgument, match=needle.replace("(", r"\(")):
        check_outputs(outputs(tmp_path))


@pytest.mark.parametrize("flags", [
    lambda d: ["--json", str(d)],
    lambda d: ["--json", str(d / "missing" / "v.json")],
    lambda d: ["--json", "/proc/equiv-never.json"],
    lambda d: ["--json", str(d / "v.out"), "--junit", str(d / "v.out")],
])
def test_gate_refuses_an_output_before_any_work(tmp_path, flags):
    (tmp_path / "kernel.py").write_text(MARKED)
    out = cli("gate", "--candidate", "kernel.py:fn", "--device", "cpu", *flags(tmp_path), cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "imported.marker").exists()          # the candidate was never loaded
    assert not (tmp_path / "v.out").exists()


def test_clean_text_escapes_controls_and_replaces_surrogates():
    text = "a\x1b[31mb\x00c\td\ne\ud800f\x7f\x9f\ufffe"
    assert clean_text(text) == "a\\x1b[31mb\\x00c\td\ne\ufffdf\\x7f\\x9f\ufffd"
    assert clean_data({"k\x07": ["x\udcff", 1.5, None]}) == {"k\\x07": ["x\ufffd", 1.5, None]}


def test_a_nasty_message_reaches_console_json_and_junit_intact(tmp_path):
    (tmp_path / "nasty.py").write_text(NASTY)
    out = cli("gate", "--candidate", "nasty.py:fn", "--device", "cpu", "--stages", "tolerance",
              "--json", "v.json", "--junit", "v.xml", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "boom \\x1b[31mred" in out.stdout and "\x1b" not in out.stdout
    detail = json.loads((tmp_path / "v.json").read_text())["checks"][0]["detail"]
    assert "\\x00 nul \ufffd surrogate \\x07 bell" in detail
    suite = ET.parse(tmp_path / "v.xml").getroot()               # well-formed
    assert "boom" in suite.find("testcase/failure").get("message")


def _signal_during_mtp(tmp_path, signum):
    (tmp_path / "slow.py").write_text(SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "equiv", "gate", "--candidate", "slow.py:fn", "--device",
                             "cpu", "--stages", "mtp", "--json", "v.json", "--junit", "v.xml"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (tmp_path / "called.marker").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert (tmp_path / "called.marker").exists(), proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_a_signal_during_the_mtp_stage_ends_cleanly(tmp_path, signum, code, word):
    rc, out, err = _signal_during_mtp(tmp_path, signum)
    assert rc == code, (rc, out, err)
    assert f"equiv gate: {word}" in err and "terminate called" not in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["called.marker", "slow.py"]   # no output, whole or half


def _signal_during_an_in_process_call(tmp_path, signum):
    """A built-in verifier (called in the gate's own process) held inside its call by the test
    hook (``EQUIV_TEST_FAULT=call=hang``) when the signal comes."""
    marks = tmp_path / "marks"
    env = {**os.environ, "EQUIV_TEST_FAULT": "call=hang", "EQUIV_TIMELINE": str(marks)}
    proc = subprocess.Popen([sys.executable, "-m", "equiv", "gate", "--op", "verify", "--candidate", "torch_sampler",
                             "--device", "cpu", "--stages", "statistics", "--json", "v.json"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and \
            not (marks.exists() and "test hook: call hangs" in marks.read_text()):
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:            # the signal swallowed: the next call hangs again
        proc.kill()
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_a_signal_during_a_call_in_the_gate_s_process_is_no_defect_of_the_candidate(tmp_path, signum, code, word):
    """Ctrl-C or a CI job's SIGTERM inside a built-in's call ends the command: it was once the
    candidate's "raised Terminated" defect, a FAIL verdict of a correct verifier with its JSON."""
    rc, out, err = _signal_during_an_in_process_call(tmp_path, signum)
    assert rc == code, (rc, out, err)
    assert f"equiv gate: {word}" in err and "FAIL" not in out and "Traceback" not in err, (out, err)
    assert sorted(os.listdir(tmp_path)) == ["marks"]                    # no verdict written


def test_a_closed_pipe_ends_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "equiv", "check", "--candidate", "hardcoded_one",
                             "--device", "cpu", "--recipe", "gaussian:vocab=100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                          # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1, err      # the verdict's exit code, no traceback
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_ctrl_c_in_a_callable_s_call_stops_a_gate_run_from_the_api():
    """A gate run from Python (a notebook, a test) with a callable, interrupted inside its call:
    KeyboardInterrupt reaches the caller; the gate does not judge it as the callable's own
    BaseException and go on (which it did before ``interrupts_noted``). A callable that raises
    KeyboardInterrupt itself, with no signal, is still judged for it."""
    import equiv
    from equiv.ops.verify.paths import torch_sampler

    def ctrl_c(*args):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)                            # the signal's KeyboardInterrupt comes here
        return torch_sampler(*args)

    def raises(*args):
        raise KeyboardInterrupt("mine")

    before = signal.signal(signal.SIGINT, signal.default_int_handler)    # as in a plain interpreter
    try:
        with pytest.raises(KeyboardInterrupt):
            equiv.gate(ctrl_c, op="verify", device="cpu", stages="statistics")
        res = equiv.gate(raises, op="verify", device="cpu", stages="statistics")
        assert not res.passed and "KeyboardInterrupt" in res.summary()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # left as it was
    finally:
        signal.signal(signal.SIGINT, before)
