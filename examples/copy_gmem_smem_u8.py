# copy -> gmem_smem with 8-bit elements: a CTA of 128 threads copies a 64x64 uint8
# tile global -> shared -> global. Rows are 64 bytes, so each thread moves 16 elements
# (one 128-bit access) per round: 4096 / (128 x 16) = 2 rounds. Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

shape, dtype = (64, 64), "uint8"


@T.prim_func
def copy_gmem_smem_u8(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, shape, dtype)
    B = T.match_buffer(B_ptr, shape, dtype)
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    A_smem = T.alloc_buffer(shape, dtype, scope="shared")
    Tx.cta.copy(A_smem[0:64, 0:64], A[0:64, 0:64])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:64, 0:64], A_smem[0:64, 0:64])
