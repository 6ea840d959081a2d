"""The direction of imports, read from the source (no module is imported).

Plan: every ``.py`` file of ``equiv/``, ``reference/`` and ``properties/`` is parsed; each import
(top level or inside a function, absolute or relative) becomes an edge between project modules
(``equiv.reference`` / ``equiv.properties`` are the checkout's top-level folders). Then:
- there is no import circle (Tarjan's strongly connected components, none larger than one);
- ``equiv`` imports neither ``properties`` nor ``tests``, and ``reference`` imports nothing of the project;
- ``equiv/run`` imports no operation (``equiv.ops.NAME``): a spec names its operation;
- ``CandidateSpec.parse`` is the one place that tells a file spec from a module spec.
Each rule is seen failing on a small made-up graph, so none is a check that cannot fail.
"""
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("equiv", "reference", "properties", "fixtures")


def _modules() -> dict:
    out = {}
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[name.removesuffix(".__init__")] = path
    return out


def _resolve(name: str, modules) -> str | None:
    for top in ("properties", "reference", "fixtures"):
        if name == f"equiv.{top}" or name.startswith(f"equiv.{top}."):
            name = name[len("equiv."):]
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict:
    modules = _modules()
    graph = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                prefix = (base + "." if node.level else "") + (node.module or "")
                targets = [f"{prefix}.{a.name}" for a in node.names]
            for t in targets:
                r = _resolve(t, modules)
                if r and r != mod:
                    graph[mod].add(r)
    return graph


def circles(graph: dict) -> list:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def upward(graph: dict) -> list:
    bad = [(m, t) for m, ts in graph.items() if m.startswith("equiv") for t in ts
           if t.startswith(("properties", "tests"))]
    bad += [(m, t) for m, ts in graph.items() if m.startswith("reference") for t in ts
            if not t.startswith("reference")]
    return bad


def run_imports_an_op(graph: dict) -> list:
    return [(m, t) for m, ts in graph.items() if m.startswith("equiv.run") for t in ts
            if t.startswith("equiv.ops.")]


def test_the_rules_can_fail():
    assert circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert upward({"equiv.gate": {"properties.subjects"}, "reference.x": {"equiv.run"}})
    assert run_imports_an_op({"equiv.run.worker": {"equiv.ops.verify.paths"}})


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_imports_point_down():
    graph = import_graph()
    assert upward(graph) == []
    assert run_imports_an_op(graph) == []


def source_lines():
    """``(path from the root, line number, line)`` of every line of ``equiv/``'s modules."""
    for dirpath, _, files in os.walk(os.path.join(ROOT, "equiv")):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    yield os.path.relpath(path, ROOT), n, line


def test_one_place_decides_what_a_spec_is():
    # telling "file or module" and "built-in or not" by the text is spec.py's alone
    pattern = re.compile(r"""(['"]):\1 (not )?in |rpartition\(['"]:['"]\)|endswith\(['"]\.py['"]\)""")
    found = [f"{path}:{n}" for path, n, line in source_lines() if pattern.search(line)]
    assert found and all(p.startswith(os.path.join("equiv", "run", "spec.py")) for p in found), found


# The house by layer (docs/house.md): a module imports only from its own layer or lower ones.
# The longest matching prefix decides a module's layer.
LAYERS = {
    "reference": 0, "fixtures": 0,
    "fixtures.traces": 7, "fixtures.adversarial": 7,   # the scripts that made the data
    "equiv._version": 1, "equiv.errors": 1, "equiv.validation": 1, "equiv.checks": 1, "equiv.verdict": 1,
    "equiv.stats": 1, "equiv.console": 1, "equiv.atomic": 1, "equiv.sanitize": 1, "equiv.recipe_text": 1,
    "equiv.devices": 1, "equiv.provenance": 1, "equiv.junit": 1, "equiv.figures": 1, "equiv.memory": 1,
    "equiv.disk_cache": 1, "equiv.memo": 1, "equiv.timeline": 1,
    "equiv.run": 2, "equiv.ops": 2,        # the registry and the supervised worker
    "equiv.options": 3, "equiv.candidate": 3,   # over both: RunOptions checks a spec (equiv.run) and an op
    "equiv.ops.": 4,                      # every op's folder (the registry itself, equiv.ops, is layer 2)
    "equiv.api": 5, "equiv.gate": 5, "equiv.selftest": 5, "equiv.mtp": 5, "equiv.strategies": 5,
    "equiv.commands": 6, "equiv.pytest": 6, "equiv.cli": 6, "equiv.__main__": 6, "equiv": 6,
    "properties": 7,
}


def layer_of(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p if p.endswith(".") else p + ".")),
               key=len, default=None)
    if best is None:
        raise AssertionError(f"{module} has no layer: add it to LAYERS (and to docs/house.md)")
    return LAYERS[best]


def up_a_layer(graph: dict) -> list:
    return sorted((m, t) for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m))


def test_the_layer_rule_can_fail():
    assert up_a_layer({"equiv.stats.fit": {"equiv.mtp.harness"}}) == [("equiv.stats.fit", "equiv.mtp.harness")]
    assert up_a_layer({"equiv.ops": {"equiv.ops.verify.op"}}) == [("equiv.ops", "equiv.ops.verify.op")]
    assert up_a_layer({"equiv.run.suite": {"equiv.options"}}) == [("equiv.run.suite", "equiv.options")]
    assert up_a_layer({"equiv.ops.verify.judge": {"equiv.stats", "equiv.ops.draft_topk.paths"}}) == []


def test_no_import_runs_up_a_layer():
    assert up_a_layer(import_graph()) == []


def ops_importing_mtp(graph: dict) -> list:
    return sorted((m, t) for m, ts in graph.items() if m.startswith("equiv.ops.") for t in ts
                  if t.startswith("equiv.mtp"))


def test_no_op_imports_mtp():
    assert ops_importing_mtp({"equiv.ops.verify.laws": {"equiv.mtp.statistics"}})
    assert ops_importing_mtp(import_graph()) == []


def op_names_outside_ops(names) -> list:
    """Lines of ``equiv/`` outside ``equiv/ops/`` (the registry, ``equiv/ops/__init__.py``,
    aside) that name an operation: a feature reaches an op only through its ``Op``."""
    # an op's name as an op: quoted, in a module path, after --op/op=, or any name with an
    # underscore (``draft_topk``); a plain word (``verify``) is also English ("verify rounds")
    words = "|".join(map(re.escape, names))
    pattern = re.compile(rf"(['\"])({words})\1|ops[./]({words})\b|--op[ =]({words})\b|\bop=({words})\b|"
                         + "|".join(rf"\b{re.escape(n)}\b" for n in names if "_" in n or n == "equiv"))
    return [f"{path}:{n}: {line.strip()}" for path, n, line in source_lines()
            if path.split(os.sep)[:2] != ["equiv", "ops"] and pattern.search(line)]


def test_only_the_registry_names_an_op():
    sys.path.insert(0, ROOT)
    from equiv.ops import OP_NAMES

    assert op_names_outside_ops(("equiv",))            # the scan sees the tree
    assert op_names_outside_ops(OP_NAMES) == []
