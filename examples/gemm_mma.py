# gemm -> mma.m16n8k*: C = A @ B on tensor cores, written in TIRx (float16 in, float32 accumulate
# and out). Each CTA computes a 128x128 tile of C with 8 warps (2 x 4), each warp a 64x32 tile
# as 4 x 4 m16n8 accumulators; K advances 32 at a time:
#   global -> registers (16-byte loads of tile k + 1, issued before the math on tile k)
#   shared (two stages, swizzled) -> ldmatrix fragments -> 32 mma.sync per warp
#   registers -> the other shared stage (16-byte stores), one CTA barrier per step
# and the accumulators go straight to C (8-byte stores). M, N, K are multiples of the tile;
# change them below (the simulator checks this small size; the GPU takes any).
# Result: C == A @ B (each mma.sync rounds its sum once to f32, docs/numerics.md §8).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, tx, mma_a_layout, mma_acc_layout, mma_b_layout

M, N, K = 256, 256, 128
BM, BN, BK = 128, 128, 32  # CTA tile
WM, WN = 64, 32  # warp tile: 2 x 4 warps
dtype = "float16"

# Shared stages. A rows are 32 halves (64 B): the 64-B swizzle puts the 8 rows an ldmatrix
# reads in 8 distinct 16-B bank groups. B rows are 128 halves (256 B): XOR the chunk with the
# row (at 4) so the 8 K-rows of an ldmatrix.trans land in distinct bank groups too.
A_SMEM = ComposeLayout(3, 2, 3, TileLayout(S[(2, BM, BK)]))
B_SMEM = ComposeLayout(3, 3, 4, TileLayout(S[(2, BK, BN)]))
# Register staging of one K step: thread t loads rows t // 4 (+ 64) of A, 8 halves at column
# 8 (t % 4); rows t // 16 (+ 16) of B, 8 halves at column 8 (t % 16).
A_STAGE = TileLayout(S[(2, 64, 4, 8):(8, 4 @ tx, 1 @ tx, 1)])
B_STAGE = TileLayout(S[(2, 16, 16, 8):(8, 16 @ tx, 1 @ tx, 1)])
# The mma.m16n8k16 fragments of the warp tile (lane 4 g + t holds rows g, g + 8 of each atom;
# tirx.layout's helpers say where each element lives). Each 8x8 block is also an ldmatrix
# fragment (B's transposed: ldmatrix.trans).
A_FRAG = mma_a_layout(WM, BK)
B_FRAG = mma_b_layout(BK, WN)
ACC = mma_acc_layout(WM, WN)


@T.prim_func
def gemm_mma(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), "float32")
    T.device_entry()
    bx, by = T.cta_id([N // BN, M // BM])
    w = T.warp_id([8]); T.lane_id([32]); T.thread_id([256])
    wm = w // 4
    wn = w % 4
    A_s = T.alloc_buffer((2, BM, BK), dtype, scope="shared", layout=A_SMEM)
    B_s = T.alloc_buffer((2, BK, BN), dtype, scope="shared", layout=B_SMEM)
    A_r = T.alloc_buffer((BM, BK), dtype, scope="local", layout=A_STAGE)
    B_r = T.alloc_buffer((BK, BN), dtype, scope="local", layout=B_STAGE)
    A_f = T.alloc_buffer((WM, BK), dtype, scope="local", layout=A_FRAG)
    B_f = T.alloc_buffer((BK, WN), dtype, scope="local", layout=B_FRAG)
    acc = T.alloc_buffer((WM, WN), "float32", scope="local", layout=ACC)
    Tx.warp.fill(acc[0:WM, 0:WN], 0.0)
    Tx.cta.copy(A_r[0:BM, 0:BK], A[by * BM:by * BM + BM, 0:BK])
    Tx.cta.copy(B_r[0:BK, 0:BN], B[0:BK, bx * BN:bx * BN + BN])
    Tx.cta.copy(A_s[0, 0:BM, 0:BK], A_r[0:BM, 0:BK])
    Tx.cta.copy(B_s[0, 0:BK, 0:BN], B_r[0:BK, 0:BN])
    T.cuda.cta_sync()
    for ko in range(K // BK):
        if ko + 1 < K // BK:
            Tx.cta.copy(A_r[0:BM, 0:BK], A[by * BM:by * BM + BM, (ko + 1) * BK:(ko + 1) * BK + BK])
            Tx.cta.copy(B_r[0:BK, 0:BN], B[(ko + 1) * BK:(ko + 1) * BK + BK, bx * BN:bx * BN + BN])
        Tx.warp.copy(A_f[0:WM, 0:BK], A_s[ko % 2, wm * WM:wm * WM + WM, 0:BK])
        Tx.warp.copy(B_f[0:BK, 0:WN], B_s[ko % 2, 0:BK, wn * WN:wn * WN + WN])
        Tx.warp.gemm(acc[0:WM, 0:WN], A_f[0:WM, 0:BK], B_f[0:BK, 0:WN], acc[0:WM, 0:WN], beta=1.0)
        if ko + 1 < K // BK:
            Tx.cta.copy(A_s[(ko + 1) % 2, 0:BM, 0:BK], A_r[0:BM, 0:BK])
            Tx.cta.copy(B_s[(ko + 1) % 2, 0:BK, 0:BN], B_r[0:BK, 0:BN])
        T.cuda.cta_sync()
    Tx.warp.copy(C[by * BM + wm * WM:by * BM + wm * WM + WM, bx * BN + wn * WN:bx * BN + wn * WN + WN], acc[0:WM, 0:WN])
