# TMA multicast in 2-CTA clusters (docs/tile-primitives.md §3.20, §8.8): the two CTAs of a cluster
# need the same 64 x 128 band of A (as the CTAs of one GEMM row need one A tile). Each CTA loads
# half of the band's rows with cta_mask=0b11: the TMA unit reads every byte from global memory once
# and writes it into the shared memory of both CTAs, at the same offset, completing its bytes on
# the mbarrier at the same offset in each. So every CTA's mbarrier expects the WHOLE band's bytes
# (its own half and its peer's). Each CTA then stores the band at its own columns: B = [A, A].
# The mbarriers are initialised before a cluster barrier (the peer's multicast completes on them).
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

M, K = 256, 128
TM = 64
CLUSTER = 2
ROWS = TM // CLUSTER  # rows of the band each CTA issues
dtype = "float16"
BAND_BYTES = TM * K * 2


@T.prim_func
def tma_multicast(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, K), dtype)
    B = T.match_buffer(B_ptr, (M, CLUSTER * K), dtype)
    T.device_entry()
    bx, by = T.cta_id([CLUSTER, M // TM])
    rank = T.cta_id_in_cluster([CLUSTER])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    band = pool.alloc((TM, K), dtype)
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    r0 = by * TM
    h0 = rank * ROWS
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), BAND_BYTES)
        Tx.copy_async(band[h0 : h0 + ROWS, 0:K], A[r0 + h0 : r0 + h0 + ROWS, 0:K], dispatch="tma_auto", mbar=bar.ptr_to([0]), cta_mask=(1 << CLUSTER) - 1)
    bar.wait(0, 0)
    if tid == 0:
        Tx.copy_async(B[r0 : r0 + TM, bx * K : bx * K + K], band[0:TM, 0:K], dispatch="tma_auto")
        T.ptx.cp_async.bulk.commit_group()
        T.ptx.cp_async.bulk.wait_group(0)
