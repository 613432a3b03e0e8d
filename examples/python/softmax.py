"""Row softmax in TIRx, written from Python: `softmax(M, N, dtype)` builds the kernel for an
M x N matrix of float32 or bfloat16 (in and out; bfloat16 computes in float32 and rounds once).

One CTA per row, THREADS threads: thread t holds the 16-byte vectors t, t + THREADS, ... of the
row in registers (one coalesced pass over global memory each way). The row max and the row sum
are thread-local folds (`Tx.max`/`Tx.sum` on the thread's registers), then CTA reductions
(`T.cuda.cta_max`/`cta_sum`: warp butterflies, one value per warp through shared memory). The
exponent is one `exp2((x - max) * log2 e)` per element (`Tx.exp2` with scale and bias: an FMUL,
an FADD and MUFU.EX2 in f32), the normalisation one multiplication by 1 / sum.

    python examples/python/softmax.py      # checks a small case in the simulator
"""

import numpy as np

from tirx import T, Tx
from tirx.layout import S, TileLayout, tx

LOG2E = 1.4426950408889634


def softmax(M: int, N: int, dtype: str = "float32", threads: int = 256):
    elem = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    vec = 16 // elem
    assert N % (threads * vec) == 0, f"N must be a multiple of {threads * vec}"
    per = N // threads  # registers per thread
    warps = threads // 32
    row = TileLayout(S[(N // (threads * vec), threads, vec) : (vec, 1 @ tx, 1)])
    widen = dtype != "float32"

    @T.prim_func
    def softmax_kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (M, N), dtype)
        B = T.match_buffer(B_ptr, (M, N), dtype)
        T.device_entry()
        r = T.cta_id([M])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((N,), "float32", scope="local", layout=row)
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if widen:
            Xin = T.alloc_buffer((N,), dtype, scope="local", layout=row)
            Tx.cta.copy(Xin[0:N], A[r, 0:N])
            Tx.cta.cast(X[0:N], Xin[0:N])
        else:
            Tx.cta.copy(X[0:N], A[r, 0:N])
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        m = T.cuda.cta_max(part[0], warps, scratch.ptr_to([0]))
        Tx.exp2(Xl[0:per], Xl[0:per], -m * LOG2E, LOG2E)
        Tx.sum(part[0:1], Xl[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        Tx.mul(Xl[0:per], Xl[0:per], 1.0 / s)
        if widen:
            Tx.cta.cast(Xin[0:N], X[0:N])
            Tx.cta.copy(B[r, 0:N], Xin[0:N])
        else:
            Tx.cta.copy(B[r, 0:N], X[0:N])

    return softmax_kernel


def reference(a: np.ndarray) -> np.ndarray:
    x = a.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(a.dtype)


if __name__ == "__main__":
    import tirx
    from tirx.runtime import numpy_dtype

    for dtype in ("float32", "bfloat16"):
        k = tirx.compile(softmax(4, 2048, dtype))
        a = (np.random.default_rng(0).standard_normal((4, 2048)) * 3).astype(numpy_dtype(dtype))
        b = np.zeros_like(a)
        k(a, b)
        err = np.abs(b.astype(np.float64) - reference(a).astype(np.float64)).max()
        print(dtype, "max abs error", err)
