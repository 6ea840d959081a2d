"""Loading candidates by spec, and the error each bad spec gets."""
import pytest

from equiv import CandidateLoadError, load_candidate


def test_builtin_and_module_and_file_specs(tmp_path):
    assert load_candidate("identity_top1").builtin
    assert load_candidate("equiv.ops.draft_topk.paths.torch_paths:softmax_topk").fn.__name__ == "softmax_topk"
    f = tmp_path / "mine.py"
    f.write_text("def draft(logits, k):\n    return None\n")
    assert load_candidate(f"{f}:draft").fn.__name__ == "draft"


@pytest.mark.parametrize("spec, msg", [
    ("no.such:thing", "no module named 'no'"),
    ("missing.py:fn", "no file 'missing.py'"),
    ("equiv.ops.draft_topk.paths.torch_paths:nothing", "has no attribute 'nothing'"),
    ("equiv.ops.draft_topk.paths:_REGISTRY", "not a callable"),
    ("softmax", "not a built-in path"),
    ("", "empty"),
    ("equiv.errors:UsageError.__init__.x", "has no attribute"),
])
def test_bad_specs_name_the_spec_and_the_fix(spec, msg):
    with pytest.raises(CandidateLoadError, match=msg) as info:
        load_candidate(spec)
    assert isinstance(info.value, ImportError)


def test_wrong_signature_is_refused(tmp_path):
    f = tmp_path / "one_arg.py"
    f.write_text("def draft(logits):\n    return None\n")
    with pytest.raises(CandidateLoadError, match="cannot be called as fn"):
        load_candidate(f"{f}:draft")


def test_import_error_inside_the_file_is_reported(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import no_such_dependency_here\n")
    with pytest.raises(CandidateLoadError, match="ModuleNotFoundError"):
        load_candidate(f"{f}:draft")
