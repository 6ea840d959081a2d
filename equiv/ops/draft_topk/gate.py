"""The draft top-k's gate plan (``equiv gate``, the default op): one verdict on a candidate.

Plan
----
1. Resolve the candidate and start its worker (``equiv.run``; a user's candidate's, and the
   MTP stage's own, as soon as the suite has started, before this process imports torch:
   ``equiv.run.supervisor.prestart``): a spec that does not load is a usage error (exit 2)
   before any stage runs; an import that exits, is killed or hangs is a failed ``load`` check,
   and no stage runs.
2. ``properties``: run the property suite of ``equiv.properties`` against the candidate through
   pytest in a subprocess (so the gate and ``pytest --equiv-candidate`` are one source of truth),
   and read the per-test JSON the plugin writes. Each property is one check; pytest's exit code
   must agree with the records (a crashed or interrupted run is a failure, never a pass). The
   subprocess is the critical path, so it starts first, once the arguments are checked and
   before this process imports torch, and runs while this process judges the next two stages;
   it is read last, and killed if this process stops first (a device or a spec that fails here
   included). Each stage's ``seconds`` is its own wall time, so the
   properties' overlap the others'.
3. ``tolerance``: ``equiv.ops.draft_topk.compare`` on every input family x dtype x k asked at V = 129280, the
   worker building each recipe on the device; at the end of the stage the inputs are checked once
   more (a late write from a thread or a stream). On a host of more than three cores this
   process's own share of each recipe (its values, its float64 reference) is done ahead in a
   pool of processes (``ahead.py``): the same bits, the host's cores instead of one.
4. ``mtp``: the speculative-decoding harness as a probe in the candidate's worker, candidate
   against ``softmax_topk`` on the same seeds: greedy, target-only and confidence chains at
   k = 1, tree drafting at each k > 1 asked. Nothing calls the candidate at a k not asked.
   With the tolerance stage it runs beside it, from the start, in a thread of this process and
   a worker of its own (a built-in's too: ``runner_for(..., lane="mtp")``), so that the two
   stages take the longer of their times, not the sum, and each stage's calls reach the
   candidate in their own process and order (a candidate whose state changes with its calls is
   judged the same way every run).
Each stage is reported as run (with what ran), not applicable (why) or not run (why); a verdict
in which no check ran fails with "nothing was checked". Only this process says PASS, after every
stage it owns finished. Budgets: ``quick`` (a pull request: seconds) and ``full`` (nightly).
The result is a frozen ``GateResult`` with ``to_json()``, ``to_junit()`` and ``summary()``.
"""
from __future__ import annotations

import time

from equiv.memory import admit
from equiv.options import DEFAULT_VOCAB
from equiv.run import forget_prestarted, prestart
from equiv.run.suite import killed_on_error, stage_limit, start_properties
from equiv.validation import check_int
from equiv.verdict import GateResult

BUDGETS = {
    # families x dtypes of the tolerance stage; rows per recipe; seeds per recipe; pytest budget
    # shape_elements: the coverage plan's largest B x V (2**25: [1024, 32000]; 2**28: [1024, 151936])
    "quick": {"dtypes": ("float32", "bfloat16"), "batch": 4, "seeds": 1, "mtp_timeout": 300,
              "properties_timeout": 300, "shape_elements": 2 ** 25},
    "full": {"dtypes": ("float32", "bfloat16", "float16"), "batch": 16, "seeds": 3, "mtp_timeout": 3600,
             "properties_timeout": 3600, "shape_elements": 2 ** 28},
}
STAGES = ("properties", "tolerance", "mtp")
# the property suite in two processes side by side on a host of four cores or more
# (``equiv.run.suite.start_properties``): the call-history and equivalence properties, the rest
SUITE_SHARDS = ("test_call_history or test_equivalence", "not (test_call_history or test_equivalence)")
BESIDE = ("mtp",)               # stages run beside the tolerance stage (``staged``), each in a worker of its own


def beside(stages) -> tuple:
    """The stages of ``stages`` that run beside the tolerance stage (none without it)."""
    return tuple(b for b in BESIDE if b in stages) if "tolerance" in stages else ()


def run_draft_gate(options, *, stages=STAGES, vocab: int = DEFAULT_VOCAB, progress=None,
                   feature_stages=None) -> GateResult:
    """The draft top-k gate under ``options`` (``equiv.options.RunOptions``, already checked).
    ``feature_stages`` maps a stage a feature above the ops runs (``mtp``: the MTP harness,
    ``equiv.mtp.stage``) to its function; ``equiv.gate`` passes them in. The suite starts here;
    ``gate_stages.judge`` runs the rest."""
    plan = BUDGETS[options.budget]
    vocab = check_int("vocab", vocab, min_value=max(options.ks))
    t0 = time.perf_counter()
    stage_timeout = stage_limit(plan["properties_timeout"], options.timeout)
    # the suite first (module docstring, step 2): the device is resolved after, the same way there
    suite = None
    if "properties" in stages:
        suite = start_properties(options, stage_timeout=stage_timeout, shards=SUITE_SHARDS)
    aside = beside(stages)
    with killed_on_error(suite):
        # the candidate's workers (a user's; the MTP stage's own) load it while this process imports
        # torch (equiv.run.supervisor.prestart); the runners take them once the device is resolved
        for lane in ("", *aside):
            prestart(options.spec, timeout=options.timeout, lane=lane)
        admit()                                  # the device's free memory (equiv.gate), after the suite started
        # the stages' modules import torch at their top: 2.9 s (-X importtime, busy 2-core CPU;
        # ~1.2 s idle) that the suite, started above, does not wait for
        from equiv.ops.draft_topk.gate_stages import judge
    try:
        return judge(options, suite, plan=plan, stages=stages, all_stages=STAGES, vocab=vocab,
                     stage_timeout=stage_timeout, t0=t0, progress=progress, feature_stages=feature_stages,
                     beside=aside)
    finally:
        forget_prestarted()                      # a worker no stage took (a failed load, a stage not run)
