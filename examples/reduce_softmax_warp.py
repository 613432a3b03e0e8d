# reduce -> warp_shuffle: a row softmax in registers, one warp per row of 1024
# float32 (8 rows, 2 CTAs of 4 warps). Lane l holds columns 4l..4l+3 of each
# 128-column block (32 registers, loaded 16 bytes at a time); the row max and
# the row sum are thread-local folds then an xor butterfly over the 32 lanes,
# left in every lane (the destination is replicated over laneid). Result:
# B[r, :] = exp(A[r, :] - max A[r, :]) / sum exp(A[r, :] - max A[r, :]).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid

N = 1024
row = TileLayout(S[(8, 32, 4) : (4, 1 @ laneid, 1)])  # column j: lane (j // 4) % 32, register (j // 128) * 4 + j % 4
lanes = TileLayout(S[1:1] + R[32 : 1 @ laneid])  # one value, in every lane


@T.prim_func
def reduce_softmax_warp(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, N), "float32")
    B = T.match_buffer(B_ptr, (8, N), "float32")
    T.device_entry()
    bx = T.cta_id([2])
    T.thread_id([128])
    w = T.warp_id([4])
    X = T.alloc_buffer((N,), "float32", scope="local", layout=row)
    M = T.alloc_buffer((1,), "float32", scope="local", layout=lanes)
    Z = T.alloc_buffer((1,), "float32", scope="local", layout=lanes)
    r = bx * 4 + w
    Tx.warp.copy(X[0:N], A[r, 0:N])
    Tx.warp.max(M[0:1], X[0:N])  # 31 fmaxf per lane, then 5 shuffles
    Xl = X.local()  # this lane's 32 registers
    Ml = M.local()
    Tx.sub(Xl[0:32], Xl[0:32], Ml[0])
    Tx.exp(Xl[0:32], Xl[0:32])
    Tx.warp.sum(Z[0:1], X[0:N])
    Zl = Z.local()
    Tx.fdiv(Xl[0:32], Xl[0:32], Zl[0])
    Tx.warp.copy(B[r, 0:N], X[0:N])
