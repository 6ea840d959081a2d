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
    max_batch: int = 1024
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
    fn: Callable | None          # None for a user's candidate: it is only called in its worker
    explicit: bool               # given with --equiv-candidate (the ledger never applies)
    builtin: bool                # a built-in path of equiv.ops.draft_topk.paths
    max_k: int | None            # None: any k <= V (unknown for a candidate: judged at --equiv-k)
    budget: Budget = Budget()
    k: int = 1                   # the k this subject is judged at (one of --equiv-k)

    def supports_k(self, k: int) -> bool:
        return self.max_k is None or k <= self.max_k

    def __str__(self) -> str:
        return self.name

    @property
    def test_id(self) -> str:
        return self.name if self.k == 1 else f"{self.name}-k{self.k}"


@dataclass(frozen=True)
class Options:
    """The equiv options of this pytest run, resolved once."""

    candidate: str | None
    device: str
    dtypes: tuple
    ks: tuple
    budget: str
    timeout: float | None = 60.0

    @property
    def k(self) -> int:
        return self.ks[0]

    def cli(self) -> list[str]:
        """The options as pytest arguments (for REPRO lines)."""
        args = []
        if self.candidate:
            args.append(f"--equiv-candidate={self.candidate}")
        args.append(f"--equiv-device={self.device}")
        if self.dtypes != _ALL_DTYPES:
            args.append(f"--equiv-dtype={','.join(self.dtypes)}")
        if self.ks != (1,):
            args.append(f"--equiv-k={','.join(map(str, self.ks))}")
        if self.timeout != 60.0:
            args.append(f"--equiv-timeout={'inf' if self.timeout is None else f'{self.timeout:g}'}")
        if self.budget != "full":
            args.append(f"--equiv-budget={self.budget}")
        return args


_ALL_DTYPES = ("float32", "bfloat16", "float16")


def options_from(config) -> Options:
    from equiv.devices import resolve_device
    from equiv.pytest.plugin import option
    from equiv.validation import check_choices

    dtypes = option(config, "equiv_dtype")
    return Options(candidate=option(config, "equiv_candidate"),
                   device=resolve_device(option(config, "equiv_device")),
                   dtypes=tuple(check_choices("--equiv-dtype", dtypes, _ALL_DTYPES)) if dtypes else _ALL_DTYPES,
                   ks=parse_ks(option(config, "equiv_k"), "--equiv-k"),
                   budget=option(config, "equiv_budget"),
                   timeout=parse_timeout(option(config, "equiv_timeout"), "--equiv-timeout"))


def parse_ks(text, name: str = "k") -> tuple:
    """``--equiv-k 1`` or ``1,4``: the k values judged, each an integer >= 1, in the order given."""
    from equiv.validation import check_int

    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        from equiv.errors import InvalidArgument

        raise InvalidArgument(f"{name}={text!r} is empty: give k values such as 1 or 1,4")
    ks = []
    for t in items:
        try:
            value = int(t)
        except ValueError:
            value = t
        ks.append(check_int(name, value, min_value=1))
    return tuple(dict.fromkeys(ks))


def parse_timeout(text, name: str = "timeout") -> float | None:
    """Seconds per call; ``inf`` (or ``none``) for no limit."""
    from equiv.validation import check_float

    if text is None or str(text).strip().lower() in ("inf", "none"):
        return None
    try:
        text = float(text)
    except (TypeError, ValueError):
        pass
    return check_float(name, text, min_value=0.0, exclusive_min=True)


def _budget(name: str, device: str) -> Budget:
    return SLOW_PATHS.get(name, {}).get(device, Budget())


def subjects_from(opts: Options) -> list[Subject]:
    """The candidate alone when one is given (once per k asked), else every built-in path (at
    each k it supports). A user's candidate is never imported here: its worker does that."""
    from equiv.candidate import load_candidate
    from equiv.ops.draft_topk.paths import get_path, path_names
    from equiv.run import trusted

    if opts.candidate:
        spec = opts.candidate.strip()
        builtin = spec in path_names()
        fn = load_candidate(spec).fn if trusted(spec) else None
        max_k = get_path(spec).max_k if builtin else None
        return [Subject(spec, fn, explicit=True, builtin=builtin, max_k=max_k,
                        budget=_budget(spec, opts.device), k=k) for k in opts.ks]
    return [Subject(name, get_path(name), explicit=False, builtin=True, max_k=get_path(name).max_k,
                    budget=_budget(name, opts.device), k=k)
            for k in opts.ks for name in path_names()]
