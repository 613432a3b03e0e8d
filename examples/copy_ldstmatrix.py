# copy -> ldstmatrix (seed 004): a warp loads num=2 8x8 float16 tiles
# (an 8x16 matrix) from shared memory into the m8n8 register fragment with
# one `ldmatrix.x2`: lane i holds row i // 4, column pair i % 4 of each tile.
# Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

num = 2; M, N = 8, num * 8
r_layout = TileLayout(S[(8, 4, num, 2) : (4 @ laneid, 1 @ laneid, 2, 1)])
s_layout = TileLayout(S[(8, 4, num, 2) : (num * 8, 2, 8, 1)])  # row-major
full = (slice(0, 8), slice(0, 4), slice(0, num), slice(0, 2))


@T.prim_func
def copy_ldstmatrix(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), "float16")
    B = T.match_buffer(B_ptr, (M, N), "float16")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((8, 4, num, 2), "float16", scope="shared", layout=s_layout)
    row = tid // 4
    cp = tid % 4
    for n, e in T.grid(num, 2):
        A_smem[row, cp, n, e] = A[row, n * 8 + cp * 2 + e]
    T.cuda.cta_sync()
    R = T.alloc_buffer((8, 4, num, 2), "float16", scope="local", layout=r_layout)
    Tx.warp.copy(R[full], A_smem[full])  # shared -> register (ldmatrix)
    R_local = R.local()  # this lane's 4 registers: (n, e) at n * 2 + e
    for n, e in T.grid(num, 2):
        B[row, n * 8 + cp * 2 + e] = R_local[n * 2 + e]
