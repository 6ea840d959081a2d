import cProfile, pstats, sys
from equiv.ops.verify_tree.judge import run_judge
from equiv.ops.verify_tree.plans import statistical_cases, contract_cases
from equiv.ops.verify_tree.paths import VERIFIERS
fn = VERIFIERS[sys.argv[1]]
cProfile.run('run_judge(fn, contract_cases(fn.drafts) + statistical_cases("quick", fn.drafts), device="cpu", drafts=fn.drafts, spec="x")', "/tmp/prof_vt")
pstats.Stats("/tmp/prof_vt").sort_stats("cumulative").print_stats(35)
