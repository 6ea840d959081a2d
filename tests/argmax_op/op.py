"""``argmax``: ``fn(x [B, V] float32) -> index [B] int64``, the first maximal index of each row.

Its pieces are what any op brings: a NumPy reference, recipes the worker builds, built-ins, a
zoo of mutants and a legal variant, an exact gate stage and a property for the pytest plugin.
The gate reuses the core's pieces (the supervised worker, the property-suite subprocess, the
verdict, the judgments) through their public names only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from equiv.checks import Check, Defect, Diagnosis, Stage, stage_of
from equiv.devices import resolve_device
from equiv.errors import InvalidArgument
from equiv.ops import Op
from equiv.run import load_check, runner_for
from equiv.run.suite import property_checks, start_properties
from equiv.verdict import CheckRun, GateResult, finish_stages

STAGES = ("properties", "exact")


@dataclass(frozen=True)
class ArgmaxRecipe:
    """``ties:seed=S,batch=B,vocab=V,ties=T,near=N``: Gaussian rows, every row's maximum repeated
    ``ties`` times; with ``near=1`` the first element sits 1e-4 under the maximum (one float16 step
    merges them)."""

    seed: int = 0
    batch: int = 4
    vocab: int = 1000
    ties: int = 0
    near: int = 0

    @classmethod
    def parse(cls, text: str) -> "ArgmaxRecipe":
        family, _, rest = text.partition(":")
        if family != "ties":
            raise InvalidArgument(f"argmax recipe {text!r}: the family must be 'ties'")
        try:
            return cls(**{k: int(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)})
        except (TypeError, ValueError):
            raise InvalidArgument(f"argmax recipe {text!r}: write ties:seed=S,batch=B,vocab=V,ties=T") from None

    def __str__(self) -> str:
        return f"ties:seed={self.seed},batch={self.batch},vocab={self.vocab},ties={self.ties},near={self.near}"

    def values(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        x = rng.standard_normal((self.batch, self.vocab)).astype(np.float32)
        for row in x:
            where = rng.choice(self.vocab, size=min(self.ties, self.vocab), replace=False)
            row[where] = row.max()
            if self.near and self.vocab > 1:
                row[1:] = np.maximum(row[1:], row[0] + 1e-3)
                row[0] = row[1:].max() - 1e-4
        return x

    def build(self, device: str):
        import torch    # only where the input is built (the candidate's worker)

        return torch.from_numpy(self.values()).to(device)


def reference(x: np.ndarray) -> np.ndarray:
    """The first index of each row's maximum, in float64 (NumPy's argmax returns the first)."""
    return np.argmax(x.astype(np.float64), axis=1)


def torch_argmax(x):
    return x.argmax(dim=-1)


def via_stable_sort(x):                            # legal: a stable descending sort keeps the first
    import torch

    return torch.sort(x, dim=-1, descending=True, stable=True).indices[:, 0]


def last_of_ties(x):                               # mutant: the last maximal index
    return x.shape[-1] - 1 - x.flip(-1).argmax(dim=-1)


def in_half_precision(x):                          # mutant: argmax of a float16 copy (near-ties merge)
    return x.half().argmax(dim=-1)


def off_by_one(x):                                 # mutant: an index past the maximum
    return (x.argmax(dim=-1) + 1) % x.shape[-1]


last_of_ties.bug_class = "ties broken the other way"
in_half_precision.bug_class = "downcast before the comparison"
off_by_one.bug_class = "index arithmetic"
BUILTINS = {"torch_argmax": torch_argmax}
MUTANTS = {"last_of_ties": last_of_ties, "in_half_precision": in_half_precision, "off_by_one": off_by_one}
LEGAL = {"via_stable_sort": via_stable_sort}


def plan(seed: int) -> list:
    return [ArgmaxRecipe(seed, 4, 1000, 0), ArgmaxRecipe(seed + 1, 8, 129280, 0),
            ArgmaxRecipe(seed + 2, 4, 1000, 3), ArgmaxRecipe(seed + 3, 3, 33, 2), ArgmaxRecipe(seed + 4, 2, 64, 0, 1)]


def judge(runner, recipe) -> Check:
    """One exact check: the candidate's indices on ``recipe`` against the reference's."""
    out = runner.call(recipe, names=("x",))
    name = f"exact:{recipe}"
    repro = f"REPRO: equiv check --op argmax --candidate {runner_name(runner)} --recipe '{recipe}'"
    if not out.ok:
        return Check("exact", name, False, f"the call {out.problem}", subject=str(recipe), inputs=recipe,
                     outcome=out.kind, repro=repro, cause=out.kind)
    got = getattr(out.value, "values", None)
    want = reference(recipe.values())
    if got is None or np.shape(got) != want.shape:
        return Check("exact", name, False, f"returned {type(out.value).__name__} of shape {np.shape(got)}, "
                     f"expected [{recipe.batch}] int64", subject=str(recipe), inputs=recipe, repro=repro,
                     cause="format", evidence={"cause": "format"})
    bad = np.flatnonzero(np.asarray(got) != want)
    if bad.size:
        b = int(bad[0])
        return Check("exact", name, False, f"{bad.size}/{want.size} rows differ; row {b}: {int(got[b])} "
                     f"for the first maximum {int(want[b])}", subject=str(recipe), inputs=recipe,
                     repro=repro, evidence={"cause": "wrong_index", "row": b, "rows": int(bad.size)},
                     cause="wrong_index")
    return Check("exact", name, True, f"{want.size} rows exact", subject=str(recipe))


def runner_name(runner) -> str:
    return getattr(getattr(runner, "candidate", None), "text", "SPEC")


def diagnose(spec: str, checks) -> Diagnosis:
    """One defect per cause, the smallest failing recipe its trigger."""
    by_cause: dict = {}
    for c in checks:
        if c.passed or c.cause is None:
            continue
        if c.cause not in by_cause or c.inputs.vocab * c.inputs.batch < by_cause[c.cause][0].inputs.vocab * \
                by_cause[c.cause][0].inputs.batch:
            by_cause[c.cause] = (c, [])
        by_cause[c.cause][1].append(c.name)
    defects = tuple(Defect(cause=cause, title=cause.replace("_", " "), explanation=c.detail, where="tokens",
                           trigger=str(c.inputs), evidence=c.detail, checks=tuple(names), repro=c.repro or "",
                           data=c.evidence) for cause, (c, names) in by_cause.items())
    return Diagnosis(spec, defects)


def gate(options, *, stages, vocab=None, progress=None, feature_stages=None) -> GateResult:
    t0 = time.perf_counter()
    spec = options.spec
    suite = start_properties(options, stage_timeout=300) if "properties" in stages else None
    device = resolve_device(options.device)
    checks, done = [], []
    try:
        load = load_check(spec, device, options.timeout)
        if load is not None:
            checks.append(Check("load", "load", False, f"the candidate {load.problem}"))
        else:
            if "exact" in stages:
                runner = runner_for(spec, device, options.timeout)
                got = [judge(runner, r) for r in plan(options.seed)]
                checks += got
                done.append(stage_of("exact", got, {"summary": f"{len(got)} recipes"}))
            if suite is not None:
                got, st = property_checks(suite, 300)
                suite = None
                checks += got
                done.append(st)
    finally:
        if suite is not None:
            suite.kill()
    done, passed = finish_stages(done, stages, STAGES, checks)
    return GateResult(candidate=spec.text, passed=passed, checks=tuple(checks), k=(), device=device,
                      dtypes=("float32",), budget=options.budget, seed=options.seed,
                      duration_s=time.perf_counter() - t0, stages=done, op="argmax",
                      diagnosis=diagnose(spec.text, checks))


@dataclass(frozen=True)
class ExactResult:
    checks: tuple

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def summary(self) -> str:
        return "\n".join(f"{'pass' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in self.checks)

    def to_json(self) -> dict:
        return {"passed": self.passed, "checks": [c.to_json() for c in self.checks]}


def check(options, recipe=None, *, calls: int = 1) -> CheckRun:
    recipe = ArgmaxRecipe.parse(recipe or OP.default_recipe) if isinstance(recipe, (str, type(None))) else recipe
    device = resolve_device(options.device)
    load_check(options.spec, device, options.timeout)
    result = ExactResult((judge(runner_for(options.spec, device, options.timeout), recipe),))
    return CheckRun(result, diagnose(options.spec.text, result.checks))


def exact_property(options) -> None:
    """The plugin's property: the candidate is exact on the plan (raises AssertionError)."""
    runner = runner_for(options.spec, resolve_device(options.device), options.timeout)
    failed = [c for c in (judge(runner, r) for r in plan(options.seed)) if not c.passed]
    if failed:
        raise AssertionError(f"{failed[0].detail}\n{failed[0].repro}")


@dataclass(frozen=True)
class ArgmaxReport:
    """Every path x plan recipe: a row each (``equiv report --op argmax``)."""

    rows: tuple                                    # (path, recipe, passed, detail)

    @property
    def passed(self) -> bool:
        return all(r[2] for r in self.rows)

    def render(self, fmt: str = "table", mtp=None) -> str:
        if fmt == "json":
            import json

            return json.dumps({"rows": [dict(zip(("path", "recipe", "passed", "detail"), r)) for r in self.rows]})
        return "\n".join(f"{p:<16} {'pass' if ok else 'FAIL'}  {r}  {d}" for p, r, ok, d in self.rows)


def report(paths=None, *, seed: int = 0, device: str = "auto", timeout=None, **_sizes) -> ArgmaxReport:
    """The built-ins (or ``paths``) on the exact plan; the draft op's sizes (dtypes, vocab...) do
    not apply to this op and are ignored."""
    from equiv.run import CandidateSpec

    names = [p for p in paths.split(",") if p] if isinstance(paths, str) else list(paths or BUILTINS)
    rows = []
    for name in names:
        runner = runner_for(CandidateSpec.parse(name, "argmax"), resolve_device(device), timeout)
        rows += [(name, str(r), c.passed, c.detail) for r, c in ((r, judge(runner, r)) for r in plan(seed))]
    return ArgmaxReport(tuple(rows))


def _check_signature(text, fn) -> None:
    pass


OP = Op(name="argmax", signature="fn(x) -> index", summary="the test suite's small op: the first maximal index",
        mutants_module=__name__, builtin_names=lambda: tuple(BUILTINS), builtin=BUILTINS.__getitem__,
        check_signature=_check_signature, mutants=lambda: MUTANTS, legal_variants=lambda: LEGAL,
        parse_recipe=ArgmaxRecipe.parse, default_recipe="ties:seed=0,batch=4,vocab=1000,ties=2",
        stages=STAGES, gate=gate, check=check, ledger=dict, selftest_stages=("exact",),
        properties=lambda: {"exact": exact_property}, report=report)
