# reduce -> shared at cta scope: 64 threads reduce a 4x16x12 float32 tile in
# shared memory over non-contiguous axes (0, 2) and over the last axis with
# accum. Groups of 32 threads (min(next_pow2(48), 32, 64)) fold 48 elements per
# column sum; groups of 16 fold a row of 12. Each call ends with __syncthreads.
# Results: Cs[j] = sum A[:, j, :]; Rm[i, j] = max(Rm[i, j], max A[i, j, :]).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

fa = (slice(0, 4), slice(0, 16), slice(0, 12))


@T.prim_func
def reduce_shared_cta(A_ptr: T.handle, Cs_ptr: T.handle, Rm_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 16, 12), "float32")
    Cs = T.match_buffer(Cs_ptr, (16,), "float32")
    Rm = T.match_buffer(Rm_ptr, (4, 16), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([64])
    A_s = T.alloc_buffer((4, 16, 12), "float32", scope="shared")
    C_s = T.alloc_buffer((16,), "float32", scope="shared")
    R_s = T.alloc_buffer((4, 16), "float32", scope="shared")
    Tx.cta.copy(A_s[fa], A[fa])
    Tx.cta.copy(R_s[0:4, 0:16], Rm[0:4, 0:16])
    T.cuda.cta_sync()
    Tx.cta.sum(C_s[0:16], A_s[fa], axes=(0, -1))
    Tx.cta.max(R_s[0:4, 0:16], A_s[fa], accum=True)
    Tx.cta.copy(Cs[0:16], C_s[0:16])
    Tx.cta.copy(Rm[0:4, 0:16], R_s[0:4, 0:16])
