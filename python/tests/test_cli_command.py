"""The package's `tirx` command (issue 28 item 6): the same command line as the binary,
with its exit codes (0 ok, 1 user error), from `python -m tirx` and the console script."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "copy_gmem_smem.py")


def tirx(*args):
    return subprocess.run([sys.executable, "-m", "tirx", *args], capture_output=True, text=True, timeout=300)


def test_python_m_tirx_runs_the_cli():
    r = tirx("--version")
    assert r.returncode == 0 and r.stdout.startswith("tirx "), r.stdout + r.stderr
    r = tirx("explain", EXAMPLE)
    assert r.returncode == 0, r.stderr
    assert "chosen" in r.stdout and "target: sm_90a" in r.stdout, r.stdout


def test_a_user_error_exits_1_with_its_diagnostic(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tvm.script import tirx as T\n\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (4,), \"float33\")\n")
    r = tirx("check", str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "bad.py:5:" in r.stderr and "float33" in r.stderr, r.stderr
    r = tirx("no-such-command")
    assert r.returncode == 1 and "no-such-command" in r.stderr


def test_the_console_script_is_installed_with_the_package():
    exe = shutil.which("tirx", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None or not os.path.dirname(exe) == os.path.dirname(sys.executable):
        import pytest

        pytest.skip("the package is not installed with its scripts in this environment (e.g. PYTHONPATH)")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("tirx "), r.stdout + r.stderr
