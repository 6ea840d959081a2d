"""A gate's stages (``equiv.run.suite.staged``): the stages named ``beside`` run in threads of
their own beside the others, their results in the order asked; an exception in one kills the
property suite and reaches the caller; alone, a stage is not sent to a thread."""
import threading

import pytest

from equiv.checks import Check, stage_of
from equiv.run import suite


def _stage(name):
    c = Check(name, name, True, "held")
    return [c], stage_of(name, [c])


class FakeSuite:
    killed = False

    def kill(self):
        self.killed = True


def test_a_stage_beside_runs_at_the_same_time_as_the_others():
    meet = threading.Barrier(2, timeout=20)      # both must be running at once to pass it
    seen = {}

    def run(name, earlier):
        seen[name] = threading.current_thread().name
        meet.wait()
        return _stage(name)

    checks, stages = suite.staged(("tolerance", "mtp"), None, 60, run, beside=("mtp",))
    assert [s.name for s in stages] == ["tolerance", "mtp"] and [c.name for c in checks] == ["tolerance", "mtp"]
    assert seen["mtp"].startswith("equiv-stage") and seen["tolerance"] == threading.current_thread().name
    assert all(s.seconds is not None and s.status == "pass" for s in stages)


def test_without_beside_the_stages_run_in_turn_and_see_the_checks_before():
    order, meet = [], threading.Barrier(2, timeout=0.5)

    def run(name, earlier):
        order.append((name, [c.name for c in earlier]))
        return _stage(name)

    suite.staged(("tolerance", "mtp"), None, 60, run)
    assert order == [("tolerance", []), ("mtp", ["tolerance"])]
    with pytest.raises(threading.BrokenBarrierError):   # and the barrier above does need two at once
        meet.wait()


def test_a_stage_alone_is_not_sent_to_a_thread():
    seen = []
    suite.staged(("mtp",), None, 60, lambda name, earlier: seen.append(threading.current_thread().name) or _stage(name),
                 beside=("mtp",))
    assert seen == [threading.current_thread().name]


def test_an_exception_beside_reaches_the_caller_and_kills_the_suite():
    fake = FakeSuite()

    def run(name, earlier):
        if name == "mtp":
            raise RuntimeError("the harness broke")
        return _stage(name)

    with pytest.raises(RuntimeError, match="the harness broke"):
        suite.staged(("properties", "tolerance", "mtp"), fake, 60, run, beside=("mtp",))
    assert fake.killed


def test_a_lane_is_a_worker_of_its_own_for_the_same_candidate():
    import os

    from equiv.run import runner_for

    spec = os.path.join(os.path.dirname(__file__), "candidates", "hostile.py") + ":k1_only"
    main = runner_for(spec, "cpu", 30, op="draft_topk")
    lane = runner_for(spec, "cpu", 30, op="draft_topk", lane="mtp")
    assert main.isolated and lane.isolated and lane is not main
    builtin = runner_for("softmax_topk", "cpu", 30, op="draft_topk")
    assert not builtin.isolated and runner_for("softmax_topk", "cpu", 30, op="draft_topk", lane="mtp").isolated
    assert runner_for(spec, "cpu", 30, op="draft_topk", lane="mtp") is lane
    assert runner_for(spec, "cpu", 30, op="draft_topk") is main
