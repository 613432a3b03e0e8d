# copy -> ldstmatrix on 128B-swizzled shared memory: a warp loads a 32x64
# float16 tile into m8n8 register fragments with eight ldmatrix.x4 (the
# swizzle walked with per-lane strides, no xor per instruction), doubles it in
# registers, and stores it with eight stmatrix.x4 into a second swizzled tile.
# Result: B == 2 * A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid

M, N, dtype = 32, 64, "float16"
swizzled = ComposeLayout(3, 3, 3, TileLayout(S[(M, N)]))
# Lane l holds row 8 rb + l // 4, columns 8 cb + 2 (l % 4) + {0, 1} of every
# row block rb < 4 and column block cb < 8: 64 registers, pairs adjacent.
frag = TileLayout(S[(4, 8, 8, 4, 2) : (2, 4 @ laneid, 8, 1 @ laneid, 1)])
fs = (slice(0, M), slice(0, N))


@T.prim_func
def ldstmatrix_swizzle_x4(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    A_smem = T.alloc_buffer((M, N), dtype, scope="shared", layout=swizzled)
    B_smem = T.alloc_buffer((M, N), dtype, scope="shared", layout=swizzled)
    Tx.warp.copy(A_smem[fs], A[fs])
    T.cuda.cta_sync()
    R = T.alloc_buffer((M, N), dtype, scope="local", layout=frag)
    Tx.warp.copy(R[fs], A_smem[fs])  # shared -> registers: ldmatrix.x4
    Tx.warp.add(R[fs], R[fs], R[fs])
    Tx.warp.copy(B_smem[fs], R[fs])  # registers -> shared: stmatrix.x4
    T.cuda.cta_sync()
    Tx.warp.copy(B[fs], B_smem[fs])
