# Tiled copy benchmark: B = A for a 16384 x 4096 float32 tensor, global -> shared -> global,
# one 64 x 128 tile per CTA of 128 threads (gmem_smem variant, 128-bit vectors).
# Each tensor is 256 MiB, far larger than the H100's 50 MB L2, so both this kernel and
# the cudaMemcpy it is compared with by `tirx bench` run from DRAM.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

M, N = 16384, 4096
TM, TN = 64, 128
dtype = "float32"


@T.prim_func
def tiled_copy_f32(A_ptr: T.handle, B_ptr: T.handle):
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
