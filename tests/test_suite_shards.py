"""The property suite in shards side by side (``equiv.run.suite.start_properties``): on a host
of four cores or more the draft gate's suite runs in two processes, and its stage holds the same
checks as the suite run whole; a shard that selects nothing is a failure, never a silent pass."""
from equiv.ops.draft_topk.gate import SUITE_SHARDS
from equiv.options import RunOptions
from equiv.run import suite


def _stage(monkeypatch, cores, shards=SUITE_SHARDS):
    monkeypatch.setattr(suite, "cores", lambda: cores)
    options = RunOptions.make("softmax_topk", device="cpu", budget="quick", seed=0)
    handle = suite.start_properties(options, stage_timeout=300, shards=shards)
    assert isinstance(handle, suite.SuiteGroup) == (cores >= 4)
    return suite.property_checks(handle, 300)


def test_shards_hold_the_checks_of_the_whole_suite(monkeypatch):
    whole, whole_stage = _stage(monkeypatch, 2)
    split, split_stage = _stage(monkeypatch, 8)
    assert sorted(c.name for c in split) == sorted(c.name for c in whole)
    assert all(c.passed for c in split) and split_stage.status == whole_stage.status == "pass"
    assert "2 processes side by side" in split_stage.ran["summary"]


def test_a_shard_that_selects_nothing_fails(monkeypatch):
    got, stage = _stage(monkeypatch, 8, shards=("test_no_such_property", "not test_no_such_property"))
    assert stage.status == "FAIL"
    assert any("pytest exited 5" in c.detail for c in got if not c.passed)


def test_the_suite_gets_one_thread_on_a_small_host_unless_the_caller_set_it(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(suite, "cores", lambda: 2)
    assert suite.environment("quick")["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert suite.environment("quick")["OMP_NUM_THREADS"] == "3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(suite, "cores", lambda: 16)
    assert "OMP_NUM_THREADS" not in suite.environment("quick")


def test_a_quick_suite_keeps_hypothesis_files_in_equivs_cache_and_a_full_one_in_its_temporary_folder(
        tmp_path, monkeypatch):
    """Hypothesis parses every local module's source for constants once per version of the file
    when its folder persists (``suite.hypothesis_storage``); never the caller's folder."""
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EQUIV_CACHE", "1")
    quick = suite.hypothesis_storage("quick", str(tmp_path / "tmp"))
    assert quick.startswith(str(tmp_path / "cache")) and "hypothesis-" in quick
    assert suite.hypothesis_storage("full", str(tmp_path / "tmp")) == str(tmp_path / "tmp" / "hypothesis")
    monkeypatch.setenv("EQUIV_CACHE", "0")
    assert suite.hypothesis_storage("quick", str(tmp_path / "tmp")) == str(tmp_path / "tmp" / "hypothesis")
    options = RunOptions.make("torch_sampler", op="verify", device="cpu", budget="quick", seed=0)
    monkeypatch.setenv("EQUIV_CACHE", "1")
    monkeypatch.chdir(tmp_path)
    got, stage = suite.property_checks(suite.start_properties(options, stage_timeout=300, select="not verify_statistics"),
                                       300)
    assert stage.status == "pass" and not (tmp_path / ".hypothesis").exists()
    assert list((tmp_path / "cache").glob("hypothesis-*/constants/*"))      # what it parsed, kept
