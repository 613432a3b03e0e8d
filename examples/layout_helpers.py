# Layouts built by the layout helpers, in a warpgroup copy round trip: global
# -> the canonical 128-byte-swizzled shared tile of `mma_shared_layout` -> the
# register fragment of a `tcgen05.ld.16x256b` (`tcgen05_atom_layout`) ->
# global; warp 0 also loads the m16n16 A fragment of `mma.sync` (built with
# `tile_to`) from the same shared tile with ldmatrix. Result: B == A and
# C == A[0:16, 0:16].
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, laneid, mma_shared_layout, tcgen05_atom_layout

M, N, dtype = 64, 64, "float16"
SMEM = mma_shared_layout(dtype, 3, (M, N))
FRAG = tcgen05_atom_layout("16x256b", (M, N), dtype)
A_FRAG = S[(2, 8, 4, 2):(2, 4 @ laneid, 1 @ laneid, 1)].tile_to([16, 16], [16, 8])


@T.prim_func
def layout_helpers(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    C = T.match_buffer(C_ptr, (16, 16), dtype)
    T.device_entry(); T.cta_id([1]); w = T.warp_id([4]); T.lane_id([32]); T.thread_id([128])
    A_smem = T.alloc_buffer((M, N), dtype, scope="shared", layout=SMEM)
    R = T.alloc_buffer((M, N), dtype, scope="local", layout=FRAG)
    F = T.alloc_buffer((16, 16), dtype, scope="local", layout=A_FRAG)
    Tx.wg.copy(A_smem[:, :], A[:, :])
    T.cuda.cta_sync()
    Tx.wg.copy(R[:, :], A_smem[:, :])  # swizzled shared -> 16x256b fragment
    Tx.wg.copy(B[:, :], R[:, :])
    if w == 0:
        Tx.warp.copy(F[:, :], A_smem[0:16, 0:16])  # ldmatrix x4 into the A fragment
        Tx.warp.copy(C[:, :], F[:, :])
