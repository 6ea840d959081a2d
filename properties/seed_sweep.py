"""False-positive sweep: correct paths through the whole suite under many Hypothesis seeds.

Plan: for each path and each seed in ``range(start, start + seeds)``, run the property suite on
that built-in path in-process (``equiv.properties.killing.run_suite`` with ``-k PATH`` and
``--hypothesis-seed=SEED``, which re-seeds every property even under the derandomized ``ci``
profile), so every seed draws different inputs. The known-failure ledger applies as in CI (its
entries are strict xfails proven by their witness; an xfail is not a false positive). Any failed
test is a false positive: the tolerance table, the reference or a relation's allowance is wrong.

    python -m equiv.properties.seed_sweep --paths softmax_topk,identity_top1 --seeds 200 --json out.json

prints one line per failure and a summary per path, and exits 1 if any false positive appeared.
"""
from __future__ import annotations

import argparse
import sys
import time

from equiv.atomic import write_json
from equiv.properties.killing import run_suite


def sweep(path: str, seeds: range, *, budget: str, profile: str, progress=None) -> dict:
    failures, examples, t0 = [], 0, time.perf_counter()
    for seed in seeds:
        report = run_suite(None, budget=budget, profile=profile, stop_at_first=False,
                           extra=["-k", path, f"--hypothesis-seed={seed}"])
        examples += sum(t.get("examples") or 0 for t in report["tests"])
        for t in report["tests"]:
            if t["outcome"] in ("failed", "error", "xpassed"):
                failures.append({"seed": seed, "nodeid": t["nodeid"], "outcome": t["outcome"],
                                 "message": (t.get("message") or "").splitlines()[:3]})
                if progress:
                    progress(f"{path} seed {seed}: {t['outcome']} {t['nodeid']}")
        if progress and (seed - seeds.start) % 10 == 9:
            progress(f"{path}: {seed - seeds.start + 1} seeds done, {len(failures)} false positives, "
                     f"{time.perf_counter() - t0:.0f} s")
    return {"path": path, "seeds": len(seeds), "first_seed": seeds.start, "budget": budget,
            "profile": profile, "examples": examples, "false_positives": failures,
            "duration_s": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m equiv.properties.seed_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="softmax_topk,identity_top1")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--budget", default="full", choices=("quick", "full"))
    parser.add_argument("--profile", default="equiv-ci", choices=("equiv-dev", "equiv-ci", "equiv-nightly"))
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds={args.seeds} is invalid: give at least 1")
    say = lambda line: print(line, file=sys.stderr, flush=True)
    results = [sweep(p, range(args.start, args.start + args.seeds), budget=args.budget,
                     profile=args.profile, progress=say) for p in args.paths.split(",")]
    for r in results:
        print(f"{r['path']}: {len(r['false_positives'])} false positives in {r['seeds']} seeds "
              f"({r['examples']} examples, {r['budget']} budget, {r['profile']} profile, {r['duration_s']} s)")
    if args.json:
        write_json(args.json, results)
    return 1 if any(r["false_positives"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
