import time, sys
from equiv.ops.verify_tree.judge import run_judge
from equiv.ops.verify_tree.plans import statistical_cases, contract_cases
from equiv.ops.verify_tree.paths import VERIFIERS
from equiv.ops.verify_tree.mutants import MUTANTS, LEGAL_VARIANTS
from equiv.ops.verify_tree.defects import diagnose
names = sys.argv[1].split(",")
for name in names:
    fn = VERIFIERS.get(name) or LEGAL_VARIANTS.get(name) or MUTANTS[name][0]
    drafts = sys.argv[2] if len(sys.argv) > 2 else fn.drafts
    targets = getattr(fn, "targets", "any")
    t0 = time.time()
    v = run_judge(fn, contract_cases(drafts) + statistical_cases("quick", drafts, 0, targets), device="cpu", drafts=drafts, spec=name)
    print(name, drafts, "PASS" if v.passed else "FAIL", [c.check for c in v.failed], f"{time.time()-t0:.1f}s")
    if not v.passed:
        for d in diagnose(v).defects: print("   ", d.kind, "|", d.detail[:150])
