# Swizzled shared memory: a 128B swizzle (ComposeLayout(3, 3, 3, ...)) over a
# 32x64 float16 tile, the layout a TMA or ldmatrix consumer would use. The
# warp copies global -> swizzled shared -> global. Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout

M, N, dtype = 32, 64, "float16"
swizzled = ComposeLayout(3, 3, 3, TileLayout(S[(M, N)]))


@T.prim_func
def constructs_swizzle(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    A_smem = T.alloc_buffer((M, N), dtype, scope="shared", layout=swizzled)
    Tx.warp.copy(A_smem[:, :], A[:, :])
    T.cuda.cta_sync()
    Tx.warp.copy(B[0:M, 0:N], A_smem[0:M, 0:N])
