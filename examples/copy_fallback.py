# copy -> fallback (seed 003): a warp copies a 4x6 float32 tile. 24 elements
# do not divide over 32 lanes, so gmem_smem declines. Left to the dispatcher,
# gmem_smem_predicated would keep all lanes working (6 lanes, one 16-byte vector
# each); this demo forces the fallback, where lane 0 copies element by element
# (and tirx warns about the slow pick). Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

shape, dtype = (4, 6), "float32"  # 24 elements, 32 threads -> 24 does not divide
s_layout = TileLayout(S[shape])
full = (slice(0, 4), slice(0, 6))


@T.prim_func
def copy_fallback(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    A_smem = T.alloc_buffer(shape, dtype, scope="shared", layout=s_layout)
    Tx.warp.copy(A_smem[full], A[full], dispatch="fallback")
    T.cuda.cta_sync()
    Tx.warp.copy(B[full], A_smem[full], dispatch="fallback")
