"""``equiv paths``: the built-in paths and what their outputs mean."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("paths", help="list the built-in paths")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.compare import CONTRACT
    from equiv.paths import get_path, path_names

    paths = [get_path(n) for n in path_names()]
    if args.json:
        print(json.dumps({"paths": [p.to_json() for p in paths], "contract": list(CONTRACT)}, indent=2))
        return 0
    rows = [("name", "k", "topk_p", "what it computes")]
    rows += [(p.name, "any" if p.max_k is None else f"<= {p.max_k}", p.topk_p_meaning, p.description)
             for p in paths]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3])
    print("\nthe contract every path and candidate is judged by:")
    for line in CONTRACT:
        print(f"  - {line}")
    return 0
