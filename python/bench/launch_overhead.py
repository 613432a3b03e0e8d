"""Launch overhead of small kernels called from Python on PyTorch CUDA tensors, one of each
kind (plain; scalar parameters with run-time sizes and launch checks; TMA tensor maps in
dynamic shared memory; a 2-CTA cluster; the plain kernel through its `torch.library` op and
replayed from a CUDA graph), against PyTorch ops measured in the same process: host time per
call (median over batches of calls, each batch followed by one synchronize), microseconds.

    python python/bench/launch_overhead.py [--calls N] [--batches N] [--breakdown]

`--breakdown` also times the steps of the plain kernel's call one by one (the torch.compile
check, the native argument checks and launch, the launch alone on prepared arguments, the
stream query) and PyTorch's own launch floor, to say where the microseconds go.
"""

import argparse
import statistics
import time

import torch

import tirx
from tirx import MBarrier, T, Tx


def tiny():
    @T.prim_func
    def add_one(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32,), "float32")
        B = T.match_buffer(B_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        B[tid] = A[tid] + 1.0

    return tirx.compile(add_one)


def scalar_sized():
    """Run-time size `n` (a scalar parameter): its grid and launch checks are evaluated per call."""

    @T.prim_func
    def add_n(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
        A = T.match_buffer(A_ptr, (n,), "float32")
        B = T.match_buffer(B_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([(n + 31) // 32])
        tid = T.thread_id([32])
        i = bx * 32 + tid
        if i < n:
            B[i] = A[i] + 1.0

    return tirx.compile(add_n)


def tma(m=64, n=128, tm=64, tn=128):
    """B = A through shared memory: a TMA load on an mbarrier, a TMA store (two tensor maps)."""

    @T.prim_func
    def tma_copy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, n), "float16")
        B = T.match_buffer(B_ptr, (m, n), "float16")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        pool = T.SMEMPool()
        S_ = pool.alloc((tm, tn), "float16")
        full = MBarrier(pool, 1)
        pool.commit()
        full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        if tid == 0:
            Tx.copy_async(S_[0:tm, 0:tn], A[0:tm, 0:tn], dispatch="tma_auto", mbar=full.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), tm * tn * 2)
            full.wait(0, 0)
            Tx.copy_async(B[0:tm, 0:tn], S_[0:tm, 0:tn], dispatch="tma_explicit")
            T.ptx.cp_async.bulk.commit_group()
            T.ptx.cp_async.bulk.wait_group(0)

    return tirx.compile(tma_copy)


def cluster():
    """A 2-CTA cluster exchanging tiles through distributed shared memory."""

    @T.prim_func
    def exchange(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 128), "float16")
        B = T.match_buffer(B_ptr, (64, 128), "float16")
        T.device_entry()
        bx = T.cta_id([2])
        rank = T.cta_id_in_cluster([2])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        mine = pool.alloc((64, 64), "float16")
        theirs = pool.alloc((64, 64), "float16")
        bar = MBarrier(pool, 1)
        pool.commit()
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        Tx.cta.copy(mine[0:64, 0:64], A[0:64, bx * 64 : bx * 64 + 64])
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 64 * 64 * 2)
            Tx.copy_async(theirs[0:64, 0:64], mine[0:64, 0:64], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=1 - rank)
        bar.wait(0, 0)
        peer = 1 - bx
        Tx.cta.copy(B[0:64, peer * 64 : peer * 64 + 64], theirs[0:64, 0:64])
        T.cuda.cluster_sync()

    return tirx.compile(exchange)


def triton_add_one():
    """The plain kernel's work written in Triton (None without triton)."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add_one(a_ptr, b_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(b_ptr + i, tl.load(a_ptr + i) + 1.0)

    return lambda a, b: add_one[(1,)](a, b, BLOCK=32)


def per_call(fn, calls, batches):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out), min(out), max(out)


def breakdown(k, a, b, c, rep):
    """The plain call's steps, each alone (host time; each launch still queues GPU work), and
    the floor: PyTorch's own launch of an empty kernel through pybind (`torch.cuda._sleep(0)`)."""
    from tirx import torch_op

    dev = a.get_device()
    stream = torch._C._cuda_getCurrentRawStream(dev)
    ptrs = [a.data_ptr(), b.data_ptr()]
    args = (a, b)
    return [
        ("  step: compiling() check", per_call(torch_op.compiling, c, rep)),
        ("  step: native check+launch", per_call(lambda: k._l.call_torch(args), c, rep)),
        ("  step: native launch only", per_call(lambda: k._l.launch(dev, stream, ptrs), c, rep)),
        ("  step: current stream", per_call(lambda: torch._C._cuda_getCurrentRawStream(dev), c, rep)),
        ("  floor: torch.cuda._sleep(0)", per_call(lambda: torch.cuda._sleep(0), c, rep)),
    ] + on_side_stream(k, a, b, c, rep)


def on_side_stream(k, a, b, c, rep):
    """The same calls on a created stream instead of the legacy default stream."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        rows = [
            ("side stream: tirx kernel(a, b)", per_call(lambda: k(a, b), c, rep)),
            ("side stream: torch.add", per_call(lambda: torch.add(a, 1, out=b), c, rep)),
            ("side stream: _sleep(0) floor", per_call(lambda: torch.cuda._sleep(0), c, rep)),
        ]
    torch.cuda.synchronize()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--breakdown", action="store_true")
    args = ap.parse_args()
    k = tiny()
    a = torch.randn(32, device="cuda")
    b = torch.empty_like(a)
    k(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a + 1)
    ks = scalar_sized()
    kt, kc = tma(), cluster()
    h = torch.randn(64, 128, device="cuda").half()
    h2 = torch.empty_like(h)
    for kk, x, y, extra in ((ks, a, b, (32,)), (kt, h, h2, ()), (kc, h, h2, ())):
        kk(x, y, *extra)
        torch.cuda.synchronize()
    torch.testing.assert_close(h2, h)
    op = k.torch_op()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(100):
            k(a, b)
    m1, m2 = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    c, rep = args.calls, args.batches
    rows = [
        ("tirx kernel(a, b)", per_call(lambda: k(a, b), c, rep)),
        ("tirx scalar n, checks", per_call(lambda: ks(a, b, 32), c, rep)),
        ("tirx TMA (2 tensor maps)", per_call(lambda: kt(h, h2), c, rep)),
        ("tirx 2-CTA cluster, dsmem", per_call(lambda: kc(h, h2), c, rep)),
        ("tirx torch op(a, b)", per_call(lambda: op(a, b), c, rep)),
        ("tirx graph replay (/100)", tuple(x / 100 for x in per_call(g.replay, max(c // 100, 10), rep))),
        ("torch.add(a, 1, out=b)", per_call(lambda: torch.add(a, 1, out=b), c, rep)),
        ("torch: b = a + 1", per_call(lambda: a + 1, c, rep)),
        ("torch.mm 64x64", per_call(lambda: torch.mm(m1, m2), c, rep)),
    ]
    tri = triton_add_one()
    if tri is not None:
        tri(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(b, a + 1)
        rows.append(("triton add_one[(1,)](a, b)", per_call(lambda: tri(a, b), c, rep)))
    if args.breakdown:
        rows += breakdown(k, a, b, c, rep)
    print(f"{torch.cuda.get_device_name()}; {args.batches} batches of {args.calls} calls; µs per call (median, min, max)")
    for name, (med, lo, hi) in rows:
        print(f"{name:<28} {med:7.2f}  {lo:7.2f}  {hi:7.2f}")


if __name__ == "__main__":
    main()
