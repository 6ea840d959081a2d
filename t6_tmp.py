import sys
sys.path.insert(0, "tests")
from test_verify_tree_judge import judged
from equiv.ops.verify_tree.paths import VERIFIERS
print(judged(VERIFIERS[sys.argv[1]], sys.argv[2]).summary())
