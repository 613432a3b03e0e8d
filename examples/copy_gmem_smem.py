# copy -> gmem_smem (seed 002): a warp copies a 32x32 float32 tile
# global -> shared and back, 128-bit vectors, 8 rounds. Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

shape, dtype = (32, 32), "float32"
s_layout = TileLayout(S[shape])
fs = (slice(0, 32), slice(0, 32))


@T.prim_func
def copy_gmem_smem(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    A_smem = T.alloc_buffer(shape, dtype, scope="shared", layout=s_layout)
    Tx.warp.copy(A_smem[fs], A[fs])  # global -> shared
    T.cuda.cta_sync()
    Tx.warp.copy(B[fs], A_smem[fs])  # shared -> global
