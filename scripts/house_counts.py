"""The house's figures (issue 45): ``python3 scripts/house_counts.py [--list]``.

Plan: parse every ``.py`` file of ``equiv/``, ``reference/``, ``properties/`` and ``fixtures/``
(the source ``tests/test_layout.py`` reads) and count
- imports: every ``import`` / ``from ... import`` statement;
- imports inside functions: those under a ``def`` or ``lambda`` (a lazy import);
- lazy imports with a cost comment: those of them with a measured figure (``1.2 s``, ``40 ms``)
  in a comment on their line or the line just above their block of adjacent import lines;
- up-arrows and circles: ``tests/test_layout.py``'s ``up_a_layer`` and ``circles`` over its
  import graph (top-level and function imports alike);
- duplicate pairs: the first line of ``duplicates --most 40`` where that tool is installed;
- README lines.
``--list`` also prints each lazy import without a cost comment (file:line).
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("equiv", "reference", "properties", "fixtures")
COST = re.compile(r"#.*\b\d+(\.\d+)?\s*(ms|s)\b")
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_layout import circles, import_graph, up_a_layer  # noqa: E402 (the tests folder, on the path above)


def imports(path: str):
    """``(line, inside a function)`` of each import statement of ``path``."""
    found = []

    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child.lineno, inside))
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    walk(ast.parse(open(path, encoding="utf-8").read()), False)
    return found


def measured_cost(lines, line: int) -> bool:
    """Whether the import at ``line`` (1-based) has a measured cost beside it (module docstring)."""
    i = line - 1
    while i > 0 and lines[i - 1].strip().startswith(("import ", "from ", "#")) and not COST.search(lines[i]):
        i -= 1
    return bool(COST.search(lines[i]) or (i > 0 and COST.search(lines[i - 1])) or COST.search(lines[line - 1]))


def source_files():
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            yield from (os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".py"))


def counts(listing: bool = False) -> dict:
    total = inside = measured = 0
    for path in source_files():
        lines = open(path, encoding="utf-8").read().splitlines()
        for line, lazy in imports(path):
            total += 1
            if not lazy:
                continue
            inside += 1
            if measured_cost(lines, line):
                measured += 1
            elif listing:
                print(f"  unmeasured: {os.path.relpath(path, ROOT)}:{line}: {lines[line - 1].strip()}")
    graph = import_graph()
    out = {"imports": total, "imports inside functions": inside, "lazy imports with a cost comment": measured,
           "up-arrows": len(up_a_layer(graph)), "import circles": len(circles(graph))}
    if shutil.which("duplicates"):
        run = subprocess.run(["duplicates", "--most", "40"], cwd=ROOT, capture_output=True, text=True)
        first = (run.stdout.splitlines() or ["?"])[0]
        out["duplicate pairs"] = first.split(" pairs")[0] if " pairs" in first else first
    out["README lines"] = sum(1 for _ in open(os.path.join(ROOT, "README.md"), encoding="utf-8"))
    return out


if __name__ == "__main__":
    for name, value in counts("--list" in sys.argv).items():
        print(f"{name}: {value}")
