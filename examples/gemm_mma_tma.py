# gemm -> mma.m16n8k16 fed by TMA: C = A @ B with warpgroup specialisation, the mma.sync
# counterpart of gemm_hopper.py (which uses wgmma). bfloat16 A, B and C, float32 accumulation;
# `dtype = "float16"` makes it an f16 GEMM. Each CTA is 3 warpgroups (384 threads) and walks the
# 128x256 tiles of C persistently (tile r * CTAS + bx in round r, grouped raster as gemm_hopper.py):
#   warpgroup 0, the producer (setmaxnreg.dec 24): one thread, for every K step i of every tile,
#     waits until stage i % STAGES is free (mbarrier empty[s]), announces its bytes on full[s]
#     (arrive.expect_tx) and loads A (128x64, a 2-D TMA box) and B (64x256, a 3-D box 64x64x4)
#     into it; the 128-byte swizzle of mma_shared_layout is the descriptor's.
#   warpgroups 1 and 2, the consumers (setmaxnreg.inc 240): 8 warps, warp (wg - 1, wn) computes
#     the 64x64 block at rows 64 (wg - 1), columns 64 wn as 4 x 8 m16n8 accumulators. A stage is
#     consumed in four 16-wide steps whose ldmatrix fragments are double-buffered in registers
#     (as gemm_mma_pipelined_bk64.py): step kk loads the fragments of step kk + 1, then issues
#     its 32 mma.sync; step 3 first waits for full[next stage] and loads its step-0 fragments.
#     After the last ldmatrix of a stage (step 2) each lane runs fence.proxy.async, the warp
#     __syncwarp, and its lane 0 arrives on empty[s] (count 8: one per consumer warp).
#   Epilogue per tile: each warp rounds its accumulators to dtype and stores them to C.
# Why the fence: ldmatrix reads shared memory through the generic proxy and the TMA load that
# refills the stage writes it through the async proxy; an mbarrier release alone does not order
# the two. On an H100 the early release without it gives wrong results (the refill overtakes
# the ldmatrix reads); `tirx sim` reports the missing fence (docs/tile-primitives.md §8.9).
# Why this beats gemm_mma_pipelined_bk64.py (0.60x against 0.52-0.54x of torch.matmul): no CTA
# barrier and no cp.async address arithmetic in the main loop, so the 8 consumer warps drift
# apart and the mma pipe is fed while some of them wait.
# Phases: step i = r * KT + kt uses stage s = i % STAGES for the (i // STAGES)-th time, so the
# consumers wait on full[s] with parity (i // STAGES) % 2 and the producer, refilling it, on
# empty[s] with the parity of the previous release, (i // STAGES + 1) % 2.
# Registers: 24 + 2 x 240 = 3 x 168, the 65536 registers over 384 threads. Under the 240 cap
# ptxas keeps the lane index in local memory (4 bytes, reloaded once per tile).
# Shared memory: 4 stages of 48 KiB (A 16 + B 32) = 192 KiB. M, N, K are multiples of the tile;
# the simulator checks this small size (set CTAS to the number of SMs, 132 on an H100).
# Result: C == A @ B (each mma.sync rounds its sum once to f32, docs/numerics.md §8; C is the f32
# accumulator rounded once to dtype).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid, mma_shared_layout, mma_acc_layout, mma_b_layout
from tvm.tirx.lang.pipeline import MBarrier

M, N, K = 256, 512, 256
BM, BN, BK = 128, 256, 64  # CTA tile; K step of one stage
KH = 16  # K width of one fragment step (four per stage)
WM, WN = 64, 64  # warp tile: 2 x 4 consumer warps
STAGES = 4
CTAS = 2  # persistent CTAs
dtype = "bfloat16"
TM, TN, KT = M // BM, N // BN, K // BK
TILES = TM * TN
ROUNDS = (TILES + CTAS - 1) // CTAS
GROUP = 8 if TM % 8 == 0 else (4 if TM % 4 == 0 else (2 if TM % 2 == 0 else 1))
STAGE_BYTES = (BM * BK + BK * BN) * 2  # what the two TMA loads of a stage deliver
PRODUCER_REGS = 24  # setmaxnreg budgets: 24 + 2 x 240 = 3 x 168
CONSUMER_REGS = 240

# A stages are K-major (rows of A), B stages MN-major (rows of B along N); 128-byte swizzle.
# Fragments and accumulators as in gemm_mma_pipelined_bk64.py.
A_SMEM = mma_shared_layout(dtype, 3, (STAGES, BM, BK))
B_SMEM = mma_shared_layout(dtype, 3, (STAGES, BK, BN))
A_FRAG = TileLayout(S[(2, 4, 2, 8, 2, 4, 2):(32, 8, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
B_FRAG = mma_b_layout(2 * 16, WN)  # two buffers of one 16-wide K step
ACC = mma_acc_layout(WM, WN)


@T.prim_func
def gemm_mma_tma(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), dtype)
    T.device_entry()
    bx = T.cta_id([CTAS])
    wg = T.warpgroup_id([3]); wn = T.warp_id_in_wg([4]); lane = T.lane_id([32]); tid = T.thread_id([384])
    pool = T.SMEMPool()
    A_s = pool.alloc((STAGES, BM, BK), dtype, layout=A_SMEM)
    B_s = pool.alloc((STAGES, BK, BN), dtype, layout=B_SMEM)
    full = MBarrier(pool, STAGES)
    empty = MBarrier(pool, STAGES)
    pool.commit()
    full.init(1)  # the producer's expect_tx arrival (+ the stage's transaction bytes)
    empty.init(8)  # one arrival per consumer warp
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    A_f = T.alloc_buffer((2, WM, KH), dtype, scope="local", layout=A_FRAG)
    B_f = T.alloc_buffer((2, KH, WN), dtype, scope="local", layout=B_FRAG)
    acc = T.alloc_buffer((WM, WN), "float32", scope="local", layout=ACC)
    out = T.alloc_buffer((WM, WN), dtype, scope="local", layout=ACC)
    if wg == 0:
        T.ptx.setmaxnreg.dec(PRODUCER_REGS)
        if tid == 0:
            for r in range(ROUNDS):
                if r * CTAS + bx < TILES:
                    for kt in range(KT):
                        if r * KT + kt >= STAGES:
                            empty.wait((r * KT + kt) % STAGES, ((r * KT + kt) // STAGES + 1) % 2)
                        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(r * KT + kt) % STAGES]), STAGE_BYTES)
                        Tx.copy_async(A_s[(r * KT + kt) % STAGES, 0:BM, 0:BK],
                                      A[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM:
                                        ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + BM,
                                        kt * BK:kt * BK + BK],
                                      dispatch="tma_auto", mbar=full.ptr_to([(r * KT + kt) % STAGES]))
                        Tx.copy_async(B_s[(r * KT + kt) % STAGES, 0:BK, 0:BN],
                                      B[kt * BK:kt * BK + BK,
                                        (r * CTAS + bx) % (GROUP * TN) // GROUP * BN:
                                        (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + BN],
                                      dispatch="tma_auto", mbar=full.ptr_to([(r * KT + kt) % STAGES]))
    else:
        T.ptx.setmaxnreg.inc(CONSUMER_REGS)
        for r in range(ROUNDS):
            if r * CTAS + bx < TILES:
                Tx.warp.fill(acc[0:WM, 0:WN], 0.0)
                full.wait((r * KT) % STAGES, ((r * KT) // STAGES) % 2)
                Tx.warp.copy(A_f[0, 0:WM, 0:KH], A_s[(r * KT) % STAGES, (wg - 1) * WM:(wg - 1) * WM + WM, 0:KH])
                Tx.warp.copy(B_f[0, 0:KH, 0:WN], B_s[(r * KT) % STAGES, 0:KH, wn * WN:wn * WN + WN])
                for kt in range(KT):
                    for kk in T.unroll(BK // KH):
                        if kk == BK // KH - 1:
                            if kt + 1 < KT:
                                full.wait((r * KT + kt + 1) % STAGES, ((r * KT + kt + 1) // STAGES) % 2)
                                Tx.warp.copy(A_f[(kk + 1) % 2, 0:WM, 0:KH],
                                             A_s[(r * KT + kt + 1) % STAGES, (wg - 1) * WM:(wg - 1) * WM + WM, 0:KH])
                                Tx.warp.copy(B_f[(kk + 1) % 2, 0:KH, 0:WN],
                                             B_s[(r * KT + kt + 1) % STAGES, 0:KH, wn * WN:wn * WN + WN])
                        else:
                            Tx.warp.copy(A_f[(kk + 1) % 2, 0:WM, 0:KH],
                                         A_s[(r * KT + kt) % STAGES, (wg - 1) * WM:(wg - 1) * WM + WM, (kk + 1) * KH:(kk + 1) * KH + KH])
                            Tx.warp.copy(B_f[(kk + 1) % 2, 0:KH, 0:WN],
                                         B_s[(r * KT + kt) % STAGES, (kk + 1) * KH:(kk + 1) * KH + KH, wn * WN:wn * WN + WN])
                            if kk == BK // KH - 2:
                                # The stage's last ldmatrix is issued: order its reads before the
                                # refill (generic -> async proxy), then release it for the warp.
                                T.ptx.fence.proxy.async_.shared__cta()
                                T.cuda.warp_sync()
                                if lane == 0:
                                    empty.arrive((r * KT + kt) % STAGES)
                        Tx.warp.gemm(acc[0:WM, 0:WN], A_f[kk % 2, 0:WM, 0:KH], B_f[kk % 2, 0:KH, 0:WN], acc[0:WM, 0:WN], beta=1.0)
                Tx.warp.cast(out[0:WM, 0:WN], acc[0:WM, 0:WN])
                Tx.warp.copy(C[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + (wg - 1) * WM:
                               ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + (wg - 1) * WM + WM,
                               (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + wn * WN:
                               (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + wn * WN + WN],
                             out[0:WM, 0:WN])
