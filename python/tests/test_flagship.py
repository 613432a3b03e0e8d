"""The flagship kernels written from Python (examples/python/): row softmax (float32 and
bfloat16, rows of 1024 to 8192) and RMSNorm (bfloat16, hidden 4096 and 8192), value-checked in
the simulator against NumPy (issue 14, item 6; the GPU figures come from python/bench/kernels.py)."""

import os
import sys

import numpy as np
import pytest

import tirx
from tirx.runtime import numpy_dtype

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))

from rmsnorm import reference as rms_ref, rmsnorm  # noqa: E402
from softmax import reference as softmax_ref, softmax  # noqa: E402


@pytest.mark.parametrize("N", [1024, 2048, 8192])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_rows(N, dtype):
    if dtype == "bfloat16" and N < 2048:
        N = 2048  # one 16-byte vector of bf16 per thread needs N a multiple of 2048
    k = tirx.compile(softmax(3, N, dtype), target="sm_90a")
    a = (np.random.default_rng(N).standard_normal((3, N)) * 4).astype(numpy_dtype(dtype))
    b = np.zeros_like(a)
    k(a, b)
    got, want = b.astype(np.float64), softmax_ref(a).astype(np.float64)
    tol = 2e-6 if dtype == "float32" else 8e-3  # f32: a few ulps of exp2f and the sum; bf16: one rounding
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * want.max())
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=3e-2 if dtype == "bfloat16" else 1e-5)


@pytest.mark.parametrize("H", [4096, 8192])
def test_rmsnorm_bf16(H):
    dt = numpy_dtype("bfloat16")
    k = tirx.compile(rmsnorm(2, H, "bfloat16", 1e-6), target="sm_90a")
    rng = np.random.default_rng(H)
    x = rng.standard_normal((2, H)).astype(dt)
    w = (rng.standard_normal(H) * 0.5 + 1).astype(dt)
    y = np.zeros_like(x)
    k(x, w, y)
    want = rms_ref(x, w).astype(np.float64)
    # Computed in f32, rounded once to bf16: within one bf16 ulp of the f64 result.
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2 ** -7, atol=1e-6)
