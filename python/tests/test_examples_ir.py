"""Every bundled example, built by the Python front end (run as a program through
`tirx.compat`), gives the same IR as the file read by the script front end (docs/python.md §2.4)."""

import glob
import os
import runpy

import pytest

import tirx
import tirx.compat  # noqa: F401  (the examples import `tvm.script.tirx`)
from tirx.script.frontend import PrimFunc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")) + glob.glob(os.path.join(ROOT, "examples", "bench", "*.py")))


def test_there_are_examples():
    assert len(EXAMPLES) >= 20


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.relpath(p, ROOT) for p in EXAMPLES])
def test_python_and_file_front_ends_agree(path):
    g = runpy.run_path(path)
    kernels = [v for v in g.values() if isinstance(v, PrimFunc)]
    assert len(kernels) == 1, [k.name for k in kernels]
    with open(path) as f:
        native = tirx._native.parse_file(f.read(), path)
    assert kernels[0].same_ir(native), kernels[0].source
    assert kernels[0].script() == native.canonical()
