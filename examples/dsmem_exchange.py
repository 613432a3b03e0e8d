# DSMEM exchange in 2-CTA clusters (docs/tile-primitives.md §3.21, §8.8): each CTA loads its
# 64 x 64 tile of A into shared memory, sends it to its peer's shared memory with a dsmem
# bulk copy (cp.async.bulk.shared::cluster, completing on the PEER's mbarrier), waits for the
# tile its peer sent, and writes it out at the peer's columns: B = A, and a copy landing in
# the wrong CTA would swap tiles.
# The mbarriers are initialised before a cluster barrier (peers complete them), the sender
# fences its generic writes before the async-proxy copy, and a cluster barrier at the end
# keeps every CTA alive until its peer's copy has completed.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

M, N = 128, 256
TM, TN = 64, 64
CLUSTER = 2
dtype = "float16"
TILE_BYTES = TM * TN * 2


@T.prim_func
def dsmem_exchange(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    bx, by = T.cta_id([N // TN, M // TM])
    rank = T.cta_id_in_cluster([CLUSTER])
    tid = T.thread_id([128])
    pool = T.SMEMPool()
    mine = pool.alloc((TM, TN), dtype)
    theirs = pool.alloc((TM, TN), dtype)
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    r0 = by * TM
    c0 = bx * TN
    Tx.cta.copy(mine[0:TM, 0:TN], A[r0 : r0 + TM, c0 : c0 + TN])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), TILE_BYTES)
        Tx.copy_async(theirs[0:TM, 0:TN], mine[0:TM, 0:TN], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=1 - rank)
    bar.wait(0, 0)
    p0 = (bx // CLUSTER * CLUSTER + 1 - rank) * TN  # the peer's columns (rank = bx % 2)
    Tx.cta.copy(B[r0 : r0 + TM, p0 : p0 + TN], theirs[0:TM, 0:TN])
    T.cuda.cluster_sync()
