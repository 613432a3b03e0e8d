"""The flagship kernels written from Python (examples/python/): row softmax (float32 and
bfloat16, rows of 1 to 70,000: ragged tails and streamed wide rows) and RMSNorm (bfloat16,
hidden 4096, 5120 and 8192), value-checked in the simulator against NumPy (issue 14, item 6;
issue 29 item 3; the GPU figures come from python/bench/kernels.py)."""

import os
import sys

import numpy as np
import pytest

import tirx
from tirx.runtime import numpy_dtype

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))

from rmsnorm import reference as rms_ref, rmsnorm  # noqa: E402
from softmax import reference as softmax_ref, softmax  # noqa: E402


@pytest.mark.parametrize("N", [1, 1000, 1024, 2048, 8192, 32000])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_rows(N, dtype):
    k = tirx.compile(softmax(N, dtype, threads=256 if N > 1 else 32), target="sm_90a")
    a = (np.random.default_rng(N).standard_normal((3, N)) * 4).astype(numpy_dtype(dtype))
    b = np.zeros_like(a)
    k(a, b, 3)
    got, want = b.astype(np.float64), softmax_ref(a).astype(np.float64)
    tol = 2e-6 if dtype == "float32" else 8e-3  # f32: a few ulps of exp2f and the sum; bf16: one rounding
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * want.max())
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=3e-2 if dtype == "bfloat16" else 1e-5)


def test_softmax_streams_rows_wider_than_the_registers():
    N = 70000  # 69 registers per thread at 1024 threads: two passes over tiles of 32 per thread
    k = tirx.compile(softmax(N, "float32", threads=1024), target="sm_90a")
    a = (np.random.default_rng(N).standard_normal((2, N)) * 4).astype(np.float32)
    a[1, 3:] = -np.inf  # a row whose last tiles are all -inf: their online max stays -inf
    b = np.zeros_like(a)
    k(a, b, 2)
    want = softmax_ref(a).astype(np.float64)
    np.testing.assert_allclose(b.astype(np.float64), want, rtol=2e-6, atol=2e-6 * want.max())


@pytest.mark.parametrize("H", [4096, 5120, 8192])
def test_rmsnorm_bf16(H):
    dt = numpy_dtype("bfloat16")
    k = tirx.compile(rmsnorm(H, "bfloat16"), target="sm_90a")
    rng = np.random.default_rng(H)
    x = rng.standard_normal((2, H)).astype(dt)
    w = (rng.standard_normal(H) * 0.5 + 1).astype(dt)
    y = np.zeros_like(x)
    k(x, w, y, 2, 1e-6)
    want = rms_ref(x, w).astype(np.float64)
    # Computed in f32, rounded once to bf16: within one bf16 ulp of the f64 result.
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2 ** -7, atol=1e-6)


def test_attention_walkthrough():
    """examples/python/attention.py: a causal grouped-query configuration in ping-pong, a wide
    K/V tile configuration and the ping-pong loop rotated, each against float64 in the simulator."""
    from attention import run  # noqa: E402 (examples/python)

    for shape, config, tol in [
        ((1, 2, 1, 150, 330, 64, True), dict(consumers=2, bn=64, overlap=True, pingpong=True), 2.0**-7),
        ((1, 1, 1, 200, 400, 128, False), dict(consumers=2, bn=176, overlap=True), 2.0**-7),
        ((1, 2, 1, 150, 330, 64, True), dict(consumers=2, bn=128, overlap=True, pingpong=True, rotate=True), 2.0**-7),
    ]:
        err, text = run(*shape, **config)
        assert err < tol, (shape, config, err)
        assert "wgmma.mma_async" in text and "(rs)" in text


def test_training_through_tirx_ops_matches_pytorch():
    """examples/python/train_block.py: Adam steps of two causal attention blocks through tirx's
    matmul and attention, and through the attention op beside `torch.mm` (their backward kernels,
    in the simulator), follow PyTorch's own losses within bf16 noise, and descend."""
    pytest.importorskip("torch")
    from train_block import train  # noqa: E402 (examples/python)

    theirs, _ = train(3, 128, 128, 2, "torch", "cpu", layers=2)
    for ops in ("tirx", "attention"):
        ours, _ = train(3, 128, 128, 2, ops, "cpu", layers=2)
        np.testing.assert_allclose(ours, theirs, rtol=1e-3)
        assert ours[0] > ours[1] > ours[2]
