"""Run programs written for the reference (Apache TVM TIRx) on tirx (docs/python.md §6).

``import tirx.compat`` installs ``tvm``, ``tvm.script.tirx``, ``tvm.tirx.layout``,
``tvm.testing``, ... backed by tirx — only when the real TVM is not importable. Also:

* ``python -m tirx.compat SCRIPT [ARGS]`` runs a script with it installed;
* ``pytest -p tirx.compat`` (with ``--noconftest`` to skip the reference's conftests, which
  gate everything on compute capability 10) runs the reference's test files.

Without a GPU, or with ``TIRX_DEVICE=sim``, kernels run in the CPU simulator.
"""

import importlib.util
import sys


def _real_tvm_importable() -> bool:
    m = sys.modules.get("tvm")
    if m is not None:
        return not getattr(m, "__tirx_compat__", False)
    try:
        return importlib.util.find_spec("tvm") is not None
    except (ImportError, ValueError):
        return False


def install() -> bool:
    """Installs the shim unless the real TVM is importable; returns whether it is installed."""
    if _real_tvm_importable():
        return False
    from .shim import install as _install

    _install()
    return True


installed = install()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU (tirx.compat: the simulator stands in without one)")
