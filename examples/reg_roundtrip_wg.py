# copy -> reg at warpgroup scope: 128 threads load a 128x16 float16 tile from
# global memory into registers (thread i owns row i, 16 registers), store it
# to shared memory, read it back into registers and store it to global.
# Every access is 16 bytes (vec 8, 2 rounds). Result: B == A.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tid_in_wg

fs = (slice(0, 128), slice(0, 16))


@T.prim_func
def reg_roundtrip_wg(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 16), "float16")
    B = T.match_buffer(B_ptr, (128, 16), "float16")
    T.device_entry(); T.cta_id([1]); T.thread_id([128])
    A_smem = T.alloc_buffer((128, 16), "float16", scope="shared")
    R = T.alloc_buffer((128, 16), "float16", scope="local", layout=TileLayout(S[(128, 16) : (1 @ tid_in_wg, 1)]))
    Tx.wg.copy(R[fs], A[fs], cache="nc")  # global -> registers, non-coherent path
    Tx.wg.copy(A_smem[fs], R[fs])  # registers -> shared
    T.cuda.cta_sync()
    Tx.wg.copy(R[fs], A_smem[fs])  # shared -> registers
    Tx.wg.copy(B[fs], R[fs])  # registers -> global
