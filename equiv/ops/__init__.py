"""Operations as plug-ins: one ``Op`` object per folder under ``equiv/ops/``; this is the registry.

An operation (the draft top-k, the chain verifier, ...) is everything equiv knows about one hot
path: its call signature, its built-in paths, its input recipes, the stages of its gate, its
options, its mutant zoo, its ledger of accepted failures, its diagnosis. The rest of equiv
reaches an operation only through its ``Op``: ``equiv.run`` loads and calls a candidate of any
operation without importing one (``get_op(spec.op)`` resolves the name at run time), and the
commands, the plugin, the gate, ``check``, ``selftest`` and ``report`` take ``--op NAME`` and
call the ``Op``'s fields. Nothing outside ``equiv/ops/`` names an operation except this module.

Adding an operation is adding a folder ``equiv/ops/NAME/`` whose ``op.py`` defines ``OP`` and
naming it in ``OP_NAMES``. An operation that lives outside equiv (a host project's, or the
test suite's small ``argmax`` op) is registered without an edit here: ``EQUIV_OPS`` in the
environment lists ``name=module:ATTR`` or ``name=path/to/file.py:ATTR`` entries, comma-separated;
the environment reaches the gate's pytest subprocess and the candidate's worker, so every part
of a run sees the same registry.
"""
from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from typing import Callable

from equiv.errors import CandidateLoadError, InvalidArgument
from equiv.validation import check_choice
from equiv.verdict import CheckRun

OP_NAMES = ("draft_topk", "verify", "verify_tree")
DEFAULT_OP = "draft_topk"
# The roles a feature that combines operations asks for (the MTP harness drafts with one and
# verifies with another); a feature names the role, never the op.
ROLES = {"draft": "draft_topk", "chain_verifier": "verify", "tree_verifier": "verify_tree"}
ENV_VAR = "EQUIV_OPS"


@dataclass(frozen=True)
class OpOption:
    """An option only one operation takes (``--law`` of the verifier): the CLI adds it as
    ``--NAME`` to ``gate`` and ``check``, the plugin as ``--equiv-NAME``, and ``RunOptions``
    carries its value (``options.option(NAME)``)."""

    name: str
    choices: tuple
    default: str
    help: str

    def check(self, value, label: str | None = None) -> str:
        return check_choice(label or self.name, self.default if value is None else value, self.choices)


@dataclass(frozen=True)
class Op:
    """One operation. Every callable field imports its module on first use (cheap to hold)."""

    name: str
    signature: str                       # the call a candidate must accept, as users read it
    summary: str                         # one line for ``--help`` and ``equiv paths``
    mutants_module: str                  # ``module`` of ``module:NAME`` specs that are our own zoo
    builtin_names: Callable[[], tuple]   # the built-in paths' names
    builtin: Callable[[str], Callable]   # the callable of a built-in name
    check_signature: Callable[[str, Callable], None]   # raises CandidateLoadError
    mutants: Callable[[], dict]          # name -> mutant (the zoo)
    legal_variants: Callable[[], dict]   # name -> legal variant (must pass)
    parse_recipe: Callable[[str], object]   # ``family:key=value,...`` -> a recipe
    default_recipe: str                  # what ``equiv check`` judges without ``--recipe``
    stages: tuple                        # the gate's stages, in order
    gate: Callable                       # ``gate(options, *, stages, vocab, progress)`` -> GateResult
    check: Callable                      # ``check(options, recipe, *, calls)`` -> result (passed, summary, to_json)
    ledger: Callable[[], dict]           # accepted failures (name, property) -> reason
    noun: str = "path"                   # what its built-ins are called in messages
    options: tuple = ()                  # its own options (``OpOption``)
    takes_k: bool = False                # judged at k values and input dtypes (the summary shows them)
    budget_dtypes: Callable | None = None   # budget -> the input dtypes its gate judges by default
    coverage_lines: Callable | None = None  # a gate's coverage dict -> lines for the console
    selftest_stages: tuple | None = None    # the gate stages ``equiv selftest`` runs (default: all)
    correct_paths: Callable | None = None   # the built-ins that must pass (default: every built-in)
    false_positive_run: Callable | None = None   # (path, *, seed, device, vocab, timeout) -> failures
    properties: Callable | None = None   # ``() -> {name: fn(options)}``: properties it brings to the
                                         # plugin's suite (``properties/test_op_properties.py``)
    listing: Callable | None = None      # ``() -> (json, lines)`` for ``equiv paths`` (default: names)
    bench: Callable | None = None        # ``bench(**kw)``, where the op has a speed benchmark
    report: Callable | None = None       # ``report(**kw)`` -> a report run, where the op has one
    features: Callable | None = None     # ``(name) -> object``: what a feature combining ops asks of
                                         # this one by name (the MTP harness: ``output_dtypes``, ``caller``)
    reply_modules: tuple = ()            # modules whose dataclasses a worker's reply may hold (equiv.run.wire)

    def __str__(self) -> str:
        return self.name

    def option(self, name: str) -> OpOption:
        for o in self.options:
            if o.name == name:
                return o
        raise InvalidArgument(f"--op {self.name} takes no option {name!r}; its options are "
                              f"{', '.join(o.name for o in self.options) or 'none'}")


def lazy_attr(package: str, module: str, attr: str) -> Callable[[], object]:
    """``() -> package.module.attr``, importing the module on the first call (an op's fields)."""
    return lambda: getattr(importlib.import_module(f"{package}.{module}"), attr)


def option_gate(gate: Callable[[], Callable], option: str) -> Callable:
    """An ``Op.gate`` for an op judged without k values and with one option of its own:
    ``gate()(spec, device=, budget=, seed=, timeout=, stages=, progress=, OPTION=)``."""
    def run(options, *, stages, vocab=None, progress=None, feature_stages=None):
        return gate()(options.spec, device=options.device, budget=options.budget, seed=options.seed,
                      timeout=options.timeout, stages=stages, progress=progress,
                      **{option: options.option(option)})
    return run


def option_check(check: Callable[[], Callable], option: str, default_recipe: str,
                 diagnose: Callable[[], Callable] | None = None) -> Callable:
    """An ``Op.check`` for an op judged without k values and with one option of its own:
    ``check()(spec, recipe, calls=, seed=, device=, timeout=, OPTION=)``, its verdict as a
    ``CheckRun``, with ``diagnose()(verdict)`` behind a failure where the op diagnoses one."""
    def run(options, recipe=None, *, calls: int = 1):
        verdict = check()(options.spec, recipe or default_recipe, calls=calls, seed=options.seed,
                          device=options.device, timeout=options.timeout, **{option: options.option(option)})
        return CheckRun(verdict, diagnose()(verdict) if diagnose is not None and not verdict.passed else None)
    return run


def signature_check(noun: str, signature: str) -> Callable[[str, Callable], None]:
    """An ``Op.check_signature``: the candidate must take as many positional arguments as
    ``signature`` (``fn(a, b) -> ...``) names, else one ``CandidateLoadError`` line; a callable
    without a signature to read is trusted."""
    call = signature.partition(" ->")[0]
    n = call.count(",") + 1

    def check(text: str, fn) -> None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return                               # no signature to read: trust it
        try:
            sig.bind(*[object()] * n)
        except TypeError:
            raise CandidateLoadError(f"{noun} {text!r}: signature {sig} cannot be called as {call}; "
                                     f"it must take {n} positional arguments") from None
    return check

def extra_ops() -> dict:
    """``{name: (module, ATTR)}`` from ``EQUIV_OPS`` (ops registered from outside equiv)."""
    out = {}
    for item in filter(None, (x.strip() for x in os.environ.get(ENV_VAR, "").split(","))):
        name, _, target = item.partition("=")
        parts = target.strip().split(":")
        if len(parts) != 2 or not all(parts) or not name.strip():
            raise InvalidArgument(f"{ENV_VAR} entry {item!r} is not name=module:ATTR (an importable module)")
        out[name.strip()] = tuple(parts)
    return out


def op_names() -> tuple:
    """Every operation's name: equiv's own, then those registered in ``EQUIV_OPS``."""
    return OP_NAMES + tuple(n for n in extra_ops() if n not in OP_NAMES)


def _load_extra(name: str, module: str, attr: str) -> Op:
    try:
        op = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise CandidateLoadError(f"{ENV_VAR} names op {name!r} at {module}:{attr}, which does not load: "
                                 f"{exc}") from None
    if not isinstance(op, Op) or op.name != name:
        raise CandidateLoadError(f"{ENV_VAR} entry {name}={module}:{attr} is not an equiv.ops.Op named {name!r}")
    return op


def get_op(name) -> Op:
    """The ``Op`` called ``name`` (``InvalidArgument`` naming the choices otherwise)."""
    if isinstance(name, Op):
        return name
    extra = extra_ops()
    name = check_choice("op", name, op_names())
    if name in OP_NAMES:
        return importlib.import_module(f"equiv.ops.{name}.op").OP
    return _load_extra(name, *extra[name])


def all_options() -> dict:
    """``{option name: OpOption}`` over every registered op (the plugin's and the CLI's flags)."""
    out = {}
    for n in op_names():
        for o in get_op(n).options:
            out.setdefault(o.name, o)
    return out
