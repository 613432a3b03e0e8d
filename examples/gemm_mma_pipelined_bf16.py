# gemm -> mma.m16n8k* with a multi-stage cp.async pipeline on bfloat16: the kernel of
# gemm_mma_pipelined.py (which explains the pipeline) with bfloat16 A and B, float32 accumulate
# and out. Result: C == A @ B (each mma.sync rounds its sum once to f32, docs/numerics.md §8).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, mma_a_layout, mma_acc_layout, mma_b_layout

M, N, K = 256, 256, 256
BM, BN, BK = 128, 256, 32  # CTA tile
WM, WN = 64, 64  # warp tile: 2 x 4 warps
STAGES = 4  # 4 x (8 + 16) KiB of dynamic shared memory
dtype = "bfloat16"

# Shared stages. A rows are 32 halves (64 B): the 64-B swizzle puts the 8 rows an ldmatrix
# reads in 8 distinct 16-B bank groups. B rows are 256 halves (512 B): XOR the 16-B chunk with
# the row (bits at 5) so the 8 K-rows of an ldmatrix.trans land in distinct bank groups too.
A_SMEM = ComposeLayout(3, 2, 3, TileLayout(S[(STAGES, BM, BK)]))
B_SMEM = ComposeLayout(3, 3, 5, TileLayout(S[(STAGES, BK, BN)]))
# The mma.m16n8k16 fragments of the warp tile (lane 4 g + t holds rows g, g + 8 of each atom;
# tirx.layout's helpers say where each element lives). Each 8x8 block is also an ldmatrix
# fragment (B's transposed: ldmatrix.trans).
A_FRAG = mma_a_layout(WM, BK)
B_FRAG = mma_b_layout(BK, WN)
ACC = mma_acc_layout(WM, WN)


@T.prim_func
def gemm_mma_pipelined_bf16(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), "float32")
    T.device_entry()
    bx, by = T.cta_id([N // BN, M // BM])
    w = T.warp_id([8]); T.lane_id([32]); T.thread_id([256])
    wm = w // 4
    wn = w % 4
    pool = T.SMEMPool()
    A_s = pool.alloc((STAGES, BM, BK), dtype, align=128, layout=A_SMEM)
    B_s = pool.alloc((STAGES, BK, BN), dtype, align=128, layout=B_SMEM)
    pool.commit()
    A_f = T.alloc_buffer((WM, BK), dtype, scope="local", layout=A_FRAG)
    B_f = T.alloc_buffer((BK, WN), dtype, scope="local", layout=B_FRAG)
    acc = T.alloc_buffer((WM, WN), "float32", scope="local", layout=ACC)
    Tx.warp.fill(acc[0:WM, 0:WN], 0.0)
    for s in T.unroll(STAGES - 1):
        Tx.cta.copy_async(A_s[s, 0:BM, 0:BK], A[by * BM:by * BM + BM, s * BK:s * BK + BK])
        Tx.cta.copy_async(B_s[s, 0:BK, 0:BN], B[s * BK:s * BK + BK, bx * BN:bx * BN + BN])
        T.ptx.cp_async.commit_group()
    for ko in range(K // BK):
        T.ptx.cp_async.wait_group(STAGES - 2)
        T.cuda.cta_sync()
        if ko + STAGES - 1 < K // BK:
            Tx.cta.copy_async(
                A_s[(ko + STAGES - 1) % STAGES, 0:BM, 0:BK],
                A[by * BM:by * BM + BM, (ko + STAGES - 1) * BK:(ko + STAGES - 1) * BK + BK],
            )
            Tx.cta.copy_async(
                B_s[(ko + STAGES - 1) % STAGES, 0:BK, 0:BN],
                B[(ko + STAGES - 1) * BK:(ko + STAGES - 1) * BK + BK, bx * BN:bx * BN + BN],
            )
        T.ptx.cp_async.commit_group()
        Tx.warp.copy(A_f[0:WM, 0:BK], A_s[ko % STAGES, wm * WM:wm * WM + WM, 0:BK])
        Tx.warp.copy(B_f[0:BK, 0:WN], B_s[ko % STAGES, 0:BK, wn * WN:wn * WN + WN])
        Tx.warp.gemm(acc[0:WM, 0:WN], A_f[0:WM, 0:BK], B_f[0:BK, 0:WN], acc[0:WM, 0:WN], beta=1.0)
    T.ptx.cp_async.wait_group(0)
    Tx.warp.copy(C[by * BM + wm * WM:by * BM + wm * WM + WM, bx * BN + wn * WN:bx * BN + wn * WN + WN], acc[0:WM, 0:WN])
