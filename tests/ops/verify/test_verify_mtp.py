"""``equiv mtp --verify SPEC``: the MTP harness verifies target_only with a user's verifier.

Test plan: a correct verifier (the built-in ``torch_sampler``, and the same code loaded from a
file, so it runs in the supervised worker) is lossless, its record passes and its accept length
sits beside the built-in verification's; a verifier that accepts everything (uniforms cast to
int) raises the accept length above the built-in's and fails losslessness, exit 1 with a REPRO
that carries ``--verify``; one that resamples from the target instead of the residual fails
losslessness. Small sizes (V = 1024) keep it to seconds.
"""
import os

from equiv.cli import main
from equiv.mtp import run_mtp


SIZES = dict(consumers="target_only", paths="softmax_topk", vocab=1024, sequences=32, rounds=8,
             device="cpu")
TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
VERIFIERS = os.path.join(TESTS, "candidates", "verifiers.py")


def test_a_correct_verifier_matches_the_built_in_numbers():
    run = run_mtp(verifier="torch_sampler", **SIZES)
    rec = run.record("softmax_topk", "target_only")
    assert run.passed and rec.lossless is True
    assert abs(rec.accept_length - run.verifier_baseline.accept_length) < 0.25
    assert run.config["verifier"] == "torch_sampler" and "--verify torch_sampler" in rec.repro
    assert any("verified by torch_sampler" in n for n in run.notes)


def test_a_verifier_loaded_from_a_file_runs_in_the_worker_and_passes():
    run = run_mtp(verifier=f"{VERIFIERS}:correct", **SIZES)
    assert run.passed, run.to_json()


def test_an_accept_all_verifier_shows_in_acceptance_and_fails_losslessness(capsys):
    spec = "equiv.ops.verify.mutants:uniform_cast_to_int"
    run = run_mtp(verifier=spec, **SIZES)
    rec = run.record("softmax_topk", "target_only")
    assert rec.lossless is False and not run.passed
    assert rec.accept_length > run.verifier_baseline.accept_length + 0.3
    rc = main(["mtp", "--verify", spec, "--consumers", "target_only", "--paths", "softmax_topk",
               "--vocab", "1024", "--sequences", "32", "--rounds", "8", "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 1 and "REPRO: equiv mtp --paths softmax_topk --consumers target_only" in out
    assert f"--verify {spec}" in out


def test_a_residual_bug_fails_losslessness():
    run = run_mtp(verifier="equiv.ops.verify.mutants:recovered_from_target", **SIZES)
    assert run.record("softmax_topk", "target_only").lossless is False
