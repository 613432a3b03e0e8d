# gemm -> mma.m16n8k* with a multi-stage cp.async pipeline, K steps of 64 and a grouped tile
# raster: the kernel of gemm_mma_pipelined_bf16.py (gemm_mma_pipelined.py explains the pipeline)
# tuned for fewer barriers and more L2 reuse. bfloat16 A, B and C (as torch.matmul), float32
# accumulate; `dtype = "float16"` makes it an f16 GEMM.
# Each CTA computes a 128x256 tile of C with 8 warps (2 x 4), each warp a 64x64 tile as 4 x 8
# m16n8 accumulators; K advances 64 at a time through a ring of STAGES shared-memory stages
# filled by cp.async straight from global memory (16-byte LDGSTS), and each stage is consumed in
# four 16-wide steps whose ldmatrix fragments are double-buffered in registers (the CUTLASS sm_80
# main loop): step kk loads the fragments of step kk + 1 into the other buffer, then issues its
# 32 mma.sync, so the shared-memory latency of one step hides behind the mma of the other.
#   prologue: stages 0 .. STAGES-2 issued, one commit group each; wait_group(STAGES - 2) and
#             cta_sync: stage 0 has landed; the fragments of its first step loaded
#   stage ko, step 0: issue stage ko + STAGES - 1 into the slot of ko - 1 (every warp passed the
#             barrier after its last fragment load of ko - 1), commit (empty at the end: the
#             count stays right)
#   steps 0-2: load the fragments of step kk + 1 of stage ko; mma on step kk
#   step 3:   wait_group(STAGES - 2) + cta_sync (stage ko + 1 landed for every thread, every warp
#             done reading stage ko), load the fragments of step 0 of stage ko + 1; mma on step 3
# `kk` is a `T.unroll` variable that indexes registers (`A_f[kk % 2]`), so tirx unrolls the loop
# and each copy sees a constant (docs/python.md §2.2). Why BK = 64: one cp.async wait and one CTA
# barrier per 64 K, half as many as 32-wide stages. Registers: 128 accumulators + 2 x (16 + 16)
# fragment registers; 32-wide double-buffered fragments would pass the 255 limit.
# Why the raster: the grid is 1-D, and CTA bid computes tile row pm = (bid // (GROUP * TN)) *
# GROUP + bid % GROUP, tile column pn = bid % (GROUP * TN) // GROUP: consecutive CTAs walk down a
# group of GROUP tile rows before moving right, so the CTAs resident at once share A row panels
# and B column panels in L2 instead of each streaming its own. The region begins are written out
# in full as expressions of bid, not through local variables, so that copy_async and the C store
# see them as affine in bid (gemm_hopper.py does the same).
# Shared memory: STAGES x (16 + 32) KiB (A 128x64, B 64x256 bfloat16). 3 stages keep two 64-wide
# steps (128 K, more than the 3 x 32 of the 32-wide pipeline) in flight while one is computed, in
# 144 KiB, which also fits sm_80's 163 KiB; 4 (192 KiB) fit only sm_90's 227. M, N, K are multiples of
# the tile (and K >= (STAGES - 1) * BK); change them below (the simulator checks this small size;
# the GPU takes any).
# Result: C == A @ B (each mma.sync rounds its sum once to f32, docs/numerics.md §8; C is the f32
# accumulator rounded once to dtype).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid, mma_acc_layout, mma_b_layout

M, N, K = 256, 512, 256
BM, BN, BK = 128, 256, 64  # CTA tile
KH = 16  # K width of one fragment (four per stage, double-buffered in registers)
WM, WN = 64, 64  # warp tile: 2 x 4 warps
STAGES = 3  # 3 x (16 + 32) KiB of dynamic shared memory
dtype = "bfloat16"
TM, TN = M // BM, N // BN
TILES = TM * TN
GROUP = 8 if TM % 8 == 0 else (4 if TM % 4 == 0 else (2 if TM % 2 == 0 else 1))  # tile rows per group

# Shared stages. A rows are 64 halves (128 B): the 128-B swizzle puts the 8 rows an ldmatrix
# reads in 8 distinct 16-B bank groups. B rows are 256 halves (512 B): XOR the 16-B chunk with
# the row (bits at 5) so the 8 K-rows of an ldmatrix.trans land in distinct bank groups too.
A_SMEM = ComposeLayout(3, 3, 3, TileLayout(S[(STAGES, BM, BK)]))
B_SMEM = ComposeLayout(3, 3, 5, TileLayout(S[(STAGES, BK, BN)]))
# Fragments, two buffers b of one 16-wide K step each (PTX mma.m16n8k16, lane = 4 g + t): A tile
# mt in elements 32 b + 8 mt, rows g + 8 rM, columns 2 t + p + 8 kHi at p + 2 rM + 4 kHi; B tile
# nt in 32 b + 4 nt, rows 2 t + p + 8 kHi at p + 2 kHi, column g; accumulator (mt, nt) in
# 32 mt + 4 nt, rows g + 8 rM, columns 2 t + rN at rN + 2 rM. Each 8x8 block is also an
# ldmatrix fragment (B's transposed: ldmatrix.trans).
A_FRAG = TileLayout(S[(2, 4, 2, 8, 2, 4, 2):(32, 8, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
B_FRAG = mma_b_layout(2 * 16, WN)  # two buffers of one 16-wide K step
ACC = mma_acc_layout(WM, WN)


@T.prim_func
def gemm_mma_pipelined_bk64(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), dtype)
    T.device_entry()
    bid = T.cta_id([TILES])  # tile row (bid // (GROUP * TN)) * GROUP + bid % GROUP, column bid % (GROUP * TN) // GROUP
    w = T.warp_id([8]); T.lane_id([32]); T.thread_id([256])
    wm = w // 4
    wn = w % 4
    pool = T.SMEMPool()
    A_s = pool.alloc((STAGES, BM, BK), dtype, align=128, layout=A_SMEM)
    B_s = pool.alloc((STAGES, BK, BN), dtype, align=128, layout=B_SMEM)
    pool.commit()
    A_f = T.alloc_buffer((2, WM, KH), dtype, scope="local", layout=A_FRAG)
    B_f = T.alloc_buffer((2, KH, WN), dtype, scope="local", layout=B_FRAG)
    acc = T.alloc_buffer((WM, WN), "float32", scope="local", layout=ACC)
    Tx.warp.fill(acc[0:WM, 0:WN], 0.0)
    for s in T.unroll(STAGES - 1):
        Tx.cta.copy_async(A_s[s, 0:BM, 0:BK],
                          A[((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM:
                            ((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM + BM, s * BK:s * BK + BK])
        Tx.cta.copy_async(B_s[s, 0:BK, 0:BN],
                          B[s * BK:s * BK + BK, bid % (GROUP * TN) // GROUP * BN:bid % (GROUP * TN) // GROUP * BN + BN])
        T.ptx.cp_async.commit_group()
    T.ptx.cp_async.wait_group(STAGES - 2)
    T.cuda.cta_sync()
    Tx.warp.copy(A_f[0, 0:WM, 0:KH], A_s[0, wm * WM:wm * WM + WM, 0:KH])
    Tx.warp.copy(B_f[0, 0:KH, 0:WN], B_s[0, 0:KH, wn * WN:wn * WN + WN])
    for ko in range(K // BK):
        for kk in T.unroll(BK // KH):
            if kk == 0:
                # Stage ko - 1's slot is free: every warp passed the barrier after its last fragment load.
                if ko + STAGES - 1 < K // BK:
                    Tx.cta.copy_async(
                        A_s[(ko + STAGES - 1) % STAGES, 0:BM, 0:BK],
                        A[((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM:((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM + BM,
                          (ko + STAGES - 1) * BK:(ko + STAGES - 1) * BK + BK],
                    )
                    Tx.cta.copy_async(
                        B_s[(ko + STAGES - 1) % STAGES, 0:BK, 0:BN],
                        B[(ko + STAGES - 1) * BK:(ko + STAGES - 1) * BK + BK,
                          bid % (GROUP * TN) // GROUP * BN:bid % (GROUP * TN) // GROUP * BN + BN],
                    )
                T.ptx.cp_async.commit_group()
            if kk == BK // KH - 1:
                # Stage ko + 1 has landed for every thread, and every warp is done reading stage ko.
                T.ptx.cp_async.wait_group(STAGES - 2)
                T.cuda.cta_sync()
                if ko + 1 < K // BK:
                    Tx.warp.copy(A_f[(kk + 1) % 2, 0:WM, 0:KH], A_s[(ko + 1) % STAGES, wm * WM:wm * WM + WM, 0:KH])
                    Tx.warp.copy(B_f[(kk + 1) % 2, 0:KH, 0:WN], B_s[(ko + 1) % STAGES, 0:KH, wn * WN:wn * WN + WN])
            else:
                Tx.warp.copy(A_f[(kk + 1) % 2, 0:WM, 0:KH],
                             A_s[ko % STAGES, wm * WM:wm * WM + WM, (kk + 1) * KH:(kk + 1) * KH + KH])
                Tx.warp.copy(B_f[(kk + 1) % 2, 0:KH, 0:WN],
                             B_s[ko % STAGES, (kk + 1) * KH:(kk + 1) * KH + KH, wn * WN:wn * WN + WN])
            Tx.warp.gemm(acc[0:WM, 0:WN], A_f[kk % 2, 0:WM, 0:KH], B_f[kk % 2, 0:KH, 0:WN], acc[0:WM, 0:WN], beta=1.0)
    T.ptx.cp_async.wait_group(0)
    out = T.alloc_buffer((WM, WN), dtype, scope="local", layout=ACC)  # C's values: the accumulators rounded once
    Tx.warp.cast(out[0:WM, 0:WN], acc[0:WM, 0:WN])
    Tx.warp.copy(C[((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM + wm * WM:
                   ((bid // (GROUP * TN)) * GROUP + bid % GROUP) * BM + wm * WM + WM,
                   bid % (GROUP * TN) // GROUP * BN + wn * WN:bid % (GROUP * TN) // GROUP * BN + wn * WN + WN],
                 out[0:WM, 0:WN])
