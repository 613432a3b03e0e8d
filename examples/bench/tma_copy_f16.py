# TMA tiled copy benchmark: B = A for a 16384 x 4096 float16 tensor (the traffic of
# tiled_copy_f16.py), global -> shared by TMA loads on mbarriers, shared -> global by TMA stores.
# Each CTA copies a 64 x 1024 band as 64 x 128 boxes (64 rows of 256 bytes) through a 6-stage ring
# (96 KiB of shared memory, two CTAs per SM: on an H100, 6 stages measured 0.976 of memcpy and
# 4 stages 0.960): one thread issues every copy, so later loads are in flight while earlier boxes
# are stored; a stage is refilled once the store that read it has finished reading.
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

M, N = 16384, 4096
TM, TN = 64, 128
BAND = 1024
SUB = BAND // TN
STAGES = 6
dtype = "float16"
BOX_BYTES = TM * TN * 2


@T.prim_func
def tma_copy_f16(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (M, N), dtype)
    B = T.match_buffer(B_ptr, (M, N), dtype)
    T.device_entry()
    # First id = blockIdx.x: consecutive CTAs walk along a row of bands.
    bx, by = T.cta_id([N // BAND, M // TM])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    S_ = pool.alloc((STAGES, TM, TN), dtype)
    full = MBarrier(pool, STAGES)
    pool.commit()
    full.init(1)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    r0 = by * TM
    c0 = bx * BAND
    if tid == 0:
        for i in range(STAGES):
            Tx.copy_async(S_[i, 0:TM, 0:TN], A[r0 : r0 + TM, c0 + i * TN : c0 + i * TN + TN], dispatch="tma_auto", mbar=full.ptr_to([i]))
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([i]), BOX_BYTES)
        for i in range(SUB):
            full.wait(i % STAGES, (i // STAGES) % 2)
            Tx.copy_async(B[r0 : r0 + TM, c0 + i * TN : c0 + i * TN + TN], S_[i % STAGES, 0:TM, 0:TN], dispatch="tma_auto")
            T.ptx.cp_async.bulk.commit_group()
            if STAGES < SUB and i >= 1:  # refills exist only when the ring is shorter than the band
                if i - 1 + STAGES < SUB:
                    T.ptx.cp.async_.bulk.wait_group.read(1)
                    j = i - 1 + STAGES
                    Tx.copy_async(S_[j % STAGES, 0:TM, 0:TN], A[r0 : r0 + TM, c0 + j * TN : c0 + j * TN + TN], dispatch="tma_auto", mbar=full.ptr_to([j % STAGES]))
                    T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([j % STAGES]), BOX_BYTES)
        T.ptx.cp_async.bulk.wait_group(0)
