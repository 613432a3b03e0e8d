"""RMSNorm with a weight in TIRx, written from Python: `rmsnorm(M, H, dtype, eps)` builds
y = x / sqrt(mean(x^2) + eps) * w for M tokens of H features (bfloat16 or float16 in and out,
computed in float32 and rounded once, as PyTorch's fused rms_norm does).

One CTA per token, THREADS threads: thread t holds the 16-byte vectors t, t + THREADS, ... of
the row and of the weight in registers. The sum of squares is a thread-local fold then a CTA
reduction (`T.cuda.cta_sum`); rstd = 1 / sqrt(sum / H + eps) once per row; each element is
then x * rstd * w in f32, rounded once to the output type.

    python examples/python/rmsnorm.py      # checks a small case in the simulator
"""

import numpy as np

from tirx import T, Tx
from tirx.layout import S, TileLayout, tx


def rmsnorm(M: int, H: int, dtype: str = "bfloat16", eps: float = 1e-6, threads: int = 256):
    vec = 8  # 16 bytes of a 16-bit type
    assert H % (threads * vec) == 0, f"H must be a multiple of {threads * vec}"
    per = H // threads
    warps = threads // 32
    row = TileLayout(S[(H // (threads * vec), threads, vec) : (vec, 1 @ tx, 1)])

    @T.prim_func
    def rmsnorm_kernel(X_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle):
        X = T.match_buffer(X_ptr, (M, H), dtype)
        W = T.match_buffer(W_ptr, (H,), dtype)
        Y = T.match_buffer(Y_ptr, (M, H), dtype)
        T.device_entry()
        r = T.cta_id([M])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        x16 = T.alloc_buffer((H,), dtype, scope="local", layout=row)
        w16 = T.alloc_buffer((H,), dtype, scope="local", layout=row)
        x = T.alloc_buffer((H,), "float32", scope="local", layout=row)
        w = T.alloc_buffer((H,), "float32", scope="local", layout=row)
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        Tx.cta.copy(x16[0:H], X[r, 0:H])
        Tx.cta.copy(w16[0:H], W[0:H])
        Tx.cta.cast(x[0:H], x16[0:H])
        Tx.cta.cast(w[0:H], w16[0:H])
        xl = x.local()
        Tx.mul(sq[0:per], xl[0:per], xl[0:per])
        Tx.sum(part[0:1], sq[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        rstd = 1.0 / T.sqrt(s / float(H) + eps)
        Tx.mul(xl[0:per], xl[0:per], rstd)
        Tx.cta.mul(x[0:H], x[0:H], w[0:H])
        Tx.cta.cast(x16[0:H], x[0:H])
        Tx.cta.copy(Y[r, 0:H], x16[0:H])

    return rmsnorm_kernel


def reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    xf = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + eps)
    return (xf * rstd * w.astype(np.float64)).astype(x.dtype)


if __name__ == "__main__":
    import tirx
    from tirx.runtime import numpy_dtype

    dt = numpy_dtype("bfloat16")
    k = tirx.compile(rmsnorm(4, 4096))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 4096)).astype(dt)
    w = (rng.standard_normal(4096) * 0.5 + 1).astype(dt)
    y = np.zeros_like(x)
    k(x, w, y)
    ref = reference(x, w)
    diff = np.abs(y.astype(np.float64) - ref.astype(np.float64))
    print("max abs error", diff.max(), "max |ref|", np.abs(ref.astype(np.float64)).max())
