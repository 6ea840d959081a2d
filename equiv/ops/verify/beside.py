"""Draw the cases in this thread and judge each in one other, in order: the judge's host work
(NumPy, which lets go of the GIL) hides behind the candidate's calls. Both verifier ops' judges
(``judge.run_judge``, ``verify_tree.judge.run_judge``) run their cases so."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def draw_and_judge(cases, draw, add, progress=None) -> list:
    """``draw(case)`` for each case in order, and ``add(case, draws)`` in one other thread as each
    comes, in the same order (a judge's generator sees the cases as a sequential judge would).
    After a hang (a draws' problem "did not return") no further case is drawn: the rest would
    hang too. Returns the draws; an exception of ``add`` goes on to the caller."""
    drawn = []
    with ThreadPoolExecutor(1) as beside:
        judged = []
        for i, case in enumerate(cases):
            drawn.append(draw(case))
            judged.append(beside.submit(add, case, drawn[-1]))
            if progress:
                progress(i + 1, len(cases), str(case.recipe))
            if drawn[-1].problem and "did not return" in drawn[-1].problem:
                break
        for f in judged:
            f.result()
    return drawn
