"""The draft top-k's ``equiv check`` (one candidate on one recipe) and ``equiv report`` (the
tolerance report of paths x dtypes x input families), as its ``Op`` offers them.

Plan. ``check`` compares the candidate with the reference on one recipe (``compare``) and
diagnoses a failure (``diagnose.attach.for_comparison``); ``report`` runs ``report_rows`` over
every path x dtype x family and diagnoses each failing path; ``ReportRun.render`` writes it in
any of ``report.FORMATS`` with the defects beside it.
"""
from __future__ import annotations

import time

from equiv.devices import resolve_device
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.diagnose.attach import for_comparison, for_report, with_defects
from equiv.ops.draft_topk.paths import get_path, path_names
from equiv.ops.draft_topk.recipes import DTYPES, FAMILIES, Recipe
from equiv.ops.draft_topk.report import render
from equiv.ops.draft_topk.report.rows import report_rows
from equiv.run.context import check_context
from equiv.options import DEFAULT_VOCAB
from equiv.run import CandidateSpec, load_check
from equiv.run.timeouts import parse_timeout
from equiv.validation import check_choices, check_int
from equiv.verdict import CheckRun

DEFAULT_RECIPE = f"gaussian:seed=0,batch=4,vocab={DEFAULT_VOCAB},dtype=float32"


def check(options, recipe=None, *, calls: int = 1) -> CheckRun:
    """``options.spec`` on ``recipe`` (a recipe or its text) at ``options.k``: the comparison and
    the defects behind a failure. ``calls`` is the verifier's; one comparison is one call here.
    The call runs in the context ``--context`` names (``drawn``, the default: the worker's main
    thread with grad enabled, as ``compare`` calls without a context, so that every REPRO line
    replays its call exactly)."""
    spec = options.spec
    recipe = Recipe.parse(recipe or DEFAULT_RECIPE) if isinstance(recipe, (str, type(None))) else recipe
    device = resolve_device(options.device)
    load_check(spec, device, options.timeout)    # CandidateLoadError -> exit 2, before any work
    t0 = time.perf_counter()
    asked = options.option("context")           # drawn: one call, made as a REPRO without --context was
    context = None if asked == "drawn" else check_context(asked, device)
    result = compare(spec, recipe, k=options.k, timeout=options.timeout, device=device, context=context)
    return CheckRun(result, for_comparison(spec, result, device=device, timeout=options.timeout,
                                           elapsed_s=time.perf_counter() - t0))


class ReportRun:
    """The tolerance report of paths x dtypes x families (``equiv.report``, ``Op.report``): ``passed``,
    ``render(fmt, mtp=None)`` in any of ``report.FORMATS``, ``rows`` (the report)."""

    def __init__(self, rows, diagnoses):
        self.rows, self.diagnoses = rows, diagnoses

    @property
    def passed(self) -> bool:
        return bool(self.rows.passed)

    def render(self, fmt: str = "table", mtp=None) -> str:
        return with_defects(render(self.rows, fmt, mtp), fmt, self.diagnoses)


def report(paths=None, *, dtypes=DTYPES, families=None, vocab: int = DEFAULT_VOCAB,
           batch: int = 8, seed: int = 0, k: int = 1, device: str = "auto", timeout=None,
           progress=None) -> ReportRun:
    """Compare every path (specs; default every built-in path) on every dtype x input family;
    a path that takes k = 1 only is left out above it. Every spec is loaded before any work."""
    if isinstance(paths, str):
        paths = [p for p in paths.split(",") if p.strip()]
    specs = [CandidateSpec.parse(p) for p in (paths or path_names())]
    dtypes = check_choices("dtype", dtypes, DTYPES)
    families = check_choices("families", families, FAMILIES) if families else list(FAMILIES)
    vocab = check_int("vocab", vocab, min_value=1)
    batch = check_int("batch", batch, min_value=1)
    seed = check_int("seed", seed, min_value=0)
    k = check_int("k", k, min_value=1, max_value=vocab)
    timeout = parse_timeout(timeout)
    device = resolve_device(device)
    for s in specs:
        load_check(s, device, timeout)           # fail fast, exit 2, before any work (in its worker)
    specs = [s for s in specs if not s.builtin or get_path(s.target).supports_k(k)]
    t0 = time.perf_counter()
    rows = report_rows(specs, dtypes, families, vocab=vocab, batch=batch, seed=seed, k=k, device=device,
                       progress=progress, timeout=timeout)
    return ReportRun(rows, for_report(rows, timeout=timeout, elapsed_s=time.perf_counter() - t0))
