# A launch check: B = A for an (n, 128) float32 matrix with n a kernel argument, one
# 64-row tile per CTA through shared memory (gmem_smem, 16-byte vectors). The grid is
# `(n + 63) // 64` CTAs; the last tile stays inside `A` only when n is a multiple of
# 64, which nothing here states, so lowering emits the launch check
# `(n + 63) // 64 * 64 <= n` (`tirx explain` lists it): every launch (GPU, simulator)
# evaluates it first and refuses n = 100 before anything runs, naming the region.
# Run: tirx sim examples/copy_rows_checked.py --arg n=192
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx


@T.prim_func
def copy_rows_checked(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n, 128), "float32")
    B = T.match_buffer(B_ptr, (n, 128), "float32")
    T.device_entry()
    bx = T.cta_id([(n + 63) // 64])
    T.thread_id([128])
    S_ = T.alloc_buffer((64, 128), "float32", scope="shared")
    Tx.cta.copy(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])
    T.cuda.cta_sync()
    Tx.cta.copy(B[bx * 64 : bx * 64 + 64, 0:128], S_[0:64, 0:128])
