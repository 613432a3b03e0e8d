"""Row softmax in TIRx, written from Python, for rows of any length: `softmax(N, dtype, threads)`
builds the kernel of `tirx.ops.softmax` (python/tirx/ops/softmax.py, where its body is) for rows
of N elements of float32, float16 or bfloat16 (16-bit computes in float32 and rounds once); the
number of rows M is a run-time argument: `k(A, B, M)`.

One CTA per row, THREADS threads: thread t holds the 16-byte vectors t, t + THREADS, ... of the
row in registers (one coalesced pass over global memory each way). A row that does not fill the
last vectors is padded: `Tx.cta.copy(X, A[r, 0:width], clip=True, other=-inf)` reads -inf past
the row's end (exp2 makes it 0) and the store's `clip=True` writes only the row; whole vectors
stay 16-byte accesses. The row max and sum are thread-local folds (`Tx.max`/`Tx.sum` on the
thread's registers), then CTA reductions (`T.cuda.cta_max`/`cta_sum`). Rows too wide for the
registers (`tirx.ops._common.row_capacity`) are streamed through tiles with an online max and sum.

    python examples/python/softmax.py      # checks ragged and wide rows in the simulator
"""

import numpy as np

from tirx.ops._common import RowTile
from tirx.ops.softmax import softmax_kernel


def softmax(N: int, dtype: str = "float32", threads: int = 256):
    """The softmax kernel for rows of ``N`` elements (``k(A, B, M)`` for M rows)."""
    return softmax_kernel.factory(n=N, dtype=dtype, threads=threads)


def reference(a: np.ndarray) -> np.ndarray:
    x = a.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(a.dtype)


if __name__ == "__main__":
    import tirx
    from tirx.runtime import numpy_dtype

    for dtype, N, threads in (("float32", 2048, 256), ("bfloat16", 1000, 128), ("float32", 70000, 1024)):
        k = tirx.compile(softmax(N, dtype, threads))
        a = (np.random.default_rng(0).standard_normal((2, N)) * 3).astype(numpy_dtype(dtype))
        b = np.zeros_like(a)
        k(a, b, 2)
        err = np.abs(b.astype(np.float64) - reference(a).astype(np.float64)).max()
        how = "streamed" if RowTile(N, dtype, threads).streamed else "in registers"
        print(f"{dtype} N={N} ({how}): max abs error {err:.3g}")
