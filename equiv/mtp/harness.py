"""``run_mtp``: every path under every consumer, with metrics, losslessness and equivalence.

Plan. ``run_mtp`` builds the model (``SyntheticLM``, or ``TraceLM`` over ``trace``), decodes once
with ``softmax_topk`` per consumer (the reference), then once per path and consumer with the same
seed, so paths are compared on identical prompts and identical random numbers. Each pair gives an
``MtpRecord``:

- ``applicable``: False for ``tree`` with a k = 1-only path (``hardcoded_one``,
  ``identity_top1``: an engine that carries such a shortcut takes it only when ``topk == 1``, so
  with ``topk > 1`` it runs ``softmax_topk`` and there is nothing of the path to measure), and
  for consumers a trace cannot replay (``target_only``, ``tree``);
- ``metrics``: ``AcceptanceMetrics``;
- ``lossless``: greedy-verified consumers, token-identical to plain target-only greedy decoding;
  ``target_only``, the PIT sampling fit against the exact target law;
- ``tokens_match_reference``: the path emitted the tokens ``softmax_topk`` emitted, at every
  position both reached (with a fixed number of rounds, one may emit more than the other);
- ``equivalent_to_reference``: paired TOST on per-sequence accept length vs ``softmax_topk``.

``verifier`` (a verifier spec or callable of the chain verifier op) replaces the harness's own
stochastic verification under ``target_only``, for every path and for the reference, so the
numbers describe the draft path x verifier pair an engine runs; losslessness then judges the
verifier too. The built-in verification of ``softmax_topk`` is decoded once more as
``MtpRun.verifier_baseline``, so a biased verifier shows as a different accept length beside it.

A record passes when it ran, is lossless, is equivalent and had no invalid output. The one
known, accepted failure is in ``EXPECTED_FAILURES`` with its reason; ``MtpRun.passed`` (and the
CLI's exit code) ignores exactly the checks listed there, nothing else.

Sizes: ``BUDGETS[budget][device]`` gives ``sequences``, ``rounds`` and ``vocab`` where the caller
leaves them None. ``quick`` is the pre-merge gate's (V = 129280, seconds on a 2-core CPU);
``default`` is ``equiv mtp``'s (V = 129280 on a GPU; V = 32000 on a CPU, under 5 minutes).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from equiv.devices import resolve_device
from equiv.errors import EquivError, InvalidArgument, UsageError
from equiv.mtp.compact import CompactTrace
from equiv.mtp.decoding import (CONFIDENCE_THRESHOLD, CONSUMERS, GREEDY_VERIFIED, TREE_TOKENS,
                                TREE_TOPK, DecodeOutcome, decode, greedy_reference, sample_reference)
from equiv.mtp.live import MIN_SAMPLED_TOKENS, MODELS, REAL_BUDGETS, TEXT_LAW_POSITIONS, end_to_end
from equiv.mtp.live import build as build_real
from equiv.mtp.metrics import AcceptanceMetrics, acceptance_metrics, per_sequence_accept_length, round_offsets
from equiv.mtp.models import SyntheticLM
from equiv.mtp.real import DEFAULT_DRAFT, parse_draft
from equiv.mtp.smollm2 import LAYERS as SMOLLM2_LAYERS
from equiv.mtp.traces import Trace, TraceLM, load_trace
from equiv.ops import ROLES, get_op
from equiv.run import CandidateSpec, load_check, runner_for
from equiv.run.load import Candidate
from equiv.run.inputs import Raw
from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.stats import ACCEPT_LENGTH_MARGIN, above_bound, equivalence_test, greedy_identity, pit, sampling_fit
from equiv.stats.twosample import text_law_test
from equiv.validation import check_choice, check_choices, check_float, check_int

REFERENCE = "softmax_topk"
BUDGETS = {
    "quick": {"cpu": {"sequences": 8, "rounds": 8, "vocab": 129280},
              "cuda": {"sequences": 64, "rounds": 16, "vocab": 129280}},
    "default": {"cpu": {"sequences": 128, "rounds": 32, "vocab": 32000},
                "cuda": {"sequences": 512, "rounds": 64, "vocab": 129280}},
}
EXPECTED_FAILURES = {
    ("hardcoded_one", "confidence", "equivalent_to_reference"):
        "topk_p = 1.0 makes the running product never fall under the threshold, so every chain "
        "is drafted to full length: acceptance changes by design, the emitted tokens do not",
}
# Built-in paths left out of the *default* list on a device where they cannot run at speed.
_SLOW_ON_CPU = {"fused_triton": "runs on the CPU only under the Triton interpreter (~6 ms a row "
                                "at V = 32000); name it in paths to run it anyway"}
_PIT_SALT = 7717


class CandidateEnded(RuntimeError):
    """A call through ``as_callable`` did not return normally (its one-line problem)."""


def as_callable(runner):
    """``fn(logits, k)`` that runs each call through ``runner`` (for a harness that calls a
    candidate in a loop, as the MTP decoder does): the logits cross as their values, the outputs
    come back as tensors on the logits' device, and any failed call raises ``CandidateEnded``."""
    def call(logits, k):
        out = runner.call(Raw.of(logits), k)
        if not out.ok:
            raise CandidateEnded(f"the candidate {out.problem}")
        tensors = []
        for a in out.value if isinstance(out.value, (tuple, list)) else (out.value,):
            t = torch.as_tensor(getattr(a, "values", a))
            if getattr(a, "dtype", None) in ("bfloat16", "float16"):
                t = t.to(getattr(torch, a.dtype))
            tensors.append(t.to(logits.device))
        return tuple(tensors)

    call.spec = runner.spec
    return call


@dataclass(frozen=True)
class MtpRecord:
    """One path under one consumer. ``failed_checks`` names what failed; ``expected_failure``
    the ledger's reason when every failed check is in ``EXPECTED_FAILURES``."""

    path: str
    consumer: str
    applicable: bool
    reason: str | None
    metrics: AcceptanceMetrics | None
    lossless: bool | None
    lossless_detail: object
    tokens_match_reference: bool | None
    equivalence: object
    error: str | None
    repro: str
    builtin: bool = True
    sampling_law: object = None                  # TextLawResult (real model, target_only)
    acceptance_bound: object = None              # BoundTest (a user's verifier decides)

    @property
    def equivalent_to_reference(self) -> bool | None:
        return None if self.equivalence is None else self.equivalence.equivalent

    @property
    def accept_length(self):
        return None if self.metrics is None else self.metrics.accept_length

    @property
    def accept_rate(self):
        return None if self.metrics is None else self.metrics.accept_rate

    @property
    def failed_checks(self) -> tuple:
        if not self.applicable:
            return ()
        if self.error is not None:
            return ("error",)
        failed = []
        if self.lossless is not True:
            failed.append("lossless")
        if self.equivalent_to_reference is not True:
            failed.append("equivalent_to_reference")
        if self.metrics.invalid_outputs:
            failed.append("invalid_output")
        if self.sampling_law is not None and not self.sampling_law.same_law:
            failed.append("sampling_law")
        if self.acceptance_bound is not None and not self.acceptance_bound.passed:
            failed.append("above_lossless_optimum")
        return tuple(failed)

    @property
    def expected_failure(self) -> str | None:
        failed = self.failed_checks
        if not failed or not self.builtin:
            return None
        reasons = [EXPECTED_FAILURES.get((self.path, self.consumer, c)) for c in failed]
        return reasons[0] if all(reasons) else None

    @property
    def passed(self) -> bool | None:
        return None if not self.applicable else not self.failed_checks

    def to_json(self) -> dict:
        m = self.metrics.to_json() if self.metrics is not None else {}
        return {
            "path": self.path, "consumer": self.consumer, "applicable": self.applicable,
            "passed": self.passed, "failed_checks": list(self.failed_checks),
            "expected_failure": self.expected_failure, "reason": self.reason, "error": self.error,
            "accept_length": m.get("accept_length"), "accept_rate": m.get("accept_rate"),
            "per_position": m.get("per_position"), "histogram": m.get("histogram"),
            "drafted_per_emitted": m.get("drafted_per_emitted"),
            "invalid_output_rate": m.get("invalid_output_rate"),
            "lossless": self.lossless, "tokens_match_reference": self.tokens_match_reference,
            "equivalent_to_reference": self.equivalent_to_reference,
            "accept_length_difference": None if self.equivalence is None else self.equivalence.to_json(),
            "lossless_detail": None if self.lossless_detail is None else self.lossless_detail.to_json(),
            "metrics": m or None, "repro": self.repro,
            "sampling_law": None if self.sampling_law is None else self.sampling_law.to_json(),
            "acceptance_bound": None if self.acceptance_bound is None else self.acceptance_bound.to_json(),
        }


@dataclass(frozen=True)
class MtpRun:
    """All records of one ``run_mtp`` call, with the configuration that made them."""

    records: tuple
    config: dict
    model: dict
    notes: tuple = ()
    verifier_baseline: object = None             # AcceptanceMetrics of the built-in verification
    end_to_end: dict | None = None               # a real model's figures (equiv.mtp.live)

    @property
    def passed(self) -> bool:
        return all(r.passed is not False or r.expected_failure for r in self.records)

    @property
    def failures(self) -> tuple:
        return tuple(r for r in self.records if r.passed is False and not r.expected_failure)

    def record(self, path: str, consumer: str) -> MtpRecord:
        for r in self.records:
            if r.path == path and r.consumer == consumer:
                return r
        raise KeyError((path, consumer))

    def to_json(self) -> dict:
        return {"config": self.config, "model": self.model, "passed": self.passed,
                "notes": list(self.notes),
                "verifier_baseline": None if self.verifier_baseline is None else self.verifier_baseline.to_json(),
                "end_to_end": self.end_to_end,
                "results": [r.to_json() for r in self.records]}


def _candidates(paths, device: str, timeout=DEFAULT_TIMEOUT_S):
    get_path, path_names = get_op(ROLES["draft"]).builtin, get_op(ROLES["draft"]).builtin_names

    notes = []
    if paths is None:
        names = []
        for n in path_names():
            if device == "cpu" and n in _SLOW_ON_CPU:
                notes.append(f"{n} left out of the default paths: {_SLOW_ON_CPU[n]}")
            else:
                names.append(n)
        paths = names
    elif isinstance(paths, str) or callable(paths):
        paths = [p.strip() for p in paths.split(",") if p.strip()] if isinstance(paths, str) else [paths]
    paths = list(paths)
    if not paths:
        raise InvalidArgument("paths is empty: give at least one built-in name or spec")
    # a user's spec runs in its supervised worker (equiv.run), one call per draft step; so does
    # a built-in under EQUIV_ISOLATE=always, which stays a built-in: its k limit and its
    # expected failures are the registry's, wherever it runs
    cands = []
    for p in paths:
        if isinstance(p, Candidate):             # already made (the gate's, judging its worker's decodes)
            cands.append(p)
            continue
        spec = CandidateSpec.parse(p)
        if spec.isolated:
            load_check(spec, device, timeout)   # a spec that does not load: exit 2 now; an
            fn = as_callable(runner_for(spec, device, timeout))   # import that exits fails each call
            if spec.builtin:
                fn.max_k = get_path(spec.target).max_k
            cands.append(Candidate(spec.text, fn, builtin=spec.builtin))
        else:
            cands.append(spec.load())
    names = [c.name for c in cands]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidArgument(f"paths lists {', '.join(dupes)} more than once")
    return cands, notes


def _not_applicable(cand, consumer, model, tree_topk):
    if not model.supports(consumer):
        return (f"a trace holds logits only along its greedy sequence; {consumer} verification "
                f"leaves it")
    max_k = getattr(cand.fn, "max_k", None)
    if consumer == "tree" and max_k is not None and tree_topk > max_k:
        return (f"{cand.name} supports k <= {max_k} only; an engine takes such a shortcut only at "
                f"topk == 1 and runs softmax_topk for tree drafting (topk={tree_topk})")
    return None


def _sampling_lossless(model, outcome, seed):
    tokens, lengths = outcome.tokens, outcome.lengths
    groups = np.concatenate(round_offsets(outcome))
    if hasattr(model, "token_pit"):              # a real model: its law after each context
        rng = np.random.default_rng([seed, _PIT_SALT])
        fit = sampling_fit(model.token_pit(outcome, rng), groups)
        return fit.passed, fit
    bad = ((tokens < 0) | (tokens >= model.vocab)) & (np.arange(tokens.shape[1]) < lengths[:, None])
    if bad.any():
        b, j = (int(v[0]) for v in np.nonzero(bad))
        return False, InvalidEmitted(int(bad.sum()), {"sequence": b, "position": j,
                                                      "token": int(tokens[b, j])})
    ctx = model.initial_contexts(tokens.shape[0])
    levels, ranks = [], []
    toks = torch.from_numpy(tokens).to(ctx.device)
    for j in range(int(lengths.max(initial=0))):
        levels.append(model.level_of(ctx).cpu().numpy())
        ranks.append(model.rank_of(ctx, toks[:, j]).cpu().numpy())
        ctx = model.next_context(ctx, toks[:, j])
    keep = np.arange(len(levels))[None, :] < lengths[:, None]
    lv, rk = np.stack(levels, 1)[keep], np.stack(ranks, 1)[keep]
    u = pit(model.rank_probabilities.numpy(), lv, rk, np.random.default_rng([seed, _PIT_SALT]))
    fit = sampling_fit(u, groups)
    return fit.passed, fit


def _trace_name(trace):
    if trace is None:
        return None
    return "(in-memory Trace: save_trace it to replay)" if hasattr(trace, "tokens") else str(trace)


@dataclass(frozen=True)
class InvalidEmitted:
    """The sampling fit was not run: the decode emitted tokens outside [0, V)."""

    count: int
    first: dict

    def to_json(self) -> dict:
        return {"invalid_emitted_tokens": self.count, "first": self.first}


def _repro(cfg, path, consumer):
    parts = ["equiv mtp", f"--paths {path}", f"--consumers {consumer}", f"--steps {cfg['steps']}"]
    if cfg.get("model", "synthetic") != "synthetic":
        parts.append(f"--model {cfg['model']} --draft {cfg['draft']}")
    elif cfg["trace"]:
        parts.append(f"--trace {cfg['trace']}")
    else:
        parts.append(f"--vocab {cfg['vocab']}")
    parts += [f"--sequences {cfg['sequences']}", f"--rounds {cfg['rounds']}", f"--seed {cfg['seed']}",
              f"--device {cfg['device']}"]
    if cfg.get("verifier"):
        parts.append(f"--verify {cfg['verifier']}")
    if cfg.get("tree_verifier"):
        parts.append(f"--verify-tree {cfg['tree_verifier']}")
    for key, default in (("threshold", CONFIDENCE_THRESHOLD), ("tree_topk", TREE_TOPK),
                         ("tree_tokens", TREE_TOKENS)):
        if cfg[key] != default:
            parts.append(f"--{key.replace('_', '-')} {cfg[key]}")
    return " ".join(parts)


def run_mtp(paths=None, consumers=None, *, steps: int = 3, vocab: int | None = None,
            sequences: int | None = None, rounds: int | None = None, seed: int = 0,
            device: str = "auto", trace=None, budget: str = "default",
            threshold: float = CONFIDENCE_THRESHOLD, tree_topk: int = TREE_TOPK,
            tree_tokens: int = TREE_TOKENS, margin: float = ACCEPT_LENGTH_MARGIN,
            progress=None, timeout=DEFAULT_TIMEOUT_S, verifier=None, decoded=None,
            model: str = "synthetic", draft: str | None = None, tree_verifier=None) -> MtpRun:
    """Decode with every path under every consumer and judge each (module docstring).

    ``paths``: built-in names, ``pkg.mod:fn`` / ``file.py:fn`` specs or callables
    ``fn(logits, k) -> (topk_p, topk_index)`` (default: every built-in path that runs at speed on
    the device). ``consumers``: names from ``CONSUMERS`` (default: all). ``trace``: a path to an
    ``equiv-mtp-trace/1`` file or a ``Trace``; it replaces the synthetic model. ``decoded``:
    ``{consumer: raw outcome}`` of the one candidate, decoded in its worker by
    ``decode_in_worker`` (the gate's MTP stage): judged here, never there. ``model``:
    ``synthetic`` or ``smollm2`` (a real model decoding live, ``equiv.mtp.live``; ``draft``
    ``bf16`` or ``exit:L``). ``verifier`` / ``tree_verifier``: a chain / tree verifier (a spec or
    callable of the chain or tree verifier op) that decides ``target_only`` / ``tree`` instead of the
    built-in rule; a tree so verified samples from the target and is judged as ``target_only`` is
    (the text's law), not by identity with greedy text."""
    get_path = get_op(ROLES["draft"]).builtin

    device = resolve_device(device)
    budget = check_choice("budget", budget, BUDGETS)
    sizes = BUDGETS[budget]["cuda" if device == "cuda" else "cpu"]
    consumers = list(CONSUMERS) if consumers is None else check_choices("consumers", consumers, CONSUMERS)
    steps = check_int("steps", steps, min_value=1, max_value=16)
    seed = check_int("seed", seed, min_value=0)
    threshold = check_float("threshold", threshold, min_value=0.0, max_value=1.0)
    tree_topk = check_int("tree_topk", tree_topk, min_value=2)
    tree_tokens = check_int("tree_tokens", tree_tokens, min_value=2)
    margin = check_float("margin", margin, min_value=0.0, exclusive_min=True)
    model_name = check_choice("model", model, MODELS)
    if model_name != "synthetic" and trace is not None:
        raise InvalidArgument(f"model={model_name} and trace are exclusive: a trace is its own model")
    if draft is not None and model_name == "synthetic":
        raise InvalidArgument(f"draft={draft} needs a real model: add --model smollm2")
    cands, notes = _candidates(paths, device, timeout)
    replicas, prompts = 1, None
    if model_name != "synthetic":
        real = REAL_BUDGETS[budget]["cuda" if device == "cuda" else "cpu"]
        if vocab is not None:
            raise InvalidArgument(f"vocab={vocab} does not apply to --model {model_name} "
                                  f"(V is the model's): leave it out")
        sequences = real["sequences"] if sequences is None else check_int("sequences", sequences, min_value=2)
        rounds = real["rounds"] if rounds is None else check_int("rounds", rounds, min_value=1)
        # enough sampled tokens for the PIT test (a round emits >= 1 token a sequence)
        replicas = max(real["replicas"], -(-MIN_SAMPLED_TOKENS // (sequences * rounds)))
        draft = draft or DEFAULT_DRAFT
        parse_draft(draft, SMOLLM2_LAYERS)       # a bad name: exit 2 before the model loads
        model, prompts = build_real(draft, device, sequences)
        vocab = model.vocab
    elif trace is not None:
        tr = trace if isinstance(trace, (Trace, CompactTrace)) else load_trace(trace)
        if steps > tr.steps:
            raise InvalidArgument(f"steps={steps} is more than the trace's {tr.steps} draft depths")
        if vocab is not None and vocab != tr.vocab:
            raise InvalidArgument(f"vocab={vocab} does not match the trace's V={tr.vocab}: "
                                  f"leave vocab out with a trace")
        if tr.sequences < 2:
            raise InvalidArgument(f"the trace holds {tr.sequences} sequence; the equivalence test "
                                  f"pairs sequences and needs >= 2")
        model = TraceLM(tr, device)
        sequences = tr.sequences if sequences is None else check_int(
            "sequences", sequences, min_value=2, max_value=tr.sequences)
        rounds = int(tr.tokens.shape[1]) if rounds is None else check_int("rounds", rounds, min_value=1)
        vocab = tr.vocab
    else:
        vocab = sizes["vocab"] if vocab is None else check_int("vocab", vocab, min_value=2)
        sequences = sizes["sequences"] if sequences is None else check_int("sequences", sequences, min_value=2)
        rounds = sizes["rounds"] if rounds is None else check_int("rounds", rounds, min_value=1)
        model = SyntheticLM(vocab, seed=seed, device=device)
    cfg = {"model": model_name, "draft": draft, "replicas": replicas,
           "paths": [c.name for c in cands], "consumers": consumers, "steps": steps, "vocab": vocab,
           "sequences": sequences, "rounds": rounds, "seed": seed, "device": device,
           "budget": budget, "trace": _trace_name(trace),
           "threshold": threshold, "tree_topk": tree_topk, "tree_tokens": tree_tokens,
           "margin": margin, "verifier": _verifier_name(verifier),
           "tree_verifier": _verifier_name(tree_verifier)}
    kwargs = dict(steps=steps, rounds=rounds, sequences=sequences, seed=seed, threshold=threshold,
                  tree_topk=tree_topk, tree_tokens=tree_tokens)
    verify = tree_verify = baseline = verified = tree_baseline = tree_verified = None
    if verifier is not None and "target_only" in consumers and model.supports("target_only"):
        verify = get_op(ROLES["chain_verifier"]).features("caller")(verifier, device, timeout)
        baseline = acceptance_metrics(decode(model, get_path(REFERENCE), "target_only", name=REFERENCE, **kwargs))
    if tree_verifier is not None and "tree" in consumers and model.supports("tree"):
        tree_verify = get_op(ROLES["tree_verifier"]).features("caller")(tree_verifier, device, timeout)
        tree_baseline = acceptance_metrics(decode(model, get_path(REFERENCE), "tree", name=REFERENCE, **kwargs))
    greedy_tokens = plain = None
    if any(_greedy_judged(c, cfg) for c in consumers):
        length = rounds * (steps + 1) if trace is None else int(model.trace.tokens.shape[1])
        greedy_tokens = greedy_reference(model, sequences, length)
    if prompts is not None and any(not _greedy_judged(c, cfg) for c in consumers):
        plain = sample_reference(model, sequences * replicas, TEXT_LAW_POSITIONS, seed + 1)
    total, done = len(consumers) * (len(cands) + 1), 0
    records = []
    for consumer in consumers:
        ref_out = None
        with_verify = dict(kwargs, verify=verify) if consumer == "target_only" else kwargs
        if consumer == "tree" and tree_verify is not None:
            with_verify = dict(kwargs, tree_verify=tree_verify)
        sampled = not _greedy_judged(consumer, cfg)
        if sampled and replicas > 1:
            with_verify = dict(with_verify, sequences=sequences * replicas)
        ref_error = None
        if model.supports(consumer):
            try:
                ref_out = decode(model, get_path(REFERENCE), consumer, name=REFERENCE, **with_verify)
            except UsageError:
                raise
            except EquivError as exc:            # a user's verifier that answers out of contract
                ref_error = str(exc)
        if ref_out is not None:
            if consumer == "target_only" and verify is not None:
                verified = acceptance_metrics(ref_out)
            if consumer == "tree" and tree_verify is not None:
                tree_verified = acceptance_metrics(ref_out)
        done += 1
        if progress:
            progress(done, total, f"{REFERENCE} x {consumer}")
        for cand in cands:
            records.append(_judge(cand, consumer, model, ref_out, greedy_tokens, cfg, with_verify,
                                  decoded, plain if sampled else None, ref_error))
            done += 1
            if progress:
                progress(done, total, f"{cand.name} x {consumer}")
    if baseline is not None and verified is not None:
        notes.append(f"target_only verified by {cfg['verifier']}: softmax_topk's accept length "
                     f"{verified.accept_length:.3f}, {baseline.accept_length:.3f} with the built-in "
                     f"verification")
    if tree_baseline is not None and tree_verified is not None:
        notes.append(f"tree verified by {cfg['tree_verifier']} (sampling the target): softmax_topk's "
                     f"accept length {tree_verified.accept_length:.3f}, {tree_baseline.accept_length:.3f} "
                     f"with the built-in greedy verification")
    e2e = None
    if prompts is not None:
        e2e = end_to_end(records, model, prompts, plain, greedy_tokens)
    return MtpRun(tuple(records), cfg, model.describe(), tuple(notes), baseline, e2e)


def _text_law(out, plain, prompts: int):
    """A path's sampled text against plain sampling from the target (a real model's
    ``prompts`` prompts, row ``b`` from prompt ``b % prompts``; ``equiv.mtp.live``)."""
    return text_law_test(out.tokens, plain, np.arange(out.tokens.shape[0]) % prompts,
                         np.arange(plain.shape[0]) % prompts,
                         min(TEXT_LAW_POSITIONS, out.tokens.shape[1], plain.shape[1]),
                         lengths_a=out.lengths)


def decode_in_worker(cand, consumers, *, budget: str, device: str, seed: int, vocab: int,
                     tree_topk: int = TREE_TOPK, steps: int = 3) -> dict:
    """``{consumer: raw outcome}`` of ``cand`` on the synthetic model, as ``run_mtp`` with these
    arguments would decode it: ``{"outcome": DecodeOutcome fields}``, ``{"refused": why}`` (not
    applicable) or ``{"error": what}``. Runs in the candidate's worker; no judgment is made
    here (``run_mtp(..., decoded=...)`` makes it in the verdict process)."""

    sizes = BUDGETS[budget]["cuda" if device == "cuda" else "cpu"]
    model = SyntheticLM(vocab, seed=seed, device=device)
    kwargs = dict(steps=steps, rounds=sizes["rounds"], sequences=sizes["sequences"], seed=seed,
                  threshold=CONFIDENCE_THRESHOLD, tree_topk=tree_topk, tree_tokens=TREE_TOKENS)
    out = {}
    for consumer in consumers:
        reason = _not_applicable(cand, consumer, model, tree_topk)
        if reason is not None:
            out[consumer] = {"refused": reason}
            continue
        try:
            out[consumer] = {"outcome": asdict(decode(model, cand, consumer, name=cand.name, **kwargs))}
        except UsageError as exc:
            out[consumer] = ({"refused": f"{cand.name} refused k={tree_topk}: {exc}"}
                             if consumer == "tree" and not cand.builtin else {"error": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:                                  # a crashing path is a failure
            out[consumer] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _greedy_judged(consumer: str, cfg: dict) -> bool:
    """Whether ``consumer``'s text must equal greedy text: the greedy-verified consumers, except a
    tree decided by a user's tree verifier, which samples (``target_only`` is always sampled)."""
    return consumer in GREEDY_VERIFIED and not (consumer == "tree" and cfg.get("tree_verifier"))


def _verifier_name(verifier):
    if verifier is None or isinstance(verifier, str):
        return verifier
    return getattr(verifier, "spec", None) or getattr(verifier, "__name__", repr(verifier))


def _judge(cand, consumer, model, ref_out, greedy_tokens, cfg, kwargs, decoded=None, plain=None,
           ref_error=None) -> MtpRecord:
    """The record of ``cand`` under ``consumer``: it decodes here, or ``decoded[consumer]`` holds
    what its worker decoded (``decode_in_worker``); either way the judgment is made here.
    ``ref_error``: the reference's decode failed (a verifier out of contract): every record of
    the consumer is that error."""

    base = dict(path=cand.name, consumer=consumer, repro=_repro(cfg, cand.name, consumer),
                builtin=cand.builtin)
    empty = dict(metrics=None, lossless=None, lossless_detail=None, tokens_match_reference=None,
                 equivalence=None)
    reason = _not_applicable(cand, consumer, model, cfg["tree_topk"])
    if reason is not None:
        return MtpRecord(applicable=False, reason=reason, error=None, **empty, **base)
    if ref_error is not None:
        return MtpRecord(applicable=True, reason=None, error=ref_error, **empty, **base)
    try:
        if decoded is not None:                  # decoded elsewhere (the candidate's worker): raw data
            got = decoded.get(consumer)
            if got is None or got.get("error"):
                reason = "no outcome came back" if got is None else got["error"]
                return MtpRecord(applicable=True, reason=None, error=reason, **empty, **base)
            if got.get("refused"):
                return MtpRecord(applicable=False, reason=got["refused"], error=None, **empty, **base)
            out = DecodeOutcome(**got["outcome"])
        else:
            out = ref_out if cand.name == REFERENCE else decode(model, cand, consumer, name=cand.name, **kwargs)
    except UsageError as exc:
        if consumer == "tree" and not cand.builtin:
            return MtpRecord(applicable=False, reason=f"{cand.name} refused k={cfg['tree_topk']}: {exc}",
                             error=None, **empty, **base)
        return MtpRecord(applicable=True, reason=None, error=f"{type(exc).__name__}: {exc}", **empty, **base)
    except Exception as exc:                                  # a crashing path is a failure
        return MtpRecord(applicable=True, reason=None, error=f"{type(exc).__name__}: {exc}", **empty, **base)
    metrics = acceptance_metrics(out)
    if _greedy_judged(consumer, cfg):
        detail = greedy_identity(out.tokens, out.lengths, greedy_tokens)
        lossless = detail.identical
    else:
        try:
            lossless, detail = _sampling_lossless(model, out, cfg["seed"])
        except InvalidArgument as exc:                        # too few tokens to judge
            return MtpRecord(applicable=True, reason=None, error=f"lossless not judged: {exc}",
                             metrics=metrics, lossless=None, lossless_detail=None,
                             tokens_match_reference=None, equivalence=None, **base)
    mine, ref = per_sequence_accept_length(out), per_sequence_accept_length(ref_out)
    keep = np.isfinite(mine) & np.isfinite(ref)
    equivalence = equivalence_test(mine[keep], ref[keep], cfg["margin"])
    law = None if plain is None else _text_law(out, plain, cfg["sequences"])
    bound = None
    if out.optimum is not None:                  # a user's verifier: never above the lossless optimum
        bound = above_bound(out.accepted[out.active], out.optimum[out.active], span=cfg["steps"])
        lossless = bool(lossless) and bound.passed
    return MtpRecord(applicable=True, reason=None, metrics=metrics, lossless=lossless,
                     lossless_detail=detail, tokens_match_reference=_same_tokens(out, ref_out),
                     equivalence=equivalence, error=None, sampling_law=law, acceptance_bound=bound,
                     **base)


def _same_tokens(out, ref_out) -> bool:
    """Did both decodes emit the same tokens at every position both reached?"""
    common = np.minimum(out.lengths, ref_out.lengths)
    mask = np.arange(out.tokens.shape[1])[None, :] < common[:, None]
    return bool(np.array_equal(out.tokens[mask], ref_out.tokens[mask]))
