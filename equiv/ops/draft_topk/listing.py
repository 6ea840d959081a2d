"""``equiv paths`` for the draft top-k: the built-in paths, what their ``topk_p`` means, the contract."""
from __future__ import annotations

from equiv.ops.draft_topk.compare import CONTRACT
from equiv.ops.draft_topk.paths import get_path, path_names


def listing() -> tuple:
    """``(json document, lines for the console)``."""
    paths = [get_path(n) for n in path_names()]
    doc = {"paths": [p.to_json() for p in paths], "contract": list(CONTRACT)}
    rows = [("name", "k", "topk_p", "what it computes")]
    rows += [(p.name, "any" if p.max_k is None else f"<= {p.max_k}", p.topk_p_meaning, p.description)
             for p in paths]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] for r in rows]
    lines += ["", "the contract every path and candidate is judged by:"] + [f"  - {line}" for line in CONTRACT]
    return doc, lines
