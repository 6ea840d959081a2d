"""What the property suite judges: the subjects, their k, dtypes, device and example budget.

Plan
----
- With ``--equiv-candidate SPEC`` the suite judges that candidate only (``explicit``: the
  known-failure ledger does not apply, its failures must show). Otherwise it judges every
  built-in path in ``equiv.path_names()``, read at collection time, so a path that registers
  itself (``fused_triton``) is judged without editing the suite.
- Every subject is judged at ``--equiv-k`` (default 1) and on inputs of ``--equiv-dtype``
  (default all three), built on ``--equiv-device``. ``--equiv-k auto`` (the gate's default) judges
  a candidate at k = 1, and its ``topk_ordering`` at the other ks of ``AUTO_KS`` it accepts
  (``more_k``; ``equiv.ops.draft_topk.ksupport``): the other properties at k > 1 would cost the
  suite's time again per k, and the gate's tolerance and MTP stages judge every accepted k.
- ``SLOW_PATHS`` gives a path that is slow on some device (the Triton interpreter on a CPU) a
  smaller budget: a cap on V and on B, and a fraction of the examples. ``--equiv-budget quick``
  runs ``QUICK_EXAMPLES`` per property (weighted) instead of the profile's ``max_examples``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from equiv.ops.draft_topk.paths import get_path, path_names
from equiv.pytest.plugin import run_options
from equiv.run.spec import CandidateSpec

QUICK_EXAMPLES = 6


@dataclass(frozen=True)
class Budget:
    """How much of the input space a subject gets: V and B caps and a share of the examples."""

    max_vocab: int = 129280
    max_batch: int = 4096                        # equiv.ops.draft_topk.space.MAX_BATCH
    example_factor: float = 1.0


# path name -> {device type: Budget}. fused_triton on a CPU runs under the Triton interpreter
# (measured: 50 ms for [2, 129280] at k = 1, 200 ms at k = 4, against 5 ms for torch).
SLOW_PATHS = {
    "fused_triton": {"cpu": Budget(max_vocab=32000, max_batch=9, example_factor=0.5)},
}


@dataclass(frozen=True)
class Subject:
    """One implementation under test."""

    name: str                    # built-in path name or candidate spec: the test id
    spec: object                 # its parsed ``CandidateSpec`` (what the runner is asked for)
    fn: Callable | None          # None for a user's candidate: it is only called in its worker
    explicit: bool               # given with --equiv-candidate (the ledger never applies)
    builtin: bool                # a built-in path of equiv.ops.draft_topk.paths
    max_k: int | None            # None: any k <= V (unknown for a candidate: judged at --equiv-k)
    budget: Budget = Budget()
    k: int = 1                   # the k this subject is judged at (one of --equiv-k)
    more_k: tuple = ()           # --equiv-k auto: the other ks topk_ordering judges, if accepted

    def supports_k(self, k: int) -> bool:
        return self.max_k is None or k <= self.max_k

    def __str__(self) -> str:
        return self.name

    @property
    def test_id(self) -> str:
        return self.name if self.k == 1 else f"{self.name}-k{self.k}"


def options_from(config):
    """The equiv options of this pytest run (``equiv.options.RunOptions``), read once by the plugin."""
    return run_options(config)


def _budget(name: str, device: str) -> Budget:
    return SLOW_PATHS.get(name, {}).get(device, Budget())


def subjects_from(opts) -> list[Subject]:
    """The candidate alone when one is given (once per k asked), else every built-in path (at
    each k it supports). A user's candidate is never imported here: its worker does that."""
    spec = opts.spec
    if spec is not None:
        fn = spec.load().fn if spec.trusted else None
        max_k = get_path(spec.target).max_k if spec.builtin else None
        if opts.k_auto:
            return [Subject(spec.text, spec, fn, explicit=True, builtin=spec.builtin, max_k=max_k,
                            budget=_budget(spec.text, opts.device), k=opts.ks[0], more_k=opts.ks[1:])]
        return [Subject(spec.text, spec, fn, explicit=True, builtin=spec.builtin, max_k=max_k,
                        budget=_budget(spec.text, opts.device), k=k) for k in opts.ks]
    return [Subject(name, CandidateSpec.parse(name), get_path(name), explicit=False, builtin=True, max_k=get_path(name).max_k,
                    budget=_budget(name, opts.device), k=k)
            for k in opts.ks for name in path_names()]
