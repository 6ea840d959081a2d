"""The chain verifier's statistical plan holds one-hot and sampled drafts at every class of chain
length in every seed (issue 43, part 2), and its coverage says where each class was judged
(part 4): statistically, by exact checks only (the contract cases), or not at all."""
import pytest

from equiv.ops.verify import space
from equiv.ops.verify.plans import contract_cases, statistical_cases
from equiv.verdict import JUDGED_WHERE


@pytest.mark.parametrize("seed", range(5))
def test_both_draft_kinds_reach_the_judge_at_every_chain_length(seed):
    judged = space.reach(statistical_cases("quick", seed=seed) + contract_cases(seed))["judged"]
    assert judged["draft x n"]["statistical"] == list(space.UNIVERSE["draft x n"])
    assert judged["n"]["statistical"] == list(space.N_CLASSES)


def test_the_table_has_a_column_for_exact_checks_only():
    cov = space.reach(contract_cases(0))                 # contract cases only: nothing statistical
    judged = cov["judged"]
    assert judged["draft x n"]["statistical"] == [] and judged["draft x n"]["exact checks only"]
    line = next(x for x in space.table_lines(cov) if x.startswith("draft x n"))
    assert all(f"{w}:" in line for w in JUDGED_WHERE) and "statistical: none" in line
    assert "every length" in space.PURPOSES
