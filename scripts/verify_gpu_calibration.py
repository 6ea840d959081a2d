"""Calibrate the losslessness judge of the verify gate on one GPU, and time the quick gate.

Plan (each part writes its rows as soon as it ends, and no part starts after ``--deadline-s``):

1. ``gate``: the whole quick verify gate command, ``python -m equiv gate --op verify --candidate
   torch_sampler --device D``, three times; its median wall time (and each run's).
2. ``null``: ``--runs`` runs (1000) of the correct ``torch_sampler`` on the statistical stage
   of the quick gate on this device (on a GPU with its power case: ``plans.POWER``) under the
   lossless law (``equiv.ops.verify.calibration.run_calibration``: each run with its own
   generator seeds, ``--seed`` the first run); failed runs, their rate and its one-sided 95 % bound.
3. ``power``: ``--power-runs`` runs of ``biased_sampler(shape, tv, at="emitted")`` (every
   position the verifier reaches emits a law ``tv`` from the target's, in total variation;
   shapes sharper, flatter, swap_top2) for each ``--tv`` on the same plan, with the power case
   in ``--parts`` calls (default: the plan's own; one power row per value).

``--draws law`` replaces the samplers by ``law_draws.LawSampler`` (null: the exact lossless law;
power: the same biased law as ``biased_sampler``), drawn on the host from the recipes' distinct
problems: the same plan and judge at ~2.5 s a run on two CPU cores, for power estimates with
more runs than a GPU session holds (the gate's own samplers are judged on the device).
``--parts 0`` judges the CPU gate's plan (no power case): what the CPU budget detects.

Writes ``DIR/calibration.jsonl`` (one JSON row per measurement), ``DIR/table.md`` (the tables
docs/verify.md quotes) and ``DIR/gate_times.json``. ``--small`` runs the same parts at CPU scale
(20 null runs, 3 power runs with the power case at V = 4097, 256 rows x 2 calls, one gate run)
to test the script. ``--parts-only gate,null,power`` picks the parts (to split the work over
commands: the second half of the null runs with ``--seed 501 --runs 500``).

    PYTHONPATH=. python3 scripts/verify_gpu_calibration.py --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

SHAPES = ("sharper", "flatter", "swap_top2")


def gate_times(device: str, repeats: int) -> dict:
    cmd = [sys.executable, "-m", "equiv", "gate", "--op", "verify", "--candidate", "torch_sampler",
           "--device", device]
    times, codes = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        codes.append(subprocess.run(cmd, capture_output=True, text=True).returncode)
        times.append(round(time.perf_counter() - t0, 2))
    return {"part": "gate", "command": " ".join(["python -m equiv"] + cmd[3:]), "seconds": times,
            "median_s": statistics.median(times), "exit_codes": codes}


def plan_cases(device: str, parts: int | None, small: bool):
    """The quick gate's statistical cases on a GPU (the GPU plan: the second wide case in
    ``plans.LARGEST_PARTS_GPU`` calls, then the power case), the power case in ``parts`` calls
    (default: the plan's own; 0: none, the CPU gate's plan); with ``small``, the power case at
    V = 4097, 256 rows x ``parts or 2``."""
    from equiv.ops.verify.plans import POWER, power_cases, statistical_cases

    if parts == 0:
        return statistical_cases("quick")             # the CPU plan: no power case
    gpu = statistical_cases("quick", device="cuda")
    base = gpu[:-POWER["quick"][1]]                    # the GPU plan before its power case
    power = power_cases("quick", index=len(base), parts=parts or (2 if small else None))
    if small:
        power = [replace(c, recipe=c.recipe.with_(vocab=4097, batch=256)) for c in power]
    return base + power


def main(argv=None) -> int:
    from equiv.devices import resolve_device
    from equiv.ops.verify.calibration import _row, biased_sampler, reached_tv, run_calibration, run_draws_once
    from equiv.ops.verify.law_draws import LawSampler
    from equiv.ops.verify.paths import torch_sampler

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--small", action="store_true", help="CPU scale: tests the script")
    ap.add_argument("--runs", type=int, default=None, help="null runs (default 1000; 20 with --small)")
    ap.add_argument("--power-runs", type=int, default=None, help="runs per power row (default 20; 3 with --small)")
    ap.add_argument("--parts", default=None, help="calls of the power case, comma-separated (default: the plan's; 0: none, the CPU gate's plan)")
    ap.add_argument("--tv", default="0.01,0.02")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="power shapes, comma-separated")
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed")
    ap.add_argument("--draws", choices=("device", "law"), default="device",
                    help="device: call the samplers on --device; law: draw their exact laws on the host "
                         "(equiv/ops/verify/law_draws.py; many power runs on a CPU)")
    ap.add_argument("--parts-only", default="gate,null,power")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--deadline-s", type=float, default=420.0)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    device = resolve_device(args.device)
    runs = args.runs if args.runs is not None else (20 if args.small else 1000)
    power_runs = args.power_runs if args.power_runs is not None else (3 if args.small else 20)
    try:
        parts_list = [int(p) for p in args.parts.split(",")] if args.parts else [None]
    except ValueError:
        ap.error(f"--parts={args.parts!r}: give whole numbers, comma-separated (0: no power case)")
    if any(p < 0 for p in parts_list if p is not None):
        ap.error(f"--parts={args.parts!r}: a number of calls is 0 or more")
    only = set(args.parts_only.split(","))
    if not only <= {"gate", "null", "power"}:
        ap.error(f"--parts-only: {', '.join(sorted(only - {'gate', 'null', 'power'}))} unknown; choose from gate, null, power")
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            ap.error(f"--shapes: {shape!r} is not a shape; choose from {', '.join(SHAPES)}")
    os.makedirs(args.out, exist_ok=True)
    out_rows = []

    def emit(row):
        out_rows.append(row)
        with open(os.path.join(args.out, "calibration.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    def late(part):
        if time.perf_counter() - t_start > args.deadline_s:
            emit({"part": part, "not_run": f"past the {args.deadline_s:g} s deadline"})
            return True
        return False

    if "gate" in only:
        times = gate_times(device, 1 if args.small else 3)
        with open(os.path.join(args.out, "gate_times.json"), "w") as f:
            json.dump(times, f, indent=2)
        emit(times)
    if "null" in only and not late("null"):
        cases = plan_cases(device, parts_list[0], args.small)           # --parts 0: the CPU plan
        t0 = time.perf_counter()
        fn = torch_sampler if args.draws == "device" else LawSampler(None, 0.0)
        fails = run_calibration(fn, cases, runs, device=device, seed=args.seed,
                                workers=args.workers, guarded=False)
        emit({"part": "null", "law": "lossless", "device": device, "draws": args.draws, "first_seed": args.seed,
              "rows": sum(c.recipe.batch * c.calls for c in cases),
              **_row({"verifier": fn.__name__, "plan": "quick", "tv": 0.0, "shape": "-"}, fails, runs),
              "seconds": round(time.perf_counter() - t0, 1)})
    for parts in parts_list if "power" in only else ():
        cases = plan_cases(device, parts, args.small)
        for tv in (float(t) for t in args.tv.split(",")):
            for shape in args.shapes.split(","):
                if late(f"power {shape} {tv} parts {parts}"):
                    continue
                fn = biased_sampler(shape, tv, at="emitted") if args.draws == "device" else LawSampler(shape, tv)
                t0 = time.perf_counter()
                fails = run_calibration(fn, cases, power_runs, device=device, seed=args.seed,
                                        workers=args.workers, guarded=False, chunk=min(power_runs, 100))
                emit({"part": "power", "law": "lossless", "device": device, "draws": args.draws,
                      "first_seed": args.seed, "vocab": cases[-1].recipe.vocab,
                      "rows": sum(c.recipe.batch * c.calls for c in cases),
                      **_row({"verifier": fn.__name__, "shape": shape, "tv": tv}, fails, power_runs),
                      "reached_tv": round(reached_tv(cases, run_draws_once(fn, cases, device), shape, tv,
                                                     at="emitted"), 5),
                      "seconds": round(time.perf_counter() - t0, 1)})
    write_table(args.out, out_rows, time.perf_counter() - t_start)
    return 0


def write_table(out: str, rows: list, total_s: float) -> None:
    lines = ["| part | verifier | V | rows | tv (reached) | runs | failed runs | rate | 95 % bound (one-sided) | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("part") in ("null", "power"):
            bound = f"<= {r['upper95']:.4f}" if r["part"] == "null" else f">= {r.get('lower95', 0):.4f}"
            lines.append(f"| {r['part']} | {r['verifier']} | {r.get('vocab', 'plan')} | {r.get('rows', 'plan')} | "
                         f"{r['tv']} ({r.get('reached_tv', '-')}) | {r['runs']} | {r['failed_runs']} | "
                         f"{r['rate']:.3f} | {bound} | {r['seconds']} |")
        elif r.get("part") == "gate":
            lines.insert(0, f"quick verify gate, whole command: median {r['median_s']} s of {r['seconds']} "
                            f"(exit codes {r['exit_codes']})\n")
        elif r.get("not_run"):
            lines.append(f"| {r['part']} | not run: {r['not_run']} |")
    lines.append(f"\ntotal {total_s:.0f} s")
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
