"""What the property suite judges: the subjects, their k, dtypes, device and example budget.

Plan
----
- With ``--equiv-candidate SPEC`` the suite judges that candidate only (``explicit``: the
  known-failure ledger does not apply, its failures must show). Otherwise it judges every
  built-in path in ``equiv.path_names()``, read at collection time, so a path that registers
  itself (``fused_triton``) is judged without editing the suite.
- Every subject is judged at ``--equiv-k`` (default 1) and on inputs of ``--equiv-dtype``
  (default all three), built on ``--equiv-device``.
- ``SLOW_PATHS`` gives a path that is slow on some device (the Triton interpreter on a CPU) a
  smaller budget: a cap on V and on B, and a fraction of the examples. ``--equiv-budget quick``
  runs ``QUICK_EXAMPLES`` per property (weighted) instead of the profile's ``max_examples``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

QUICK_EXAMPLES = 6


@dataclass(frozen=True)
class Budget:
    """How much of the input space a subject gets: V and B caps and a share of the examples."""

    max_vocab: int = 129280
    max_batch: int = 33
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
    fn: Callable
    explicit: bool               # given with --equiv-candidate (the ledger never applies)
    builtin: bool                # a built-in path of equiv.paths
    max_k: int | None            # None: any k <= V (unknown for a candidate: judged at --equiv-k)
    budget: Budget = Budget()

    def supports_k(self, k: int) -> bool:
        return self.max_k is None or k <= self.max_k

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Options:
    """The equiv options of this pytest run, resolved once."""

    candidate: str | None
    device: str
    dtypes: tuple
    k: int
    budget: str

    def cli(self) -> list[str]:
        """The options as pytest arguments (for REPRO lines)."""
        args = []
        if self.candidate:
            args.append(f"--equiv-candidate={self.candidate}")
        args.append(f"--equiv-device={self.device}")
        if self.dtypes != _ALL_DTYPES:
            args.append(f"--equiv-dtype={','.join(self.dtypes)}")
        if self.k != 1:
            args.append(f"--equiv-k={self.k}")
        if self.budget != "full":
            args.append(f"--equiv-budget={self.budget}")
        return args


_ALL_DTYPES = ("float32", "bfloat16", "float16")


def options_from(config) -> Options:
    from equiv.devices import resolve_device
    from equiv.plugin import option
    from equiv.validation import check_choices

    dtypes = option(config, "equiv_dtype")
    return Options(candidate=option(config, "equiv_candidate"),
                   device=resolve_device(option(config, "equiv_device")),
                   dtypes=tuple(check_choices("--equiv-dtype", dtypes, _ALL_DTYPES)) if dtypes else _ALL_DTYPES,
                   k=int(option(config, "equiv_k")),
                   budget=option(config, "equiv_budget"))


def _budget(name: str, device: str) -> Budget:
    return SLOW_PATHS.get(name, {}).get(device, Budget())


def subjects_from(opts: Options) -> list[Subject]:
    """The candidate alone when one is given, else every built-in path."""
    from equiv.candidate import load_candidate
    from equiv.paths import get_path, path_names

    if opts.candidate:
        cand = load_candidate(opts.candidate)
        max_k = get_path(cand.spec).max_k if cand.builtin else None
        return [Subject(cand.spec, cand, explicit=True, builtin=cand.builtin, max_k=max_k,
                        budget=_budget(cand.spec, opts.device))]
    return [Subject(name, get_path(name), explicit=False, builtin=True, max_k=get_path(name).max_k,
                    budget=_budget(name, opts.device)) for name in path_names()]
