"""The properties an operation brings itself (``Op.properties``), for any registered op.

An op defined outside equiv (``EQUIV_OPS``) has no test module here; it lists its properties as
``{name: fn(options)}`` and this module runs each against ``--equiv-candidate`` under the run's
``RunOptions`` (the plugin's options, read back whole). A property raises ``AssertionError``
with its ``REPRO:`` line. Ops without ``properties`` add no test here.
"""
import pytest

from equiv.ops import get_op
from equiv.options import RunOptions

pytestmark = pytest.mark.equiv_op("*")


def pytest_generate_tests(metafunc):
    if "op_property" in metafunc.fixturenames:
        op = get_op(metafunc.config.getoption("equiv_op", None) or "draft_topk")
        names = sorted(op.properties()) if op.properties is not None else []   # none: deselected (conftest)
        metafunc.parametrize("op_property", names, ids=names)


def test_op_property(request, op_property):
    options = RunOptions.from_pytest(request.config)
    if options.spec is None:
        pytest.skip("an op's own properties judge one candidate: give --equiv-candidate")
    request.node.user_properties.append(("equiv_property", op_property))
    get_op(options.op).properties()[op_property](options)
