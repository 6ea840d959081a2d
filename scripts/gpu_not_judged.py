"""NOT JUDGED on a real GPU (docs/trust.md, "Not judged"): usage ``python scripts/gpu_not_judged.py OUTDIR``.

1. Another process holds all but ~300 MiB of the GPU; a quick gate (tolerance stage) of a correct
   torch file candidate must say NOT JUDGED (exit 3), naming the free memory and the other
   processes' share.
2. The GPU idle again, a candidate that asks for 1 TiB in its call must FAIL (exit 1) with
   "out-of-memory defect of the candidate".
3. The same correct candidate on the idle GPU passes (exit 0).
4. What the memory reading costs per call (``faults.memory('cuda')``), in microseconds.
Each gate's output, JSON and JUnit go to OUTDIR; one line per case is printed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import timeit

CORRECT = '''import torch


def draft_topk(logits, k):
    return torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1)
'''
GREEDY = '''import torch


def draft_topk(logits, k):
    torch.empty(2 ** 40, dtype=torch.uint8, device=logits.device)
    return torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1)
'''
HOG = '''import sys, time, torch
free, _ = torch.cuda.mem_get_info()
keep = torch.empty(free - 300 * 2 ** 20, dtype=torch.uint8, device="cuda")
print("held", keep.numel(), flush=True)
time.sleep(float(sys.argv[1]))
'''


def gate(out: str, name: str, source: str) -> tuple:
    path = os.path.join(out, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    t0 = time.perf_counter()
    got = subprocess.run([sys.executable, "-m", "equiv", "gate", "--candidate", f"{path}:draft_topk", "--k", "1",
                          "--device", "cuda", "--stages", "tolerance", "--json", os.path.join(out, f"{name}.json"),
                          "--junit", os.path.join(out, f"{name}.xml")], capture_output=True, text=True, timeout=900)
    with open(os.path.join(out, f"{name}.log"), "w") as f:
        f.write(got.stdout + got.stderr)
    lines = [ln for ln in got.stdout.splitlines() if "NOT JUDGED:" in ln or "out-of-memory defect" in ln]
    return got.returncode, time.perf_counter() - t0, (lines[0].strip()[:400] if lines else got.stdout.splitlines()[0])


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    hog = subprocess.Popen([sys.executable, "-c", HOG, "600"], stdout=subprocess.PIPE, text=True)
    print("hog:", hog.stdout.readline().strip(), flush=True)
    try:
        rc, s, line = gate(out, "busy_correct", CORRECT)
        print(f"1 busy GPU, correct candidate: exit {rc} in {s:.1f} s: {line}", flush=True)
    finally:
        hog.kill()
        hog.wait()
    rc, s, line = gate(out, "idle_greedy", GREEDY)
    print(f"2 idle GPU, 1 TiB candidate: exit {rc} in {s:.1f} s: {line}", flush=True)
    rc, s, line = gate(out, "idle_correct", CORRECT)
    print(f"3 idle GPU, correct candidate: exit {rc} in {s:.1f} s: {line}", flush=True)
    import torch

    from equiv.run import faults

    torch.cuda.init()
    n = 2000
    print(f"4 memory reading per call: {timeit.timeit(lambda: faults.memory('cuda:0'), number=n) / n * 1e6:.1f} us "
          f"(cuda), {timeit.timeit(lambda: faults.memory('cpu'), number=n) / n * 1e6:.1f} us (host)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu-not-judged")
