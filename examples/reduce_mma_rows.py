# reduce -> local_view: row reductions of per-warp 16x128 mma accumulators
# (2 warps, 32 rows). Element (r, c) of a warp's tile lives on lane
# 4 (r % 8) + (c % 8) // 2, so a row is spread over the 4 lanes of a quad. The
# per-quad destination Y (16, 4) keeps that: `thread_reduce=True` folds each
# lane's 32 registers of a row, then a butterfly over the quad (masks 2, 1)
# gives all 4 lanes the row's value. Results: Mx[r, q] = max A[r, :] for every
# quad lane q; Sm[r, q] = Sm[r, q] + sum A[r, :] (accum), the sum taken as
# per-lane partials first, then reduced in place.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

acc = TileLayout(S[(2, 8, 16, 4, 2) : (32, 4 @ laneid, 2, 1 @ laneid, 1)])
quad = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


@T.prim_func
def reduce_mma_rows(A_ptr: T.handle, Mx_ptr: T.handle, Sm_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 128), "float32")
    Mx = T.match_buffer(Mx_ptr, (32, 4), "float32")
    Sm = T.match_buffer(Sm_ptr, (32, 4), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([64])
    w = T.warp_id([2])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout=acc)
    Y = T.alloc_buffer((16, 4), "float32", scope="local", layout=quad)
    P = T.alloc_buffer((16, 4), "float32", scope="local", layout=quad)
    Tx.warp.copy(X[0:16, 0:128], A[w * 16 : w * 16 + 16, 0:128])
    Tx.warp.max(Y[0:16, 0:4], X[0:16, 0:128], thread_reduce=True)
    Tx.warp.copy(Mx[w * 16 : w * 16 + 16, 0:4], Y[0:16, 0:4])
    Tx.warp.sum(P[0:16, 0:4], X[0:16, 0:128])  # per-lane partials, no shuffle
    Tx.warp.copy(Y[0:16, 0:4], Sm[w * 16 : w * 16 + 16, 0:4])
    Tx.warp.sum(P[0:16, 0:4], P[0:16, 0:4], thread_reduce=True)  # in place: the quad butterfly
    Tx.warp.add(Y[0:16, 0:4], Y[0:16, 0:4], P[0:16, 0:4])
    Tx.warp.copy(Sm[w * 16 : w * 16 + 16, 0:4], Y[0:16, 0:4])
