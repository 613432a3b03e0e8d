"""A design probe, not a product kernel: does a row split over a group of co-resident CTAs that
exchange their statistics through global memory reach the copy's bandwidth at 262k columns? (A
cluster's CTAs share a GPC: clusters of 16 run on 112 of this H200's 132 SMs, of 8 on 120.)
Measured 2026-12-02 on an H200: no — 0.23-0.44 of a copy in every configuration here, where
the cluster designs reach 0.91 (README, issue 33).

LayerNorm's forward in plain CUDA (CuPy's NVRTC), bf16 rows of H columns, f32 statistics:
G = SMs x CTAS co-resident CTAs (a cooperative launch) in row groups of GROUP CTAs; CTA r of a
group holds columns [r S, (r + 1) S) of each of its group's rows in registers (S a multiple of
8, the last slice shorter), writes its count, mean and M2 about its own mean to a slot of the
row's parity, meets its group at a barrier word in global memory, combines the GROUP partials
(Chan et al.), normalises and stores. The barrier: each CTA's first thread adds 1 (acq_rel);
the last arriver adds 2^31 - GROUP (release: the count back to 0, the top bit flipped); the
others spin on an acquire load until the top bit differs from what their add returned; CTA
barriers before and after. Another CTA of the SM (CTAS > 1) loads while one waits. With the
option ``f`` (``ln_flag``), no barrier word: each CTA stores its mean and M2 in two 64-bit words
beside the row's number and polls its group's; ``p``: the next row's loads issued before the
exchange.

    cd python/bench && python group_probe.py [H] [--configs 'T,CTAS,GROUP[,f][,p];...'] [--tirx 'T,GROUP[,p];...']

Prints per configuration ms, GB/s, the fraction of a device copy of the same bytes, max |y -
torch's layer_norm|, beside torch's layer_norm and tirx.ops.layer_norm (its tuned design); with
``--tirx 'T,GROUP[,p];...'``, the same design written in TIRx (`tirx.ops.norm.layer_norm_grid_kernel`:
slices in registers, `T.cuda.grid_group_sync`; ``p``: the next row prefetched), as many groups as
the device holds CTAs for."""

import argparse

import cupy
import torch
from ops import copy_us  # this directory

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ void group_sync(unsigned int* word, unsigned int size) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int old;
        asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(word) : "memory");
        if (((old + 1u) & 0x7fffffffu) == size) {
            asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(word), "r"(0x80000000u - size) : "memory");
        } else {
            unsigned int cur, polls = 0;
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(word) : "memory");
                if (++polls == (1u << 26)) __trap();  // a group that never fills: fail, not hang
            } while (((cur ^ old) & 0x80000000u) == 0u);
        }
    }
    __syncthreads();
}

// The CTA's sum of v over its threads, in every thread.
__device__ __forceinline__ float cta_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    float s = lane < THREADS / 32 ? red[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

extern "C" __global__ void __launch_bounds__(THREADS) ln_group(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b,
    __nv_bfloat16* __restrict__ y, float* part, unsigned int* bars, int m, float eps) {
    __shared__ float red[32];
    const int groups = gridDim.x / GROUP, q = blockIdx.x / GROUP, r = blockIdx.x % GROUP;
    const int lo = r * SLICE, hi = min(lo + SLICE, H);
    const float count = float(hi - lo);
    float v[VECS * 8];
    for (int row = q, it = 0; row < m; row += groups, ++it) {
        const __nv_bfloat16* xr = x + (size_t)row * H;
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const int c = lo + (i * THREADS + threadIdx.x) * 8;
            uint4 u = make_uint4(0, 0, 0, 0);
            if (c < hi) u = *reinterpret_cast<const uint4*>(xr + c);
            const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f = __bfloat1622float2(h2[j]);
                v[i * 8 + 2 * j] = f.x;
                v[i * 8 + 2 * j + 1] = f.y;
                s += f.x + f.y;
            }
        }
        const float mean_r = cta_sum(s, red) / count;
        float d2 = 0.f;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const bool in = lo + (i * THREADS + threadIdx.x) * 8 < hi;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float d = v[i * 8 + j] - mean_r;
                d2 += in ? d * d : 0.f;
            }
        }
        const float m2_r = cta_sum(d2, red);
        float* slot = part + ((size_t)((it & 1) * groups + q) * GROUP) * 3;
        if (threadIdx.x == 0) {
            slot[r * 3] = count;
            slot[r * 3 + 1] = mean_r;
            slot[r * 3 + 2] = m2_r;
        }
        group_sync(bars + q, GROUP);
        // Every warp combines the group's partials (lane p reads partial p), then the lanes' merge.
        const int lane = threadIdx.x % 32;
        float n = 0.f, mu = 0.f, m2 = 0.f;
        for (int p = lane; p < GROUP; p += 32) {
            const float nb = __ldcg(slot + p * 3), mb = __ldcg(slot + p * 3 + 1), qb = __ldcg(slot + p * 3 + 2);
            const float nn = n + nb, delta = mb - mu;
            mu += delta * nb / nn;
            m2 += qb + delta * delta * n * nb / nn;
            n = nn;
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float nb = __shfl_xor_sync(0xffffffffu, n, o), mb = __shfl_xor_sync(0xffffffffu, mu, o);
            const float qb = __shfl_xor_sync(0xffffffffu, m2, o);
            const float nn = n + nb;
            if (nn > 0.f) {
                const float delta = mb - mu;
                mu += delta * nb / nn;
                m2 += qb + delta * delta * n * nb / nn;
            }
            n = nn;
        }
        const float rstd = rsqrtf(m2 / float(H) + eps);
        __nv_bfloat16* yr = y + (size_t)row * H;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const int c = lo + (i * THREADS + threadIdx.x) * 8;
            if (c >= hi) continue;
            const uint4 wu = __ldg(reinterpret_cast<const uint4*>(w + c)), bu = __ldg(reinterpret_cast<const uint4*>(b + c));
            const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wu);
            const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bu);
            uint4 o;
            __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 wf = __bfloat1622float2(w2[j]), bf = __bfloat1622float2(b2[j]);
                o2[j] = __floats2bfloat162_rn(__fmaf_rn((v[i * 8 + 2 * j] - mu) * rstd, wf.x, bf.x),
                                              __fmaf_rn((v[i * 8 + 2 * j + 1] - mu) * rstd, wf.y, bf.y));
            }
            *reinterpret_cast<uint4*>(yr + c) = o;
        }
    }
}
// The flag-in-data exchange: no barrier word. CTA r of a group stores its mean and M2 each in a
// 64-bit word beside the row's sequence number (a 64-bit store is single-copy atomic), in the
// slots of the row's parity; warp 0 of every CTA polls the GROUP slots until each carries this
// row's number, combines them and hands the statistics to the CTA through shared memory. One
// store and one load round trip, where the barrier costs an atomic's, a release's and a load's.
// Slots of parity k are rewritten for row k + 2 only after every CTA wrote row k + 1's, which it
// does after reading row k's. SEQ_BASE (a launch's number, in the high bits) keeps one launch
// from reading another's.
__device__ __forceinline__ uint4 load_slice(const __nv_bfloat16* xr, int c, int hi) {
    uint4 u = make_uint4(0, 0, 0, 0);
    if (c < hi) u = *reinterpret_cast<const uint4*>(xr + c);
    return u;
}

extern "C" __global__ void __launch_bounds__(THREADS) ln_flag(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b,
    __nv_bfloat16* __restrict__ y, unsigned long long* slots, int m, float eps, unsigned int seq_base) {
    __shared__ float red[32];
    __shared__ float stats[2];
    const int groups = gridDim.x / GROUP, q = blockIdx.x / GROUP, r = blockIdx.x % GROUP;
    const int lo = r * SLICE, hi = min(lo + SLICE, H);
    const float count = float(hi - lo);
    uint4 u[VECS];
    if (q < m) {
#pragma unroll
        for (int i = 0; i < VECS; ++i) u[i] = load_slice(x + (size_t)q * H, lo + (i * THREADS + threadIdx.x) * 8, hi);
    }
    for (int row = q, it = 0; row < m; row += groups, ++it) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&u[i]);
#pragma unroll
            for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(h2[j]); s += f.x + f.y; }
        }
        const float mean_r = cta_sum(s, red) / count;
        float d2 = 0.f;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const bool in = lo + (i * THREADS + threadIdx.x) * 8 < hi;
            const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&u[i]);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f = __bfloat1622float2(h2[j]);
                const float a = f.x - mean_r, c = f.y - mean_r;
                d2 += in ? a * a + c * c : 0.f;
            }
        }
        const float m2_r = cta_sum(d2, red);
        const unsigned long long seq = (unsigned long long)(seq_base + (unsigned int)it + 1u) << 32;
        unsigned long long* slot = slots + ((size_t)((it & 1) * groups + q) * GROUP) * 2;
        if (threadIdx.x == 0) {
            asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(slot + r * 2), "l"(seq | __float_as_uint(mean_r)) : "memory");
            asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(slot + r * 2 + 1), "l"(seq | __float_as_uint(m2_r)) : "memory");
        }
#if PREFETCH
        uint4 un[VECS];
        const int next = row + groups;
        if (next < m) {
#pragma unroll
            for (int i = 0; i < VECS; ++i) un[i] = load_slice(x + (size_t)next * H, lo + (i * THREADS + threadIdx.x) * 8, hi);
        }
#endif
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            float n = 0.f, mu = 0.f, m2 = 0.f;
            for (int p = lane; p < GROUP; p += 32) {
                unsigned long long a, c;
                unsigned int polls = 0;
                do {
                    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(a) : "l"(slot + p * 2) : "memory");
                    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(c) : "l"(slot + p * 2 + 1) : "memory");
                    if (++polls == (1u << 26)) __trap();
                } while ((a & 0xffffffff00000000ull) != seq || (c & 0xffffffff00000000ull) != seq);
                const float nb = float(min(SLICE, H - p * SLICE)), mb = __uint_as_float((unsigned int)a);
                const float qb = __uint_as_float((unsigned int)c);
                const float nn = n + nb, delta = mb - mu;
                mu += delta * nb / nn;
                m2 += qb + delta * delta * n * nb / nn;
                n = nn;
            }
            for (int o = 16; o > 0; o >>= 1) {
                const float nb = __shfl_xor_sync(0xffffffffu, n, o), mb = __shfl_xor_sync(0xffffffffu, mu, o);
                const float qb = __shfl_xor_sync(0xffffffffu, m2, o);
                const float nn = n + nb;
                if (nn > 0.f) {
                    const float delta = mb - mu;
                    mu += delta * nb / nn;
                    m2 += qb + delta * delta * n * nb / nn;
                }
                n = nn;
            }
            if (lane == 0) { stats[0] = mu; stats[1] = rsqrtf(m2 / float(H) + eps); }
        }
        __syncthreads();
        const float mu = stats[0], rstd = stats[1];
        __nv_bfloat16* yr = y + (size_t)row * H;
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            const int c = lo + (i * THREADS + threadIdx.x) * 8;
            if (c >= hi) continue;
            const uint4 wu = __ldg(reinterpret_cast<const uint4*>(w + c)), bu = __ldg(reinterpret_cast<const uint4*>(b + c));
            const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wu);
            const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bu);
            const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&u[i]);
            uint4 o;
            __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 wf = __bfloat1622float2(w2[j]), bf = __bfloat1622float2(b2[j]), f = __bfloat1622float2(h2[j]);
                o2[j] = __floats2bfloat162_rn(__fmaf_rn((f.x - mu) * rstd, wf.x, bf.x), __fmaf_rn((f.y - mu) * rstd, wf.y, bf.y));
            }
            *reinterpret_cast<uint4*>(yr + c) = o;
        }
#if PREFETCH
#pragma unroll
        for (int i = 0; i < VECS; ++i) u[i] = un[i];
#else
        const int next = row + groups;
        if (next < m) {
#pragma unroll
            for (int i = 0; i < VECS; ++i) u[i] = load_slice(x + (size_t)next * H, lo + (i * THREADS + threadIdx.x) * 8, hi);
        }
#endif
    }
}"""


def kernel(h: int, threads: int, group: int, name: str = "ln_group", prefetch: bool = False):
    per = -(-h // group)
    slice_ = -(-per // 8) * 8  # (16-byte vectors)
    vecs = -(-slice_ // (8 * threads))
    defs = {"H": h, "THREADS": threads, "GROUP": group, "SLICE": slice_, "VECS": vecs, "PREFETCH": int(prefetch)}
    src = "".join(f"#define {k} {v}\n" for k, v in defs.items()) + SOURCE
    return cupy.RawKernel(src, name, options=("-std=c++17",), enable_cooperative_groups=True), slice_, vecs


def timed_ms(f, reps=10) -> float:
    for _ in range(3):
        f()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("h", nargs="?", type=int, default=262144)
    ap.add_argument("--configs", default="512,1,12;256,2,22;512,1,12,f;512,1,12,f,p;512,1,11,f,p;1024,1,6,f,p;256,2,22,f;256,2,22,f,p;256,2,24,f,p;1024,1,12,f,p;512,1,22,f,p;256,3,33,f")
    ap.add_argument("--tirx", default="512,32;512,32,p;256,32;1024,32;1024,32,p")
    a = ap.parse_args()
    h = a.h
    m = max(1, (1 << 30) // (4 * h))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(h, device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    ref = torch.nn.functional.layer_norm(x.float(), [h], w.float(), b.float(), 1e-5).to(torch.bfloat16)
    nbytes = 2 * x.numel() * 2
    copy = copy_us(nbytes) / 1e3
    print(f"H {h}, {m} rows, {nbytes / 1e9:.2f} GB moved; copy {copy:.3f} ms; {sms} SMs")
    eager = timed_ms(lambda: torch.nn.functional.layer_norm(x, [h], w, b, 1e-5))
    print(f"torch layer_norm      {eager:.3f} ms  {nbytes / eager / 1e6:7.0f} GB/s  {copy / eager:.3f} of copy")
    try:
        import tirx.ops

        tirx.ops.layer_norm(x, [h], w, b, 1e-5)
        ours = timed_ms(lambda: tirx.ops.layer_norm(x, [h], w, b, 1e-5))
        print(f"tirx.ops.layer_norm   {ours:.3f} ms  {nbytes / ours / 1e6:7.0f} GB/s  {copy / ours:.3f} of copy")
    except Exception as e:  # (the probe runs without the package too)
        print(f"tirx.ops.layer_norm: {e}")
    xc, wc, bc = (cupy.asarray(t.view(torch.int16)) for t in (x, w, b))
    for cfg in filter(None, a.configs.split(";")):
        threads, ctas, group, *opts = cfg.split(",")
        threads, ctas, group = int(threads), int(ctas), int(group)
        flag, prefetch = "f" in opts, "p" in opts
        grid = sms * ctas
        if grid % group:
            print(f"{cfg}: {grid} CTAs are not whole groups of {group}")
            continue
        k, slice_, vecs = kernel(h, threads, group, "ln_flag" if flag else "ln_group", prefetch)
        y = torch.empty_like(x)
        yc = cupy.asarray(y.view(torch.int16))
        if flag:
            slots = cupy.zeros(2 * grid * 2, dtype=cupy.uint64)
            launches = [0]

            def run():
                launches[0] += 1  # each launch its own sequence numbers
                base = cupy.uint32((launches[0] << 20) & 0xFFFFFFFF)
                k((grid,), (threads,), (xc, wc, bc, yc, slots, cupy.int32(m), cupy.float32(1e-5), base))
        else:
            part = torch.zeros(2 * grid * 3, device="cuda", dtype=torch.float32)
            bars = torch.zeros(grid // group, device="cuda", dtype=torch.int32)
            args = (xc, wc, bc, yc, cupy.asarray(part), cupy.asarray(bars), cupy.int32(m), cupy.float32(1e-5))

            def run():
                k((grid,), (threads,), args)

        try:
            ms = timed_ms(run)
        except cupy.cuda.driver.CUDADriverError as e:
            print(f"{cfg}: {e}")
            continue
        err = (y.float() - ref.float()).abs().max().item()
        regs = k.attributes["num_regs"]
        spill = k.attributes["local_size_bytes"]
        print(
            f"T {threads:4} x {ctas}/SM{' flag' if flag else ''}{' prefetch' if prefetch else ''}, groups of {group:2} (slice {slice_}, {vecs} vectors/thread, {regs} regs, "
            f"{spill} B local): {ms:.3f} ms  {nbytes / ms / 1e6:7.0f} GB/s  {copy / ms:.3f} of copy  max|diff| {err:.3g}"
        )
    for cfg in filter(None, a.tirx.split(";")):
        threads, group, *p = cfg.split(",")
        tirx_design(x, w, b, ref, h, m, int(threads), int(group), p == ["p"], nbytes, copy)


def tirx_design(x, w, b, ref, h, m, threads, group, prefetch, nbytes, copy):
    import tirx
    from tirx.ops import norm

    try:
        # (the kernel's registers, so its residency, may change with its number of groups)
        groups, k = 1 << 30, tirx.compile(norm.layer_norm_grid_kernel(h, "bfloat16", threads, group, 1, prefetch))
        while k.resident_ctas() // group < groups:
            groups = k.resident_ctas() // group
            k = tirx.compile(norm.layer_norm_grid_kernel(h, "bfloat16", threads, group, groups, prefetch))
    except Exception as e:  # (a slice too wide for the registers, say)
        print(f"TIRx T {threads}, groups of {group}: {e}")
        return
    y = torch.empty_like(x)
    part = torch.zeros(2 * groups * group, 2, device="cuda", dtype=torch.float32)
    words = torch.zeros(groups, device="cuda", dtype=torch.int32)
    ms = timed_ms(lambda: k(x, w, b, y, part, words, m, 1e-5))
    err = (y.float() - ref.float()).abs().max().item()
    print(
        f"TIRx T {threads:4}{' prefetch' if prefetch else ''}, {groups} groups of {group:2} ({groups * group} CTAs): {ms:.3f} ms  "
        f"{nbytes / ms / 1e6:7.0f} GB/s  {copy / ms:.3f} of copy  max|diff| {err:.3g}"
    )


if __name__ == "__main__":
    main()
