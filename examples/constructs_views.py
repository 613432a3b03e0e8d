# Views: a warp owns a 32x8 register tile (lane i holds row i); `.local()`
# exposes one lane's 8 registers for scalar code, `.view()` reshapes shared
# memory. Result: B[i, j] = 3 * A[i, j] + j.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

shape, dtype = (32, 8), "float32"
fs = tuple(slice(0, d) for d in shape)


@T.prim_func
def constructs_views(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_shared(shape, dtype)
    R = T.alloc_local(shape, dtype, layout=TileLayout(S[shape : (1 @ laneid, 1)]))
    Tx.warp.copy(A_smem[fs], A[fs])
    T.cuda.cta_sync()
    Tx.warp.copy(R[fs], A_smem[fs])
    R_local = R.local()  # this lane's 8 registers (row `tid`)
    for j in range(8):
        R_local[j] = R_local[j] * 3.0 + T.cast(j, dtype)
    T.cuda.cta_sync()
    A_flat = A_smem.view(256)  # the same shared bytes, flat
    Tx.copy(A_flat[tid * 8 : tid * 8 + 8], R_local[0:8])  # thread scope: my row
    T.cuda.cta_sync()
    Tx.warp.copy(B[fs], A_smem[fs])
