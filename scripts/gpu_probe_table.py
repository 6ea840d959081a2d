"""The GPU probes' table (issue 14): ``python scripts/gpu_probe_table.py [OUT.json]`` on a CUDA machine.

For the four built-in paths and the two GPU mutants, in float32 and bfloat16 at k = 1 (and k = 4
for the paths that take it): ``graph_replay``'s status, ``batch_invariance``'s status and whether
every answer was bitwise equal to the row computed alone, and ``batch_invariance`` with bitwise
equality required. Prints a Markdown table; writes every ProbeResult as JSON. Exit 1 when a
verdict differs from the expected one: the built-in paths pass both probes (hardcoded_one too:
its defect is its value, not its batching), ``static_output_buffer`` fails graph_replay, and
``batch_dependent_reduction`` passes batch_invariance and fails it only when bitwise is required.
"""
from __future__ import annotations

import json
import sys

import equiv
from equiv.ops.draft_topk import gpu_probes
from equiv.ops.draft_topk.mutants import GPU_MUTANTS

PATHS = ("softmax_topk", "hardcoded_one", "identity_top1", "fused_triton")
KS = {"softmax_topk": (1, 4), "fused_triton": (1, 4)}


def main(out: str | None) -> int:
    rows, results, wrong = [], [], []
    subjects = [(n, equiv.get_path(n)) for n in PATHS] + list(GPU_MUTANTS.items())
    for name, fn in subjects:
        for k in KS.get(name, (1,)):
            for dtype in ("float32", "bfloat16"):
                base = {"dtype": dtype, "name": name, "k": k}
                g = gpu_probes.graph_replay(fn, "cuda", base)
                b = gpu_probes.batch_invariance(fn, "cuda", base)
                strict = gpu_probes.batch_invariance(fn, "cuda", {**base, "require_bitwise": True})
                results += [r.to_json() for r in (g, b, strict)]
                want_g = "fail" if name == "static_output_buffer" else "pass"
                want_strict = "fail" if name == "batch_dependent_reduction" else None
                if g.status != want_g and not (want_g == "pass" and g.passed):
                    wrong.append(f"{name} k={k} {dtype}: graph_replay {g.status}, expected {want_g}")
                if name != "static_output_buffer" and b.status != "pass":
                    wrong.append(f"{name} k={k} {dtype}: batch_invariance {b.status}, expected pass")
                if want_strict and strict.status != want_strict:
                    wrong.append(f"{name} k={k} {dtype}: bitwise required: {strict.status}, expected fail")
                bitwise = b.facts.get("bitwise_invariant")
                rows.append(f"| {name} | {k} | {dtype} | {g.status}{' (' + g.reason + ')' if g.reason else ''} "
                            f"| {b.status} | {'yes' if bitwise else 'no' if bitwise is not None else '-'} "
                            f"| {strict.status} |")
    print("| path | k | dtype | graph_replay | batch_invariance | bitwise invariant | bitwise required |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for w in wrong:
        print("UNEXPECTED:", w)
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
