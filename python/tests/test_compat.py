"""`tirx.compat` runs programs written for the reference (docs/python.md §6)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, *args], cwd=HERE, capture_output=True, text=True, env=e, timeout=600)


def test_a_reference_style_test_file_passes_under_the_plugin():
    r = run("-m", "pytest", "--noconftest", "-p", "tirx.compat", "-q", "compat_suite/refstyle_kernels.py",
            env={"TIRX_DEVICE": os.environ.get("TIRX_DEVICE", "sim")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 passed" in r.stdout, r.stdout


def test_python_m_tirx_compat_runs_a_script(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, tvm\n"
        "from tvm.script import tirx as T\n"
        "assert tvm.__tirx_compat__ and T.prim_func is not None\n"
        "print('ran', sys.argv[1:])\n"
    )
    r = run("-m", "tirx.compat", str(script), "x", "y")
    assert r.returncode == 0, r.stderr
    assert "ran ['x', 'y']" in r.stdout


def test_reference_internals_import_as_stubs_and_fail_when_used():
    r = run("-c", "import tirx.compat, tvm.tirx.operator.tile_primitive as tp\n"
                  "from tvm.tirx.operator.tile_primitive import DispatchContext\n"
                  "try:\n    DispatchContext()\nexcept NotImplementedError as e:\n    print('stub:', e)\n")
    assert r.returncode == 0, r.stderr
    assert "does not provide" in r.stdout


def test_tvm_testing_registers_bfloat16_with_numpy():
    # Issue 27 defect 18: `astype("bfloat16")` failed in a fresh process.
    code = "import tirx.compat, tvm.testing, numpy as np; print(np.zeros(2).astype('bfloat16').dtype)"
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "bfloat16"


def test_a_reference_kernel_reports_its_build_error_at_tvm_compile(tmp_path):
    # As the reference does (its permute_layout tests wrap `tvm.compile` in `pytest.raises`):
    # a kernel written against the shim's `tvm` raises at compile, not at decoration.
    script = tmp_path / "prog.py"
    script.write_text(
        "import tvm\n"
        "from tvm.script import tirx as T\n"
        "from tvm.script.tirx import tile as Tx\n"
        "def build():\n"
        "    @T.prim_func\n"
        "    def f(A_ptr: T.handle, B_ptr: T.handle):\n"
        "        A = T.match_buffer(A_ptr, (32,), 'float32')\n"
        "        B = T.match_buffer(B_ptr, (32,), 'float16')\n"
        "        T.device_entry(); T.cta_id([1]); T.thread_id([32])\n"
        "        Tx.warp.copy(B[0:32], A[0:32])\n"
        "    return f\n"
        "f = build()\n"
        "print('decorated')\n"
        "try:\n"
        "    tvm.compile(tvm.IRModule({'main': f}), target=tvm.target.Target('cuda'))\n"
        "except RuntimeError as e:\n"
        "    print('compile:', str(e).splitlines()[0])\n"
    )
    r = run("-m", "tirx.compat", str(script), env={"TIRX_DEVICE": "sim"})
    assert r.returncode == 0, r.stderr
    assert "decorated" in r.stdout and "compile: error:" in r.stdout, r.stdout


def test_from_source_builds_a_kernel_from_script_text(tmp_path):
    # The reference's `tvm.script.from_source(text)`; `T` and `Tx` need no imports in the text,
    # and a diagnostic points into the text as given.
    script = tmp_path / "prog.py"
    script.write_text(
        "import numpy as np, tvm\n"
        "text = '''\n"
        "@T.prim_func\n"
        "def add_one(A_ptr: T.handle, B_ptr: T.handle):\n"
        "    A = T.match_buffer(A_ptr, (32,), 'float32')\n"
        "    B = T.match_buffer(B_ptr, (32,), 'float32')\n"
        "    T.device_entry(); T.cta_id([1]); t = T.thread_id([32])\n"
        "    B[t] = A[t] + 1.0\n"
        "'''\n"
        "f = tvm.script.from_source(text)\n"
        "a = np.arange(32, dtype=np.float32); b = np.zeros(32, np.float32)\n"
        "f(a, b)\n"
        "print('ok', f.name, b[:3].tolist())\n"
        "try:\n"
        "    tvm.script.from_source(text.replace('+ 1.0', '+ A'))\n"
        "except RuntimeError as e:\n"
        "    print(str(e).splitlines()[1].strip())\n"
    )
    r = run("-m", "tirx.compat", str(script), env={"TIRX_DEVICE": "sim"})
    assert r.returncode == 0, r.stderr
    assert "ok add_one [1.0, 2.0, 3.0]" in r.stdout, r.stdout
    assert "<from_source>:7:" in r.stdout, r.stdout
