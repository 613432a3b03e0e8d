# copy -> reg (seed 000): a warp round-trips a 32x8 float32 tile
# shared -> registers -> shared. The register layout puts row i in lane i
# (8 contiguous registers per lane), so both copies dispatch to `reg`.
# Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

shape, dtype = (32, 8), "float32"
r_layout = TileLayout(S[shape : (1 @ laneid, 1)])  # lane i -> row i, 8 regs
s_layout = TileLayout(S[shape])
fs = (slice(0, 32), slice(0, 8))


@T.prim_func
def copy_reg(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer(shape, dtype, scope="shared", layout=s_layout)
    for kk in range(8):
        A_smem[tid, kk] = A[tid, kk]
    T.cuda.cta_sync()
    R = T.alloc_buffer(shape, dtype, scope="local", layout=r_layout)
    Tx.warp.copy(R[fs], A_smem[fs])  # shared -> register
    for kk in range(8):
        A_smem[tid, kk] = T.float32(0)
    T.cuda.cta_sync()
    Tx.warp.copy(A_smem[fs], R[fs])  # register -> shared
    T.cuda.cta_sync()
    for kk in range(8):
        B[tid, kk] = A_smem[tid, kk]
