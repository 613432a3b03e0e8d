# elementwise -> reg (seed 001): a warp takes the sqrt of a 32x8 float32 tile
# held in registers (lane i owns row i, 8 registers). The copies in and out
# are `copy -> reg` straight from/to global memory. Result: B == sqrt(A).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

fs = (slice(0, 32), slice(0, 8))


@T.prim_func
def ewise_sqrt_warp(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
    Tx.warp.copy(R[fs], A[fs])
    Tx.warp.sqrt(R[fs], R[fs])  # 8 registers per lane: R[f] = sqrt(R[f])
    Tx.warp.copy(B[fs], R[fs])
