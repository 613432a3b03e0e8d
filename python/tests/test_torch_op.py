"""Kernels inside PyTorch programs (issue 28 item 2): a kernel as a `torch.library` custom
op, `torch.compile(fullgraph=True)` through it and through a direct call, and `tirx.compat`
not confusing Dynamo. On CPU tensors the op runs the simulator; with a GPU, also on CUDA."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tirx  # noqa: E402
from tirx import T  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _axpy():
    @T.prim_func
    def axpy(X_ptr: T.handle, Y_ptr: T.handle, a: T.float32):
        X = T.match_buffer(X_ptr, (256,), "float32")
        Y = T.match_buffer(Y_ptr, (256,), "float32")
        T.device_entry()
        bx = T.cta_id([2])
        t = T.thread_id([128])
        Y[bx * 128 + t] = Y[bx * 128 + t] + X[bx * 128 + t] * a

    return tirx.compile(axpy)


@pytest.mark.parametrize("device", DEVICES)
def test_a_kernel_as_a_custom_op(device):
    k = _axpy()
    op = k.torch_op()
    assert k.torch_op() is op
    x = torch.arange(256, dtype=torch.float32, device=device)
    y = torch.ones(256, device=device)
    op(x, y, 2.0)
    torch.testing.assert_close(y, 1 + 2 * x)
    # Schema: the written buffer is mutated, the scalar a float.
    schema = str(op._opoverload._schema)
    assert re.search(r"Tensor X, Tensor\(a\d+!\) Y, float a\) -> \(\)", schema), schema
    torch.library.opcheck(op, (x, torch.ones(256, device=device), 0.5))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph_through_the_op_and_a_direct_call(device):
    k = _axpy()
    op = k.torch_op()

    @torch.compile(fullgraph=True)
    def through_op(x):
        y = torch.zeros_like(x)
        op(x, y, 3.0)
        return y * 2

    @torch.compile(fullgraph=True)
    def direct(x):
        y = torch.ones_like(x)
        k(x, y, 0.5)
        return y + 1

    x = torch.arange(256, dtype=torch.float32, device=device)
    torch.testing.assert_close(through_op(x), 6 * x)
    torch.testing.assert_close(direct(x), 2 + 0.5 * x)


def test_named_ops_and_their_errors():
    k = _axpy()
    op = k.torch_op("tirx_test::axpy_named")
    y = torch.zeros(256)
    torch.ops.tirx_test.axpy_named(torch.ones(256), y, 4.0)
    np.testing.assert_array_equal(y.numpy(), np.full(256, 4.0, np.float32))
    assert op is k.torch_op("tirx_test::axpy_named")
    with pytest.raises(ValueError, match="already registered"):
        _axpy().torch_op("tirx_test::axpy_named")
    with pytest.raises(ValueError, match="namespace::op"):
        _axpy().torch_op("no_namespace")


def test_importing_tirx_compat_leaves_dynamo_working():
    code = (
        "import torch, tirx, tirx.compat, tvm\n"
        "f = torch.compile(lambda x: x * 2 + 1, fullgraph=True)\n"
        "print(f(torch.ones(4)).tolist())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TIRX_DEVICE="sim"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[3.0, 3.0, 3.0, 3.0]" in r.stdout


def test_tirx_ops_imported_before_torch_registers_every_op_on_a_first_eager_call():
    """`tirx.ops` imported before torch: the first eager call of any op (softmax here) registers
    them all, so torch.compile then traces another (rms_norm, never called eagerly); a first call
    inside a compiled function is an error that says so."""
    code = (
        "import tirx.ops as ops\n"
        "import torch\n"
        "x, w = torch.randn(4, 64), torch.ones(64)\n"
        "g = torch.compile(lambda x, w: ops.rms_norm(x, [64], w, 1e-6), fullgraph=True)\n"
        "try:\n"
        "    g(x, w)\n"
        "except Exception as e:\n"
        "    print('first:', 'call it once outside the compiled function' in str(e))\n"
        "ops.softmax(x, -1)\n"
        "torch._dynamo.reset()\n"
        "want = torch.nn.functional.rms_norm(x, [64], w, 1e-6)\n"
        "print('then:', torch.allclose(g(x, w), want, rtol=1e-5, atol=1e-5))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=dict(os.environ, TIRX_DEVICE="sim"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "first: True" in r.stdout and "then: True" in r.stdout, r.stdout + r.stderr[-2000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_the_op_in_a_cuda_graph_and_on_a_side_stream():
    k = _axpy()
    op = k.torch_op()
    x = torch.arange(256, dtype=torch.float32, device="cuda")
    y = torch.zeros(256, device="cuda")
    op(x, y, 1.0)  # loads the module before capture
    g = torch.cuda.CUDAGraph()
    y.zero_()
    with torch.cuda.graph(g):
        op(x, y, 1.0)
    y.zero_()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 3 * x)
    s = torch.cuda.Stream()
    z = torch.zeros(256, device="cuda")
    # (z's zeros are queued on the default stream, in a block the freed `3 * x` may have held:
    # without this wait the side stream's kernel can read that block first and give 5 x, as
    # PyTorch's own ops would; PyTorch asks the same of any tensor used on another stream)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op(x, z, 2.0)
    s.synchronize()
    torch.testing.assert_close(z, 2 * x)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_op_on_a_second_gpu():
    k = _axpy()
    x = torch.arange(256, dtype=torch.float32, device="cuda:1")
    y = torch.zeros(256, device="cuda:1")
    torch.compile(lambda a, b: k(a, b, 1.0), fullgraph=True)(x, y)
    torch.testing.assert_close(y, x)
