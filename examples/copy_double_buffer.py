# copy -> gmem_smem with value ranges (docs/tile-primitives.md §1.3, §3.1): a CTA streams 8 tiles of
# 32x32 float32 through a two-stage shared buffer. Stage (k + 1) % 2 loads tile k + 1 while
# stage k % 2 stores tile k; `if k + 1 < 8` narrows k to [0, 6], so A[k + 1] is in bounds. The
# `%` begins are affine atoms: every copy is cooperative (128 threads, 16-byte vectors).
# Then, under `if w >= 1` (w in [1, 3]), warp w copies tile w - 1 of A to rows (w - 1) * 32 of
# a second buffer, which the CTA writes to C. Result: B == A, C == tiles 0..2 of A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

tiles, rows, cols, dtype = 8, 32, 32, "float32"


@T.prim_func
def copy_double_buffer(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (tiles, rows, cols), dtype)
    B = T.match_buffer(B_ptr, (tiles, rows, cols), dtype)
    C = T.match_buffer(C_ptr, (96, cols), dtype)
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); w = T.warp_id([4]); T.thread_id([128])
    S1 = T.alloc_buffer((2, rows, cols), dtype, scope="shared")
    Tx.cta.copy(S1[0, 0:32, 0:32], A[0, 0:32, 0:32])
    for k in range(tiles):
        T.cuda.cta_sync()
        if k + 1 < tiles:
            Tx.cta.copy(S1[(k + 1) % 2, 0:32, 0:32], A[k + 1, 0:32, 0:32])
        Tx.cta.copy(B[k, 0:32, 0:32], S1[k % 2, 0:32, 0:32])
    T.cuda.cta_sync()
    S2 = T.alloc_buffer((96, cols), dtype, scope="shared")
    if w >= 1:
        Tx.warp.copy(S2[(w - 1) * 32:(w - 1) * 32 + 32, 0:32], A[(w - 1), 0:32, 0:32])
    T.cuda.cta_sync()
    Tx.cta.copy(C[0:96, 0:32], S2[0:96, 0:32])
