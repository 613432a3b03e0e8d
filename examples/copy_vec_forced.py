# Forced fixed-width copies (docs/tile-primitives.md §3.16): every thread moves its row of a
# 128x128 f32 tile in 16-byte vectors with exactly the PTX instructions it asks for —
# `ld.global.nc.L1::no_allocate.L2::256B.v4.u32` into registers, `st.shared.v4.u32` — through
# a 64 KiB `scope="shared"` tile (over 48 KiB: placed in dynamic shared memory, with a note),
# then writes the row of its neighbour back. Result: B = A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx


@T.prim_func
def copy_vec_forced(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 128), "float32")
    B = T.match_buffer(B_ptr, (128, 128), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([128])
    A_smem = T.alloc_buffer((128, 128), "float32", scope="shared")
    left = A_smem.sub[:, 0:64]  # a view of the left half
    R = T.alloc_local((4,), "float32")
    for c in range(16):
        # global -> shared through a register temporary, read-only path with cache hints
        Tx.copy(
            left[tid, c * 4 : c * 4 + 4],
            A[tid, c * 4 : c * 4 + 4],
            dispatch="vec_128b",
            cache="nc",
            l1_evict="L1::no_allocate",
            prefetch_size="L2::256B",
        )
        # global -> registers -> shared, one instruction each
        Tx.copy(R[0:4], A[tid, 64 + c * 4 : 68 + c * 4], dispatch="vec_128b", cache="nc")
        Tx.copy(A_smem[tid, 64 + c * 4 : 68 + c * 4], R[0:4], dispatch="vec_128b")
    T.cuda.cta_sync()
    row: T.let = (tid + 1) % 128
    for c in range(32):
        Tx.copy(R[0:4], A_smem[row, c * 4 : c * 4 + 4], dispatch="vec_128b")
        T.evaluate(R[0])
        Tx.copy(B[row, c * 4 : c * 4 + 4], R[0:4], dispatch="vec_128b")
