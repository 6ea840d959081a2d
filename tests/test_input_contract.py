"""The input contract, audited: every input a gate sends is what docs/trust.md promises.

Test plan. For each operation, the recipes its gates draw are built and checked against the
documented input contract ("The harness's inputs obey the contract", docs/trust.md):

- ``verify_tree``: the contract plan, the statistical plan and the independence cases of the
  quick budget for every construction (``any``), seeds ``SEEDS``; every family of the op's own
  ``FAMILIES`` at a small and a large V; ``EXAMPLES`` recipes of its Hypothesis strategy. Checked:
  ``parents [B, N]`` (node 0 the root, ``parents[i] < i``, -2 only for absent nodes, which have
  no present child), tokens in ``[0, V)``, every target and draft row a
  distribution, each drafted child of positive draft probability under its parent's law.
- ``verify``: the contract and statistical plans of the quick budget under both laws, the GPU
  power case and the GPU plan's extra parts, seeds ``SEEDS``; every family x draft kind; the
  Hypothesis strategy. Checked: shapes and dtypes (through the padded / offset layouts), the
  built rows equal to the problems' rows, draft tokens in ``[0, V)`` (every row's, sampled too)
  with positive draft probability, every target and draft row a distribution.
- ``draft_topk``: the tolerance plan's shapes of every family x dtype, seeds ``SEEDS``; the
  property suite's coverage recipes; the Hypothesis strategy. Checked: ``[B, V]`` of the
  recipe's dtype, every row healthy (no NaN, no +inf, one finite entry at least; -inf entries
  are in the contract: probability 0).
- the MTP harness's callers (``Op.features("caller")`` of both verifiers, and the draft path it
  calls): what a user's verifier is handed there.

A family that sends something outside the contract on purpose is named in its op's
``recipes.OUTSIDE_CONTRACT`` (with why); only there may rows break it, and only as that family
declares (the draft op's ``poison_mix``: at most ``min(specials or 4, B)`` poisoned rows).

*The bound.* Every probability row the recipes send is a law normalised in float64 and rounded
once to float32 (bfloat16-valued rows are adjusted to sum to 1 first). Rounding ``x_i`` to
float32 moves it by at most ``2**-24 x_i`` (unit roundoff; subnormals by at most ``2**-150``),
so the float32 row's sum is within ``2**-24 * sum(x)`` of ``sum(x)``; the float64 normalisation
and this test's float64 sum add at most ``V * 2**-53`` each. Bound: ``|sum - 1| <= 2**-24 +
V * 2**-50`` (6.0e-8 + 2.3e-10 at V = 262144). The MTP harness hands over an engine's float32
softmax, whose sum is only within the contract's general bound ``(V + 2) * 2**-24`` (a float32
sum of V terms, then one rounding per entry). A row cut to its top tokens and not renormalised
(mass 0.45-0.90) fails either bound by far.

Cost: rows of one recipe repeat a few laws (the verifier's problems, the tree model's ``BANK``
laws), which are audited whole; the built tensors of a large batch are audited on a capped batch
(``ELEMENTS`` floats at most), keeping V, so the largest vocabularies (262144) are built.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from equiv.ops.draft_topk import recipes as topk_recipes
from equiv.ops.draft_topk.coverage import tolerance_plan
from equiv.ops.draft_topk.strategies import coverage_recipes, recipes as topk_strategy
from equiv.ops.verify import plans as verify_plans
from equiv.ops.verify import recipes as verify_recipes_module
from equiv.ops.verify_tree import independence, plans as tree_plans
from equiv.ops.verify_tree import recipes as tree_recipes_module
from equiv.properties.verify_strategies import verify_recipes
from equiv.properties.verify_tree_strategies import tree_recipes

SEEDS = (0, 1)
EXAMPLES = 25
ELEMENTS = 2 ** 21                   # floats of one capped build
ROWS = 256                           # rows of one capped build
U32 = 2.0 ** -24                     # float32's unit roundoff


def row_bound(vocab: int) -> float:
    """The recipes' bound on ``|sum - 1|`` of a float32 row of ``vocab`` entries (module docstring)."""
    return U32 + vocab * 2.0 ** -50


def softmax_bound(vocab: int) -> float:
    """The contract's general bound: a float32 softmax's row (module docstring)."""
    return (vocab + 2) * U32


class Findings:
    """What broke the contract, one line each, with the mass figures; the first ``SHOWN`` print."""

    SHOWN = 12

    def __init__(self):
        self.lines = []

    def add(self, where, message):
        self.lines.append(f"{where}: {message}")

    def check(self):
        assert not self.lines, (f"{len(self.lines)} inputs break the input contract:\n  "
                                + "\n  ".join(self.lines[:self.SHOWN]))


def distribution_problem(rows, name: str, bound=row_bound) -> str | None:
    """``None`` when every row of ``rows [..., V]`` (float32) is a distribution within ``bound(V)``,
    else one line: how many rows fail, the range of their masses and the worst."""
    rows = np.asarray(rows)
    if rows.dtype != np.float32:
        return f"{name} of dtype {rows.dtype}, not float32"
    flat = rows.reshape(-1, rows.shape[-1]).astype(np.float64)
    if not np.isfinite(flat).all():
        return f"{name}: {int((~np.isfinite(flat)).any(1).sum())} rows hold a non-finite value"
    if (flat < 0).any():
        return f"{name}: {int((flat < 0).any(1).sum())} rows hold a negative value"
    mass = flat.sum(1)
    off = np.abs(mass - 1.0)
    bad = off > bound(rows.shape[-1])
    if bad.any():
        return (f"{name}: {int(bad.sum())} of {mass.size} rows sum to {mass[bad].min():.6g}..{mass[bad].max():.6g} "
                f"(worst |sum - 1| = {off.max():.3g}, bound {bound(rows.shape[-1]):.3g} at V = {rows.shape[-1]})")
    return None


def tree_problem(parents, tokens, vocab: int) -> str | None:
    """The tree contract of ``parents`` / ``tokens`` ``[B, N]`` int64 (module docstring), or None."""
    parents, tokens = np.asarray(parents), np.asarray(tokens)
    B, N = parents.shape
    if parents.dtype != np.int64 or tokens.dtype != np.int64 or tokens.shape != (B, N):
        return f"parents {parents.dtype} {parents.shape}, tokens {tokens.dtype} {tokens.shape}: not int64 [B, N]"
    if N and (parents[:, 0] != -1).any():
        return f"node 0 is not the root (parents[:, 0] = {sorted(set(parents[:, 0].tolist()))[:4]})"
    i = np.arange(N)[None, :]
    present = parents != -2
    if (present[:, 1:] & ~((parents[:, 1:] >= 0) & (parents[:, 1:] < i[:, 1:]))).any():
        return "a present node whose parent is not an earlier node (parents[i] < i broken)"
    if (present[:, 1:] & ~np.take_along_axis(present, np.maximum(parents[:, 1:], 0), 1)).any():
        return "a present node whose parent is absent"
    if ((tokens < 0) | (tokens >= vocab)).any():
        return f"a token outside [0, {vocab}): {tokens[(tokens < 0) | (tokens >= vocab)][:4].tolist()}"
    return None


def capped(recipe, per_row: int):
    """``recipe`` with a batch of at most ``ROWS`` and ``ELEMENTS / per_row`` rows (at least one)."""
    return recipe.with_(batch=max(1, min(recipe.batch, ROWS, ELEMENTS // max(per_row, 1))))


def declared(module) -> dict:
    """The op's own declaration of the families outside the contract (``family -> why``)."""
    out = module.OUTSIDE_CONTRACT
    assert set(out) <= set(module.FAMILIES) and all(isinstance(w, str) and w for w in out.values())
    return out


# ---------------------------------------------------------------------------------- verify_tree

def distinct(recipes) -> list:
    """One recipe of each class: recipes that differ in their seed or their part alone (a slot's
    calls of fresh drafts) are one class; the first stands for it."""
    def key(r):
        return r.with_(seed=0, part=min(r.part, 1)) if hasattr(r, "part") else r.with_(seed=0)
    return list({key(r): r for r in reversed(recipes)}.values())[::-1]


def tree_cases(seed: int) -> list:
    out = [c.recipe for c in tree_plans.contract_cases("any", seed)]
    out += [c.recipe for c in tree_plans.statistical_cases("quick", "any", seed)]
    out += [c.recipe for c in tree_plans.statistical_cases("quick", "any", seed, targets="onehot")]
    out += [c.recipe for c in independence.independence_cases("any", seed)]
    return distinct(out)


def tree_families() -> list:
    """Every family of the op's list, each construction at small V, ``topk`` at the largest."""
    base = tree_recipes_module.TreeRecipe(batch=4, nodes=9, depth=3, fanout=3)
    return [base.with_(family=f, vocab=v, drafts=c) for f in tree_recipes_module.FAMILIES
            for v, cs in ((3, tree_recipes_module.CONSTRUCTIONS), (1025, tree_recipes_module.CONSTRUCTIONS),
                          (262144, ("topk",))) for c in cs]


_BANKS = set()


def audit_tree(r, found: Findings) -> None:
    assert not declared(tree_recipes_module)      # none: a new one must say how the audit reads it
    m = r.model()
    key = (r.family, r.seed, r.vocab)
    if key not in _BANKS:                          # every row any batch of this model sends
        _BANKS.add(key)
        for name, rows in (("target_probs", m.target32), ("draft_probs", m.draft32)):
            got = distribution_problem(rows, f"{name} (bank laws)")
            if got:
                found.add(f"verify_tree {r}", got)
    small = capped(r, r.nodes * r.vocab * (2 if r.probs else 1))
    try:
        parents, tokens, q, p = small.build("cpu")
    except Exception as exc:                       # a recipe the gate may draw that cannot be built
        found.add(f"verify_tree {small}", f"cannot be built: {type(exc).__name__}: {exc}")
        return
    B, N, V = small.batch, small.nodes, small.vocab
    if tuple(p.shape) != (B, N, V) or (q is not None and tuple(q.shape) != (B, N, V)) or (q is None) != (not r.probs):
        found.add(f"verify_tree {small}", f"shapes {list(p.shape)} / {None if q is None else list(q.shape)}, "
                                          f"not [{B}, {N}, {V}]")
        return
    for name, rows in (("target_probs", p), ("draft_probs", q)):
        got = None if rows is None else distribution_problem(rows.numpy(), name)
        if got:
            found.add(f"verify_tree {small}", got)
    got = tree_problem(parents.numpy(), tokens.numpy(), V)
    if got:
        found.add(f"verify_tree {small}", got)
    elif q is not None:
        par, tok = parents.numpy(), tokens.numpy()
        b, i = np.nonzero(par[:, 1:] >= 0)
        qx = q.numpy()[b, par[b, i + 1], tok[b, i + 1]]
        if (qx <= 0).any():
            found.add(f"verify_tree {small}", f"{int((qx <= 0).sum())} drafted children of draft probability 0 "
                                              f"under their parent's law")


# --------------------------------------------------------------------------------------- verify

def verify_cases(seed: int) -> list:
    out = []
    for law in ("lossless", "token"):
        out += [c.recipe for c in verify_plans.plan("quick", seed, law=law)]
        out += [c.recipe for c in verify_plans.statistical_cases("quick", seed, law=law, device="cuda")]
    out += [verify_recipes_module.VerifyRecipe(family=f, draft=d, seed=seed, batch=6, n=3, vocab=v, problems=3)
            for f in verify_recipes_module.FAMILIES for d in verify_recipes_module.DRAFTS for v in (2, 1025, 262144)]
    return out


def audit_verify(r, found: Findings) -> None:
    assert not declared(verify_recipes_module)
    pr = r.make_problems()
    for name, rows in (("target_probs", pr.target), ("draft_probs", pr.draft)):
        got = None if rows is None else distribution_problem(rows, f"{name} (problems)")
        if got:
            found.add(f"verify {r}", got)
    tokens = r.row_tokens()
    if tokens.shape != (r.batch, r.n) or tokens.dtype != np.int64 or ((tokens < 0) | (tokens >= r.vocab)).any():
        found.add(f"verify {r}", f"draft tokens {tokens.dtype} {tokens.shape}, range "
                                 f"{tokens.min()}..{tokens.max()}: not int64 [B, n] in [0, V)")
        return
    if pr.draft is not None:
        qx = pr.draft[r.rows()[:, None], np.arange(r.n)[None, :], tokens]
        if (qx <= 0).any():
            found.add(f"verify {r}", f"{int((qx <= 0).sum())} draft tokens of draft probability 0")
    small = capped(r, (2 * r.n + 1) * r.vocab)
    d, q, p = small.build("cpu")
    B, n, V = small.batch, small.n, small.vocab
    rows = small.rows()
    if (d.dtype, tuple(d.shape), p.dtype, tuple(p.shape)) != (torch.int64, (B, n), torch.float32, (B, n + 1, V)) \
            or (q is None) != (pr.draft is None) or (q is not None and (q.dtype, tuple(q.shape)) != (torch.float32, (B, n, V))):
        found.add(f"verify {small}", f"built d {d.dtype} {list(d.shape)}, p {p.dtype} {list(p.shape)}: not the contract's")
        return
    same = np.array_equal(p.numpy(), pr.target[rows]) and (q is None or np.array_equal(q.numpy(), pr.draft[rows]))
    if not same or not np.array_equal(d.numpy(), small.row_tokens()):
        found.add(f"verify {small}", "the built tensors are not the problems' rows (layout)")


# ----------------------------------------------------------------------------------- draft_topk

def topk_cases(seed: int) -> list:
    plan = tolerance_plan(topk_recipes.FAMILIES, topk_recipes.DTYPES, seed=seed)
    out = []
    for family, dtype in ((f, d) for d in topk_recipes.DTYPES for f in topk_recipes.FAMILIES):
        for shape in plan.shapes_for(family, dtype):
            r = topk_recipes.Recipe(family=family, seed=seed, batch=shape.batch, vocab=shape.vocab, dtype=dtype,
                                    pad=shape.pad, offset=shape.offset)
            out.append(capped(r, 16 * r.vocab))      # 16x: the family's float64 draws and edits
    out += [r.with_(seed=seed) for r in coverage_recipes(topk_recipes.DTYPES)]
    return out


def audit_topk(r, found: Findings) -> None:
    outside = declared(topk_recipes)
    x = r.build("cpu")
    if tuple(x.shape) != (r.batch, r.vocab) or str(x.dtype) != f"torch.{r.dtype}":
        found.add(f"draft_topk {r}", f"logits {x.dtype} {list(x.shape)}, not {r.dtype} [{r.batch}, {r.vocab}]")
        return
    v = x.float()
    healthy = ~torch.isnan(v).any(1) & ~(v == math.inf).any(1) & torch.isfinite(v).any(1)
    sick = int((~healthy).sum())
    if r.family not in outside and sick:
        found.add(f"draft_topk {r}", f"{sick} of {r.batch} rows poisoned (NaN, +inf or all -inf) in a family "
                                     f"the op does not declare outside the contract")
    if r.family in outside and sick > min(r.specials or 4, r.batch):
        found.add(f"draft_topk {r}", f"{sick} poisoned rows, more than the {min(r.specials or 4, r.batch)} declared")


# ---------------------------------------------------------------------------------- every op

AUDITS = {"verify_tree": audit_tree, "verify": audit_verify, "draft_topk": audit_topk}
PLANNED = {"verify_tree": lambda: distinct([r for seed in SEEDS for r in tree_cases(seed)]) + tree_families(),
           "verify": lambda: distinct([r for seed in SEEDS for r in verify_cases(seed)]),
           "draft_topk": lambda: [r for seed in SEEDS for r in topk_cases(seed)]}
DRAWN = {"verify_tree": tree_recipes(max_elements=ELEMENTS), "verify": verify_recipes(max_elements=ELEMENTS),
         "draft_topk": topk_strategy(max_elements=ELEMENTS // 16)}


def audited(recipes, audit) -> None:
    found = Findings()
    for r in recipes:
        audit(r, found)
    found.check()


@pytest.mark.parametrize("op", AUDITS)
def test_every_recipe_the_gate_draws_keeps_the_contract(op):
    audited(PLANNED[op](), AUDITS[op])


@pytest.mark.parametrize("op", AUDITS)
@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_drawn_recipe_keeps_the_contract(op, data):
    audited([data.draw(DRAWN[op], label="recipe")], AUDITS[op])


def test_the_bound_holds_for_one_rounding_and_sees_a_cut_or_a_bfloat16_row():
    """The audit can fail: a law rounded once to float32 passes at V = 262144, the same law cut to
    its top tokens (the ``truncated`` family before issue 42) or rounded to bfloat16 does not."""
    rng = np.random.default_rng(0)
    law = rng.dirichlet(np.full(262144, 0.3), size=4)
    assert distribution_problem(law.astype(np.float32), "rounded once") is None
    cut = np.where(law >= np.sort(law, 1)[:, -10:-9], law, 0.0).astype(np.float32)
    assert "rows sum to" in distribution_problem(cut, "cut")
    bf16 = torch.from_numpy(law.astype(np.float32)).bfloat16().float().numpy()
    assert "rows sum to" in distribution_problem(bf16, "bfloat16")
    assert "negative" in distribution_problem(np.array([[1.5, -0.5]], dtype=np.float32), "negative")


def test_the_draft_ops_poisoned_family_is_declared_and_poisons():
    """The one family outside the draft op's contract is declared, and does what it declares."""
    assert set(declared(topk_recipes)) == {"poison_mix"}
    x = topk_recipes.Recipe(family="poison_mix", batch=8, vocab=33).build("cpu")
    assert int((torch.isnan(x).any(1) | (x == math.inf).any(1) | ~torch.isfinite(x).any(1)).sum()) == 4


# ---------------------------------------------------------------------------------- MTP callers

def test_the_mtp_harness_hands_verifiers_inputs_inside_the_contract():
    """What ``equiv mtp --verifier / --tree-verifier`` hands a user's verifier: spied, then checked."""
    from equiv.mtp.decoding import decode
    from equiv.mtp.models import SyntheticLM
    from equiv.ops.draft_topk.paths import get_path
    from equiv.ops.verify.paths import VERIFIERS as CHAIN
    from equiv.ops.verify_tree.paths import VERIFIERS as TREE

    seen = {"chain": [], "tree": [], "logits": []}
    base = get_path("softmax_topk")

    def draft_path(logits, k):
        seen["logits"].append(logits.detach().float().cpu())
        return base(logits, k)

    def chain(d, q, p, g):
        seen["chain"].append((d.cpu().numpy(), None if q is None else q.cpu().numpy(), p.cpu().numpy()))
        return CHAIN["torch_sampler"](d, q, p, g)

    def tree(parents, tokens, q, p, g):
        seen["tree"].append((parents.cpu().numpy(), tokens.cpu().numpy(), p.cpu().numpy()))
        return TREE["target_only"](parents, tokens, q, p, g)

    model = SyntheticLM(4099, seed=0, device="cpu")
    kw = dict(steps=3, rounds=2, sequences=4, seed=0, tree_topk=2, tree_tokens=6)
    decode(model, draft_path, "target_only", name="spy", verify=lambda d, q, p, s: chain(
        d, q, p, torch.Generator().manual_seed(int(s))), **kw)
    decode(model, draft_path, "tree", name="spy", tree_verify=lambda a, b, q, p, s: tree(
        a, b, q, p, torch.Generator().manual_seed(int(s))), **kw)
    assert seen["chain"] and seen["tree"] and seen["logits"]
    found = Findings()
    for d, q, p in seen["chain"]:
        for got in (distribution_problem(p, "target_probs", softmax_bound),
                    None if ((d >= 0) & (d < p.shape[-1])).all() else "a draft token outside [0, V)"):
            if got:
                found.add("mtp chain verifier", got)
    for parents, tokens, p in seen["tree"]:
        for got in (distribution_problem(p, "target_probs", softmax_bound), tree_problem(parents, tokens, p.shape[-1])):
            if got:
                found.add("mtp tree verifier", got)
    for x in seen["logits"]:
        if not (torch.isfinite(x).all(1)).all():
            found.add("mtp draft path", "logits with a non-finite entry")
    found.check()
