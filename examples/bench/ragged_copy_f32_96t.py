# Ragged tiled copy benchmark, float32 on 96 threads: B = A for a 10000 x 9000 float32 tensor,
# global -> shared -> global, one 50 x 90 tile per CTA of 96 threads. A tile row is 360 bytes
# and starts 8 bytes past a 16-byte boundary in every other CTA column (bx * 90 floats), so
# no split of the tile has 16-byte vectors on both sides. gmem_smem_peel chooses the global
# width alone: 22 aligned 16-byte global vectors per row (two 8-byte shared accesses each:
# shared rows are 360 bytes apart) and an 8-byte head or tail, the case chosen per CTA at run
# time. `tirx bench` measures it against cudaMemcpy of the same bytes.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

M, N = 10000, 9000
TM, TN = 50, 90
dtype = "float32"


@T.prim_func
def ragged_copy_f32_96t(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    # First id = blockIdx.x: consecutive CTAs walk along a row of tiles.
    bx, by = T.cta_id([N // TN, M // TM])
    tx = T.thread_id([96])
    A_smem = T.alloc_buffer((TM, TN), dtype, scope="shared")
    Tx.cta.copy(A_smem[0:TM, 0:TN], A[by * TM : by * TM + TM, bx * TN : bx * TN + TN])
    T.cuda.cta_sync()
    Tx.cta.copy(B[by * TM : by * TM + TM, bx * TN : bx * TN + TN], A_smem[0:TM, 0:TN])
