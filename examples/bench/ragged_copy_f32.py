# Ragged tiled copy benchmark: B = A for a 15360 x 4000 float32 tensor, global -> shared ->
# global, one 60 x 100 tile per CTA of 128 threads. A tile has 6000 elements, which 128
# threads do not divide, so gmem_smem declines; gmem_smem_predicated keeps all 128 threads
# on 16-byte vectors (12 rounds, the last one guarded) instead of the reference's one-thread
# scalar fallback. `tirx bench` measures it against cudaMemcpy of the same bytes.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

M, N = 15360, 4000
TM, TN = 60, 100
dtype = "float32"


@T.prim_func
def ragged_copy_f32(A_ptr: T.handle, B_ptr: T.handle):
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
