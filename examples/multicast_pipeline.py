# A ring of stages filled by multicast TMA loads in 2-CTA clusters (docs/tile-primitives.md §8.8):
# the two CTAs of a cluster need the same bands of A, one per step (as the CTAs of a GEMM tile
# row need the same A tiles). Each CTA's producer (thread 0) loads half of a step's band with
# cta_mask=0b11 into the stage of both CTAs, completing on full[stage] in each (which expects the
# whole band's bytes); each CTA's consumer warp copies the band to its own B[rank].
# A stage is refilled by BOTH producers, so it is free only when BOTH consumers are done with
# it: empty[stage] counts 2 arrivals, and a consumer's lane 0 arrives on its own CTA's
# empty[stage] and on the peer's (`empty.arrive(stage, cta_id=peer)`: `mapa` +
# `mbarrier.arrive.release.cluster.shared::cluster`). Without the remote arrive the peer's
# producer refills this CTA's stage while its consumer still reads it: `tirx sim` reports the
# multicast load's write racing with the read (docs/tile-primitives.md §8.8).
# The consumer reads through the generic proxy and the refill writes through the async proxy:
# fence.proxy.async by every reading lane, then __syncwarp, before the release.
# Phases: step s uses stage s % STAGES for the (s // STAGES)-th time: the consumers wait on
# full with parity (s // STAGES) % 2, the producer on empty with (s // STAGES + 1) % 2 (the
# first pass over a fresh barrier passes). A cluster barrier before the end: no CTA exits
# while its peer's multicast or remote arrive may still reach it.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

TM, K = 64, 64  # a band: TM rows of K columns
STEPS = 6
STAGES = 2
CLUSTER = 2
ROWS = TM // CLUSTER  # rows of a band each CTA's producer loads
dtype = "float16"
BAND_BYTES = TM * K * 2


@T.prim_func
def multicast_pipeline(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (STEPS * TM, K), dtype)
    B = T.match_buffer(B_ptr, (CLUSTER, STEPS * TM, K), dtype)
    T.device_entry()
    T.cta_id([CLUSTER])
    rank = T.cta_id_in_cluster([CLUSTER])
    warp = T.warp_id([2])
    lane = T.lane_id([32])
    tid = T.thread_id([64])
    pool = T.SMEMPool()
    band = pool.alloc((STAGES, TM, K), dtype)
    full = MBarrier(pool, STAGES)
    empty = MBarrier(pool, STAGES)
    pool.commit()
    full.init(1)  # the producer's expect_tx arrival (+ the band's bytes, from both producers)
    empty.init(CLUSTER)  # this CTA's consumer and the peer's
    T.ptx.fence.mbarrier_init()
    T.cuda.cluster_sync()
    if tid == 0:
        for s in range(STEPS):
            empty.wait(s % STAGES, (s // STAGES + 1) % 2)
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([s % STAGES]), BAND_BYTES)
            Tx.copy_async(
                band[s % STAGES, rank * ROWS : rank * ROWS + ROWS, 0:K],
                A[s * TM + rank * ROWS : s * TM + rank * ROWS + ROWS, 0:K],
                dispatch="tma_auto",
                mbar=full.ptr_to([s % STAGES]),
                cta_mask=(1 << CLUSTER) - 1,
            )
    if warp == 1:
        for s in range(STEPS):
            full.wait(s % STAGES, (s // STAGES) % 2)
            for i in range(2):
                for c in range(K):
                    B[rank, s * TM + lane * 2 + i, c] = band[s % STAGES, lane * 2 + i, c]
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.warp_sync()
            if lane == 0:
                empty.arrive(s % STAGES)
                empty.arrive(s % STAGES, cta_id=1 - rank)
    T.cuda.cluster_sync()
