// GPU check of the CUDA that tirx-cuda generates for its test kernels
// (crates/cuda/tests/kernels.rs). Each generated .cu is its own translation
// unit; this file launches the extern "C" kernels and compares every output
// element with a host (or, for the 12 GiB kernel, device-side) reference.
//
//   TIRX_CU_OUT=$PWD/out/cu cargo test -p tirx-cuda --test kernels
//   nvcc -arch=sm_90a -o check crates/cuda/gpu/check.cu out/cu/*.cu && ./check [NAME...]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

extern "C" {
__global__ void copy_f32(float*, float*);
__global__ void copy_f16(__half*, __half*);
__global__ void copy_u8(unsigned char*, unsigned char*);
__global__ void fallback_copy(float*, float*);
__global__ void scalar_grid(float*, float*);
__global__ void scalar_params(float*, int, float*, float);
__global__ void reg_copy(float*, float*);
__global__ void ldstmatrix(__half*, __half*);
__global__ void packed_f16(__half*, __half*, __half*);
__global__ void cast_pairs(float*, __half*, float*);
__global__ void swizzle_copy(__half*, __half*);
__global__ void big_scale(float*, float*);
__global__ void warp_shuffle(float*, float*, __nv_bfloat16*, __nv_bfloat16*, int*, int*);
__global__ void cp_async_copy(float*, float*);
__global__ void mbarrier_pipeline(float*, float*);
__global__ void ptx_vec_copy(float*, float*, unsigned short*, unsigned short*);
__global__ void mma_f16(__half*, __half*, float*, float*);
__global__ void mma_bf16(__nv_bfloat16*, __nv_bfloat16*, float*, float*);
__global__ void mma_f16_k8(__half*, __half*, float*, float*);
__global__ void mma_tf32(float*, float*, float*, float*);
__global__ void mma_s8(signed char*, signed char*, int*, int*);
__global__ void named_barrier(float*, float*);
__global__ void wgmma_ss(__nv_bfloat16*, __nv_bfloat16*, int*, float*);
__global__ void wgmma_rs_f16acc(__half*, __half*, __half*);
__global__ void warp_specialized(float*, float*);
}

#define CK(x)                                                                               \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(2);                                                                   \
        }                                                                                   \
    } while (0)

static int failures = 0;

template <class T>
static T* upload(const std::vector<T>& h) {
    T* d;
    CK(cudaMalloc(&d, h.size() * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <class T>
static T* zeros(size_t n) {
    T* d;
    CK(cudaMalloc(&d, n * sizeof(T)));
    CK(cudaMemset(d, 0, n * sizeof(T)));
    return d;
}

template <class T>
static std::vector<T> download(const T* d, size_t n) {
    CK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static float f(float x) { return x; }
static float f(__half x) { return __half2float(x); }
static float f(unsigned char x) { return x; }
static float f(int x) { return float(x); }
static float f(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Compares bit patterns (exact), printing the first few mismatches.
template <class T>
static void expect(const char* name, const std::vector<T>& got, const std::vector<T>& want) {
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
            if (bad < 4) std::printf("  %s[%zu] = %g, want %g\n", name, i, f(got[i]), f(want[i]));
            ++bad;
        }
    }
    std::printf("%-6s %-14s %zu elements%s\n", bad ? "FAIL" : "ok", name, want.size(), bad ? " (mismatches)" : "");
    failures += bad != 0;
}

template <class T, class K>
static void roundtrip(const char* name, K kernel, int n, unsigned grid, unsigned block, size_t smem = 0) {
    std::vector<T> a(n);
    for (int i = 0; i < n; ++i) a[i] = T(float((i * 7 + 3) % 251));
    T* da = upload(a);
    T* db = zeros<T>(n);
    kernel<<<grid, block, smem>>>(da, db);
    CK(cudaGetLastError());
    expect(name, download(db, n), a);
    cudaFree(da);
    cudaFree(db);
}

static void check_scalar_grid() {
    std::vector<float> a(500), want(500);
    for (int i = 0; i < 500; ++i) a[i] = float(i) + 0.25f;
    for (int g = 0; g < 500; ++g) want[(g % 25) * 20 + g / 25] = std::sqrt(a[g]);
    float* da = upload(a);
    float* db = zeros<float>(500);
    scalar_grid<<<4, 128>>>(da, db);
    CK(cudaGetLastError());
    expect("scalar_grid", download(db, 500), want);
}

/// Scalar arguments between the buffers and a grid sized by them: (n + 127) / 128 CTAs.
static void check_scalar_params() {
    const int n = 300;
    const float scale = -1.5f;
    std::vector<float> a(n), want(n);
    for (int i = 0; i < n; ++i) a[i] = float(i) * 0.25f, want[i] = a[i] * scale;
    float* da = upload(a);
    float* db = zeros<float>(n);
    scalar_params<<<(n + 127) / 128, 128>>>(da, n, db, scale);
    CK(cudaGetLastError());
    expect("scalar_params", download(db, n), want);
}

static void check_reg_copy() {
    std::vector<float> a(256), want(256);
    for (int i = 0; i < 256; ++i) a[i] = float(i) * 0.5f - 3.0f, want[i] = a[i] * 2.0f;
    float* da = upload(a);
    float* db = zeros<float>(256);
    reg_copy<<<1, 32>>>(da, db);
    CK(cudaGetLastError());
    expect("reg_copy", download(db, 256), want);
}

static void check_ldstmatrix() {
    std::vector<__half> a(256), want(256);
    for (int i = 0; i < 256; ++i) a[i] = __float2half(float(i));
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) want[r * 16 + c] = a[c * 16 + r];
    __half* da = upload(a);
    __half* db = zeros<__half>(256);
    ldstmatrix<<<1, 32>>>(da, db);
    CK(cudaGetLastError());
    expect("ldstmatrix", download(db, 256), want);
}

static void check_packed_f16() {
    std::vector<__half> a(256), b(256), want(256);
    for (int i = 0; i < 256; ++i) {
        float x = float(i % 8), y = float(i % 5 - 2);
        a[i] = __float2half(x);
        b[i] = __float2half(y);
        want[i] = __float2half((x + y) * y + 2.0f);  // small integers: exact in f16
    }
    __half *da = upload(a), *db = upload(b), *dc = zeros<__half>(256);
    packed_f16<<<1, 32>>>(da, db, dc);
    CK(cudaGetLastError());
    expect("packed_f16", download(dc, 256), want);
}

static void check_cast_pairs() {
    std::vector<float> a(256), want_bf(256);
    std::vector<__half> want_h(256);
    for (int i = 0; i < 256; ++i) {
        a[i] = float(i) * 0.37f - 20.1f;
        want_h[i] = __float2half_rn(a[i]);
        want_bf[i] = __bfloat162float(__float2bfloat16_rn(a[i])) + __half2float(want_h[i]);
    }
    float* da = upload(a);
    __half* dh = zeros<__half>(256);
    float* dbf = zeros<float>(256);
    cast_pairs<<<1, 32>>>(da, dh, dbf);
    CK(cudaGetLastError());
    expect("cast_pairs.H", download(dh, 256), want_h);
    expect("cast_pairs.Bf", download(dbf, 256), want_bf);
}

/// PTX shfl.sync source lanes (lane within the warp) for width-`w` segments.
static int shfl_down(int l, int d, int w) { return l + d <= (l & ~(w - 1)) + w - 1 ? l + d : l; }
static int shfl_up(int l, int d, int w) { return l - d >= (l & ~(w - 1)) ? l - d : l; }

static void check_warp_shuffle() {
    std::vector<float> a(64), want_b(64, 0.0f);
    std::vector<__nv_bfloat16> c(64), want_d(64);
    std::vector<int> e(64), want_f(256);
    for (int i = 0; i < 64; ++i) {
        a[i] = float((i * 7 + 3) % 13) - 6.0f;  // small integers: every partial sum is exact
        c[i] = __float2bfloat16_rn(float(i) * 0.37f - 5.0f);
        e[i] = (i * 13 + 5) % 101 - 50;
    }
    for (int t = 0; t < 64; ++t) {
        int w = t / 32 * 32, l = t % 32, seg8 = t & ~7;
        for (int k = 0; k < 32; ++k) want_b[t] += a[w + k];
        want_d[t] = c[t ^ 5];
        int sum = 0;
        for (int k = 0; k < 8; ++k) sum += e[seg8 + k];
        want_f[t * 4 + 0] = sum;
        want_f[t * 4 + 1] = e[w + shfl_down(l, 3, 16)];
        want_f[t * 4 + 2] = e[w + (l & ~15) + 7];
        want_f[t * 4 + 3] = e[w + shfl_up(l, 1, 8)];
    }
    float *da = upload(a), *db = zeros<float>(64);
    __nv_bfloat16 *dc = upload(c), *dd = zeros<__nv_bfloat16>(64);
    int *de = upload(e), *df = zeros<int>(256);
    warp_shuffle<<<1, 64>>>(da, db, dc, dd, de, df);
    CK(cudaGetLastError());
    expect("warp_shuffle.B", download(db, 64), want_b);
    expect("warp_shuffle.D", download(dd, 64), want_d);
    expect("warp_shuffle.F", download(df, 256), want_f);
}

static void check_cp_async() {
    std::vector<float> a(256), want(256);
    for (int i = 0; i < 256; ++i) a[i] = float(i) + 0.5f;
    for (int t = 0; t < 32; ++t)
        for (int j = 0; j < 4; ++j) {
            want[t * 4 + j] = a[(31 - t) * 4 + j];
            int k = 128 + t * 4 + j;
            want[k] = (j < 2 && t % 2 == 0) ? 0.0f : a[k];  // even threads zero-fill their 8-byte copy
        }
    float *da = upload(a), *db = zeros<float>(256);
    cp_async_copy<<<1, 32>>>(da, db);
    CK(cudaGetLastError());
    expect("cp_async_copy", download(db, 256), want);
}

// Inline-PTX vector loads and stores (cache hints, 16/8/2-byte forms): B = A and G = H,
// each element moved by another thread through shared memory.
static void check_ptx_vec() {
    std::vector<float> a(128);
    std::vector<unsigned short> h(32);
    for (int i = 0; i < 128; ++i) a[i] = float(i) * 0.25f - 3.0f;
    for (int i = 0; i < 32; ++i) h[i] = (unsigned short)(0xA000u + 7u * i);
    float *da = upload(a), *db = zeros<float>(128);
    unsigned short *dh = upload(h), *dg = zeros<unsigned short>(32);
    ptx_vec_copy<<<1, 32>>>(da, db, dh, dg);
    CK(cudaGetLastError());
    expect("ptx_vec_copy.B", download(db, 128), a);
    expect("ptx_vec_copy.G", download(dg, 32), h);
}

static void check_mbarrier_pipeline() {
    std::vector<float> a(128), want(128);
    for (int i = 0; i < 128; ++i) a[i] = float(i % 37) * 0.25f;
    for (int r = 0; r < 4; ++r)
        for (int l = 0; l < 32; ++l) want[r * 32 + l] = a[r * 32 + l] * 2.0f + a[r * 32] * 2.0f;
    float *da = upload(a), *db = zeros<float>(128);
    mbarrier_pipeline<<<1, 64>>>(da, db);
    CK(cudaGetLastError());
    expect("mbarrier_pipe", download(db, 128), want);
}

/// Each warpgroup mirrors its 128 elements through shared memory behind its own barrier.
static void check_named_barrier() {
    std::vector<float> a(256), want(256);
    for (int i = 0; i < 256; ++i) a[i] = float(i) * 0.5f;
    for (int t = 0; t < 256; ++t) want[t] = a[t / 128 * 128 + 127 - t % 128];
    float *da = upload(a), *db = zeros<float>(256);
    named_barrier<<<1, 256>>>(da, db);
    CK(cudaGetLastError());
    expect("named_barrier", download(db, 256), want);
}

__global__ void fill_pattern(float* a, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        a[i] = float(i % 1000003);
}

__global__ void count_big_scale_errors(const float* b, long long n, unsigned long long* bad) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float want = float(i % 1000003) * (i % 4 == 0 ? 0.5f : 1.0f);
        if (b[i] != want) atomicAdd(bad, 1ull);
    }
}

/// 3 x 2^30 floats (12 GiB) per buffer: element indices past 2^31 need 64-bit math.
static void check_big_scale() {
    const long long n = 3ll << 30;
    float *da, *db;
    unsigned long long* dbad;
    if (cudaMalloc(&da, n * 4) != cudaSuccess || cudaMalloc(&db, n * 4) != cudaSuccess) {
        std::printf("FAIL   big_scale      cannot allocate 2 x 12 GiB\n");
        ++failures;
        return;
    }
    CK(cudaMalloc(&dbad, 8));
    CK(cudaMemset(dbad, 0, 8));
    CK(cudaMemset(db, 0, n * 4));
    fill_pattern<<<4096, 256>>>(da, n);
    big_scale<<<1 << 20, 256>>>(da, db);
    CK(cudaGetLastError());
    count_big_scale_errors<<<4096, 256>>>(db, n, dbad);
    unsigned long long bad = download(dbad, 1)[0];
    std::printf("%-6s %-14s %lld elements%s\n", bad ? "FAIL" : "ok", "big_scale", n, bad ? " (mismatches)" : "");
    if (bad) std::printf("  %llu mismatches\n", bad);
    failures += bad != 0;
    cudaFree(da);
    cudaFree(db);
    cudaFree(dbad);
}

static __half to(__half*, float x) { return __float2half(x); }
static __nv_bfloat16 to(__nv_bfloat16*, float x) { return __float2bfloat16(x); }
static float to(float*, float x) { return x; }
static signed char to(signed char*, float x) { return (signed char)x; }
static int to(int*, float x) { return (int)x; }

/// (row, col) of element e of register r of `lane`'s fragment (PTX ISA, mma.m16n8k*):
/// op 0 = C/D, 1 = A, 2 = B; p elements per 32-bit register.
static void frag(int op, int p, int lane, int r, int e, int* row, int* col) {
    int g = lane / 4, t = lane % 4;
    if (op == 1) *row = g + 8 * (r % 2), *col = p * t + e + 4 * p * (r / 2);
    else if (op == 2) *row = p * t + e + 4 * p * r, *col = g;
    else *row = g + 8 * (r / 2), *col = 2 * t + r % 2;
}

/// One mma.sync of a 16x8xk tile (the hand-built `mma_*` kernels: registers loaded lane-major,
/// D = A*B + C stored lane-major). Inputs are small multiples of 1/8 (integers for s8), so
/// every sum is exact and D must be bit-exact.
template <class T, class Acc, class Kern>
static void check_mma_one(const char* name, Kern kernel, int k, int p, bool integer) {
    int na = 16 * k / 32, nb = k * 8 / 32;
    std::vector<float> a(16 * k), b(k * 8), c(128);
    for (int i = 0; i < 16 * k; ++i) a[i] = integer ? float((i * 7) % 255 - 127) : float((i * 7) % 17 - 8) / 8;
    for (int i = 0; i < k * 8; ++i) b[i] = integer ? float((i * 5) % 255 - 127) : float((i * 5) % 17 - 8) / 8;
    for (int i = 0; i < 128; ++i) c[i] = integer ? float(i * 3 - 100) : float(i % 9) - 4;
    std::vector<T> ha(32 * na), hb(32 * nb);
    std::vector<Acc> hc(128), want(128);
    for (int l = 0; l < 32; ++l) {
        int row, col;
        for (int j = 0; j < na; ++j) frag(1, p, l, j / p, j % p, &row, &col), ha[l * na + j] = to((T*)0, a[row * k + col]);
        for (int j = 0; j < nb; ++j) frag(2, p, l, j / p, j % p, &row, &col), hb[l * nb + j] = to((T*)0, b[row * 8 + col]);
        for (int j = 0; j < 4; ++j) {
            frag(0, 1, l, j, 0, &row, &col);
            double s = c[row * 8 + col];
            for (int x = 0; x < k; ++x) s += double(a[row * k + x]) * b[x * 8 + col];
            hc[l * 4 + j] = to((Acc*)0, c[row * 8 + col]);
            want[l * 4 + j] = to((Acc*)0, float(s));
        }
    }
    T *da = upload(ha), *db = upload(hb);
    Acc *dc = upload(hc), *dd = zeros<Acc>(128);
    kernel<<<1, 32>>>(da, db, dc, dd);
    CK(cudaGetLastError());
    expect(name, download(dd, 128), want);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
}

static void check_mma() {
    check_mma_one<__half, float>("mma_f16", mma_f16, 16, 2, false);
    check_mma_one<__nv_bfloat16, float>("mma_bf16", mma_bf16, 16, 2, false);
    check_mma_one<__half, float>("mma_f16_k8", mma_f16_k8, 8, 2, false);
    check_mma_one<float, float>("mma_tf32", mma_tf32, 8, 1, false);
    check_mma_one<signed char, int>("mma_s8", mma_s8, 32, 4, true);
}

/// The byte offset of element (mn, k) of a wgmma operand under a descriptor (PTX ISA,
/// canonical shared-memory layouts; `sw` 0..3 = none/32B/64B/128B), swizzle applied.
static int wg_place(bool mn_major, int sw, int lbo, int sbo, int e, int mn, int k) {
    int w = 16 << sw, t = 16 / e, off;
    if (!mn_major)
        off = sw == 0 ? (mn % 8) * 16 + (mn / 8) * sbo + (k % t) * e + (k / t) * lbo : (mn % 8) * w + (mn / 8) * sbo + k * e;
    else
        off = sw == 0 ? (mn % t) * e + (mn / t) * sbo + (k % 8) * 16 + (k / 8) * lbo
                      : (mn % (w / e)) * e + (mn / (w / e)) * lbo + (k % 8) * w + (k / 8) * sbo;
    return off ^ (((off >> 7) & ((1 << sw) - 1)) << 4);
}

/// (row, col) of accumulator element i of thread tid of a warpgroup (wgmma register fragments).
static void wg_d(int tid, int i, int* row, int* col) {
    int w = tid / 32, g = tid % 32 / 4, t = tid % 4;
    *row = 16 * w + g + 8 * (i / 2 % 2), *col = 8 * (i / 4) + 2 * t + i % 2;
}

/// wgmma_ss: A (K-major, 32B swizzle) and B (MN-major, 128B swizzle) copied linearly into
/// shared memory and read through descriptors; D = A*B^T (+ 1 with flag set), 64x64x16.
static void check_wgmma_ss() {
    std::vector<__nv_bfloat16> a(64 * 16), b(16 * 64);
    std::vector<float> af(a.size()), bf(b.size());
    for (size_t i = 0; i < a.size(); ++i) af[i] = float(int(i * 7 % 17) - 8) / 8, a[i] = __float2bfloat16(af[i]);
    for (size_t i = 0; i < b.size(); ++i) bf[i] = float(int(i * 5 % 17) - 8) / 8, b[i] = __float2bfloat16(bf[i]);
    for (int flag = 0; flag < 2; ++flag) {
        std::vector<float> want(128 * 32);
        for (int t = 0; t < 128; ++t)
            for (int i = 0; i < 32; ++i) {
                int row, col;
                wg_d(t, i, &row, &col);
                double s = flag;
                for (int k = 0; k < 16; ++k)
                    s += double(af[wg_place(false, 1, 16, 256, 2, row, k) / 2]) * bf[wg_place(true, 3, 2048, 1024, 2, col, k) / 2];
                want[t * 32 + i] = float(s);
            }
        __nv_bfloat16 *da = upload(a), *db = upload(b);
        int* df = upload(std::vector<int>{flag});
        float* dd = zeros<float>(128 * 32);
        wgmma_ss<<<1, 128>>>(da, db, df, dd);
        CK(cudaGetLastError());
        expect(flag ? "wgmma_ss+D" : "wgmma_ss", download(dd, 128 * 32), want);
        cudaFree(da), cudaFree(db), cudaFree(df), cudaFree(dd);
    }
}

/// wgmma_rs_f16acc: A from each thread's four registers, B (32x16, K-major, core matrices)
/// from shared memory, a float16 D = A*B^T, 64x32x16; sums exact in float16.
static void check_wgmma_rs() {
    std::vector<__half> a(128 * 8), b(32 * 16);
    std::vector<float> am(64 * 16), bf(b.size());
    for (int t = 0; t < 128; ++t)
        for (int j = 0; j < 8; ++j) {
            float x = float(int((t * 8 + j) * 7 % 5) - 2) / 2;
            a[t * 8 + j] = __float2half(x);
            int w = t / 32, g = t % 32 / 4, q = t % 4, r = j / 2, e = j % 2;
            am[(16 * w + g + 8 * (r % 2)) * 16 + 2 * q + e + 8 * (r / 2)] = x;
        }
    for (size_t i = 0; i < b.size(); ++i) bf[i] = float(int(i * 3 % 5) - 2) / 2, b[i] = __float2half(bf[i]);
    std::vector<__half> want(128 * 16);
    for (int t = 0; t < 128; ++t)
        for (int i = 0; i < 16; ++i) {
            int row, col;
            wg_d(t, i, &row, &col);
            double s = 0;
            for (int k = 0; k < 16; ++k) s += double(am[row * 16 + k]) * bf[wg_place(false, 0, 512, 128, 2, col, k) / 2];
            want[t * 16 + i] = __float2half(float(s));
        }
    __half *da = upload(a), *db = upload(b), *dd = zeros<__half>(128 * 16);
    wgmma_rs_f16acc<<<1, 128>>>(da, db, dd);
    CK(cudaGetLastError());
    expect("wgmma_rs_f16", download(dd, 128 * 16), want);
    cudaFree(da), cudaFree(db), cudaFree(dd);
}

/// warp_specialized: warpgroup 0 writes shared memory and arrives, warpgroup 1 waits and reads it.
static void check_warp_specialized() {
    std::vector<float> a(128), want(128);
    for (int i = 0; i < 128; ++i) a[i] = float(i) * 0.25f, want[127 - i] = a[i];
    float *da = upload(a), *db = zeros<float>(128);
    warp_specialized<<<1, 256>>>(da, db);
    CK(cudaGetLastError());
    expect("warp_specialized", download(db, 128), want);
    cudaFree(da), cudaFree(db);
}

/// `check [NAME...]`: runs the named checks (all without arguments), e.g.
/// `check warp_shuffle cp_async mbarrier` under compute-sanitizer.
int main(int argc, char** argv) {
    struct Check {
        const char* name;
        void (*run)();
    };
    const Check checks[] = {
        {"copy", [] {
             roundtrip<float>("copy_f32", copy_f32, 1024, 1, 32);
             roundtrip<__half>("copy_f16", copy_f16, 1024, 1, 32);
             roundtrip<unsigned char>("copy_u8", copy_u8, 1024, 1, 32);
             roundtrip<float>("fallback_copy", fallback_copy, 24, 1, 32);
             roundtrip<__half>("swizzle_copy", swizzle_copy, 4096, 1, 128, 8192);
         }},
        {"scalar_grid", check_scalar_grid},
        {"scalar_params", check_scalar_params},
        {"reg_copy", check_reg_copy},
        {"ldstmatrix", check_ldstmatrix},
        {"packed_f16", check_packed_f16},
        {"cast_pairs", check_cast_pairs},
        {"warp_shuffle", check_warp_shuffle},
        {"cp_async", check_cp_async},
        {"ptx_vec", check_ptx_vec},
        {"mbarrier", check_mbarrier_pipeline},
        {"mma", check_mma},
        {"named_barrier", check_named_barrier},
        {"wgmma", [] {
             check_wgmma_ss();
             check_wgmma_rs();
         }},
        {"warp_specialized", check_warp_specialized},
        {"big_scale", check_big_scale},
    };
    for (const Check& c : checks) {
        bool named = argc == 1;
        for (int i = 1; i < argc; ++i) named |= std::strcmp(argv[i], c.name) == 0;
        if (named) c.run();
    }
    std::printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
