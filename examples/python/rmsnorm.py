"""RMSNorm with a weight in TIRx, written from Python, for rows of any length: `rmsnorm(H, dtype,
threads)` builds the kernel of `tirx.ops.rms_norm` (python/tirx/ops/norm.py, where its body is):
y = x / sqrt(mean(x^2) + eps) * w for M tokens of H features (float32, float16 or bfloat16 in
and out, computed in float32 and rounded once, as PyTorch's fused rms_norm does). M and eps are
run-time arguments: `k(X, W, Y, M, eps)`.

One CTA per token, THREADS threads: thread t holds the 16-byte vectors t, t + THREADS, ... of
the row and of the weight in registers, padded to whole vectors (`clip=True, other=0.0`: the
padding adds nothing to the sum of squares and is never stored; hidden 5120 on 256 threads is
2.5 vectors per thread). The sum of squares is a thread-local fold then a CTA reduction
(`T.cuda.cta_sum`); rstd = 1 / sqrt(sum / H + eps) once per row; each element is then
x * rstd * w in f32, rounded once to the output type.

    python examples/python/rmsnorm.py      # checks a ragged hidden size in the simulator
"""

import numpy as np

from tirx.ops.norm import rms_norm_kernel


def rmsnorm(H: int, dtype: str = "bfloat16", threads: int = 256):
    """The RMSNorm kernel for rows of ``H`` features (``k(X, W, Y, M, eps)`` for M rows)."""
    return rms_norm_kernel.factory(h=H, dtype=dtype, threads=threads)


def reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    xf = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + eps)
    return (xf * rstd * w.astype(np.float64)).astype(x.dtype)


if __name__ == "__main__":
    import tirx
    from tirx.runtime import numpy_dtype

    dt = numpy_dtype("bfloat16")
    for H in (4096, 5120):
        k = tirx.compile(rmsnorm(H))
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4, H)).astype(dt)
        w = (rng.standard_normal(H) * 0.5 + 1).astype(dt)
        y = np.zeros_like(x)
        k(x, w, y, 4, 1e-6)
        ref = reference(x, w)
        diff = np.abs(y.astype(np.float64) - ref.astype(np.float64))
        print(f"H={H}: max abs error {diff.max():.3g}, max |ref| {np.abs(ref.astype(np.float64)).max():.3g}")
