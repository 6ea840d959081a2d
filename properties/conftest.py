"""Wiring of the property suite into pytest.

- Collecting this suite makes the run an equiv run (``EQUIV_SUITE``; ``equiv.pytest.plugin.activate``):
  the ``equiv-*`` Hypothesis profiles are registered (at import, so ``--hypothesis-profile
  equiv-ci`` finds them) and loaded, the ``equiv_gpu`` marker exists, the options are checked.

- ``subject``: every property test is parametrized over the subjects of ``equiv.properties.subjects``
  (the ``--equiv-candidate`` alone, or every built-in path read at collection time).
- ``suite``: the ``equiv.properties.runner.Suite`` of one test; it skips, with the reason, a subject
  that does not support the k this run judges at (under ``--equiv-k auto``, a k the candidate
  refuses: ``equiv.ops.draft_topk.ksupport``).
- Ordering: property tests run in ``PROPERTY_ORDER`` (broad and cheap first), so ``-x`` stops a
  broken candidate early and the pre-merge gate reports the most telling failure first.
- The known-failure ledger (``equiv.ops.draft_topk.ledger``) turns each listed (built-in path,
  property) into a strict xfail whose witness runs first (``Suite.run``); never for an explicit
  ``--equiv-candidate``.
"""
from __future__ import annotations

import re

import pytest

from equiv.ops import get_op
from equiv.ops.draft_topk import ksupport
from equiv.ops.draft_topk.ledger import KNOWN_FAILURES
from equiv.properties.runner import Suite
from equiv.properties.subjects import options_from, subjects_from
from equiv.pytest.plugin import activate, option
from equiv.pytest.profiles import register_profiles

EQUIV_SUITE = True
register_profiles()

PROPERTY_ORDER = ("equivalence", "poisoned_batches", "raw_arrays", "adversarial_fixtures",
                  "repeated_calls", "bounds", "row_independence", "poison_never_leaks",
                  "shift_invariance", "vocab_permutation", "monotonicity", "topk_ordering",
                  "builtin_argument_errors")
_OPTIONS = pytest.StashKey()


def _options(config):
    if _OPTIONS not in config.stash:
        opts = options_from(config)
        config.stash[_OPTIONS] = (opts, subjects_from(opts))
    return config.stash[_OPTIONS]


def _test_id(subject) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]", "_", subject.test_id)


def op_of(item) -> str:
    marker = item.get_closest_marker("equiv_op")
    if marker and marker.args[0] == "*":         # an op's own properties (Op.properties): the op judged
        op = option(item.config, "equiv_op")
        return op if get_op(op).properties is not None else None
    return marker.args[0] if marker else "draft_topk"


def pytest_generate_tests(metafunc):
    if option(metafunc.config, "equiv_op") != "draft_topk":
        return                                   # the draft properties are deselected below
    if "subject" in metafunc.fixturenames:
        _, subjects = _options(metafunc.config)
        metafunc.parametrize("subject", subjects, ids=[_test_id(s) for s in subjects])


@pytest.fixture
def suite(request, subject):
    opts, _ = _options(request.config)
    if request.node.get_closest_marker("own_k") is None and not subject.supports_k(subject.k):
        pytest.skip(f"path {subject.name!r} supports k <= {subject.max_k}; this run judges at "
                    f"k = {subject.k}")
    suite = Suite(request, subject, opts)
    if opts.k_auto and subject.explicit:         # --equiv-k auto: a k it refuses is not judged
        refused = _refused(request.config, suite)
        if subject.k in refused:
            pytest.skip(f"k={subject.k} not judged: {refused[subject.k]}")
    return suite


_REFUSED = pytest.StashKey()


def _refused(config, suite) -> dict:
    """{k: why} for the ks of ``AUTO_KS`` the candidate refuses (asked once per run)."""
    if _REFUSED not in config.stash:
        config.stash[_REFUSED] = ksupport.accepted(suite.runner, suite.opts.ks[:1], suite.opts.timeout).refused
    return config.stash[_REFUSED]


def property_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "subject" not in callspec.params:
        return None
    return getattr(item, "originalname", item.name).removeprefix("test_")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    activate(config)
    config.addinivalue_line("markers", "own_k: the test chooses its own k (the suite fixture does not skip on k)")


def pytest_collection_modifyitems(config, items):
    op = option(config, "equiv_op")
    other = [item for item in items if op_of(item) != op]
    if other:                                    # --equiv-op picks one operation's properties
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if op_of(item) == op]
    slots = [i for i, item in enumerate(items) if property_of(item) is not None]
    order = {name: n for n, name in enumerate(PROPERTY_ORDER)}
    ordered = sorted((items[i] for i in slots), key=lambda it: order.get(property_of(it), len(order)))
    for i, item in zip(slots, ordered):
        items[i] = item
        subject = item.callspec.params["subject"]
        known = KNOWN_FAILURES.get((subject.name, property_of(item)))
        if known and not subject.explicit:
            item.add_marker(pytest.mark.xfail(strict=True, raises=AssertionError,
                                              reason=f"known failure (equiv/ops/draft_topk/ledger.py): {known.reason}"))
