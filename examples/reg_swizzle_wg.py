# copy -> reg into 128-byte-swizzled shared memory: a warpgroup holds a
# 128x64 float16 tile (thread i owns row i, 64 registers), stores it to a
# ComposeLayout(3, 3, 3) shared tile and loads it back. The swizzle is walked
# with per-thread signed strides (the fast path), 16-byte accesses, 8 rounds.
# Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, wg_local_layout

fs = (slice(0, 128), slice(0, 64))


@T.prim_func
def reg_swizzle_wg(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 64), "float16")
    B = T.match_buffer(B_ptr, (128, 64), "float16")
    T.device_entry(); T.cta_id([1]); T.thread_id([128])
    A_smem = T.alloc_buffer((128, 64), "float16", scope="shared", layout=ComposeLayout(3, 3, 3, TileLayout(S[(128, 64)])))
    R = T.alloc_buffer((128, 64), "float16", scope="local", layout=wg_local_layout(64))
    Tx.wg.copy(R[fs], A[fs])
    Tx.wg.copy(A_smem[fs], R[fs])  # registers -> swizzled shared
    T.cuda.cta_sync()
    Tx.wg.copy(R[fs], A_smem[fs])  # swizzled shared -> registers
    Tx.wg.copy(B[fs], R[fs])
