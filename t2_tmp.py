import time, sys
from equiv.ops.verify_tree.judge import run_judge
from equiv.ops.verify_tree.plans import statistical_cases, contract_cases
from equiv.ops.verify_tree.paths import VERIFIERS
name, drafts = sys.argv[1], sys.argv[2]
t0 = time.time()
v = run_judge(VERIFIERS[name], statistical_cases("quick", drafts), device="cpu", drafts=drafts, spec=name)
print(v.summary()); print("stat", time.time() - t0)
t0 = time.time()
v = run_judge(VERIFIERS[name], contract_cases(drafts), device="cpu", drafts=drafts, spec=name)
print(v.summary()); print("contract", time.time() - t0)
