# elementwise -> reg on mma accumulator fragments: 4 warps each own a 16x128
# float32 fragment (element (r, c) on lane 4*(r%8) + (c%8)/2, 64 registers),
# compute exp(x * 1.5 + 0.25) in float32 and convert the result to bfloat16
# in register pairs (__float22bfloat162_rn). Result: B == bf16(exp(1.5 * A + 0.25)).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

frag = TileLayout(S[(2, 8, 16, 4, 2) : (32, 4 @ laneid, 2, 1 @ laneid, 1)])
fs = (slice(0, 16), slice(0, 128))


@T.prim_func
def ewise_fragment_exp(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 128), "float32")
    B = T.match_buffer(B_ptr, (64, 128), "bfloat16")
    T.device_entry(); T.cta_id([1]); T.thread_id([128])
    w = T.warp_id([4])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout=frag)
    Y = T.alloc_buffer((16, 128), "bfloat16", scope="local", layout=frag)
    Tx.warp.copy(X[fs], A[w * 16 : w * 16 + 16, 0:128])
    Tx.warp.exp(X[fs], X[fs], bias=0.25, scale=1.5)
    Tx.warp.cast(Y[fs], X[fs])  # 32 pair conversions per lane
    Tx.warp.copy(B[w * 16 : w * 16 + 16, 0:128], Y[fs])
