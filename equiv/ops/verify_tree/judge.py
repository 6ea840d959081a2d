"""The judge of a tree verifier: is the emitted text lossless under the construction it declares?

Plan. A verdict rests on seeded calls of the candidate on recipes (recipes.py: a target and a
draft that are seeded functions of the whole prefix, trees drafted by ``topk``, ``iid`` or
``wor``), each output checked in this (the verdict) process against the laws of
``equiv.reference.verify_tree``:

1. ``contract`` (exact): a pair of int64 ``[B, D+1]`` tensors on the inputs' device, inputs
   unchanged (calls.py); ``accepted_path = [0, a1 .. ak, -1 ..]`` a real chain of children of
   present nodes, ``output_token_ids = [tok(a1) .. tok(ak), x, -1 ..]`` with ``x`` in ``[0, V)``;
   the same generator seed gives the same pair (the first seed is called again last).
2. ``support`` (exact): no emitted token has target probability 0 after its node.
3. ``greedy`` (exact): on one-hot targets (temperature 0) every emitted token is the target's
   argmax after its prefix: greedy decoding's text through the tree (reference ``greedy_text``)
   or a prefix of it, the argmax at the last accepted node ending it. Acceptance need not be
   maximal: a lossless verifier may stop at any node (an accept-length cap, a truncated tree) and
   draw from that node's full target; how many outputs did is an efficiency figure in the pass
   line (``greedy_shortfall``), beside the accept length against the tree optimum.
4. ``marginal`` (statistics): each row's text is continued past its last token with fresh draws
   from the target (the same prefix function), to ``D+1`` tokens. Under a lossless verifier the
   randomized PIT of each token under the target law after its prefix (the Rosenblatt transform)
   is uniform and independent of the past: chi-square in ``PIT_BINS`` bins, pooled and per
   (family, construction, position); and the Bernstein score tests of verify (lossless.py): the
   ``target`` score ``p(y)`` for every token, and for ``topk`` trees (fixed, so the score is known
   before the call) the ``residual`` score: at a prefix that is a tree node with child tokens
   ``C``, ``p(y) 1[y not in C] / (1 - p(C))`` -- the law a target-only verifier draws from, where
   its bugs live; and the ``children`` score (children.py): whether the token after a node is one
   of its children as often as ``p(C)`` says, pooled over a family's positions from ``m`` on.
   (For ``iid``/``wor`` the law holds only on average over trees, so no score may depend on the
   tree.)
5. ``joint``: the binned PITs of neighbouring positions against the uniform square (verify's).
6. ``exhaustive`` (small V): every continued text is one of ``V**(D+1)`` cells; chi-square of the
   cell counts against the exact sequence law of each row's root (reference ``sequence_law``).
7. ``tail`` (Poisson): repeats among tail draws of each bank law against their exact mean (the
   chain's test, equiv/ops/verify/tail.py): a law squeezed onto a few tail tokens, which bins miss.
8. ``independence`` (exact sign tests; only where a case has rows of identical inputs,
   ``problems``, and two calls: independence.py): rows of one call, and calls with different
   generator seeds, must not share randomness -- the chain verifier's swap sign tests
   (equiv/ops/verify/independence.py, its own budget ``INDEPENDENCE_ALPHA = 2e-5``), failing
   with the cause ``shared randomness between rows`` or ``between calls``.

Family-wise error ``FAMILY_ALPHA = 1e-4`` per judge run: a fifth each to the PIT, score, joint,
exhaustive and tail tests, Bonferroni inside each; a test fails only when significant AND its effect
passes a floor (binned TVD ``LOSSLESS_TVD_FLOOR``, score ``SCORE_FLOOR``, exhaustive
``EXHAUSTIVE_FLOOR``). *Efficiency*: per statistical recipe, the mean accept length (accepted
drafts + 1) against the optimum of a lossless verifier on the same trees
(reference ``optimum_accept_length``). Calibration: docs/verify_tree.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.checks import Check
from equiv.verdict import Case, FirstFailures, JudgeVerdict
from equiv.ops.verify.beside import ahead, draw_and_judge
from equiv.ops.verify.independence import independence_check
from equiv.ops.verify.laws import sorted_table
from equiv.ops.verify.lossless import JOINT_BINS, LOSSLESS_TVD_FLOOR, SCORE_FLOOR, joint_tests, score_tests
from equiv.ops.verify.recipes import cdf_draw
from equiv.ops.verify.tail import level_repeats, repeat_tests
from equiv.ops.verify_tree.draws import run_draws
from equiv.memo import memo
from equiv.ops.verify_tree.children import child_mass, children_score
from equiv.ops.verify_tree.recipes import TreeRecipe, law_index, step, tree_model
from equiv.reference import verify_tree as ref
from equiv.stats import PIT_BINS, Labels, cells_test, pit, sampling_fit

CHECKS = ("contract", "support", "greedy", "marginal", "joint", "exhaustive", "tail", "independence")
FAMILY_ALPHA = 1e-4
SHARE = {"pit": 0.2, "score": 0.2, "joint": 0.2, "exhaustive": 0.2, "tail": 0.2}
EXHAUSTIVE_FLOOR = 0.005
EXHAUSTIVE_MAX_CELLS = 4096
TABLE_BYTES = 128 * 2 ** 20                 # the sorted target tables kept, as made (recipes.MODEL_BYTES)
_SALT = 4099


@dataclass(frozen=True)
class TreeVerdict(JudgeVerdict):
    """Every check of one judge run, with what ran and under which declared construction."""

    candidate: str
    device: str
    seed: int
    drafts: str
    checks: tuple
    recipes: int
    calls: int
    rows: int
    efficiency: tuple = ()
    notes: tuple = ()
    law: str = "lossless"

    def summary(self) -> str:
        return self.summary_of(f"{self.candidate} on {self.device}: {'PASS' if self.passed else 'FAIL'} (lossless for "
                               f"drafts={self.drafts}; {self.recipes} recipes, {self.calls} calls, {self.rows} rows)",
                               "tree optimum")

    def to_json(self) -> dict:
        return {"candidate": self.candidate, "device": self.device, "seed": self.seed, "drafts": self.drafts,
                "passed": self.passed, "recipes": self.recipes, "calls": self.calls, "rows": self.rows,
                "checks": [c.to_json() for c in self.checks], "efficiency": list(self.efficiency),
                "notes": list(self.notes)}


def judged(check: str, passed: bool, detail: str, recipe: str | None = None, repro: str | None = None,
           evidence: dict | None = None) -> Check:
    """One check of the judge as the project's ``Check`` (stage ``judge``; the gate files it under
    its own stage), its failing recipe as text and parsed (``inputs``), its typed ``evidence``."""
    return Check("judge", check, passed, detail, subject=check,
                 inputs=None if recipe is None else TreeRecipe.parse(recipe), evidence=evidence,
                 repro=repro, recipe=recipe, cause=None if evidence is None else evidence.get("cause"))


def repro_line(spec, recipe, calls, seed, device, drafts) -> str:
    return (f"REPRO: equiv check --op verify_tree --candidate {spec} --recipe '{recipe}' --calls {calls} "
            f"--seed {seed} --device {device} --drafts {drafts}")


# -- exact checks ---------------------------------------------------------------------------------

def layout_problem(recipe, paths, outs):
    """``(call, row, message)`` of the first output that breaks the path / token layout, else None."""
    t = recipe.trees()
    V, N = recipe.vocab, recipe.nodes
    C, B, W = paths.shape
    for c in range(C):
        for b in range(B):
            pa, out = paths[c, b], outs[c, b]
            if pa[0] != 0:
                return c, b, f"accepted_path starts with {pa[0]}, not 0 (the root)"
            k = 0
            while k + 1 < W and pa[k + 1] != -1:
                node = int(pa[k + 1])
                if not 0 < node < N or t.parents[b, node] != pa[k]:
                    return c, b, (f"accepted_path {pa.tolist()}: node {node} is not a child of node {int(pa[k])} "
                                  f"(parents {t.parents[b].tolist()})")
                k += 1
            if (pa[k + 1:] != -1).any():
                return c, b, f"accepted_path {pa.tolist()}: an entry after the first -1 is not -1"
            want = t.tokens[b, pa[1:k + 1]]
            if (out[:k] != want).any():
                return c, b, (f"output_token_ids {out.tolist()} do not start with the accepted nodes' tokens "
                              f"{want.tolist()} (path {pa[:k + 1].tolist()})")
            if not 0 <= out[k] < V:
                return c, b, (f"output_token_ids {out.tolist()}: the drawn token after {k} accepted drafts is "
                              f"{out[k]}, not a token in [0, {V})")
            if (out[k + 1:] != -1).any():
                return c, b, f"output_token_ids {out.tolist()}: an entry after the drawn token is not -1"
    return None


def _lengths(paths):
    return (paths[..., 1:] != -1).sum(-1)


def support_problem(recipe, paths, outs):
    t, m = recipe.trees(), recipe.model()
    k = _lengths(paths)
    C, B, W = outs.shape
    for j in range(W):
        emitted = j <= k
        node = np.where(emitted, paths[..., min(j, W - 1)] if j < W else 0, 0).clip(min=0)
        idx = t.index[np.arange(B)[None, :], node]
        prob = m.target32[idx, np.where(emitted, outs[..., j], 0)]
        bad = emitted & ~(prob > 0)
        if bad.any():
            c, b = (int(v[0]) for v in np.nonzero(bad))
            what = "accepted a child" if j < k[c, b] else "drew a token"
            return c, b, (f"position {j} emitted token {outs[c, b, j]} whose target probability after node "
                          f"{int(node[c, b])} is 0 ({what}): no lossless verifier emits it"), \
                f"{what} of target probability 0"
    return None


def _greedy_tokens(recipe, paths, outs):
    """``(k [C, B], nodes [C, B, W], want [C, B, W])``: accepted drafts, the node each emitted
    token follows and the one-hot target's argmax there (the token greedy decoding emits)."""
    t, m = recipe.trees(), recipe.model()
    k = _lengths(paths)
    W = outs.shape[-1]
    nodes = np.where(np.arange(W) <= k[..., None], paths, 0).clip(min=0)
    rows = np.arange(recipe.batch)[None, :, None]
    return k, nodes, m.target.argmax(1)[t.index[rows, nodes]]


def greedy_problem(recipe, paths, outs):
    """One-hot targets: ``(call, row, message, cause)`` of the first emitted token that is not the
    target's argmax after its prefix, else None. Greedy decoding's text and every prefix of it
    pass: a lossless verifier may stop at any node (an accept-length cap, a truncated tree) and
    emit the argmax there; stopping early is efficiency (``greedy_shortfall``), not a defect."""
    t = recipe.trees()
    k, nodes, want = _greedy_tokens(recipe, paths, outs)
    bad = (np.arange(outs.shape[-1]) <= k[..., None]) & (outs != want)
    if not bad.any():
        return None
    c, b, j = (int(v[0]) for v in np.nonzero(bad))
    node = int(nodes[c, b, j])
    kids = t.children[b, node]
    goes_on = bool(((kids >= 0) & (t.tokens[b, kids.clip(min=0)] == want[c, b, j])).any())
    cause = ("greedy: accepted a wrong child" if j < k[c, b] else
             "greedy: stopped at the argmax child and drew another token" if goes_on else
             "greedy: wrong drawn token")
    _, text = ref.greedy_text(t.parents[b], t.tokens[b], recipe.model().target[t.index[b]])
    return c, b, (f"position {j} emitted {outs[c, b, j]} after node {node} where the one-hot target allows only "
                  f"{want[c, b, j]} (emitted {outs[c, b].tolist()}; greedy decoding through the tree emits "
                  f"{text}, and a lossless verifier that stops earlier a prefix of it)"), cause


def greedy_shortfall(recipe, paths, outs) -> int:
    """One-hot targets, every emitted token the argmax: how many outputs stopped at a node whose
    argmax child greedy decoding would have accepted (fewer drafts: efficiency, not a defect)."""
    k, nodes, want = _greedy_tokens(recipe, paths, outs)
    last = np.take_along_axis(nodes, k[..., None], -1)[..., 0]
    token = np.take_along_axis(want, k[..., None], -1)[..., 0]
    rows = np.broadcast_to(np.arange(recipe.batch), k.shape)
    return int((_step_node(recipe.trees(), rows, last, token) >= 0).sum())


# -- statistics ------------------------------------------------------------------------------------

def _step_node(t, rows, node, token):
    """The tree node after ``node`` (-1: outside the tree) when ``token`` follows: its first
    child with that token."""
    kids = t.children[rows, np.maximum(node, 0)]                         # [..., F]
    tok = np.where(kids >= 0, t.tokens[rows[..., None], np.maximum(kids, 0)], -1)
    hit = (tok == token[..., None]) & (node >= 0)[..., None]
    first = np.where(hit.any(-1), np.take_along_axis(kids, hit.argmax(-1)[..., None], -1)[..., 0], -1)
    return first


def continued(recipe, k, outs, rng, draw=None):
    """``(tokens, levels, nodes)`` ``[C, B, L]``: each row's text (``outs``, ``k`` accepted drafts
    and one drawn token) continued past its last token with draws from the target -- or from
    ``draw(law, n, rng) -> n tokens`` (calibration's biased laws) -- the bank law each token was
    drawn under, and the tree node its prefix is (-1 once the prefix left the tree). ``k = -1``
    draws the whole text (a lossless verifier's text, drawn on the host)."""
    t, m = recipe.trees(), recipe.model()
    C, B, L = outs.shape
    draw = draw or (lambda law, n, g: cdf_draw(m.target_cdf[law], g.random(n)))
    seq = outs.copy()
    levels = np.empty_like(seq)
    nodes = np.full_like(seq, -1)
    state = np.broadcast_to(t.state[:, 0], (C, B)).copy()
    rows = np.broadcast_to(np.arange(B), (C, B))
    node = np.zeros((C, B), dtype=np.int64)
    for j in range(L):
        lv = law_index(state)
        levels[..., j] = lv
        nodes[..., j] = node
        need = j > k
        col = seq[..., j]
        for law in np.unique(lv[need]):
            at = need & (lv == law)
            col[at] = draw(law, int(at.sum()), rng)
        seq[..., j] = col
        state = step(state, col)
        node = _step_node(t, rows, node, col)
    return seq, levels, nodes


@memo(32)                                   # made ahead in another thread (run_judge)
def _residual_table(recipe):
    """Per node of a ``topk`` tree ``[B, N]``: the residual score's mean, variance, maximum and
    the mass left ``1 - p(children)`` (0 where nothing is left or the node has no children)."""
    t, m = recipe.trees(), recipe.model()
    p = m.target
    kids = t.children
    valid = kids >= 0
    B, N, F = kids.shape
    law = t.index                                                         # [B, N]
    tok = np.where(valid, t.tokens[np.arange(B)[:, None, None], np.maximum(kids, 0)], 0)
    pc = np.where(valid, p[law[..., None], tok], 0.0)
    rest = 1.0 - pc.sum(-1)
    s2, s3 = (p * p).sum(1)[law], (p ** 3).sum(1)[law]
    ok = valid.any(-1) & (rest > 1e-12)
    safe = np.where(ok, rest, 1.0)
    mean = (s2 - (pc ** 2).sum(-1)) / safe
    var = np.maximum((s3 - (pc ** 3).sum(-1)) / safe ** 2 - mean ** 2, 0.0)
    order = np.argsort(-p, axis=1, kind="stable")[:, :F + 1]              # the top F+1 tokens of each law
    cand = order[law]                                                     # [B, N, F+1]
    taken = (cand[..., :, None] == np.where(valid, tok, -1)[..., None, :]).any(-1)
    best = np.take_along_axis(cand, (~taken).argmax(-1)[..., None], -1)[..., 0]
    top = p[law, best] / safe
    return np.where(ok, mean, 0.0), np.where(ok, var, 0.0), np.where(ok, top, 0.0), np.where(ok, rest, 0.0)


@memo(8)
def _moments(bank: tuple):
    """``(sum p^2, sum p^3, max p)`` of each target law of ``bank = (family, seed, vocab)``: the
    bank's, shared by the parts of an ``iid`` / ``wor`` slot (made a part, they were three passes
    over ``[BANK, V]`` each: ~15 ms at V ~ 150000, 88 parts a construction on a GPU)."""
    p = tree_model(*bank).target
    return (p * p).sum(1), (p ** 3).sum(1), p.max(1)


def _score_parts(recipe, seq, levels, nodes):
    """The ``target`` and (topk trees) ``residual`` scores (module docstring): per token
    ``(s - mean, var, max s)``."""
    m, t = recipe.model(), recipe.trees()
    p = m.target
    s2, s3, top = _moments((recipe.family, recipe.seed, recipe.vocab))
    lv, tok = levels.ravel(), seq.ravel()
    out = {"target": (p[lv, tok] - s2[lv], s3[lv] - s2[lv] ** 2, top[lv])}
    if recipe.drafts != "topk":                 # the law holds on average over trees only
        out["residual"] = out["children"] = (np.zeros(lv.size), np.zeros(lv.size), np.zeros(lv.size))
        return out
    mean, var, mx, rest = _residual_table(recipe)
    rows = np.broadcast_to(np.arange(seq.shape[1])[None, :, None], seq.shape)
    nd = nodes
    at = nd >= 0
    ndc = np.maximum(nd, 0)
    kids = t.children[rows, ndc]                                          # [C, B, L, F]
    is_child = ((np.where(kids >= 0, t.tokens[rows[..., None], np.maximum(kids, 0)], -1) == seq[..., None])
                .any(-1))
    r = rest[rows, ndc]
    live = at & (r > 0)
    s = np.where(live & ~is_child, p[levels, seq] / np.where(live, r, 1.0), 0.0)
    dev = np.where(live, s - mean[rows, ndc], 0.0).ravel()
    out["residual"] = (dev, np.where(live, var[rows, ndc], 0.0).ravel(), np.where(live, mx[rows, ndc], 0.0).ravel())
    out["children"] = children_score(recipe, at, is_child, rows, nd)     # children.py (issue 43)
    return out


class Stats:
    def __init__(self):
        self.u, self.groups, self.joint, self.scores, self.exhaustive, self.cases = [], [], {}, [], [], []
        self.tail: dict = {}                    # slot label -> level_repeats records (tail.py)


def _statistics_of_case(case, paths, outs, stats, rng):
    statistics_of_texts(case, *continued(case.recipe, _lengths(paths), outs, rng), stats, rng)


def statistics_of_texts(case, seq, levels, nodes, stats, rng):
    """Feed the continued texts of ``case`` to the statistical tests (``stats``)."""
    r = case.recipe
    m = r.model()
    sorted_laws, rank_of, _ = _tables(r.family, r.seed, r.vocab)
    u = pit(sorted_laws, levels.ravel(), rank_of[levels.ravel(), seq.ravel()], rng)
    stats.tail.setdefault(_label(case), []).extend(
        level_repeats(sorted_laws, levels.ravel(), rank_of[levels.ravel(), seq.ravel()]))
    L = seq.shape[-1]
    pos = np.broadcast_to(np.arange(L), seq.shape).ravel()
    stats.u.append(u)
    stats.groups.append(Labels([f"{_label(case)}:position{j}" for j in range(L)], pos))
    k = np.minimum((u * JOINT_BINS).astype(np.int64), JOINT_BINS - 1).reshape(-1, L)
    for j in range(L - 1):
        stats.joint.setdefault(f"{_label(case)}:positions {j},{j + 1}", []).append(
            k[:, j] * JOINT_BINS + k[:, j + 1])
    stats.scores.append(_score_parts(r, seq, levels, nodes))
    stats.cases.append(case)
    if r.vocab ** L <= EXHAUSTIVE_MAX_CELLS:
        t = r.trees()
        flat = seq.reshape(-1, L) @ (r.vocab ** np.arange(L - 1, -1, -1))
        roots = np.broadcast_to(t.tokens[:, 0], seq.shape[:2]).ravel()
        expected = np.zeros(r.vocab ** L)
        for root in np.unique(roots):
            law = ref.sequence_law(_target_fn(m), int(root), r.vocab, L).ravel()
            expected += law * int((roots == root).sum())
        observed = np.bincount(flat, minlength=expected.size).astype(float)
        order = np.argsort(-expected, kind="stable")
        got = cells_test(observed[order], expected[order])
        if got is not None:
            stats.exhaustive.append((str(r), int(flat.size)) + got)


def _target_fn(m):
    def target(prefix):
        state = m.start(np.array(prefix[0]))
        for y in prefix[1:]:
            state = step(state, y)
        return m.target[int(law_index(state))]
    return target


@memo(24, max_bytes=TABLE_BYTES)
def _tables(family, seed, vocab):
    return sorted_table(tree_model(family, seed, vocab).target)


def optimum(recipe) -> np.ndarray:
    """``[B]``: each row's tree optimum (reference ``optimum_accept_length``; rows without
    duplicate siblings by the same sum, vectorised: the reach of every node)."""
    t, m = recipe.trees(), recipe.model()
    B, N = t.parents.shape
    reach = np.zeros((B, N))
    reach[:, 0] = 1.0
    rows = np.arange(B)
    for i in range(1, N):
        par = np.maximum(t.parents[:, i], 0)
        here = t.parents[:, i] >= 0
        reach[:, i] = np.where(here, reach[rows, par] * m.target[t.index[rows, par], t.tokens[:, i]], 0.0)
    best = reach.sum(1)
    for b in np.flatnonzero(t.duplicates):
        best[b] = ref.optimum_accept_length(t.parents[b], t.tokens[b], m.target[t.index[b]])
    return best


def efficiency(recipe, paths) -> dict:
    """Mean accept length against the tree optimum. Only a fixed (``topk``) tree has that bound:
    for ``iid``/``wor`` the text is lossless on average over trees, and given its tree it leans
    toward the drafted tokens (SpecInfer accepts more than a fixed tree's optimum), so there the
    optimum and ratio are None."""
    got = (_lengths(paths) + 1).ravel().astype(np.float64)
    best = float(optimum(recipe).mean()) if recipe.drafts == "topk" else None
    return {"recipe": str(recipe), "rows": int(got.size), "accept_length": float(got.mean()),
            "stderr": float(got.std(ddof=1) / np.sqrt(got.size)) if got.size > 1 else 0.0,
            "token_optimum": best, "ratio": None if best is None else float(got.mean() / best)}


# -- the verdict -----------------------------------------------------------------------------------

def _size(recipe) -> int:
    r = TreeRecipe.parse(recipe) if isinstance(recipe, str) else recipe
    return r.batch * r.nodes * r.vocab


class Findings(FirstFailures):
    """The first failure of each check (``FirstFailures``) and the counts of each check."""

    judged, size = staticmethod(judged), staticmethod(_size)

    def __init__(self, spec, device, drafts):
        self.spec, self.device, self.drafts = spec, device, drafts
        self.first: dict = {}
        self.ran = {c: 0 for c in CHECKS}
        self.short = 0                       # greedy outputs that stopped before greedy decoding's end

    @staticmethod
    def seed(case, call) -> int:
        return case.seeds[call]

    def repro(self, case) -> str:
        return repro_line(self.spec, case.recipe, case.calls, case.seed, self.device, self.drafts)


def _judge_case(case, draws, found, stats, eff, rng):
    r = case.recipe
    if not draws.ok:
        found.fail("contract", case, (len(draws.outputs), None, f"the candidate {draws.problem}"),
                   cause=draws.cause or "contract")
        return
    found.ran["contract"] += 1
    paths, outs = draws.paths, draws.outputs
    if case.replay:
        again = np.flatnonzero(((paths[-1] != paths[0]) | (outs[-1] != outs[0])).any(-1))
        if again.size:
            b = int(again[0])
            found.fail("contract", case, (0, b, f"the same generator seed gave {outs[-1][b].tolist()} then "
                                                f"{outs[0][b].tolist()}"), cause="determinism")
    paths, outs = case.judged(paths), case.judged(outs)
    bad = layout_problem(r, paths, outs)
    if bad:
        found.fail("contract", case, bad, cause="path layout")
        return
    found.ran["support"] += outs.shape[0] * outs.shape[1]
    bad = support_problem(r, paths, outs)
    if bad:
        found.fail("support", case, bad[:3], cause=bad[3])
    if r.family == "onehot_target":
        found.ran["greedy"] += outs.shape[0] * outs.shape[1]
        bad = greedy_problem(r, paths, outs)
        if bad:
            found.fail("greedy", case, bad[:3], cause=bad[3])
        else:
            found.short += greedy_shortfall(r, paths, outs)
    if case.statistical:
        eff.append(efficiency(r, paths))
        _statistics_of_case(case, paths, outs, stats, rng)


def _group_cause(group: str) -> str:
    slot = group.split(":")[-1]
    return f"emitted law at {slot.replace('position', 'position ')}" if slot.startswith("position") else \
        "emitted law"


def _label(case) -> str:
    """A test group's name: family, construction and the plan slot (a slot's own rows are not
    diluted by another slot's of the same family)."""
    r = case.recipe
    return f"{r.family}:{r.drafts}" + (f"/{case.purpose}" if case.purpose else "")


def _case_of(stats, group):
    label = group.rsplit(":", 1)[0].removeprefix("offset ")          # stats/fit.py's offset PIT tests
    return next((c for c in stats.cases if _label(c) == label), stats.cases[0])


def statistical_checks(found, stats, repro) -> list:
    if not stats.cases:
        return []
    out = []
    u, groups = np.concatenate(stats.u), Labels.concat(stats.groups)
    fit = sampling_fit(u, groups, alpha=FAMILY_ALPHA * SHARE["pit"], tvd_floor=LOSSLESS_TVD_FLOOR, bins=PIT_BINS)
    kinds = sorted({k for s in stats.scores for k in s})
    scores = score_tests({k: tuple(np.concatenate([s[k][i] for s in stats.scores if k in s]) for i in range(3))
                          for k in kinds},
                         Labels.concat([g for g, s in zip(stats.groups, stats.scores)]),
                         FAMILY_ALPHA * SHARE["score"]) if kinds else []
    failed = [(t.group, f"{t.n} tokens: chi-square {t.chi2:.1f} over {t.bins} PIT bins, p = {t.p_value:.3g}, "
                        f"binned TVD {t.tvd:.4f} > floor {LOSSLESS_TVD_FLOOR}") for t in fit.tests if t.failed]
    failed += [(t["group"], f"{t['n']} tokens: {t['score']} score off its exact mean by {t['z']:+.1f} standard "
                            f"deviations, Bernstein p = {t['p_value']:.3g} < {t['level']:.3g}, total variation at "
                            f"least {t['tv_bound']:.4f} > floor {SCORE_FLOOR}") for t in scores if t["failed"]]
    if failed:
        group, what = min(failed, key=lambda f: f[0] == "pooled")
        residual = any(t["failed"] and t["score"] == "residual" for t in scores) and not any(
            t["failed"] and t["score"] == "target" for t in scores) and not any(t.failed for t in fit.tests)
        found.fail("marginal", _case_of(stats, group), (None, None, f"{group}: {what}"),
                   {"group": group, "pit": fit.to_json(), "scores": scores}, repro,
                   cause="residual law" if residual else _group_cause(group))
    else:
        smallest = min([fit.min_p_value] + [t["p_value"] for t in scores])
        out.append(judged("marginal", True, f"{fit.tokens} tokens, {len(fit.tests)} PIT chi-square and "
                                                 f"{len(scores)} score tests; smallest p = {smallest:.3g}"))
    joint = joint_tests({k: np.concatenate(v) for k, v in stats.joint.items()},
                        FAMILY_ALPHA * SHARE["joint"], LOSSLESS_TVD_FLOOR)
    bad = [t for t in joint if t["failed"]]
    if bad:
        t = bad[0]
        found.fail("joint", _case_of(stats, t["group"]), (None, None, (
            f"{t['group']}: chi-square {t['chi2']:.1f} over {t['df'] + 1} cells ({t['n']} pairs), p = "
            f"{t['p_value']:.3g} < {t['level']:.3g}, binned TVD {t['tvd']:.4f}")), {"group": t["group"]}, repro,
            cause="joint law of neighbouring positions" if t["group"] == "pooled" else
            f"joint law of {t['group'].split(':')[-1]}")
    elif joint:
        out.append(judged("joint", True, f"{len(joint)} neighbouring-position chi-square tests; smallest "
                                              f"p = {min(t['p_value'] for t in joint):.3g}"))
    if stats.exhaustive:
        level = FAMILY_ALPHA * SHARE["exhaustive"] / len(stats.exhaustive)
        bad = [e for e in stats.exhaustive if e[4] < level and e[5] > EXHAUSTIVE_FLOOR]
        if bad:
            rec, n, chi2, df, p, tvd = bad[0]
            case = next(c for c in stats.cases if str(c.recipe) == rec)
            found.fail("exhaustive", case, (None, None, (
                f"{n} continued texts in {df + 1} cells against the exact sequence law: chi-square {chi2:.1f}, "
                f"p = {p:.3g} < {level:.3g}, TVD {tvd:.4f} > floor {EXHAUSTIVE_FLOOR}")), {"recipe": rec}, repro,
                cause="text law (exhaustive)")
        else:
            out.append(judged("exhaustive", True, f"{len(stats.exhaustive)} exact comparisons of the whole "
                                                       f"text's law; smallest p = "
                                                       f"{min(e[4] for e in stats.exhaustive):.3g}"))
    out += _tail_check(found, stats, repro)
    return out


def rows_alike(case, draws) -> bool:
    """Whether ``case`` feeds ``independence``: rows of identical inputs (at least two rows a
    problem), two calls and the replay, every call answered."""
    r = case.recipe
    return draws.ok and len(draws.outputs) >= 3 and r.n_problems < r.batch and r.batch >= 2 * r.n_problems


def _tail_check(found, stats, repro) -> list:
    """7. ``tail`` (the chain's test, equiv/ops/verify/tail.py): repeats among the draws that land
    on tokens of probability under ``1 / (64 N)`` of their bank law, against their exact mean: a
    residual drawn from a stalled cumulative sum (float16) squeezes the tail onto few tokens."""
    tests = repeat_tests(stats.tail, FAMILY_ALPHA * SHARE["tail"])
    bad = [t for t in tests if t["failed"]]
    if bad:
        t = min(bad, key=lambda t: t["group"] == "pooled")
        found.fail("tail", _case_of(stats, t["group"] + ":tail"), (None, None, (
            f"{t['group']}: {t['repeats']:.0f} tail tokens drawn twice or more among {t['tail_draws']} tail draws "
            f"where the law allows {t['allowed']:.3g} ({t['ratio']:.3g}x), Chernoff p = {t['p_value']:.3g} < "
            f"{t['level']:.3g}")),
            {"group": t["group"]}, repro, cause="tail concentration")
        return []
    if not tests:
        return [judged("tail", True, "no draw landed in a tail (tokens of probability under 1 / (64 draws))")]
    return [judged("tail", True, f"{len(tests)} tail-repeat tests; smallest p = "
                                 f"{min(t['p_value'] for t in tests):.3g}")]


def run_judge(candidate, cases, *, device: str, drafts: str, spec: str | None = None, seed: int = 0,
              timeout: float | None = None, repro: str | None = None, progress=None) -> TreeVerdict:
    """Judge ``candidate`` on ``cases`` (module docstring); ``drafts`` the declared construction."""
    spec = spec or getattr(candidate, "spec", None) or getattr(candidate, "__name__", "candidate")
    judging = _Judging(str(spec), device, seed, drafts)
    with ahead([job for case in cases for job in _made_ahead(case)]):
        drawn = draw_and_judge(cases, lambda case: run_draws(candidate, case.recipe, case.seeds, device=device,
                                                             timeout=timeout), judging.add, progress)
        return judging.verdict(cases, drawn, repro)


def _made_ahead(case) -> list:
    """What judging a statistical ``case`` reads of its recipe's laws and trees, as calls that make
    it (each cached: ``equiv.memo``, or the recipe's own caches), for ``beside.ahead``."""
    r = case.recipe
    if not case.statistical:
        return []
    jobs = [r.model, r.trees, lambda: _tables(r.family, r.seed, r.vocab)]
    return jobs + ([lambda: _residual_table(r), lambda: child_mass(r)] if r.drafts == "topk" else [])


def judge_draws(cases, drawn, *, spec, device, seed=0, repro=None, drafts="topk") -> TreeVerdict:
    """The verdict on the outputs ``drawn[i]`` of ``cases[i]`` (cases past the end of ``drawn``
    were not run)."""
    judging = _Judging(spec, device, seed, drafts)
    for case, draws in zip(cases, drawn):
        judging.add(case, draws)
    return judging.verdict(cases, drawn, repro)


class _Judging:
    """One verdict in the making: each case's outputs judged as they come (``add``, in the order
    of the cases), then the pooled tests (``verdict``)."""

    def __init__(self, spec, device, seed, drafts):
        self.found = Findings(spec, device, drafts)
        self.stats, self.eff = Stats(), []
        self.rng = np.random.default_rng([seed, _SALT])
        self.spec, self.device, self.seed, self.drafts = spec, device, seed, drafts

    def add(self, case, draws) -> None:
        _judge_case(case, draws, self.found, self.stats, self.eff, self.rng)

    def verdict(self, cases, drawn, repro) -> TreeVerdict:
        return _verdict(cases, drawn, self.found, self.stats, self.eff, spec=self.spec, device=self.device,
                        seed=self.seed, repro=repro, drafts=self.drafts)


def _verdict(cases, drawn, found, stats, eff, *, spec, device, seed, repro, drafts) -> TreeVerdict:
    checks = statistical_checks(found, stats, repro)
    checks += independence_check([(c, d) for c, d in zip(cases, drawn) if rows_alike(c, d)], found, judged)
    exact = {"contract": f"{found.ran['contract']} recipes: a pair of int64 [B, D+1] tensors, a real chain of "
                         f"children, the drafted tokens then one drawn token, inputs unchanged, same seed -> same "
                         f"output",
             "support": f"{found.ran['support']} outputs: no emitted token of target probability 0",
             "greedy": f"{found.ran['greedy']} outputs on one-hot targets: every emitted token the argmax after "
                       f"its prefix (greedy decoding's text or a prefix; {found.short} stopped before its end: "
                       f"efficiency, not a defect)"}
    statistical = any(c.statistical for c in cases)
    out = []
    for check in CHECKS:
        if check in found.first:
            out.append(found.first[check])
        elif check in exact and found.ran[check]:
            out.append(judged(check, True, exact[check]))
        elif check in exact and (check != "greedy" or any(c.recipe.family == "onehot_target" for c in cases)):
            out.append(judged(check, False, "nothing checked: no call returned a usable output"))
        elif check == "independence":
            out += [c for c in checks if c.name == check]
        elif statistical and check not in exact:
            got = [c for c in checks if c.name == check]
            if got:
                out += got
            elif check != "exhaustive" or any(c.recipe.vocab ** (c.recipe.trees().max_depth + 1)
                                               <= EXHAUSTIVE_MAX_CELLS for c in cases if c.statistical):
                out.append(judged(check, False, "nothing checked: no call returned a usable output"))
    calls = sum(len(d.outputs) for d in drawn)
    rows = sum(int(np.prod(d.outputs.shape[:2])) for d in drawn)
    return TreeVerdict(spec, device, seed, drafts, tuple(out), len(cases), calls, rows, tuple(eff))
