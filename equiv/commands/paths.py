"""``equiv paths``: the built-in paths and what their outputs mean."""
from __future__ import annotations

from equiv.commands import add_json, check_outputs, write_json


def add_parser(sub):
    p = sub.add_parser("paths", help="list the built-in paths and the contract they meet")
    add_json(p, "the list")
    p.set_defaults(run=run)


def run(args) -> int:
    from equiv.ops.draft_topk.compare import CONTRACT
    from equiv.ops.draft_topk.paths import get_path, path_names

    check_outputs(json=args.json_out)
    paths = [get_path(n) for n in path_names()]
    write_json(args, {"paths": [p.to_json() for p in paths], "contract": list(CONTRACT)})
    rows = [("name", "k", "topk_p", "what it computes")]
    rows += [(p.name, "any" if p.max_k is None else f"<= {p.max_k}", p.topk_p_meaning, p.description)
             for p in paths]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        args.console.out("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3])
    args.console.out("\nthe contract every path and candidate is judged by:")
    for line in CONTRACT:
        args.console.out(f"  - {line}")
    return 0
