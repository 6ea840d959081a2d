"""Calibrate the diagnosis on the mutant zoo: every mutant must map to its expected kinds, nothing more.

Plan
----
- ``EXPECTED_KINDS``: for each mutant of ``equiv.ops.draft_topk.mutants`` (and the built-in paths), the kinds of
  defect the diagnosis must name -- one per independent bug, none for a correct path.
- ``mini_gate(spec, k)``: a cheap stand-in for the gate's failing checks, for the test suite: a
  fixed battery of inputs, one per feature the isolation varies (padding, batch size past 4 and
  past 16, poisoned rows, a ragged tile, rows at different heights, large magnitudes, bfloat16
  at V = 32000, a raw single entry, an unlisted V, B past 1024, a misaligned base, masks inside
  rows, confident rows, a second call of one shape), run through ``equiv.ops.draft_topk.compare``;
  each failing input becomes one failing check with its recipe, as the gate reports them; and the
  call history of the property ``call_history`` at a small shape, with its ``parts`` as data.
- ``calibrate(names, gate=True)`` runs, per candidate, the real gate (``gate=True``: the quick
  budget on the CPU, in this process, so a stateful candidate keeps its state as in ``equiv
  gate``) or the mini gate, then the diagnosis, and returns one ``Row`` each: kinds expected and
  found, trigger, the gate's and the diagnosis's wall time.
- ``python scripts/diagnosis_calibration.py [NAME ...] [--mini] [--device=cuda]`` prints the table of
  docs/diagnosis.md (mutant -> kinds found -> trigger) and exits 1 on any mismatch.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from equiv.checks import Check
from equiv.ops.draft_topk import history
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.diagnose import diagnose
from equiv.ops.draft_topk.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run import runner_for
from equiv.run.timeouts import DEFAULT_TIMEOUT_S

EXPECTED_KINDS = {
    "constant_probability": ("placeholder_probability",),
    "index_off_by_one": ("wrong_index",),
    "second_best_index": ("wrong_index",),
    "padding_lane_wins": ("out_of_vocabulary_index",),
    "no_max_subtraction": ("magnitude",),
    "nan_masked": ("poison_made_finite",),
    "rows_past_four_unwritten": ("batch_size",),
    "wrong_axis_softmax": ("neighbour_rows",),
    "bf16_probabilities": ("value_error",),
    "int32_indices": ("output_format",),
    "squeezed_output": ("output_format",),
    "tail_ignored": ("shape_threshold",),
    "contiguous_stride_assumed": ("non_contiguous",),
    "cached_by_shape": ("stale_output",),
    "global_max_subtraction": ("neighbour_rows",),
    "input_dtype_accumulator": ("dtype_specific",),
    "topk_ascending": ("rank_order",),
    "duplicate_indices": ("rank_order",),
    "input_modified_in_place": ("input_write",),
    "guarded_division": ("poison_made_finite",),
    "argmax_of_downcast": ("wrong_index",),
    "online_rescale_missing": ("shape_threshold",),
    "split_vocab_argmax": ("out_of_vocabulary_index", "non_contiguous", "placeholder_probability"),
    "tail_ignored_nan_masked": ("shape_threshold", "poison_made_finite"),
    "grid_cap_half_sum": ("batch_size", "dtype_specific"),
    # one per dimension of the input space (equiv.ops.draft_topk.space)
    "generic_vocab_broken": ("vocab_specific",),
    "rows_past_1024_unwritten": ("batch_size",),
    "aligned_base_assumed": ("misaligned_base",),
    "trims_at_first_neginf": ("mask_position",),
    "confident_rounded_to_one": ("confident_rounding",),
    "recycled_output_ring": ("output_reused",),
    "keyed_by_data_ptr": ("stale_output",),
    "changes_after_48_calls": ("after_n_calls",),
    "tensor_subclass_output": ("output_format",),
    "hardcoded_one": ("placeholder_probability",),
    "softmax_topk": (),
    "identity_top1": (),
    "ties_to_last_index": (),
    "float64_compute": (),
}

# One input per feature the isolation varies (module docstring); a raw entry is (values, dtype).
BATTERY = (
    "gaussian:seed=0,batch=4,vocab=1000,dtype=float32",
    "gaussian:seed=0,batch=3,vocab=33,dtype=float32,pad=1",
    "poison_mix:seed=0,batch=6,vocab=3,dtype=float32",
    "gaussian:seed=0,batch=7,vocab=3,dtype=float32",
    "gaussian:seed=0,batch=17,vocab=3,dtype=float32",
    "gaussian:seed=0,batch=1,vocab=1025,dtype=float32",
    "row_offsets:seed=0,batch=4,vocab=33,dtype=float32",
    "huge:seed=0,batch=2,vocab=33,dtype=float32",
    "gaussian:seed=1,batch=1,vocab=32000,dtype=bfloat16",
    "ties_max:seed=0,batch=2,vocab=8,dtype=float32,ties=3",
    "gaussian:seed=240,batch=1,vocab=1000,dtype=float32",
    "gaussian:seed=0,batch=4,vocab=3072,dtype=float32",
    "gaussian:seed=0,batch=1025,vocab=2,dtype=float32",
    "gaussian:seed=0,batch=3,vocab=33,dtype=float32,offset=1",
    "masked:seed=0,batch=7,vocab=33,dtype=float32",
    "confident:seed=0,batch=8,vocab=1000,dtype=float32,band=1-p 1e-3..1e-5",
)
HISTORY_SHAPE = (2, 1009)        # the mini gate's call history (the property's, at a small shape)


@dataclass(frozen=True)
class Row:
    name: str
    expected: tuple
    found: tuple
    triggers: tuple
    failing_checks: int
    gate_s: float
    diagnosis_s: float
    calls: int
    unexplained: tuple = field(default=())

    @property
    def ok(self) -> bool:
        return sorted(self.found) == sorted(self.expected)

    def line(self) -> str:
        found = ", ".join(self.found) or "none"
        trig = "; ".join(f"`{t}`" for t in self.triggers) or "-"
        share = f"{100 * self.diagnosis_s / self.gate_s:.0f}%" if self.gate_s else "-"
        return (f"| `{self.name}` | {found} | {'yes' if self.ok else '**NO**'} | {trig} | "
                f"{self.failing_checks} | {self.gate_s:.1f} | {self.diagnosis_s:.2f} ({share}) |")


def _spec(name: str) -> str:
    return f"equiv.ops.draft_topk.mutants:{name}" if name in MUTANTS or name in LEGAL_VARIANTS else name


def _k(name: str) -> int:
    return MUTANTS[name].k if name in MUTANTS else 1


def mini_gate(spec: str, k: int = 1, device: str = "cpu") -> list:
    """The battery through ``equiv.ops.draft_topk.compare``; a failing input is a failing check (docstring)."""
    checks = []
    for i, text in enumerate(BATTERY):
        recipe = Recipe.parse(text)
        if recipe.vocab < k:
            continue
        res = compare(spec, recipe.build(device), k, recipe=recipe, timeout=DEFAULT_TIMEOUT_S)
        checks.append(Check("mini", f"mini:{i}:{recipe.family}", res.passed,
                            "; ".join(f"{c.name}: {c.detail}" for c in res.failed_checks),
                            subject=f"{i}:{recipe.family}", counterexample=f"recipe {recipe}", repro=res.repro,
                            recipe=str(recipe), parts=tuple(c.name for c in res.failed_checks),
                            cause=res.contract_cause, outcome=res.call_kind))
    first = Recipe.parse("gaussian:seed=0,batch=1,vocab=2,dtype=float32")
    a = compare(spec, first.build(device), k, recipe=first, timeout=DEFAULT_TIMEOUT_S)
    b = compare(spec, first.with_(seed=1).build(device), k, recipe=first.with_(seed=1),
                timeout=DEFAULT_TIMEOUT_S)
    stale = a.passed and not b.passed
    checks.append(Check("properties", "property:repeated_calls", not stale,
                        "the answer for x2 is x1's" if stale else "", subject="repeated_calls",
                        counterexample=f"repeated_calls(recipe=Recipe.parse('{first}'), roll=1)", recipe=str(first)))
    checks.append(_history_check(spec, k, device))
    return checks


def _history_check(spec: str, k: int, device: str):
    """The property ``call_history`` at ``HISTORY_SHAPE``, its check as the gate records it."""
    plan = history.plan_for("quick", 0, k=k, max_batch=HISTORY_SHAPE[0], max_vocab=HISTORY_SHAPE[1])
    out = runner_for(spec, device, DEFAULT_TIMEOUT_S).probe("equiv.ops.draft_topk.history:probe", plan.payload())
    if not out.ok:
        return Check("properties", "property:call_history", False, f"the subject {out.problem}",
                     subject="call_history", outcome=out.kind)
    found = history.problems(plan, out.value, device)
    return Check("properties", "property:call_history", not found, "; ".join(p.line for p in found) or "held",
                 subject="call_history", recipe=found[0].recipe if found else None,
                 parts=tuple(dict.fromkeys(part for p in found for part in p.parts)))


def calibrate(names, *, gate=None, device: str = "cpu") -> list[Row]:
    """Per candidate: its checks from ``gate(spec, k, device)`` (the real gate, which a script
    above the ops passes in; default the mini gate), then the diagnosis and its row."""
    rows = []
    for name in names:
        spec, k = _spec(name), _k(name)
        t0 = time.perf_counter()
        checks = gate(spec, k, device) if callable(gate) else mini_gate(spec, k, device)
        t1 = time.perf_counter()
        d = diagnose(spec, checks, k=k, device=device, timeout=DEFAULT_TIMEOUT_S)
        t2 = time.perf_counter()
        rows.append(Row(name, EXPECTED_KINDS.get(name, ("?",)), tuple(x.kind for x in d.defects),
                        tuple(x.trigger for x in d.defects), sum(not c.passed for c in checks),
                        t1 - t0, t2 - t1, d.calls, d.unexplained))
    return rows
