"""Failing checks -> defects: the diagnosis stage of ``gate``, ``check`` and ``report``.

``diagnose(spec, checks, k=..., device=...)`` re-runs the candidate on its failing inputs, isolates
each failure's trigger one input feature at a time (``isolate``), explains later failures by the
defects already found (``explain``) and returns a frozen ``Diagnosis`` of ``Defect`` s (kind,
trigger, evidence, checks, repro); ``render`` prints them. The kinds are in ``taxonomy``.
"""
from equiv.ops.draft_topk.diagnose.core import Defect, Diagnosis, diagnose
from equiv.ops.draft_topk.diagnose.taxonomy import KINDS, Kind

__all__ = ["KINDS", "Defect", "Diagnosis", "Kind", "diagnose"]
