"""Properties only a GPU can check: CUDA-graph replay and batch invariance (issue 14).

Each probe is a pure function ``probe(fn, device, payload) -> result`` that calls the candidate
``fn(logits, k)`` many times and returns a frozen, picklable result with ``to_json()``, so that
it can run inside the supervised worker (``runner_for(spec).probe("equiv.ops.draft_topk.gpu_probes:NAME", payload)``)
or be called directly. ``payload`` is a dict of plain values (every key has a default).
Without a CUDA device both return ``status="skipped"`` with the reason.

``graph_replay`` -- draft runners capture the draft step in a CUDA graph at the largest batch
and replay it for smaller ones, padding rows holding whatever was there before.
1. Warm the candidate up on the capture stream, then capture ``fn(static, k)`` at ``b_max``.
   If the capture raises (a host synchronisation, a data-dependent allocation), the result is
   ``not_capturable`` with the reason: a fact for the engine's authors, not a failure.
2. For each real batch ``b`` in ``batches`` and each padding of rows ``b..b_max`` (NaN, a
   sentinel that wins the argmax if read, the previous trial's rows), on the current stream and
   on a second, non-default one: copy fresh rows in, replay, then run one eager call on other
   data (the engine's next step), then read the graph's outputs.
3. The real rows must match the eager answer for the same rows (indices equal, p within twice
   the tolerance; rows whose indices differ are judged against the float64 reference), and must
   not depend on the padding. Bitwise agreement across paddings is reported, not required.
``batch_invariance`` -- a row's answer should not depend on the batch it came in.
1. ``rows`` probe rows are computed alone (B = 1), then inside batches of ``batches`` (3, 64,
   1024), first in place and then after a seeded shuffle of the batch.
2. Every answer must agree with the row's answer alone within tolerance (indices equal, p within
   twice the tolerance; differing indices only where both answers pass ``equiv.ops.draft_topk.compare``);
   bitwise equality with the answer alone (p bits and indices) is measured and required only
   with ``require_bitwise`` (``--equiv-require batch-invariant``). Correctness itself is the
   equivalence properties' business, so a path judged wrong there (hardcoded_one) is judged
   here only for invariance.
Every failure carries a ``REPRO:`` line: ``python -m equiv.ops.draft_topk.gpu_probes PROBE SPEC ...``.
"""
from __future__ import annotations

import functools
import json
import sys
from dataclasses import asdict, dataclass, field

import torch

from equiv.candidate import load_candidate
from equiv.errors import InvalidArgument
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.recipes import Recipe
from equiv.ops.draft_topk.tolerance import tolerance_for

GRAPH_DEFAULTS = {"b_max": 64, "batches": (1, 5, 33, 64), "vocab": 129280, "k": 1,
                  "dtype": "float32", "seed": 0, "family": "zipf", "name": None}
BATCH_DEFAULTS = {"batches": (3, 64, 1024), "rows": 3, "vocab": 129280, "k": 1,
                  "dtype": "float32", "seed": 0, "family": "gaussian", "name": None,
                  "require_bitwise": False}
PADDINGS = ("nan", "sentinel", "stale")


@dataclass(frozen=True)
class ProbeResult:
    """One probe on one candidate. ``status``: pass, fail, skipped, or (graph_replay only)
    not_capturable, which passes; ``checks`` are (name, passed, detail) triples; ``facts`` the
    measured numbers (bitwise agreement, trials); ``repro`` replays a failure."""

    probe: str
    candidate: str
    device: str
    status: str
    reason: str
    payload: dict
    checks: tuple = ()
    facts: dict = field(default_factory=dict)
    repro: str | None = None

    @property
    def passed(self) -> bool:
        return self.status in ("pass", "not_capturable")

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        lines = [f"{self.probe} [{self.candidate}] on {self.device}: {self.status.upper()}"
                 + (f" ({self.reason})" if self.reason else "")]
        lines += [f"  {name:<22} {'pass' if ok else 'FAIL'}  {detail}" for name, ok, detail in self.checks]
        if self.repro and not self.passed:
            lines.append(self.repro)
        return "\n".join(lines)


def _payload(defaults: dict, payload) -> dict:
    payload = dict(payload or {})
    unknown = sorted(set(payload) - set(defaults))
    if unknown:
        raise InvalidArgument(f"payload key {unknown[0]!r} is unknown: use {', '.join(sorted(defaults))}")
    return {**defaults, **payload}


def _name(fn, p) -> str:
    for attr in ("spec", "name", "__name__"):
        if isinstance(getattr(fn, attr, None), str):
            return p["name"] or getattr(fn, attr)
    return p["name"] or repr(fn)


def _repro(probe: str, name: str, p: dict) -> str:
    args = " ".join(f"--{key.replace('_', '-')}={','.join(map(str, v)) if isinstance(v, (tuple, list)) else v}"
                    for key, v in p.items() if key != "name" and v != (GRAPH_DEFAULTS if probe ==
                    "graph_replay" else BATCH_DEFAULTS).get(key))
    return f"REPRO: python -m equiv.ops.draft_topk.gpu_probes {probe} {name} {args}".rstrip()


def _no_gpu(device) -> str | None:
    if str(device).split(":")[0] != "cuda":
        return f"needs a CUDA device; this run is on {device}"
    if not torch.cuda.is_available():
        return "needs a CUDA device; none is visible"
    return None


# rows built from a recipe; larger batches are column rotations of them. 8, not 64: the zipf
# family's 64 rows at V = 129280 cost ~0.5 s to build on a GPU host's busy CPU, six times per
# graph_replay run, on the property suite's critical path; 8 cost ~0.03 s
BASE_ROWS = 8


def _rows(p, batch: int, seed: int, device):
    """``batch`` distinct rows of the payload's family. A recipe builds its rows in NumPy on the host
    (bit-identical on every device), which costs seconds at 1024 x 129280; the probes compare a
    candidate only with itself, so every batch is cut from one ``BASE_ROWS``-row recipe (built
    once per family, seed, vocabulary, dtype and device: ``_base_rows``), and rows past
    ``BASE_ROWS`` are those rows rotated along the vocabulary by a different offset per block:
    other values at every column, the maximum elsewhere, the same law. Deterministic in
    (payload, batch, seed); a fresh tensor each time."""
    base = _base_rows(p["family"], seed, p["vocab"], p["dtype"], str(device))
    if batch <= BASE_ROWS:
        return base[:batch].clone()
    blocks = [base] + [_rotated(base, b) for b in range(1, -(-batch // BASE_ROWS))]
    return torch.cat(blocks)[:batch].contiguous()


def _rotated(rows, n: int):
    """``rows`` rotated along the vocabulary by the ``n``-th offset (never 0): other values at
    every column, the maximum elsewhere."""
    return torch.roll(rows, shifts=(7919 * n) % rows.shape[1] or 1, dims=1)


@functools.lru_cache(maxsize=4)
def _base_rows(family: str, seed: int, vocab: int, dtype: str, device: str):
    return Recipe(family, seed=seed, batch=BASE_ROWS, vocab=vocab, dtype=dtype).build(device)


def _same_bits(a, b) -> bool:
    return a.shape == b.shape and torch.equal(a.float().view(torch.int32), b.float().view(torch.int32))


def _disagreement(x, got, want, k: int) -> str | None:
    """Why ``got`` (p, idx) is not the answer ``want`` for rows ``x`` (None: it is). Indices
    must be equal and p within twice the tolerance; rows whose indices differ pass only if both
    answers pass ``equiv.ops.draft_topk.compare`` (an exact or near tie broken another way)."""

    (gp, gi), (wp, wi) = [(p.float().cpu(), i.cpu()) for p, i in (got, want)]
    tol = tolerance_for(x.dtype)
    both_nan = torch.isnan(gp) & torch.isnan(wp)
    close = both_nan | ((gp - wp).abs() <= 2 * (tol.rtol * wp.abs() + tol.top1_atol * wp[:, :1].abs()))
    bad = (~close.all(1)) | (gi != wi).any(1)
    for r in torch.nonzero(bad).flatten().tolist():
        row = x[r:r + 1].cpu()
        verdicts = [compare(lambda xx, kk, o=o: (o[0][r:r + 1], o[1][r:r + 1]), row, k=k, regression=False)
                    for o in ((gp, gi), (wp, wi))]
        if not all(v.passed for v in verdicts):
            return (f"row {r}: got p={gp[r].tolist()} idx={gi[r].tolist()}, eager p={wp[r].tolist()} "
                    f"idx={wi[r].tolist()}")
    return None


def graph_replay(fn, device="cuda", payload=None) -> ProbeResult:
    """Capture ``fn`` in a CUDA graph at ``b_max`` and replay it (module docstring)."""
    p = _payload(GRAPH_DEFAULTS, payload)
    name, k, b_max = _name(fn, p), int(p["k"]), int(p["b_max"])
    why = _no_gpu(device)
    if why:
        return ProbeResult("graph_replay", name, str(device), "skipped", why, p)
    repro = _repro("graph_replay", name, p)
    static = _rows(p, b_max, p["seed"], device)
    capture_stream = torch.cuda.Stream(device)
    capture_stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(capture_stream):      # compile and allocate outside the capture
        fn(static, k)
        fn(static, k)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=capture_stream):
            out_p, out_i = fn(static, k)
    except Exception as exc:                     # the candidate cannot be captured: report it
        try:
            torch.cuda.synchronize(device)
        except Exception:
            pass
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return ProbeResult("graph_replay", name, str(device), "not_capturable",
                           f"{type(exc).__name__}: {first}"[:300], p, repro=repro)
    checks, problems, bitwise, trials = [], [], 0, 0
    decoys = _rows(p, b_max, p["seed"] + 1000, device)
    fresh = _rows(p, b_max, p["seed"] + 1, device)   # each trial's rows: these, rotated anew
    other = torch.cuda.Stream(device)
    seed = p["seed"] + 1
    for stream_name, stream in (("current", torch.cuda.current_stream(device)), ("non-default", other)):
        with torch.cuda.stream(stream):
            for b in p["batches"]:
                real = _rotated(fresh[:b], seed).contiguous()
                decoy = torch.roll(decoys, shifts=seed, dims=1)   # another input, rebuilt for nothing
                seed += 1
                want = tuple(t.clone() for t in fn(real.clone(), k))
                first = None
                for pad in PADDINGS:
                    static[:b].copy_(real)
                    if pad == "nan":
                        static[b:] = float("nan")
                    elif pad == "sentinel":      # wins every argmax and overflows exp if read
                        static[b:] = 1e4
                    graph.replay()
                    fn(decoy, k)                 # the next step's eager call, before the read
                    got = (out_p[:b].clone(), out_i[:b].clone())
                    torch.cuda.synchronize(device)
                    trials += 1
                    problem = _disagreement(real, got, want, k)
                    if problem:
                        problems.append(f"B={b} of {b_max}, padding {pad}, {stream_name} stream: {problem}")
                    if first is None:
                        first = got
                    else:
                        bitwise += _same_bits(got[0], first[0]) and torch.equal(got[1], first[1])
    checks.append(("matches_eager", not problems, problems[0] if problems else
                   f"{trials} replays x real rows agree with eager calls (B in {list(p['batches'])})"))
    facts = {"trials": trials, "padding_bitwise": f"{bitwise}/{trials - 2 * len(p['batches'])}"}
    status = "pass" if not problems else "fail"
    return ProbeResult("graph_replay", name, str(device), status,
                       "" if status == "pass" else f"{len(problems)} of {trials} replays wrong",
                       p, tuple(checks), facts, repro)


def batch_invariance(fn, device="cuda", payload=None) -> ProbeResult:
    """Each probe row alone and inside batches, in place and shuffled (module docstring)."""
    p = _payload(BATCH_DEFAULTS, payload)
    why = _no_gpu(device)
    if why:
        return ProbeResult("batch_invariance", _name(fn, p), str(device), "skipped", why, p)
    return measure_batch_invariance(fn, device, p)


def measure_batch_invariance(fn, device, payload) -> ProbeResult:
    """``batch_invariance`` on any device (the tests run it on the CPU at small V)."""
    p = _payload(BATCH_DEFAULTS, payload)
    name, k = _name(fn, p), int(p["k"])
    repro = _repro("batch_invariance", name, p)
    big = _rows(p, max(p["batches"]), p["seed"], device)
    n = min(int(p["rows"]), min(p["batches"]))
    alone = [tuple(t.clone() for t in fn(big[r:r + 1].clone(), k)) for r in range(n)]
    gen = torch.Generator().manual_seed(p["seed"])
    wrong, identical, total, per_batch = [], 0, 0, {}
    for b in p["batches"]:
        for order in ("in place", "shuffled"):
            perm = torch.randperm(b, generator=gen) if order == "shuffled" else torch.arange(b)
            x = big[:b][perm.to(big.device)].contiguous()
            out_p, out_i = fn(x, k)
            if x.device.type == "cuda":
                torch.cuda.synchronize(device)
            where = torch.argsort(perm).tolist()           # row r of big sits at where[r] of x
            same = 0
            for r in range(n):
                got = (out_p[where[r]:where[r] + 1].clone(), out_i[where[r]:where[r] + 1].clone())
                same += _same_bits(got[0], alone[r][0]) and torch.equal(got[1], alone[r][1])
                problem = _disagreement(big[r:r + 1], got, alone[r], k)
                if problem:
                    wrong.append(f"row {r} in B={b} ({order}) differs from the row alone: {problem}")
            identical += same
            total += n
            per_batch[f"{b} {order}"] = f"{same}/{n}"
    bitwise = identical == total
    checks = [("within_tolerance", not wrong, wrong[0] if wrong else
               f"{n} rows alone and in {2 * len(p['batches'])} batches all within tolerance"),
              ("bitwise", bitwise or not p["require_bitwise"],
               f"{identical}/{total} answers bitwise equal to the row alone"
               + ("" if p["require_bitwise"] else " (reported; required with --equiv-require batch-invariant)"))]
    failed = [c for c in checks if not c[1]]
    return ProbeResult("batch_invariance", name, str(device), "fail" if failed else "pass",
                       failed[0][0] if failed else "", p, tuple(checks),
                       {"bitwise_invariant": bitwise, "per_batch": per_batch}, repro)


PROBES = {"graph_replay": graph_replay, "batch_invariance": batch_invariance}


def main(argv=None) -> int:
    """``python -m equiv.ops.draft_topk.gpu_probes PROBE SPEC [--key=value ...]``: run one probe, print it."""

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] not in PROBES:
        print(f"usage: python -m equiv.ops.draft_topk.gpu_probes {{{','.join(PROBES)}}} SPEC [--key=value ...]",
              file=sys.stderr)
        return 2
    probe, spec = argv[0], argv[1]
    defaults = GRAPH_DEFAULTS if probe == "graph_replay" else BATCH_DEFAULTS
    payload = {}
    for arg in argv[2:]:
        key, _, value = arg.lstrip("-").partition("=")
        key = key.replace("-", "_")
        if key not in defaults:
            raise InvalidArgument(f"--{key} is unknown: use {', '.join(sorted(defaults))}")
        dflt = defaults[key]
        payload[key] = (tuple(int(v) for v in value.split(",")) if isinstance(dflt, tuple) else
                        value in ("1", "true", "True") if isinstance(dflt, bool) else
                        int(value) if isinstance(dflt, int) else value)
    res = PROBES[probe](load_candidate(spec), "cuda", {**payload, "name": spec})
    print(res.summary())
    print(json.dumps(res.to_json(), default=str))
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
