# gemm_async -> wgmma: C = A @ B on Hopper, bfloat16 in and out, float32 accumulation, with
# warpgroup specialisation and a persistent tile loop. Each CTA is 3 warpgroups (384 threads):
#   warpgroup 0, the producer (setmaxnreg.dec 56): for every K step i of every tile it waits
#     until a stage of shared memory is free and issues the copies of A (128x64) and B (64x256)
#     into it with cp.async (copy_async: 16-byte LDGSTS straight into the 128-byte swizzled
#     mma_shared_layout, no registers), one commit group per step; with two steps in flight it
#     waits for step i - 2 (cp_async.wait_group 1), fences it for the async proxy and signals
#     that stage full;
#   warpgroups 1 and 2, the consumers (setmaxnreg.inc 224): each waits for the stage, issues
#     wgmma.m64n256k16 on its 64 rows (gemm_async: 4 wgmmas per K step, A and B straight from
#     shared memory through descriptors), keeps one step in flight (wait_group 1) and frees the
#     stage of the step before; after the last step it rounds its 64x256 accumulator to bfloat16,
#     stores it to a swizzled shared tile with stmatrix and writes C with 16-byte stores.
# The register budgets balance: 56 + 2 x 224 = 3 x 168, the 65536 registers over 384 threads (the
# simulator checks it; more would make setmaxnreg.inc wait forever). With 40 the producer spills
# the addresses of its 24 copies per step.
# Stages are handed over with named barriers: bar.arrive (does not wait) + bar.sync, ids
# 9.. (full) and 12.. (empty), all 384 threads. The producer signals step i - 2 before it waits
# for a free stage: consumers free a stage one step after they received the next one, so with
# 3 stages that order never waits on itself. CTAs walk the 128x256 tiles of C with a stride of
# the grid size. The copies can be swapped for TMA + mbarriers without changing the consumers.
# M, N, K are multiples of the tile; the simulator checks this small size (set CTAS to the
# number of SMs, 132 on an H100, and M = N = K = 4096 for a real run).
# Result: C == bf16(A @ B) (each wgmma rounds its sum once to f32, docs/numerics.md §10).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid, wid_in_wg, mma_shared_layout

M, N, K = 256, 512, 256
BM, BN, BK = 128, 256, 64  # CTA tile; each consumer warpgroup owns 64 rows of it
STAGES = 3
CTAS = 2  # persistent CTAs
dtype = "bfloat16"  # "float16" works too
TM, TN, KT = M // BM, N // BN, K // BK
TILES = TM * TN
ROUNDS = (TILES + CTAS - 1) // CTAS
FULL, EMPTY, EPILOGUE = 9, 9 + STAGES, 15  # named barrier ids (9..15 are the script's)

# A stages are K-major (rows of A), B stages MN-major (rows of B along N); 128-byte swizzle.
A_SMEM = mma_shared_layout(dtype, 3, (STAGES, BM, BK))
B_SMEM = mma_shared_layout(dtype, 3, (STAGES, BK, BN))
C_SMEM = mma_shared_layout(dtype, 3, (2, 64, BN))
# The wgmma accumulator of one consumer (64 x 256): warp w of the warpgroup has rows 16 w ..,
# lane 4 g + t rows g, g + 8 and columns 8 j + 2 t, + 1 in registers 4 j .. 4 j + 3.
ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2):(1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


@T.prim_func
def gemm_hopper(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), dtype)
    T.device_entry()
    bx = T.cta_id([CTAS])
    wg = T.warpgroup_id([3]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id([384])
    A_s = T.alloc_buffer((STAGES, BM, BK), dtype, scope="shared.dyn", layout=A_SMEM)
    B_s = T.alloc_buffer((STAGES, BK, BN), dtype, scope="shared.dyn", layout=B_SMEM)
    C_s = T.alloc_buffer((2, 64, BN), dtype, scope="shared.dyn", layout=C_SMEM)
    acc = T.alloc_buffer((64, BN), "float32", scope="local", layout=ACC)
    out = T.alloc_buffer((64, BN), dtype, scope="local", layout=ACC)
    steps = (TILES - bx + CTAS - 1) // CTAS * KT  # K steps this CTA runs
    if wg == 0:
        T.ptx.setmaxnreg.dec(56)
        for r in range(ROUNDS):
            if r * CTAS + bx < TILES:
                pm = (r * CTAS + bx) // TN * BM
                pn = (r * CTAS + bx) % TN * BN
                for kt in range(KT):
                    i = r * KT + kt  # this CTA's K step
                    # Step i - 2 has landed (one later group may still fly): hand it over.
                    if i >= 2:
                        T.ptx.cp_async.wait_group(1)
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.ptx.bar.arrive(FULL + (i - 2) % STAGES, 384)
                    if i >= STAGES:
                        T.ptx.bar.sync(EMPTY + i % STAGES, 384)
                    Tx.warpgroup.copy_async(A_s[i % STAGES, 0:BM, 0:BK], A[pm:pm + BM, kt * BK:kt * BK + BK])
                    Tx.warpgroup.copy_async(B_s[i % STAGES, 0:BK, 0:BN], B[kt * BK:kt * BK + BK, pn:pn + BN])
                    T.ptx.cp_async.commit_group()
        # The last two steps (or fewer) have not been handed over yet.
        T.ptx.cp_async.wait_group(0)
        T.ptx.fence.proxy.async_.shared__cta()
        for j in range(2):
            if steps - 2 + j >= 0:
                T.ptx.bar.arrive(FULL + (steps - 2 + j) % STAGES, 384)
    else:
        T.ptx.setmaxnreg.inc(224)
        c = wg - 1
        for r in range(ROUNDS):
            if r * CTAS + bx < TILES:
                cm = (r * CTAS + bx) // TN * BM
                cn = (r * CTAS + bx) % TN * BN
                for kt in range(KT):
                    cs = (r * KT + kt) % STAGES
                    T.ptx.bar.sync(FULL + cs, 384)
                    Tx.warpgroup.gemm_async(acc[0:64, 0:BN], A_s[cs, c * 64:c * 64 + 64, 0:BK],
                                            B_s[cs, 0:BK, 0:BN], transB=True, accum=kt > 0)
                    T.ptx.wgmma.wait_group(1)
                    # The step before is done: free its stage (unless the producer is done with it).
                    if kt > 0:
                        if r * KT + kt - 1 + STAGES < steps:
                            T.ptx.bar.arrive(EMPTY + (r * KT + kt - 1) % STAGES, 384)
                T.ptx.wgmma.wait_group(0)
                if r * KT + KT - 1 + STAGES < steps:
                    T.ptx.bar.arrive(EMPTY + (r * KT + KT - 1) % STAGES, 384)
                # Half the columns at a time: fewer registers live at once.
                Tx.warpgroup.cast(out[0:64, 0:128], acc[0:64, 0:128])
                Tx.warpgroup.copy(C_s[c, 0:64, 0:128], out[0:64, 0:128])
                Tx.warpgroup.cast(out[0:64, 128:256], acc[0:64, 128:256])
                Tx.warpgroup.copy(C_s[c, 0:64, 128:256], out[0:64, 128:256])
                T.ptx.bar.sync(EPILOGUE, 256)
                Tx.warpgroup.copy(C[cm + c * 64:cm + c * 64 + 64, cn:cn + BN], C_s[c, 0:64, 0:BN])
