"""A small operation defined only in the tests: ``argmax(x) -> index`` (``docs/house.md``).

It is registered from outside equiv (``EQUIV_OPS=argmax=argmax_op.op:OP`` with this folder's
parent on ``PYTHONPATH``) and must get ``equiv gate``, ``equiv check``, ``equiv paths``,
``equiv selftest``, the pytest plugin and the JSON/JUnit outputs without an edit of the core:
the proof that an operation is a plug-in.
"""
