"""The ``Tx`` namespace of tile primitives (``from tirx import Tx``): ``Tx.<op>`` at thread
scope, ``Tx.<scope>.<op>`` (warp, wg/warpgroup, cta, cluster); the reference's
``tvm.script.tirx.tile``. Scopes and ops are the native table's (``namespace.tx_members``); an
unknown op passes through to the script front end, which reports it with a "did you mean"."""

from .namespace import TxOp as _TxOp, tx_members as _tx_members

globals().update(_tx_members())


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _TxOp("thread", name)
