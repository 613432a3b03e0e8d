# elementwise -> reg casts at warpgroup scope: each thread converts its
# 8 float32 registers to float16 in pairs (__float22half2_rn) and back
# (__half22float2), and takes the row maximum with 0 on f16 pairs.
# Result: B == f32(f16(max(A, 0))).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tid_in_wg

lay = TileLayout(S[(128, 8) : (1 @ tid_in_wg, 1)])
fs = (slice(0, 128), slice(0, 8))


@T.prim_func
def ewise_cast_wg(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 8), "float32")
    B = T.match_buffer(B_ptr, (128, 8), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([128])
    X = T.alloc_buffer((128, 8), "float32", scope="local", layout=lay)
    H = T.alloc_buffer((128, 8), "float16", scope="local", layout=lay)
    Tx.wg.copy(X[fs], A[fs])
    Tx.wg.cast(H[fs], X[fs])
    Tx.wg.maximum(H[fs], H[fs], 0.0)
    Tx.wg.cast(X[fs], H[fs])
    Tx.wg.copy(B[fs], X[fs])
