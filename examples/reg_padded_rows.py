# copy -> reg with padded shared rows: rows of 16 float16 are stored 20
# elements apart (bank-conflict padding), so thread bases are 40 bytes apart
# and 16-byte vectors would be misaligned: the variant picks 8-byte vectors
# (vec 4, 4 rounds; `tirx explain` says why). Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tid_in_wg

fs = (slice(0, 128), slice(0, 16))


@T.prim_func
def reg_padded_rows(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 16), "float16")
    B = T.match_buffer(B_ptr, (128, 16), "float16")
    T.device_entry(); T.cta_id([1]); T.thread_id([128])
    A_smem = T.alloc_buffer((128, 16), "float16", scope="shared", layout=TileLayout(S[(128, 16) : (20, 1)]))
    R = T.alloc_buffer((128, 16), "float16", scope="local", layout=TileLayout(S[(128, 16) : (1 @ tid_in_wg, 1)]))
    Tx.wg.copy(R[fs], A[fs])
    Tx.wg.copy(A_smem[fs], R[fs])  # 8-byte stores at 40-byte row steps
    T.cuda.cta_sync()
    Tx.wg.copy(R[fs], A_smem[fs])
    Tx.wg.copy(B[fs], R[fs])
