"""``RunOptions``: what one run judges, validated once and handed on whole.

A command, the library, the gate's pytest subprocess and the pytest plugin all judge a candidate
under the same handful of options: the candidate (a parsed ``CandidateSpec``), the operation, the
k values, the device, the input dtypes, the budget, the seed, the per-call time-out and the
memory budget of the device (``max_gpu_memory``, bytes: ``equiv.memory``).
``RunOptions.make`` checks each once (one-line ``InvalidArgument`` naming the value and the fix);
``pytest_args()`` writes them as the plugin's ``--equiv-*`` options and
``RunOptions.from_pytest(config)`` reads them back with the same class, so the gate and
``pytest --pyargs equiv.properties`` cannot disagree about what was asked. Each default is
written here once (``DEFAULTS``); the time-out's lives in ``equiv.run.timeouts``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from equiv.devices import resolve_device
from equiv.errors import InvalidArgument
from equiv.memory import DEFAULT_MAX_GPU_MEMORY, memory_text, parse_memory
from equiv.ops import DEFAULT_OP, get_op
from equiv.run.spec import CandidateSpec
from equiv.run.timeouts import DEFAULT_TIMEOUT_S, parse_timeout, timeout_text
from equiv.validation import check_choice, check_choices, check_int, check_ints

DTYPES = ("float32", "bfloat16", "float16")
BUDGETS = ("quick", "full")
DEVICES = ("auto", "cpu", "cuda")
MAX_K = 64
AUTO_KS = (1, 2, 4, 8)                   # the probe's k when none is drawn yet, and the old fixed list
# k="auto" (the gate's default): one k of each class, drawn per seed (``auto_ks``), those the candidate accepts
K_CLASSES = {"1": (1,), "power of two": (2, 4, 8, 16), "3-7": (3, 5, 6, 7),
             "9-16": tuple(range(9, 16)), "17-64": tuple(range(17, MAX_K + 1))}


def auto_ks(seed: int = 0) -> tuple:
    """The k values ``--k auto`` judges at ``seed``: 1, then one drawn of each other class of
    ``K_CLASSES`` (a power of two up to 16, a non-power up to 7, one in 9..15, one past 16), so a
    kernel tuned to k in {1, 2, 4, 8} does not pass and over the seeds every k up to 64 occurs."""
    rng = random.Random(f"auto_ks:{int(seed)}")
    return (1,) + tuple(rng.choice(ks) for name, ks in K_CLASSES.items() if name != "1")


def k_class(k: int) -> str:
    return next(name for name, ks in K_CLASSES.items() if k in ks) if k <= MAX_K else f"past {MAX_K}"


def is_prime(n: int) -> bool:
    """Whether ``n`` is prime: the vocabulary class ``prime`` of every op's input space."""
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


DEFAULT_VOCAB = 129280                   # the draft top-k's main vocabulary: DeepSeek-V3/V3.2
DEFAULTS = {"op": DEFAULT_OP, "k": "1", "device": "auto", "budget_gate": "quick",
            "budget_suite": "full", "seed": 0, "timeout": DEFAULT_TIMEOUT_S}


def parse_ks(text, name: str = "k") -> tuple:
    """``1``, ``"1,4"`` or ``(1, 4)``: the k values judged, each an integer >= 1, in the order
    given, no repeats. (``RunOptions.make`` also takes ``"auto"``: ``auto_ks(seed)`` as accepted,
    and ``"auto:S"``: those of seed ``S``.)"""
    return tuple(dict.fromkeys(check_ints(name, text, min_value=1, example="1 or 1,4")))


def one_recipe_values(calls, seed, device, timeout) -> tuple:
    """``(calls, seed, device, timeout)`` of a check on one recipe (what a REPRO line runs), each
    checked in that order: whole numbers (calls >= 1, seed >= 0), the device resolved (``cuda``
    without a GPU is an error), the time-out parsed."""
    return (check_int("calls", calls, min_value=1), check_int("seed", seed, min_value=0),
            resolve_device(device), parse_timeout(timeout))


@dataclass(frozen=True)
class RunOptions:
    spec: CandidateSpec | None          # None: the suite judges every built-in path
    op: str = DEFAULTS["op"]
    ks: tuple = (1,)
    device: str = DEFAULTS["device"]    # as asked: auto, cpu or cuda (resolved where it is used)
    dtypes: tuple = DTYPES
    budget: str = DEFAULTS["budget_suite"]
    seed: int = DEFAULTS["seed"]
    timeout: float | None = DEFAULTS["timeout"]
    op_options: tuple = ()              # ((name, value), ...): the op's own options (``Op.options``)
    k_auto: bool = False                # k="auto": ``auto_ks(seed)``, narrowed by the op to those the candidate accepts
    max_gpu_memory: int = DEFAULT_MAX_GPU_MEMORY   # bytes a call may take on the device (equiv.memory)

    @classmethod
    def make(cls, candidate=None, *, op=None, k=None, device=None, dtypes=None, budget=None,
             seed=None, timeout=DEFAULT_TIMEOUT_S, names=None, max_gpu_memory=None, **op_options) -> "RunOptions":
        """Validated options; ``names`` maps a field to the name its errors use (``--equiv-k``);
        ``op_options`` are the operation's own (``Op.options``), each checked against its choices."""
        names = names or {}
        the_op = get_op(op or DEFAULTS["op"])
        op = the_op.name
        given = {k: v for k, v in op_options.items() if v is not None}
        for key in given:
            the_op.option(key)                   # an option the op does not take: InvalidArgument
        own = tuple((o.name, o.check(given.get(o.name), names.get(o.name, o.name))) for o in the_op.options)
        spec = None if candidate is None else CandidateSpec.parse(candidate, op)
        k_auto = isinstance(k, str) and k.strip().partition(":")[0] == "auto"
        seed = check_int(names.get("seed", "seed"), DEFAULTS["seed"] if seed is None else seed, min_value=0)
        if k_auto and k.strip() != "auto":          # "auto:S": the ks of seed S (the gate's, to its pytest run)
            drawn = k.strip().partition(":")[2]
            if not drawn.isdigit():
                raise InvalidArgument(f"{names.get('k', 'k')}={k!r} is invalid: give auto, auto:SEED or k values "
                                      f"such as 1,4")
        ks = (auto_ks(int(k.strip().partition(":")[2] or seed)) if k_auto else
              parse_ks(DEFAULTS["k"] if k is None else k, names.get("k", "k")))
        for v in ks:
            check_int(names.get("k", "k"), v, min_value=1, max_value=MAX_K)
        return cls(spec=spec, op=op, ks=ks,
                   device=check_choice(names.get("device", "device"), device or DEFAULTS["device"], DEVICES),
                   dtypes=tuple(check_choices(names.get("dtype", "dtype"), dtypes, DTYPES)) if dtypes else DTYPES,
                   budget=check_choice(names.get("budget", "budget"), budget or DEFAULTS["budget_suite"], BUDGETS),
                   seed=seed,
                   timeout=parse_timeout(timeout, names.get("timeout", "timeout")), op_options=own,
                   k_auto=k_auto,
                   max_gpu_memory=DEFAULT_MAX_GPU_MEMORY if max_gpu_memory is None else
                   parse_memory(max_gpu_memory, names.get("max_gpu_memory", "max_gpu_memory")))

    def with_(self, **changes) -> "RunOptions":
        return replace(self, **changes)

    def option(self, name: str):
        """The value of the op's own option ``name`` (its default when not given)."""
        for key, value in self.op_options:
            if key == name:
                return value
        return get_op(self.op).option(name).default

    @property
    def k(self) -> int:
        return self.ks[0]

    @property
    def candidate(self) -> str | None:
        """The spec's text (what reports and REPRO lines show)."""
        return None if self.spec is None else self.spec.text

    def pytest_args(self, *, every: bool = True) -> list[str]:
        """These options as the plugin's ``--equiv-*`` arguments; ``every=False`` leaves out those
        at their default (for a REPRO line a person reads)."""
        args = [f"--equiv-candidate={self.spec.text}"] if self.spec is not None else []
        pairs = [("op", self.op, DEFAULTS["op"]), ("device", self.device, None),
                 ("k", (f"auto:{self.seed}" if self.seed else "auto") if self.k_auto else ",".join(map(str, self.ks)),
                  DEFAULTS["k"]),
                 ("dtype", ",".join(self.dtypes), ",".join(DTYPES)),
                 ("budget", self.budget, DEFAULTS["budget_suite"]),
                 ("timeout", timeout_text(self.timeout), timeout_text(DEFAULTS["timeout"])),
                 ("max-gpu-memory", memory_text(self.max_gpu_memory), memory_text(DEFAULT_MAX_GPU_MEMORY))]
        the_op = get_op(self.op)
        pairs += [(name, value, the_op.option(name).default) for name, value in self.op_options]
        args += [f"--equiv-{name}={value}" for name, value, default in pairs if every or value != default]
        return args

    @classmethod
    def from_pytest(cls, config) -> "RunOptions":
        """The options of a pytest run, read from its ``--equiv-*`` options (unset: the defaults)."""
        get = config.getoption
        the_op = get_op(get("equiv_op", None) or DEFAULTS["op"])
        own = {o.name: get(f"equiv_{o.name}", None) for o in the_op.options}
        opts = cls.make(get("equiv_candidate", None), op=the_op.name, k=get("equiv_k", None),
                        device=get("equiv_device", None), dtypes=get("equiv_dtype", None),
                        budget=get("equiv_budget", None),
                        timeout=get("equiv_timeout", None) or DEFAULTS["timeout"],
                        max_gpu_memory=get("equiv_max_gpu_memory", None),
                        names={f: f"--equiv-{f}" for f in ("k", "device", "dtype", "budget", "timeout", *own)}
                        | {"max_gpu_memory": "--equiv-max-gpu-memory"},
                        **own)
        return opts.with_(device=resolve_device(opts.device))
