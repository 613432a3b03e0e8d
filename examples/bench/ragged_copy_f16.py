# Ragged tiled copy benchmark, float16: B = A for a 15360 x 4000 float16 tensor, global ->
# shared -> global, one 60 x 100 tile per CTA of 128 threads. A tile row is 200 bytes and
# starts 8 bytes past a 16-byte boundary in every other CTA column (bx * 100 halves), so no
# split of the tile has 16-byte vectors on both sides. gmem_smem_peel chooses the global width
# alone: per CTA it computes the rows' misalignment (0 or 8 bytes) and runs that case's plan:
# 12 aligned 16-byte global vectors per row (two 8-byte shared accesses each: shared rows are
# 200 bytes apart) and an 8-byte head or tail, instead of 8-byte vectors throughout.
# `tirx bench` measures it against cudaMemcpy of the same bytes.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

M, N = 15360, 4000
TM, TN = 60, 100
dtype = "float16"


@T.prim_func
def ragged_copy_f16(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    # First id = blockIdx.x: consecutive CTAs walk along a row of tiles.
    bx, by = T.cta_id([N // TN, M // TM])
    tx = T.thread_id([128])
    A_smem = T.alloc_buffer((TM, TN), dtype, scope="shared")
    Tx.cta.copy(A_smem[0:TM, 0:TN], A[by * TM : by * TM + TM, bx * TN : bx * TN + TN])
    T.cuda.cta_sync()
    Tx.cta.copy(B[by * TM : by * TM + TM, bx * TN : bx * TN + TN], A_smem[0:TM, 0:TN])
