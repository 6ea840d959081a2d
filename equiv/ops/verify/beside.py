"""Draw the cases in this thread and judge each in one other, in order: the judge's host work
(NumPy, which lets go of the GIL) hides behind the candidate's calls. Both verifier ops' judges
(``judge.run_judge``, ``verify_tree.judge.run_judge``) run their cases so, with the tables they
read (exact laws sorted and scored over the vocabulary, which do not depend on the candidate)
made ``ahead`` in other threads meanwhile."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from equiv.run.suite import cores


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


def _made(job) -> None:
    """Run ``job`` for what its caches keep; its result is not held here (a future that held every
    case's laws kept 16 GiB alive in a 275-case tree plan)."""
    job()


@contextmanager
def ahead(jobs):
    """Run ``jobs`` (calls whose results the judge's caches keep: ``equiv.memo``) in other
    threads, in order, while the body runs: the judge then finds each made, or waits for the one
    being made. NumPy lets go of the GIL in them; on a host of two cores one thread, else up to
    three. Leaving the body cancels the jobs not started and waits for those running."""
    if not jobs:
        yield
        return
    pool = ThreadPoolExecutor(max(1, min(3, cores() - 1)), thread_name_prefix="equiv-tables")
    futures = [pool.submit(_made, job) for job in jobs]
    try:
        yield
    finally:
        for f in futures:
            f.cancel()
        pool.shutdown(wait=True)                 # a job that raised: the judge meets it too
