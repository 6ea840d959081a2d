"""The command line speaks the ecosystem's conventions, the same way in every subcommand.

Plan: ``--version`` prints the package version; every subcommand's ``--help`` shows the choices
of ``--device`` and ``--budget`` and lists the values of comma-separated options; ``--json``
means one thing everywhere (``--json FILE``, ``--json -`` and a bare ``--json`` for standard
output, where the JSON is then the only thing) and every JSON carries ``equiv_version``; ``-q``
and ``-v`` are accepted before and after the subcommand; ``mtp --budget`` and ``gate --budget``
take the same words; progress bars appear only on a terminal. Subcommands that need a GPU or
minutes are checked through ``--help`` and their usage errors only.
"""
import json
import re
import subprocess
import sys

import pytest

import equiv
from equiv.cli import COMMANDS, build_parser
from equiv.console import Console


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True, timeout=timeout)


def help_of(command: str) -> str:
    import os

    env = dict(os.environ, COLUMNS="400")        # one line per option: argparse wraps at the width
    return subprocess.run([sys.executable, "-m", "equiv", command, "--help"], capture_output=True, text=True,
                          timeout=120, env=env).stdout


def test_version():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"equiv {equiv.__version__}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "paths"])
def test_help_shows_the_choices(command):
    text = help_of(command)
    if "--device" in text:
        assert "--device {auto,cpu,cuda}" in text
    if "--budget" in text:
        assert "--budget {quick,full}" in text
    if "--dtype" in text:
        assert "float32, bfloat16, float16" in text
    for flag in ("-q, --quiet", "-v, --verbose"):
        assert flag in text


def test_help_lists_stages_consumers_and_formats():
    assert "--op draft_topk: properties, tolerance, mtp" in help_of("gate")
    assert "from: greedy, target_only, confidence, tree" in help_of("mtp")
    assert "--format {table,markdown,json,html}" in help_of("report")


def test_every_json_option_means_the_same():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        json_opts = [a for a in p._actions if "--json" in a.option_strings]
        if json_opts:
            (opt,) = json_opts
            assert (opt.dest, opt.nargs, opt.const, opt.metavar) == ("json_out", "?", "-", "FILE"), name


@pytest.mark.parametrize("form", [["--json"], ["--json", "-"]])
def test_json_to_stdout_is_the_only_stdout(form):
    out = cli("check", "--candidate", "hardcoded_one", "--device", "cpu", "--recipe", "gaussian:vocab=100", *form)
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["equiv_version"] == equiv.__version__ and doc["passed"] is False
    assert "REPRO: equiv check" in out.stderr                       # the text went to stderr
    paths = json.loads(cli("paths", *form).stdout)
    assert paths["equiv_version"] == equiv.__version__ and len(paths["paths"]) >= 4


def test_json_file_carries_the_version(tmp_path):
    out = cli("gate", "--candidate", "identity_top1", "--device", "cpu", "--stages", "tolerance",
              "--dtype", "float32", "--vocab", "1000", "--json", str(tmp_path / "v.json"), "-q")
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "v.json").read_text())["equiv_version"] == equiv.__version__
    assert out.stderr == ""                                          # -q: no notes, no progress


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_and_verbose_go_before_or_after_the_command(where):
    flags = ["-q", "-v", "-v"]
    args = [*flags, "paths"] if where == "before" else ["paths", *flags]
    parsed = build_parser().parse_args(args)
    assert (parsed.quiet, parsed.verbose) == (1, 2)


def test_one_vocabulary_for_budgets():
    gate = re.search(r"--budget \{([a-z,]+)\}", help_of("gate")).group(1)
    mtp = re.search(r"--budget \{([a-z,]+)\}", help_of("mtp")).group(1)
    assert gate == mtp == "quick,full"
    out = cli("mtp", "--budget", "default", "--device", "cpu")
    assert out.returncode == 2 and "budget='default' is unknown" in out.stderr


def test_progress_only_on_a_terminal(capsys):
    quiet, plain = Console(-1).progress("x"), Console(0).progress("x")
    assert not quiet.live
    assert plain.live is False                                       # pytest's stderr is not a terminal
    plain(1, 10, "label")
    assert capsys.readouterr().err == ""
