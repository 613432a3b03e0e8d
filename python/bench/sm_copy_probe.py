"""A design probe: what share of a device copy's bandwidth can N SMs draw, with how many bytes in
flight per SM? Issue 33's 262k rows run on clusters, whose CTAs share a GPC (clusters of 16 fit
on 112 of an H200's 132 SMs, of 8 on 120, of 4 on 124): whether a design on those SMs is bound
by their count or by the bytes each keeps in flight decides what to build next. Measured
2026-12-02 (H200): 112 SMs draw 0.92 of torch's copy with 32 KB in flight per SM, 132 SMs 0.94,
so the SM count does not bound them (README).

A persistent copy in plain CUDA (CuPy's NVRTC): N CTAs of T threads (one per SM: each asks for
more than half the shared memory), each thread loading K 16-byte vectors into registers before
storing them, over a grid-stride loop; the bytes in flight per SM are T * K * 16. Printed: GB/s
and the fraction of torch's device copy of the same bytes.

    cd python/bench && python sm_copy_probe.py [--ctas 112,120,124,132] [--tk 1024x4,1024x8,512x16]
"""

import argparse

import cupy
from group_probe import timed_ms  # this directory
from ops import copy_us

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(THREADS) copy_k(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
    const long long step = (long long)gridDim.x * THREADS * K;
    for (long long base = (long long)blockIdx.x * THREADS * K + threadIdx.x; base < n; base += step) {
        uint4 v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const long long i = base + (long long)k * THREADS;
            if (i < n) v[k] = __ldcs(src + i);
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const long long i = base + (long long)k * THREADS;
            if (i < n) __stcs(dst + i, v[k]);
        }
    }
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=1 << 30, help="bytes moved (half read, half written)")
    ap.add_argument("--ctas", default="100,112,120,124,128,132")
    ap.add_argument("--tk", default="1024x2,1024x4,1024x8,512x16")
    a = ap.parse_args()
    n = a.bytes // 2 // 16
    src = cupy.empty(n * 2, dtype=cupy.uint64)
    dst = cupy.empty_like(src)
    copy = copy_us(a.bytes) / 1e3
    print(f"{a.bytes / 1e9:.2f} GB moved; torch copy {copy:.3f} ms ({a.bytes / copy / 1e6:.0f} GB/s)")
    smem = 120 * 1024  # (one CTA per SM)
    for tk in a.tk.split(","):
        t, k = (int(s) for s in tk.split("x"))
        kern = cupy.RawKernel(f"#define THREADS {t}\n#define K {k}\n" + SOURCE, "copy_k")
        kern.max_dynamic_shared_size_bytes = smem
        row = []
        for ctas in (int(s) for s in a.ctas.split(",")):
            ms = timed_ms(lambda: kern((ctas,), (t,), (src, dst, cupy.int64(n)), shared_mem=smem), reps=20)
            row.append(f"{ctas} SMs {copy / ms:.3f}")
        print(f"T {t:4} x K {k:2} ({t * k * 16 // 1024:3} KiB in flight per SM): " + "  ".join(row))


if __name__ == "__main__":
    main()
