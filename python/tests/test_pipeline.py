"""Asynchronous copies and pipelines from Python (docs/tile-primitives.md §3.17, §8): `Tx.copy_async`,
`T.ptx.*` in both spellings, `T.SMEMPool()` and `MBarrier`, checked in the simulator, including the
synchronisation mistakes the simulator reports in the user's file."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx, MBarrier


def ring(early_release: bool):
    """Warp 0 loads stage k % 2 by cp.async and arrives on `full`; warp 1 waits for it, copies
    the stage out and arrives on `empty` (before the copy when `early_release`: the mistake)."""

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4, 32, 32), "float32")
        B = T.match_buffer(B_ptr, (4, 32, 32), "float32")
        T.device_entry()
        T.cta_id([1])
        w = T.warp_id([2])
        T.lane_id([32])
        T.thread_id([64])
        pool = T.SMEMPool()
        S_ = pool.alloc((2, 32, 32), "float32", align=128)
        full = MBarrier(pool, 2)
        empty = MBarrier(pool, 2)
        pool.commit()
        full.init(32)
        empty.init(32)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        for k in range(4):
            if w == 0:
                if k >= 2:
                    empty.wait(k % 2, (k // 2 - 1) % 2)
                Tx.warp.copy_async(S_[k % 2, 0:32, 0:32], A[k, 0:32, 0:32])
                T.ptx.cp.async_.commit_group()
                T.ptx.cp.async_.wait_group(0)
                full.arrive(k % 2)
            else:
                full.wait(k % 2, (k // 2) % 2)
                if early_release:
                    empty.arrive(k % 2)
                Tx.warp.copy(B[k, 0:32, 0:32], S_[k % 2, 0:32, 0:32])
                if not early_release:
                    empty.arrive(k % 2)

    return kernel


def test_an_mbarrier_ring_in_the_simulator():
    k = ring(False)
    assert "from tvm.tirx.lang.pipeline import MBarrier" in k.source
    assert "full = MBarrier(pool, 2)" in k.source
    a = np.random.default_rng(0).standard_normal((4, 32, 32)).astype(np.float32)
    b = np.zeros_like(a)
    tirx.compile(k, target="sm_90a")(a, b)
    np.testing.assert_array_equal(b, a)


def test_a_stage_released_early_is_a_race_in_the_users_file():
    with pytest.raises(tirx.TirxError) as e:
        tirx.compile(ring(True), target="sm_90a")(np.ones((4, 32, 32), np.float32), np.zeros((4, 32, 32), np.float32))
    text = str(e.value)
    assert "data race" in text and "test_pipeline.py" in text
    assert "Tx.warp.copy_async(S_[k % 2" in text and "Tx.warp.copy(B[k" in text


def test_copy_async_config_and_reading_before_the_wait():
    def make(wait: bool):
        @T.prim_func
        def kernel(A: T.Buffer((32, 16), "uint8"), B: T.Buffer((32, 16), "uint8")):
            T.device_entry()
            tid = T.thread_id([32])
            S_ = T.alloc_buffer((32, 16), "uint8", scope="shared")
            Tx.copy_async(S_[tid, :], A[tid, :], dispatch="ldgsts", direct=True, prefetch_size=128,
                          predicate=tid < 16, fill_mode="zero")
            T.ptx.cp_async.commit_group()
            if wait:
                T.ptx.cp_async.wait_group(0)
            Tx.copy(B[tid, :], S_[tid, :])
            T.ptx.cp_async.wait_group(0)

        return kernel

    a = np.arange(512, dtype=np.uint8).reshape(32, 16)
    b = np.zeros_like(a)
    k = tirx.compile(make(True), target="sm_90a")
    assert "cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" in k.cuda_source
    k(a, b)
    np.testing.assert_array_equal(b[:16], a[:16])
    np.testing.assert_array_equal(b[16:], 0)
    with pytest.raises(tirx.TirxError, match="has not completed"):
        tirx.compile(make(False), target="sm_90a")(a, b)


def test_the_pipelined_gemm_example_runs_from_python():
    import runpy
    import os

    import tirx.compat  # noqa: F401  (the example imports tvm.script.tirx)

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    g = runpy.run_path(os.path.join(root, "examples", "gemm_mma_pipelined.py"))
    k = next(v for v in g.values() if isinstance(v, tirx.PrimFunc))
    rng = np.random.default_rng(1)
    # Multiples of 1/8 in [-1, 1]: every partial sum is exact in f32.
    a = (rng.integers(-8, 9, (256, 256)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (256, 256)) / 8).astype(np.float16)
    c = np.zeros((256, 256), np.float32)
    k(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


def test_objects_must_be_named():
    with pytest.raises(tirx.TirxError, match="bind `T.SMEMPool"):

        @T.prim_func
        def kernel(A: T.Buffer((8,), "float32")):
            T.device_entry()
            T.thread_id([32])
            T.SMEMPool()


def multicast_ring(remote: bool):
    """Two CTAs of a cluster fill a ring of stages by multicast TMA loads (each producer half
    of a band, into both CTAs); each consumer warp copies the band to its CTA's half of B and
    releases the stage to both producers — to the peer's with ``empty.arrive(s, cta_id=peer)``
    (without it, ``remote=False``, the peer's refill is unordered: the mistake)."""
    steps, stages = 4, 2

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (steps * 64, 64), "float16")
        B = T.match_buffer(B_ptr, (2, steps * 64, 64), "float16")
        T.device_entry()
        T.cta_id([2])
        rank = T.cta_id_in_cluster([2])
        w = T.warp_id([2])
        lane = T.lane_id([32])
        tid = T.thread_id([64])
        pool = T.SMEMPool()
        band = pool.alloc((stages, 64, 64), "float16")
        full = MBarrier(pool, stages)
        empty = MBarrier(pool, stages)
        pool.commit()
        full.init(1)
        empty.init(2 if remote else 1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cluster_sync()
        if tid == 0:
            for s in range(steps):
                empty.wait(s % stages, (s // stages + 1) % 2)
                T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([s % stages]), 64 * 64 * 2)
                Tx.copy_async(
                    band[s % stages, rank * 32 : rank * 32 + 32, 0:64],
                    A[s * 64 + rank * 32 : s * 64 + rank * 32 + 32, 0:64],
                    dispatch="tma_auto",
                    mbar=full.ptr_to([s % stages]),
                    cta_mask=3,
                )
        if w == 1:
            for s in range(steps):
                full.wait(s % stages, (s // stages) % 2)
                for i in range(2):
                    for c in range(64):
                        B[rank, s * 64 + lane * 2 + i, c] = band[s % stages, lane * 2 + i, c]
                T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.warp_sync()
                if lane == 0:
                    empty.arrive(s % stages)
                    if remote:
                        empty.arrive(s % stages, cta_id=1 - rank)
        T.cuda.cluster_sync()

    return kernel


def test_a_ring_of_multicast_stages_released_to_both_ctas():
    k = multicast_ring(True)
    assert "empty.arrive(s % 2, cta_id=1 - rank)" in k.source
    a = (np.arange(4 * 64 * 64) % 251).astype(np.float16).reshape(4 * 64, 64)
    b = np.zeros((2, 4 * 64, 64), np.float16)
    kern = tirx.compile(k, target="sm_90a")
    kern(a, b)
    np.testing.assert_array_equal(b, np.stack([a, a]))
    assert "mbarrier.arrive.release.cluster.shared::cluster" in kern.cuda_source
    with pytest.raises(tirx.TirxError, match="multicast TMA load by thread 0 of CTA rank"):
        tirx.compile(multicast_ring(False), target="sm_90a")(a, np.zeros_like(b))


def group_rows(sync: bool):
    """Rows of 256 split over groups of 4 CTAs (64 columns each) meeting on W[row]: Y = X / row sum."""

    @T.prim_func
    def kernel(X_ptr: T.handle, Y_ptr: T.handle, P_ptr: T.handle, W_ptr: T.handle):
        X = T.match_buffer(X_ptr, (2, 256), "float32")
        Y = T.match_buffer(Y_ptr, (2, 256), "float32")
        P = T.match_buffer(P_ptr, (8,), "float32")
        W = T.match_buffer(W_ptr, (2,), "int32")
        T.device_entry()
        bx = T.cta_id([8])
        tid = T.thread_id([64])
        red = T.alloc_buffer((2,), "float32", scope="shared")
        row = bx // 4
        c = bx % 4 * 64 + tid
        part = T.cuda.cta_sum(X[row, c], 2, red.ptr_to([0]))
        if tid == 0:
            P[bx] = part
        if sync:
            T.cuda.grid_group_sync(W.ptr_to([row]), 4)
        Y[row, c] = X[row, c] / (P[row * 4] + P[row * 4 + 1] + P[row * 4 + 2] + P[row * 4 + 3])

    return kernel


def test_ctas_of_a_cooperative_grid_meet_at_a_group_barrier():
    x = (np.arange(512).reshape(2, 256) % 13 + 1).astype(np.float32)
    y, p, w = np.zeros_like(x), np.zeros(8, np.float32), np.zeros(2, np.int32)
    kern = tirx.compile(group_rows(True), target="sm_90a")
    kern(x, y, p, w)
    np.testing.assert_array_equal(y, (x / x.sum(1, keepdims=True)).astype(np.float32))
    assert list(w.view(np.uint32)) == [0x80000000, 0x80000000]
    assert "tirx_grid_group_sync" in kern.cuda_source
    with pytest.raises(tirx.TirxError, match="data race"):
        tirx.compile(group_rows(False), target="sm_90a")(x, np.zeros_like(x), np.zeros(8, np.float32), np.zeros(2, np.int32))


def queue_rows(n_rows: int, ctas: int):
    """A persistent grid draining a queue of rows: each CTA's first row is its own, the next ones
    come from a counter thread 0 adds to (the last taker leaves it at 0) through shared memory."""

    @T.prim_func
    def kernel(X_ptr: T.handle, Y_ptr: T.handle, C_ptr: T.handle, B_ptr: T.handle):
        X = T.match_buffer(X_ptr, (n_rows, 32), "float32")
        Y = T.match_buffer(Y_ptr, (n_rows, 32), "float32")
        C = T.match_buffer(C_ptr, (1,), "int32")
        B = T.match_buffer(B_ptr, (n_rows,), "int32")
        T.device_entry()
        bx = T.cta_id([ctas])
        tid = T.thread_id([32])
        nxt = T.alloc_buffer((1,), "int32", scope="shared")
        row = bx
        while row < n_rows:
            cur = row % n_rows  # (row, which the condition bounds; the bounds prover sees the remainder's)
            Y[cur, tid] = X[cur, tid] * 2.0
            if tid == 0:
                B[cur] = bx
                taken = T.cuda.atomic_add(C.ptr_to([0]), 1)
                if taken == n_rows - 1:  # (the last of the n_rows takes: every CTA's last misses)
                    T.cuda.atomic_add(C.ptr_to([0]), -n_rows)
                nxt[0] = taken + ctas
            T.cuda.cta_sync()
            row = nxt[0]
            T.cuda.cta_sync()

    return kernel


def test_a_persistent_grid_drains_a_queue_through_an_atomic_counter():
    x = (np.arange(40 * 32).reshape(40, 32) % 7).astype(np.float32)
    y, c, b = np.zeros_like(x), np.zeros(1, np.int32), np.full(40, -1, np.int32)
    kern = tirx.compile(queue_rows(40, 3), target="sm_90a")
    kern(x, y, c, b)
    np.testing.assert_array_equal(y, 2 * x)
    assert c[0] == 0 and set(b) <= {0, 1, 2} and (b[:3] == [0, 1, 2]).all()
    assert "atomicAdd(&C[0], 1)" in kern.cuda_source and "while (row[0] < 40) {" in kern.cuda_source
    kern(x, y, c, b)  # (the counter was left at 0: a second launch runs the same)
    assert c[0] == 0


def test_a_while_loop_needs_a_kernel_condition():
    with pytest.raises(tirx.TirxError, match="compile-time value"):

        @T.prim_func
        def kernel(Y_ptr: T.handle):
            Y = T.match_buffer(Y_ptr, (32,), "float32")
            T.device_entry()
            tid = T.thread_id([32])
            while True:
                Y[tid] = 1.0


def dependent_doubling(early: bool):
    """Programmatic dependent launch: each thread waits for the kernel before it on the stream,
    then Y = 2 X, then lets the next kernel in; ``early``: X read before the wait."""

    @T.prim_func
    def kernel(X_ptr: T.handle, Y_ptr: T.handle):
        X = T.match_buffer(X_ptr, (64,), "float32")
        Y = T.match_buffer(Y_ptr, (64,), "float32")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([64])
        S = T.alloc_buffer((64,), "float32", scope="shared")
        S[tid] = 2.0
        if early:
            S[tid] = X[tid]
        T.ptx.griddepcontrol.wait()
        Y[tid] = X[tid] * S[tid]
        T.ptx.griddepcontrol.launch_dependents()

    return kernel


def test_a_dependent_kernel_touches_global_memory_after_its_wait():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    kern = tirx.compile(dependent_doubling(False), target="sm_90a")
    kern(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    assert 'asm volatile("griddepcontrol.wait;" ::: "memory");' in kern.cuda_source
    with pytest.raises(tirx.TirxError, match=r"read of `X` by thread 0 .* before its `griddepcontrol.wait`"):
        tirx.compile(dependent_doubling(True), target="sm_90a")(x, y)
