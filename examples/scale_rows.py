# Scalar parameters and a run-time row count: B = alpha * A + beta for an (n, 64)
# float32 matrix whose n is a kernel argument, not a compile-time constant.
# Each CTA of 4 warps takes 128 rows; warp w moves its 32 rows global -> registers
# (lane i owns row i: 64 registers) with the `reg` copy variant, scales them with one
# fused `fma` by the scalar arguments and writes them back. `T.assume(n % 128 == 0)`
# is what makes every tile whole: lowering proves the tiles inside `A` from it (no
# launch check beyond the assumption itself), and every launch checks it first.
# Run: tirx sim examples/scale_rows.py --arg n=256 --arg alpha=0.5 --arg beta=2
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

rows = TileLayout(S[(32, 64) : (1 @ laneid, 1)])


@T.prim_func
def scale_rows(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, alpha: T.float32, beta: T.float32):
    A = T.match_buffer(A_ptr, (n, 64), "float32")
    B = T.match_buffer(B_ptr, (n, 64), "float32")
    T.assume(n % 128 == 0)
    T.device_entry()
    bx = T.cta_id([n // 128])
    w = T.warp_id([4])
    T.lane_id([32])
    T.thread_id([128])
    R = T.alloc_buffer((32, 64), "float32", scope="local", layout=rows)
    row = bx * 128 + w * 32
    Tx.warp.copy(R[0:32, 0:64], A[row : row + 32, 0:64])
    Tx.warp.fma(R[0:32, 0:64], R[0:32, 0:64], alpha, beta)
    Tx.warp.copy(B[row : row + 32, 0:64], R[0:32, 0:64])
