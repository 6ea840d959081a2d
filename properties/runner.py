"""Run one property against one subject: the ``suite`` fixture of every property test.

Plan
----
- ``Suite.run(check, weight=..., **strategies)`` wraps ``check`` in Hypothesis at run time, so
  each subject gets its own budget: ``max_examples`` is the profile's (``--equiv-budget full``) or
  ``QUICK_EXAMPLES`` (``quick``), times the property's ``weight`` and the subject's
  ``example_factor``. A ``--hypothesis-seed`` given on the command line seeds every property,
  also under the derandomized ``ci`` profile (so the gate's ``--seed`` changes the examples);
  a random profile gets a fresh seed that the REPRO line carries.
- ``Suite.call`` runs the subject once through its runner (``equiv.run``: a user's candidate in
  its supervised worker, with the input inside guard bands): a raise, a broken contract
  (``equiv.ops.draft_topk.compare``'s own contract check) or an input changed in place is a failure.
  ``Suite.expect_equivalent`` is the full comparison pipeline of ``equiv.ops.draft_topk.compare``.
- An abnormal end of the candidate (an exit, a signal, a ``BaseException``, a hang) raises
  ``AbnormalEnd``, which is not an ``Exception``: Hypothesis stops at once instead of shrinking
  through one worker restart (or one time-out) per example, and the test fails with the input
  that triggered it.
- Every failure is a ``PropertyFailure`` (an ``AssertionError``) whose message says what broke,
  where and by how much; Hypothesis adds the shrunk ``Falsifying example``; the runner adds a
  ``REPRO:`` note with the pytest command, and records property, example counts,
  counterexample and repro as ``equiv_*`` user properties for ``--equiv-report-json``.
- A (path, property) in the known-failure ledger runs the ledger's witness as an explicit
  first example, so its strict xfail is proven whatever the budget or seed.
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import example, given, seed as with_seed, settings

from equiv.ops.draft_topk import strategies
from equiv.ops.draft_topk.compare import compare, contract_break
from equiv.ops.draft_topk.ledger import KNOWN_FAILURES
from equiv.ops.draft_topk.space import context_of
from equiv.ops.draft_topk.tolerance import tolerance_for
from equiv.properties.subjects import QUICK_EXAMPLES
from equiv.pytest.profiles import suite_settings
from equiv.run import Raw, runner_for
from equiv.run.outcome import ABNORMAL


class AbnormalEnd(BaseException):
    """The subject ended abnormally (equiv.run's ``ABNORMAL`` kinds): stop the property now."""

    def __init__(self, message: str):
        super().__init__(message)


class PropertyFailure(AssertionError):
    """A property did not hold; ``repro`` is a command that replays the failing input."""

    def __init__(self, message: str, repro: str | None = None):
        super().__init__(message)
        self.repro = repro


@dataclass(frozen=True)
class Output:
    """A subject's answer moved to the CPU: ``p`` float64 ``[B, k]``, ``idx`` int64 ``[B, k]``."""

    p: np.ndarray
    idx: np.ndarray


def to_numpy(t) -> np.ndarray:
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()                            # exact: both embed in float32
    return t.detach().cpu().numpy()


try:
    _GROUP = BaseExceptionGroup                   # Python >= 3.11
except NameError:                                # 3.10: Hypothesis raises the backport's groups
    try:
        from exceptiongroup import BaseExceptionGroup as _GROUP
    except ImportError:
        _GROUP = ()


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, _GROUP) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _notes(exc: BaseException) -> list[str]:
    seen = {id(exc): exc, id(_leaf(exc)): _leaf(exc)}
    return [n for e in seen.values() for n in getattr(e, "__notes__", [])]


def raw_repro(spec: str, values: np.ndarray, dtype: str, k: int) -> str:
    """A self-contained command for an element-level input (small V only)."""
    rows = "[" + ", ".join("[" + ", ".join(f"float('{v}')" if not np.isfinite(v) else repr(float(v))
                                           for v in row) + "]" for row in values) + "]"
    return (f"REPRO: python -c \"import equiv, torch; print(equiv.compare({spec!r}, "
            f"torch.tensor({rows}).to(torch.{dtype}), k={k}))\"")


class Suite:
    """What a property test needs: the subject, the options, strategies, calls and failures."""

    def __init__(self, request, subject, opts):
        self.request = request
        self.subject = subject
        self.opts = opts
        self.property = request.node.originalname.removeprefix("test_")
        self._in_run = False
        request.node.user_properties.append(("equiv_property", self.property))

    # -- what is judged -------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return self.subject.k

    @property
    def runner(self):
        return runner_for(self.subject.spec, self.device, self.opts.timeout)

    @property
    def device(self) -> str:
        return self.opts.device

    @property
    def dtypes(self) -> tuple:
        return self.opts.dtypes

    def coverage_recipes(self):
        """The shapes every run judges (``strategies.coverage_recipes``) within this subject's budget."""
        b = self.subject.budget
        return strategies.coverage_recipes(self.dtypes, max_vocab=b.max_vocab, max_batch=b.max_batch,
                                           min_vocab=self.k)

    def recipes(self, families, **kwargs):
        b = self.subject.budget
        kwargs["min_vocab"] = max(kwargs.get("min_vocab", 1), self.k)   # k > V is not a valid input
        kwargs["max_vocab"] = min(kwargs.get("max_vocab", b.max_vocab), b.max_vocab)
        kwargs["max_batch"] = min(kwargs.get("max_batch", b.max_batch), b.max_batch)
        return strategies.recipes(families, self.dtypes, **kwargs)

    def tolerance(self, dtype):
        return tolerance_for(dtype)

    # -- calling the subject --------------------------------------------------------------------
    def build(self, recipe):
        return recipe.build(self.device)

    def context(self, x) -> str:
        """The calling context of a call on ``x`` (``--equiv-context``; drawn: ``space.context_of``
        a key of the input -- its shape, dtype, layout and first and last rows -- so a replayed
        example is called as it was)."""
        asked = self.opts.option("context")
        if asked != "drawn":
            return asked
        rows = x.detach()[[0, -1]] if x.dim() == 2 and x.shape[0] else x.detach().reshape(-1)[:0]
        if rows.dtype == torch.bfloat16:
            rows = rows.view(torch.int16)
        key = f"{tuple(x.shape)}{x.dtype}{x.stride()}{x.storage_offset()}".encode() + rows.cpu().numpy().tobytes()
        return context_of(key, self.device)

    def tensor(self, values: np.ndarray, dtype: str):
        return torch.from_numpy(np.ascontiguousarray(values)).to(getattr(torch, dtype)).to(self.device)

    def call(self, x, k: int | None = None, *, what: str = "the input") -> Output:
        """One call of the subject; a raise, a broken contract or a changed input fails."""
        k = self.k if k is None else k
        batch, vocab = x.shape
        dtype = str(x.dtype).removeprefix("torch.")
        outcome = self.runner.call(Raw.of(x), k, timeout=self.opts.timeout, context=self.context(x))
        shape = f"[{batch}, {vocab}] {dtype}"
        if outcome.abnormal:
            self.abnormal(f"the subject {outcome.problem} on {what} {shape}"
                          + (f"; its last output: {outcome.log_tail.splitlines()[-1][:200]}"
                             if outcome.log_tail else ""), kind=outcome.kind)
        if not outcome.ok:
            self.fail(f"the subject {outcome.problem} on {what} {shape}", cause=outcome.kind)
        broken = contract_break(outcome.value, batch, vocab, k, dtype, str(x.device))
        if broken is not None:
            self.fail(f"contract broken on {what}: {broken.message}", cause=broken.cause)
        p, idx = outcome.value
        return Output(p.values.astype(np.float64), idx.values.astype(np.int64))

    def expect_equivalent(self, x, *, recipe=None, raw=None, k: int | None = None,
                          what: str = "the input"):
        """``equiv.ops.draft_topk.compare`` on ``x`` (its contract includes an untouched input); a failed check
        fails the property with the comparison's summary."""
        k = self.k if k is None else k
        res = compare(self.subject.spec, x, k, recipe=recipe, name=self.subject.name,
                      timeout=self.opts.timeout, context=self.context(x))
        if res.passed:
            return res
        if res.call_kind in ABNORMAL:
            self.abnormal(f"the subject {res.check('contract').detail} on {what}", kind=res.call_kind)
        lines = res.summary().splitlines()[:-1]    # the last line is the REPRO, rebuilt below
        repro = res.repro if raw is None else raw_repro(self.subject.name, raw, str(x.dtype)[6:], k)
        failed = ", ".join(c.name for c in res.failed_checks)
        if raw is not None:                      # the input as drawn, as data (diagnosis replays it)
            self.request.node.user_properties.append(
                ("equiv_raw", {"values": np.asarray(raw, dtype=np.float64).tolist(), "dtype": str(x.dtype)[6:]}))
        self.fail(f"{what} differs from the reference ({failed})\n" + "\n".join(lines), repro=repro,
                  recipe=res.recipe, cause=res.contract_cause)

    def abnormal(self, message: str, kind: str | None = None):
        """An abnormal end of the subject: stops a Hypothesis run at once (``AbnormalEnd``); in a
        plain test, an ordinary failure. ``kind`` (how the call ended: ``CallOutcome.kind``) goes
        into the test's record as data, for diagnosis."""
        if kind:
            self.request.node.user_properties.append(("equiv_call_kind", kind))
        if self._in_run:
            raise AbnormalEnd(message)
        self.fail(message)

    def fail(self, message: str, repro: str | None = None, recipe: str | None = None,
             cause: str | None = None):
        """Fail the property; ``recipe`` (the failing input's, when it is one) and ``cause`` (what
        broke the contract: ``CheckResult.cause``) go into the test's record as data (the last one
        recorded is Hypothesis's final, shrunk example)."""
        if recipe:
            self.request.node.user_properties.append(("equiv_recipe", str(recipe)))
        if cause:
            self.request.node.user_properties.append(("equiv_cause", str(cause)))
        text = f"{self.property} [{self.subject.name}]: {message}"
        if repro:
            text += "\n" + repro
        if not self._in_run:                     # a plain test: no Hypothesis note will follow
            lines = [r for r in (repro, self.pytest_repro(None)) if r]
            text += "\n" + lines[-1]
            self.request.node.user_properties += [
                ("equiv_message", "\n".join(text.splitlines()[:8])), ("equiv_repro", "\n".join(lines))]
        raise PropertyFailure(text, repro=repro)

    # -- running a property ---------------------------------------------------------------------
    def examples(self, weight: float) -> int:
        base = QUICK_EXAMPLES if self.opts.budget == "quick" else suite_settings().max_examples
        return max(1, round(base * weight * self.subject.budget.example_factor))

    def _seed(self):
        forced = self.request.config.getoption("hypothesis_seed", None)
        if forced is not None:
            return int(forced) if str(forced).isdigit() else forced
        if settings.default.derandomize:
            return None
        return random.getrandbits(32)

    def pytest_repro(self, seed) -> str:
        node = self.request.node
        args = [f"'{node.path}::{node.name}'"] + self.opts.pytest_args(every=False)
        if seed is not None:
            args.append(f"--hypothesis-seed={seed}")
        return (f"REPRO: HYPOTHESIS_PROFILE={settings.get_current_profile_name()} "
                f"python -m pytest {' '.join(args)} -p no:cacheprovider")

    def run(self, check, *, weight: float = 1.0, **strategies) -> None:
        """Run ``check(**drawn)`` under Hypothesis with this subject's budget (module docstring)."""

        counts = {"examples": 0, "first_failure": None}

        @functools.wraps(check)
        def counted(*args, **kwargs):
            counts["examples"] += 1
            try:
                check(*args, **kwargs)
            except BaseException:
                if counts["first_failure"] is None:
                    counts["first_failure"] = counts["examples"]
                raise

        test = given(**strategies)(settings(suite_settings(), max_examples=self.examples(weight),
                                            report_multiple_bugs=False)(counted))
        known = None if self.subject.explicit else KNOWN_FAILURES.get((self.subject.name, self.property))
        if known is not None:                    # the ledger's witness proves the failure first
            test = example(**known.example())(test)
        seed = self._seed()
        if seed is not None:
            test = with_seed(seed)(test)
        props = self.request.node.user_properties
        self._in_run = True
        try:
            test()
        except (pytest.skip.Exception, KeyboardInterrupt):
            raise
        except AbnormalEnd as exc:              # no shrinking: each example would cost a restart
            repro = self.pytest_repro(seed)
            props += [("equiv_examples", counts["examples"]), ("equiv_first_failure", counts["first_failure"]),
                      ("equiv_message", f"{self.property} [{self.subject.name}]: {exc}"),
                      ("equiv_counterexample", None), ("equiv_repro", repro)]
            raise PropertyFailure(f"{self.property} [{self.subject.name}]: {exc}\n{repro}",
                                  repro=repro) from None
        except BaseException as exc:
            leaf = _leaf(exc)
            # "Falsifying example:" (Hypothesis <= 6.16x) or "Failing test case:" (later releases)
            falsifying = "\n".join(n.strip() for n in _notes(exc)
                                   if "Falsifying" in n or "Failing test case" in n) or None
            repro = [r for r in (getattr(leaf, "repro", None), self.pytest_repro(seed)) if r]
            exc.add_note("\n".join(repro[-1:]))
            props += [("equiv_examples", counts["examples"]), ("equiv_first_failure", counts["first_failure"]),
                      ("equiv_message", "\n".join(str(leaf).strip().splitlines()[:8])),
                      ("equiv_counterexample", falsifying), ("equiv_repro", "\n".join(repro))]
            raise
        finally:
            self._in_run = False
        props.append(("equiv_examples", counts["examples"]))
