"""``equiv.assert_equivalent``: the gate's judgement as an assertion for a user's own tests.

Plan
----
- ``assert_equivalent(candidate, logits, k=1, ...)`` runs ``equiv.ops.draft_topk.compare`` (contract, index in
  the tie set, value within the tolerance table, poisoning, regression against softmax_topk)
  and returns the ``ComparisonResult`` when every check passes. Otherwise it raises
  ``EquivalenceError`` (an ``AssertionError``, so pytest shows it as a failed assertion) whose
  message has the gate's shape: the verdict line, one line per failed check (what differs,
  where, by how much, what was allowed), the worst row, and a ``REPRO:`` line. ``err.failed``
  names the failed checks, ``err.result`` is the whole comparison.
- ``logits`` is a ``[B, V]`` tensor, an ``equiv.Recipe`` or a recipe string
  (``"ties_max:seed=3,batch=4,vocab=129280"``), built on ``device``. A recipe gives the
  shortest REPRO (``equiv check --recipe ...``). A raw tensor is replayable too: a small one
  (<= ``INLINE_ELEMENTS`` values) is written into the REPRO line itself; a larger one is saved
  once, on failure, as ``logits.npy`` in a new temporary folder that the REPRO line loads.
- ``candidate`` is a spec (built-in name, ``pkg.mod:fn``, ``path/file.py:fn``) or a callable; the
  REPRO names a callable by its file and qualified name, which replays wherever the file is.
- Bad arguments (a 1-D tensor, an integer dtype, k > V) raise one-line ``InvalidArgument``s.
"""
from __future__ import annotations

import json
import os
import shlex
import tempfile

INLINE_ELEMENTS = 64


def _replay_spec(spec) -> str | None:
    """A spec that loads the candidate (a ``CandidateSpec``) again in a fresh process, or None."""
    if spec.kind != "callable" or spec.builtin:
        return spec.text
    fn = getattr(spec.fn, "__wrapped__", spec.fn)
    qualname = getattr(fn, "__qualname__", "")
    module = __import__("sys").modules.get(getattr(fn, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if not qualname or "<" in qualname or not path:
        return None                              # a lambda, a local function, an interactive one
    return f"{os.path.abspath(path)}:{qualname}"


def _quoted(text: str) -> str:
    """A double-quoted Python string literal, so that the shell's single quotes wrap it cleanly."""
    return json.dumps(text)


def _tensor_source(x) -> str:
    """Python that rebuilds ``x`` bit for bit (float32 embeds float16 and bfloat16 exactly)."""
    dtype = str(x.dtype).removeprefix("torch.")
    values = x.detach().float().cpu()
    if values.numel() <= INLINE_ELEMENTS:
        rows = "[" + ", ".join("[" + ", ".join(f'float("{v}")' if v != v or abs(v) == float("inf")
                                               else repr(v) for v in row) + "]"
                               for row in values.tolist()) + "]"
        return f"torch.tensor({rows}).to(torch.{dtype})"
    folder = tempfile.mkdtemp(prefix="equiv-repro-")
    path = os.path.join(folder, "logits.npy")
    import numpy as np

    np.save(path, values.numpy())
    return f"torch.from_numpy(numpy.load({_quoted(path)})).to(torch.{dtype})"


def _api_repro(spec: str | None, x, k: int, device: str) -> str:
    if spec is None:
        return ("REPRO: not available: the candidate is a lambda or a local function; define it at "
                "module level (or pass its spec) for a replayable line")
    code = (f"import equiv, numpy, torch; equiv.assert_equivalent({_quoted(spec)}, {_tensor_source(x)}, "
            f"k={k}, device={_quoted(device)})")
    return "REPRO: python -c " + shlex.quote(code)


def _message(result, repro: str) -> str:
    failed = result.failed_checks
    lines = [f"{result.path} k={result.k} {result.dtype} [{result.batch}, {result.vocab}] on "
             f"{result.device}: FAIL ({', '.join(c.name for c in failed)})"]
    lines += [f"  {c.name}: {c.detail}" for c in failed]
    where = f"recipe {result.recipe}, " if result.recipe else ""
    if result.worst_row is not None:
        lines.append(f"  {where}worst row {result.worst_row}")
    lines.append(repro)
    return "\n".join(lines)


def assert_equivalent(candidate, logits, k: int = 1, *, tolerance=None, device: str = "auto",
                      timeout: float | None = None, regression: bool = True):
    """Raise ``EquivalenceError`` unless ``candidate(logits, k)`` matches the reference
    (module docstring); return the ``ComparisonResult`` when it does."""
    from equiv.devices import resolve_device
    from equiv.errors import EquivalenceError
    from equiv.ops.draft_topk.compare import compare
    from equiv.ops.draft_topk.recipes import Recipe
    from equiv.run import CandidateSpec
    from equiv.validation import check_logits

    parsed = CandidateSpec.parse(candidate)
    loaded = parsed.load()                       # a user's own test: its candidate runs here
    recipe = Recipe.parse(logits) if isinstance(logits, str) else logits
    if isinstance(recipe, Recipe):
        x = recipe.build(resolve_device(device))
    else:
        recipe = None
        x = check_logits(logits, k)
        if device != "auto":
            x = x.to(resolve_device(device))
    check_logits(x, k)
    spec = _replay_spec(parsed)
    result = compare(loaded, x, k=k, tolerance=tolerance, recipe=recipe, regression=regression,
                     name=spec or loaded.spec, timeout=timeout)
    if result.passed:
        return result
    if recipe is not None and spec is not None:
        repro = result.repro
    else:
        repro = _api_repro(spec, x, k, x.device.type)
    raise EquivalenceError(_message(result, repro), result)


# -- the commands' work, as library functions: ``equiv check``, ``equiv gate``, ``equiv report`` --

from equiv.options import DEFAULT_VOCAB, DTYPES  # noqa: E402 (light: no torch, no NumPy)

DRAFT_RECIPE = f"gaussian:seed=0,batch=4,vocab={DEFAULT_VOCAB},dtype=float32"
VERIFY_RECIPE = "realistic:seed=0,batch=256,n=3,vocab=129280"


class CheckRun:
    """One candidate on one recipe, judged (``equiv.check``): ``passed``, ``summary()`` (with the
    defects behind a failure first), ``to_json()``, and ``result`` (the comparison or verdict)."""

    def __init__(self, result, diagnosis=None):
        self.result, self.diagnosis = result, diagnosis

    @property
    def passed(self) -> bool:
        return bool(self.result.passed)

    def summary(self) -> str:
        lead = self.diagnosis.summary() + "\n" if self.diagnosis is not None and self.diagnosis.defects else ""
        return lead + self.result.summary()

    def to_json(self) -> dict:
        extra = self.diagnosis.beside_checks() if self.diagnosis is not None else {}
        return {**self.result.to_json(), **extra}


def check(candidate, recipe=None, *, op: str = "draft_topk", k: int = 1, device: str = "auto",
          timeout=None, calls: int = 1, seed: int = 0, law: str = "lossless") -> CheckRun:
    """Judge ``candidate`` on one input recipe (what a ``REPRO:`` line runs): for the draft top-k
    the comparison with the reference and the defects behind a failure; for ``op="verify"`` the
    verifier's exact checks (and the statistical ones when the ``calls`` draw enough tokens).
    A spec that does not load raises ``CandidateLoadError`` before any work."""
    import time

    from equiv.devices import resolve_device
    from equiv.ops import get_op
    from equiv.run import CandidateSpec, load_check
    from equiv.run.timeouts import DEFAULT_TIMEOUT_S, parse_timeout

    the_op = get_op(op)
    spec = CandidateSpec.parse(candidate, the_op.name)
    timeout = parse_timeout(DEFAULT_TIMEOUT_S if timeout is None else timeout)
    if the_op.name == "verify":
        from equiv.ops.verify.gate import run_verify_check

        return CheckRun(run_verify_check(spec, recipe or VERIFY_RECIPE, calls=calls, seed=seed,
                                         device=device, timeout=timeout, law=law))
    from equiv.diagnose.attach import for_comparison
    from equiv.ops.draft_topk.compare import compare

    recipe = the_op.parse_recipe(recipe or DRAFT_RECIPE) if isinstance(recipe, (str, type(None))) else recipe
    device = resolve_device(device)
    load_check(spec, device, timeout)            # CandidateLoadError -> exit 2, before any work
    t0 = time.perf_counter()
    result = compare(spec, recipe, k=k, timeout=timeout, device=device)
    return CheckRun(result, for_comparison(spec, result, device=device, timeout=timeout,
                                           elapsed_s=time.perf_counter() - t0))


class ReportRun:
    """The tolerance report of paths x dtypes x families (``equiv.report``): ``passed``,
    ``render(fmt, mtp=None)`` in any of ``equiv.report.FORMATS``, ``rows`` (the report)."""

    def __init__(self, rows, diagnoses):
        self.rows, self.diagnoses = rows, diagnoses

    @property
    def passed(self) -> bool:
        return bool(self.rows.passed)

    def render(self, fmt: str = "table", mtp=None) -> str:
        from equiv.diagnose.attach import with_defects
        from equiv.report import render

        return with_defects(render(self.rows, fmt, mtp), fmt, self.diagnoses)


def report(paths=None, *, dtypes=DTYPES, families=None, vocab: int = DEFAULT_VOCAB,
           batch: int = 8, seed: int = 0, k: int = 1, device: str = "auto", timeout=None,
           progress=None) -> ReportRun:
    """Compare every path (specs; default every built-in path) on every dtype x input family;
    a path that takes k = 1 only is left out above it. Every spec is loaded before any work."""
    import time

    from equiv.devices import resolve_device
    from equiv.diagnose.attach import for_report
    from equiv.ops.draft_topk.recipes import DTYPES, FAMILIES
    from equiv.report.rows import report_rows
    from equiv.run import CandidateSpec, load_check
    from equiv.run.timeouts import parse_timeout
    from equiv.validation import check_choices, check_int
    from equiv.ops.draft_topk.paths import get_path, path_names

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
