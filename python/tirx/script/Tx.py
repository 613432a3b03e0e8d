"""The ``Tx`` namespace of tile primitives (``from tirx import Tx``): ``Tx.<op>`` at thread
scope, ``Tx.<scope>.<op>`` (warp, wg/warpgroup, cta, cluster); the reference's
``tvm.script.tirx.tile``."""

from .namespace import TX_SCOPES as _SCOPES, TxOp as _TxOp, TxScope as _TxScope

for _k, _v in _SCOPES.items():
    globals()[_k] = _TxScope(_v)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _TxOp("thread", name)
