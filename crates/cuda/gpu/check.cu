// GPU check of the CUDA that tirx-cuda generates for its test kernels
// (crates/cuda/tests/kernels.rs). Each generated .cu is its own translation
// unit; this file launches the extern "C" kernels and compares every output
// element with a host (or, for the 12 GiB kernel, device-side) reference.
//
//   TIRX_CU_OUT=$PWD/out/cu cargo test -p tirx-cuda --test kernels
//   nvcc -arch=sm_90a -o check crates/cuda/gpu/check.cu out/cu/*.cu && ./check
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
__global__ void reg_copy(float*, float*);
__global__ void ldstmatrix(__half*, __half*);
__global__ void packed_f16(__half*, __half*, __half*);
__global__ void cast_pairs(float*, __half*, float*);
__global__ void swizzle_copy(__half*, __half*);
__global__ void big_scale(float*, float*);
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

int main() {
    roundtrip<float>("copy_f32", copy_f32, 1024, 1, 32);
    roundtrip<__half>("copy_f16", copy_f16, 1024, 1, 32);
    roundtrip<unsigned char>("copy_u8", copy_u8, 1024, 1, 32);
    roundtrip<float>("fallback_copy", fallback_copy, 24, 1, 32);
    roundtrip<__half>("swizzle_copy", swizzle_copy, 4096, 1, 128, 8192);
    check_scalar_grid();
    check_reg_copy();
    check_ldstmatrix();
    check_packed_f16();
    check_cast_pairs();
    check_big_scale();
    std::printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
