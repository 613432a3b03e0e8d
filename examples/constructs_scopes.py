# Execution scopes: 256 threads = 2 warpgroups = 8 warps. The CTA stages a
# 256x16 tile into shared memory; each warpgroup loads its 128 rows into
# registers (`wg_local_layout`: thread t of the group owns row t) and scales
# them; warpgroup 1 also adds 1. The CTA writes the result back.
# Result: B[r] = 2 * A[r] (+ 1 for r >= 128).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, wg_local_layout

rows, cols, dtype = 256, 16, "float32"


@T.prim_func
def constructs_scopes(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (rows, cols), dtype)
    B = T.match_buffer(B_ptr, (rows, cols), dtype)
    T.device_entry()
    T.cta_id([1])
    wg = T.warpgroup_id([2]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id_in_wg([128])
    T.warp_id([8]); T.thread_id([256])
    A_smem = T.alloc_shared((rows, cols), dtype)
    Tx.cta.copy(A_smem[0:256, 0:16], A[0:256, 0:16])
    T.cuda.cta_sync()
    R = T.alloc_local((128, cols), dtype, layout=wg_local_layout(cols))
    base = wg * 128
    Tx.wg.copy(R[0:128, 0:16], A_smem[base : base + 128, 0:16])
    Tx.wg.mul(R[0:128, 0:16], R[0:128, 0:16], 2.0)
    if wg == 1:
        Tx.warpgroup.add(R, R, 1.0)
    Tx.wg.copy(A_smem[base : base + 128, 0:16], R[0:128, 0:16])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:256, 0:16], A_smem[0:256, 0:16])
