"""Read a folder written under scripts/profile/sitecustomize.py: the timeline of the processes,
then for each the functions with the most cumulative time (``--top N``, default 25)."""
import json
import os
import pstats
import sys


def main(argv):
    where = argv[0]
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 25
    rows = [json.loads(line) for line in open(os.path.join(where, "timeline.jsonl"))]
    t0 = min(r["start"] for r in rows)
    for r in sorted(rows, key=lambda r: r["start"]):
        print(f"pid {r['pid']:>7} parent {r['ppid']:>7}  {r['start'] - t0:7.2f} -> {r['end'] - t0:7.2f} s  "
              f"{' '.join(map(str, r['argv']))[:110]}")
    for r in sorted(rows, key=lambda r: r["start"]):
        path = os.path.join(where, f"{r['pid']}.prof")
        if not os.path.exists(path):
            continue
        print(f"\n==== pid {r['pid']} {' '.join(map(str, r['argv']))[:100]}")
        pstats.Stats(path).sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    main(sys.argv[1:])
