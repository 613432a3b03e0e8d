# Row softmax, one CTA (256 threads) per row of 2048 float32 — the flagship layout at a size the
# simulator checks quickly (examples/python/softmax.py builds it for any M, N and bfloat16;
# python/bench/kernels.py times it at 16384 x 8192 against torch.softmax). Thread t holds the
# 16-byte vectors t and t + 256 of its row in registers: one coalesced pass each way. The row
# max and sum are thread-local folds, then CTA reductions (warp xor butterflies, one partial per
# warp through shared memory); exp(x - max) is exp2((x - max) * log2 e), rounded once in f32.
# Result: B[r, :] = exp(A[r, :] - max A[r, :]) / sum exp(A[r, :] - max A[r, :]).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tx

M, N, dtype = 4, 2048, "float32"
THREADS, VEC = 256, 4
PER = N // THREADS  # registers per thread
ROW = TileLayout(S[(N // (THREADS * VEC), THREADS, VEC) : (VEC, 1 @ tx, 1)])
LOG2E = 1.4426950408889634


@T.prim_func
def softmax(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    r = T.cta_id([M])
    T.warp_id([THREADS // 32]); T.lane_id([32]); T.thread_id([THREADS])
    X = T.alloc_buffer((N,), dtype, scope="local", layout=ROW)
    part = T.alloc_buffer((1,), "float32", scope="local")
    scratch = T.alloc_buffer((THREADS // 32,), "float32", scope="shared")
    Tx.cta.copy(X[0:N], A[r, 0:N])
    Xl = X.local()  # this thread's PER registers
    Tx.max(part[0:1], Xl[0:PER])
    m = T.cuda.cta_max(part[0], THREADS // 32, scratch.ptr_to([0]))
    Tx.exp2(Xl[0:PER], Xl[0:PER], -m * LOG2E, LOG2E)
    Tx.sum(part[0:1], Xl[0:PER])
    s = T.cuda.cta_sum(part[0], THREADS // 32, scratch.ptr_to([0]))
    Tx.mul(Xl[0:PER], Xl[0:PER], 1.0 / s)
    Tx.cta.copy(B[r, 0:N], X[0:N])
