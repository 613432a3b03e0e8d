# elementwise -> reg (seed 001): a warp takes sqrt of a 32x8 float32 tile held
# in registers (lane i owns row i). Result: B == sqrt(A).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

r_layout = TileLayout(S[(32, 8) : (1 @ laneid, 1)]); fs = (slice(0, 32), slice(0, 8))


@T.prim_func
def elementwise_reg(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32"); B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((32, 8), "float32", scope="shared", layout=TileLayout(S[(32, 8)]))
    Tx.warp.copy(A_smem[fs], A[fs]); T.cuda.cta_sync()
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=r_layout)
    Tx.warp.copy(R[fs], A_smem[fs])
    Tx.warp.sqrt(R[fs], R[fs])  # elementwise reg dispatch
    Tx.warp.copy(A_smem[fs], R[fs]); T.cuda.cta_sync()
    Tx.warp.copy(B[fs], A_smem[fs])
