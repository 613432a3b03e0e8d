# elementwise -> reg on packed f16 pairs: a warp holds three 32x8 float16
# tiles (lane i owns row i). add, mul and fma run as __hadd2/__hmul2/__hfma2
# on register pairs (HADD2/HMUL2/HFMA2 on sm_90). Result: C == (A + B) * B * 0.5 + A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

fs = (slice(0, 32), slice(0, 8))
lay = TileLayout(S[(32, 8) : (1 @ laneid, 1)])


@T.prim_func
def ewise_packed_f16(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (32, 8), "float16")
    Bg = T.match_buffer(B_ptr, (32, 8), "float16")
    Cg = T.match_buffer(C_ptr, (32, 8), "float16")
    T.device_entry(); T.cta_id([1]); T.thread_id([32])
    A = T.alloc_buffer((32, 8), "float16", scope="local", layout=lay)
    B = T.alloc_buffer((32, 8), "float16", scope="local", layout=lay)
    C = T.alloc_buffer((32, 8), "float16", scope="local", layout=lay)
    Tx.warp.copy(A[fs], Ag[fs])
    Tx.warp.copy(B[fs], Bg[fs])
    Tx.warp.add(C[fs], A[fs], B[fs])       # __hadd2
    Tx.warp.mul(C[fs], C[fs], B[fs])       # __hmul2
    Tx.warp.fma(C[fs], C[fs], 0.5, A[fs])  # __hfma2
    Tx.warp.copy(Cg[fs], C[fs])
