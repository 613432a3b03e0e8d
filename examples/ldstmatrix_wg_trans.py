# copy -> ldstmatrix, transposing: a warpgroup reads a 64x32 (K x N) float16
# tile stored K-major in shared memory as n-major m8n8 fragments (the
# B-operand shape of an MMA) with ldmatrix.x4.trans: warp w takes columns
# 8w .. 8w+8, lane l holds column 8w + l // 4 and rows 2 (l % 4) + {0, 1} of
# every 8-row block. The fragments go back through stmatrix.x4.trans into a
# second tile. Both tiles use the 64B swizzle of 64-byte rows, which keeps the
# 8 rows of every 8x8 matrix in distinct banks. Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, tid_in_wg

K, N, dtype = 64, 32, "float16"
# K = 8 blocks (registers, stride 2) x 4 lane pairs x 2; N = 4 warps x 8 lanes.
frag = TileLayout(S[(8, 4, 2, 4, 8) : (2, 1 @ tid_in_wg, 1, 32 @ tid_in_wg, 4 @ tid_in_wg)])
swizzled = ComposeLayout(3, 2, 3, TileLayout(S[(K, N)]))
fs = (slice(0, K), slice(0, N))


@T.prim_func
def ldstmatrix_wg_trans(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (K, N), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    T.device_entry(); T.cta_id([1])
    T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id_in_wg([128]); T.thread_id([128])
    A_smem = T.alloc_buffer((K, N), dtype, scope="shared", layout=swizzled)
    B_smem = T.alloc_buffer((K, N), dtype, scope="shared", layout=swizzled)
    Tx.wg.copy(A_smem[fs], A[fs])
    T.cuda.cta_sync()
    R = T.alloc_local((K, N), dtype, layout=frag)
    Tx.wg.copy(R[fs], A_smem[fs])  # ldmatrix.x4.trans, 2 per warp
    Tx.wg.copy(B_smem[fs], R[fs])  # stmatrix.x4.trans
    T.cuda.cta_sync()
    Tx.wg.copy(B[fs], B_smem[fs])
