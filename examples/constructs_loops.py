# Scalar code around tile primitives: loops (range / T.serial / T.unroll /
# T.grid), bindings, if/elif/else on scope ids, loads, stores, casts and math.
# 64 threads; thread t writes row t of B:
#   B[t, j] = max(A[t, j] * 2 - 1, 0)      for even t
#   B[t, j] = sqrt(|A[t, j]|) + j % 3      for odd t < 32
#   B[t, j] = A[t, (j + t) % 16]           otherwise (a rotated copy)
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

M, N = 64, 16
dtype = "float32"


@T.prim_func
def constructs_loops(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    T.cta_id([1]); T.warp_id([2]); T.lane_id([32])
    tid = T.thread_id([M])
    half = N // 2
    if tid % 2 == 0:
        for j in T.unroll(half):
            B[tid, j] = T.max(A[tid, j] * 2.0 - 1.0, 0.0)
        for j in T.serial(half, N):
            v = A[tid, j]
            B[tid, j] = T.if_then_else(v * 2.0 - 1.0 > 0.0, v * 2.0 - 1.0, T.float32(0))
    elif tid < 32:
        for j in range(N):
            B[tid, j] = T.sqrt(T.abs(A[tid, j])) + T.cast(j % 3, dtype)
    else:
        for i, j in T.grid(1, N):
            col = (j + tid) % N
            B[tid + i, j] = A[tid, col]
