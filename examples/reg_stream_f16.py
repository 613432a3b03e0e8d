# Register streaming: B = 2 * A for an 8192 x 4096 float16 tensor (64 MiB each
# way). Each CTA's warpgroup loads a 128 x 64 tile straight into registers
# (copy -> reg, 16-byte non-coherent loads, warps read 4 full 128-byte rows per
# instruction), doubles it with packed HMUL2 (elementwise -> reg) and stores it
# back (16-byte stores). `tirx bench` compares it with a device memcpy.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, tid_in_wg

M, N = 8192, 4096
TM, TN = 128, 64
# Thread t owns columns 8*(t%8)..+8 of rows t//8 + 16*i, i < 8: 64 registers.
tile = TileLayout(S[(8, 16, 8, 8) : (8, 8 @ tid_in_wg, 1 @ tid_in_wg, 1)])


@T.prim_func
def reg_stream_f16(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), "float16")
    B = T.match_buffer(B_ptr, (M, N), "float16")
    T.device_entry()
    bx, by = T.cta_id([N // TN, M // TM])
    T.thread_id([128])
    R = T.alloc_buffer((TM, TN), "float16", scope="local", layout=tile)
    Tx.wg.copy(R[0:TM, 0:TN], A[by * TM : by * TM + TM, bx * TN : bx * TN + TN], cache="nc")
    Tx.wg.mul(R[0:TM, 0:TN], R[0:TM, 0:TN], 2.0)
    Tx.wg.copy(B[by * TM : by * TM + TM, bx * TN : bx * TN + TN], R[0:TM, 0:TN])
