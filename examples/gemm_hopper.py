# gemm_async -> wgmma: C = A @ B on Hopper, bfloat16 in and out, float32 accumulation, with
# warpgroup specialisation, TMA and a persistent tile loop (docs/tile-primitives.md §9, §8.6, §3.20).
# Each CTA is 3 warpgroups (384 threads):
#   warpgroup 0, the producer (setmaxnreg.dec 40): one thread issues everything. For every K step i
#     of every tile it waits until stage i % STAGES is free (mbarrier empty[s]), announces the
#     stage's bytes on full[s] (mbarrier.arrive.expect_tx) and loads A (128x64, one 2-D TMA box)
#     and B (64x256, one 3-D box 64x64x4) into it with TMA (copy_async tma_auto: the 128-byte
#     swizzle of mma_shared_layout is the descriptor's, no registers, completion on full[s]);
#   warpgroups 1 and 2, the consumers (setmaxnreg.inc 232): each waits for full[s], issues
#     wgmma.m64n256k16 on its 64 rows (gemm_async: 4 wgmmas per K step, A and B straight from
#     shared memory through descriptors), keeps one step in flight (wait_group 1) and then frees
#     the stage of the step before: its first thread arrives on empty[s] (count 2, one arrival per
#     consumer warpgroup; the wgmma reads are the warpgroup's, complete at its wait_group).
#   Epilogue, per consumer and half tile (64x128): round the accumulator to bfloat16, store it
#     to the warpgroup's swizzled shared tile with stmatrix, fence.proxy.async, a named barrier of
#     the warpgroup, then its first thread stores the tile to C with one TMA store (a bulk group);
#     before the tile is rewritten that thread waits until the store has read it (wait_group.read).
# Phases: step i uses stage s = i % STAGES for the (i // STAGES)-th time, so consumers wait on
# full[s] with parity (i // STAGES) % 2 and the producer, refilling it, on empty[s] with the parity
# of the consumers' previous release, (i // STAGES + 1) % 2.
# Shared memory: 4 stages of 48 KiB (A 16 + B 32) + 2 x 16 KiB epilogue tiles = 224 KiB of the
# 227 KiB a CTA may have. Consumers hold two stages (the wgmma in flight and the current one), so
# 4 stages keep two TMA steps in flight ahead of them; a full 64x256 epilogue tile per consumer
# would leave room for only 3.
# The register budgets balance: 40 + 2 x 232 = 3 x 168, the 65536 registers over 384 threads (the
# simulator checks it; more would make setmaxnreg.inc wait forever).
# CTAs walk the 128x256 tiles of C with a stride of the grid size: tile t = r * CTAS + bx is in
# group g = t // (GROUP * TN) of GROUP tile rows, at tile row g * GROUP + t % GROUP and tile column
# t % (GROUP * TN) // GROUP (down a group's rows first), so the CTAs running at once share A rows
# and B columns in L2. (g is taken modulo the number of groups, which changes nothing for t < TILES
# but keeps the tile begins inside A and C; they are written out in full, not through
# local variables, so that copy_async and gemm_async see them as affine in r, kt, bx and wg.)
# Any M; N and K multiples of 8 (TMA's 16-byte row strides): the tiles cover the matrices, what a
# load box reads past A or B is zero-filled by TMA (adding nothing to the sums) and what a store
# box writes past C is clipped, so ragged edges cost nothing in the kernel's code. When N is not a
# multiple of 64, B and C move in one box per 64-column swizzle atom (so that the last can leave
# the matrix) instead of one per tile row. The simulator
# checks this small size (set CTAS to the number of SMs, 132 on an H100, and M = N = K = 8192
# for a real run); idle CTAs just exit.
# Result: C == bf16(A @ B) (each wgmma rounds its sum once to f32, docs/numerics.md §10).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import mma_shared_layout, wgmma_acc_layout
from tvm.tirx.lang.pipeline import MBarrier

M, N, K = 256, 512, 256
BM, BN, BK = 128, 256, 64  # CTA tile; each consumer warpgroup owns 64 rows of it
STAGES = 4
CTAS = 2  # persistent CTAs
dtype = "bfloat16"  # "float16" works too
TM, TN, KT = -(-M // BM), -(-N // BN), -(-K // BK)  # tiles covering C, K steps covering K
TILES = TM * TN
ROUNDS = (TILES + CTAS - 1) // CTAS
GROUP = 8 if TM % 8 == 0 else (4 if TM % 4 == 0 else (2 if TM % 2 == 0 else 1))  # tile rows per group
STAGE_BYTES = (BM * BK + BK * BN) * 2  # what the two TMA loads of a stage deliver
EPILOGUE = 13  # named barriers 13 and 14: one per consumer warpgroup (9..15 are the script's)

# A stages are K-major (rows of A), B stages MN-major (rows of B along N); 128-byte swizzle.
A_SMEM = mma_shared_layout(dtype, 3, (STAGES, BM, BK))
B_SMEM = mma_shared_layout(dtype, 3, (STAGES, BK, BN))
C_SMEM = mma_shared_layout(dtype, 3, (2, 64, BN // 2))
# The wgmma accumulator of one consumer (64 x 256): warp w of the warpgroup has rows 16 w ..,
# lane 4 g + t rows g, g + 8 and columns 8 j + 2 t, + 1 in registers 4 j .. 4 j + 3.
ACC = wgmma_acc_layout(BN)


@T.prim_func
def gemm_hopper(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (K, N), dtype)
    C = T.match_buffer(C_ptr, (M, N), dtype)
    T.device_entry()
    bx = T.cta_id([CTAS])
    wg = T.warpgroup_id([3]); T.warp_id_in_wg([4]); T.lane_id([32]); tid = T.thread_id([384])
    pool = T.SMEMPool()
    A_s = pool.alloc((STAGES, BM, BK), dtype, layout=A_SMEM)
    B_s = pool.alloc((STAGES, BK, BN), dtype, layout=B_SMEM)
    C_s = pool.alloc((2, 64, BN // 2), dtype, layout=C_SMEM)
    full = MBarrier(pool, STAGES)
    empty = MBarrier(pool, STAGES)
    pool.commit()
    full.init(1)  # the producer's expect_tx arrival (+ the stage's transaction bytes)
    empty.init(2)  # one arrival per consumer warpgroup
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    acc = T.alloc_buffer((64, BN), "float32", scope="local", layout=ACC)
    out = T.alloc_buffer((64, BN), dtype, scope="local", layout=ACC)
    if wg == 0:
        T.ptx.setmaxnreg.dec(40)
        if tid == 0:
            for r in range(ROUNDS):
                if r * CTAS + bx < TILES:  # tile r * CTAS + bx: row pm, column pn (see the header)
                    for kt in range(KT):  # this CTA's K step i = r * KT + kt, stage i % STAGES
                        if r * KT + kt >= STAGES:
                            empty.wait((r * KT + kt) % STAGES, ((r * KT + kt) // STAGES + 1) % 2)
                        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(r * KT + kt) % STAGES]), STAGE_BYTES)
                        Tx.copy_async(A_s[(r * KT + kt) % STAGES, 0:BM, 0:BK],
                                      A[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM:
                                        ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + BM,
                                        kt * BK:kt * BK + BK],
                                      dispatch="tma_auto", mbar=full.ptr_to([(r * KT + kt) % STAGES]))
                        if N % 64 == 0:  # whole tile rows: one box
                            Tx.copy_async(B_s[(r * KT + kt) % STAGES, 0:BK, 0:BN],
                                          B[kt * BK:kt * BK + BK,
                                            (r * CTAS + bx) % (GROUP * TN) // GROUP * BN:
                                            (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + BN],
                                          dispatch="tma_auto", mbar=full.ptr_to([(r * KT + kt) % STAGES]))
                        else:  # a box per 64-column swizzle atom, so the last can leave B
                            for a in T.unroll(BN // 64):
                                Tx.copy_async(B_s[(r * KT + kt) % STAGES, 0:BK, a * 64:a * 64 + 64],
                                              B[kt * BK:kt * BK + BK,
                                                (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + a * 64:
                                                (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + a * 64 + 64],
                                              dispatch="tma_auto", mbar=full.ptr_to([(r * KT + kt) % STAGES]))
    else:
        T.ptx.setmaxnreg.inc(232)
        c = wg - 1
        for r in range(ROUNDS):
            if r * CTAS + bx < TILES:
                for kt in range(KT):
                    full.wait((r * KT + kt) % STAGES, ((r * KT + kt) // STAGES) % 2)
                    Tx.warpgroup.gemm_async(acc[0:64, 0:BN], A_s[(r * KT + kt) % STAGES, c * 64:c * 64 + 64, 0:BK],
                                            B_s[(r * KT + kt) % STAGES, 0:BK, 0:BN], transB=True, accum=kt > 0)
                    T.ptx.wgmma.wait_group(1)
                    # The step before is done: free its stage.
                    if kt > 0:
                        if tid % 128 == 0:
                            empty.arrive((r * KT + kt - 1) % STAGES)
                T.ptx.wgmma.wait_group(0)
                if tid % 128 == 0:
                    empty.arrive((r * KT + KT - 1) % STAGES)
                # Half the columns at a time (a 64x128 shared tile per consumer): round, stmatrix,
                # fence for the async proxy, barrier, one TMA store.
                if tid % 128 == 0:
                    T.ptx.cp_async.bulk.wait_group_read(0)  # the last store has read C_s[c]
                T.ptx.bar.sync(EPILOGUE + c, 128)
                Tx.warpgroup.cast(out[0:64, 0:128], acc[0:64, 0:128])
                Tx.warpgroup.copy(C_s[c, 0:64, 0:128], out[0:64, 0:128])
                T.ptx.fence.proxy.async_.shared__cta()
                T.ptx.bar.sync(EPILOGUE + c, 128)
                if tid % 128 == 0:
                    if N % 64 == 0:
                        Tx.copy_async(C[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64:
                                        ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64 + 64,
                                        (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 0:(r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 128],
                                      C_s[c, 0:64, 0:128], dispatch="tma_auto")
                    else:
                        for a in T.unroll(2):
                            Tx.copy_async(C[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64:
                                            ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64 + 64,
                                            (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 0 + a * 64:(r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 0 + a * 64 + 64],
                                          C_s[c, 0:64, a * 64:a * 64 + 64], dispatch="tma_auto")
                    T.ptx.cp_async.bulk.commit_group()
                if tid % 128 == 0:
                    T.ptx.cp_async.bulk.wait_group_read(0)  # the last store has read C_s[c]
                T.ptx.bar.sync(EPILOGUE + c, 128)
                Tx.warpgroup.cast(out[0:64, 128:256], acc[0:64, 128:256])
                Tx.warpgroup.copy(C_s[c, 0:64, 0:128], out[0:64, 128:256])
                T.ptx.fence.proxy.async_.shared__cta()
                T.ptx.bar.sync(EPILOGUE + c, 128)
                if tid % 128 == 0:
                    if N % 64 == 0:
                        Tx.copy_async(C[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64:
                                        ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64 + 64,
                                        (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 128:(r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 256],
                                      C_s[c, 0:64, 0:128], dispatch="tma_auto")
                    else:
                        for a in T.unroll(2):
                            Tx.copy_async(C[((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64:
                                            ((r * CTAS + bx) // (GROUP * TN) % (TM // GROUP) * GROUP + (r * CTAS + bx) % GROUP) * BM + c * 64 + 64,
                                            (r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 128 + a * 64:(r * CTAS + bx) % (GROUP * TN) // GROUP * BN + 128 + a * 64 + 64],
                                          C_s[c, 0:64, a * 64:a * 64 + 64], dispatch="tma_auto")
                    T.ptx.cp_async.bulk.commit_group()
        if tid % 128 == 0:
            T.ptx.cp_async.bulk.wait_group(0)
