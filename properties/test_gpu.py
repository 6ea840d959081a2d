"""Properties only a GPU can check: CUDA-graph replay and batch invariance.

Test plan
---------
The work is done by the pure probes of ``equiv/ops/draft_topk/gpu_probes.py`` (whose docstring has the
procedure); these tests run them on the subject, once per dtype of the run, at the run's k.
- ``graph_replay``: captured in a CUDA graph at B_max = 64 and replayed with fresh rows and
  with NaN / sentinel / stale padding rows, on the current and on a non-default stream, with an
  eager call between replay and read: the real rows must match eager answers. A subject that
  cannot be captured passes, and the reason is recorded (``equiv_message``): the engine's
  authors need the fact; it is no defect of the numbers.
- ``batch_invariance``: rows alone and inside batches of 3, 64 and 1024, in place and shuffled:
  within tolerance always; bitwise equality is recorded and required only with
  ``--equiv-require batch-invariant``.
Both carry the ``equiv_gpu`` marker (skipped with the reason where no CUDA device is visible) and skip
when the run judges on the CPU (``--equiv-device cpu``). A failure prints the probe's REPRO.
"""
from __future__ import annotations

import pytest


def _run(subject, suite, probe: str, **payload):
    if suite.device != "cuda":
        pytest.skip(f"{probe} needs a CUDA device; this run judges on {suite.device} (--equiv-device)")
    notes = []
    for dtype in suite.dtypes:
        # in the subject's worker (equiv.run): a capture that crashes or hangs ends the worker, not us
        out = suite.runner.probe(f"equiv.ops.draft_topk.gpu_probes:{probe}",
                                 {"k": suite.k, "dtype": dtype, "name": subject.name, **payload},
                                 timeout=None if suite.opts.timeout is None else 10 * suite.opts.timeout)
        if out.abnormal:
            suite.abnormal(f"the subject {out.problem} in the {probe} probe ({dtype})")
        if not out.ok:
            suite.fail(f"{dtype}: the {probe} probe: the subject {out.problem}")
        res = out.value
        if res.status == "skipped":
            pytest.skip(res.reason)
        if not res.passed:
            suite.fail(f"{dtype}: " + "\n".join(res.summary().splitlines()[:4]), repro=res.repro)
        notes.append(f"{dtype}: {res.status}" + (f" ({res.reason})" if res.reason else "")
                     + "".join(f"; {key} {value}" for key, value in res.facts.items()
                               if key in ("bitwise_invariant", "padding_bitwise")))
    suite.request.node.user_properties += [("equiv_examples", len(notes)),
                                           ("equiv_message", " | ".join(notes))]


@pytest.mark.equiv_gpu
def test_graph_replay(subject, suite):
    _run(subject, suite, "graph_replay")


@pytest.mark.equiv_gpu
def test_batch_invariance(subject, suite):
    required = suite.request.config.getoption("equiv_require") or ""
    _run(subject, suite, "batch_invariance",
         require_bitwise="batch-invariant" in [r.strip() for r in required.split(",")])
