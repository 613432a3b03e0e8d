// GPU check of the semantics tirx-sim assumes (run on an sm_90 machine):
//   nvcc -arch=sm_90 -o semantics crates/sim/gpu/semantics.cu && ./semantics
// 1. ldmatrix / stmatrix .x1/.x2/.x4, with and without .trans, with scattered row
//    addresses (matrix i, row r at the address lane 8i+r supplies), against the
//    reference the simulator's tests use: element (r, c) of matrix i lands in
//    lane 4r + c/2 (half c%2) of register i, or lane 4c + r/2 (half r%2) with .trans.
// 2. scalar conversions and shifts, printed as `name value` lines; the expected
//    simulator values are listed in crates/sim/src/arith.rs / value.rs tests.
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

__device__ int row_addr(int num, int lane) { return ((lane * 5) % (8 * num)) * 8; }

template <int NUM, bool TRANS>
__global__ void ld(const uint16_t* in, uint16_t* out) {
    __shared__ alignas(16) uint16_t s[64 * 4];
    int lane = threadIdx.x;
    for (int j = lane; j < 64 * NUM; j += 32) s[j] = in[j];
    __syncthreads();
    int addr = lane < 8 * NUM ? row_addr(NUM, lane) : 0;
    unsigned a = (unsigned)__cvta_generic_to_shared(&s[addr]);
    uint32_t r[4] = {0, 0, 0, 0};
    if (NUM == 1 && !TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
    if (NUM == 1 && TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
    if (NUM == 2 && !TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    if (NUM == 2 && TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    if (NUM == 4 && !TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    if (NUM == 4 && TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    for (int i = 0; i < NUM; i++) {
        out[lane * 2 * NUM + 2 * i] = r[i] & 0xffff;
        out[lane * 2 * NUM + 2 * i + 1] = r[i] >> 16;
    }
}

template <int NUM, bool TRANS>
__global__ void st(const uint16_t* in, uint16_t* out) {
    __shared__ alignas(16) uint16_t s[64 * 4];
    int lane = threadIdx.x;
    uint32_t r[4];
    for (int i = 0; i < NUM; i++) r[i] = in[lane * 2 * NUM + 2 * i] | ((uint32_t)in[lane * 2 * NUM + 2 * i + 1] << 16);
    int addr = lane < 8 * NUM ? row_addr(NUM, lane) : 0;
    unsigned a = (unsigned)__cvta_generic_to_shared(&s[addr]);
    if (NUM == 1 && !TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(a), "r"(r[0]));
    if (NUM == 1 && TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" :: "r"(a), "r"(r[0]));
    if (NUM == 2 && !TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1,%2};" :: "r"(a), "r"(r[0]), "r"(r[1]));
    if (NUM == 2 && TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};" :: "r"(a), "r"(r[0]), "r"(r[1]));
    if (NUM == 4 && !TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" :: "r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    if (NUM == 4 && TRANS) asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};" :: "r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    __syncthreads();
    for (int j = lane; j < 64 * NUM; j += 32) out[j] = s[j];
}

static int host_row_addr(int num, int i, int r) { return (((i * 8 + r) * 5) % (8 * num)) * 8; }

template <int NUM, bool TRANS>
static int check() {
    const int n = 64 * NUM;
    uint16_t h_in[256], h_out[256], want[256];
    uint16_t *d_in, *d_out;
    cudaMalloc(&d_in, 512);
    cudaMalloc(&d_out, 512);
    int bad = 0;
    for (int dir = 0; dir < 2; dir++) {
        for (int j = 0; j < n; j++) h_in[j] = (uint16_t)(j * 7 % 1000 + 1);
        cudaMemcpy(d_in, h_in, 2 * n, cudaMemcpyHostToDevice);
        if (dir == 0) ld<NUM, TRANS><<<1, 32>>>(d_in, d_out); else st<NUM, TRANS><<<1, 32>>>(d_in, d_out);
        cudaMemcpy(h_out, d_out, 2 * n, cudaMemcpyDeviceToHost);
        for (int i = 0; i < NUM; i++)
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < 8; c++) {
                    int lane = TRANS ? 4 * c + r / 2 : 4 * r + c / 2;
                    int half = TRANS ? r % 2 : c % 2;
                    int reg = lane * 2 * NUM + 2 * i + half;
                    int mem = host_row_addr(NUM, i, r) + c;
                    if (dir == 0) want[reg] = h_in[mem]; else want[mem] = h_in[reg];
                }
        int mism = 0;
        for (int j = 0; j < n; j++) mism += h_out[j] != want[j];
        printf("%s.x%d%s %s\n", dir == 0 ? "ldmatrix" : "stmatrix", NUM, TRANS ? ".trans" : "", mism ? "MISMATCH" : "ok");
        bad += mism != 0;
    }
    cudaFree(d_in);
    cudaFree(d_out);
    return bad;
}

__global__ void scalars(const float* f, const int* sh, long long* out) {
    float big = f[0], nan = f[1], x300 = f[2], neg5 = f[3], h2049 = f[4], e500 = f[5], inf = f[6];
    int one = sh[0], s33 = sh[1], s40 = sh[2], m8 = sh[3];
    int k = 0;
    out[k++] = (int)big;                       // cvt float -> int32, 3e9
    out[k++] = (int)(-big);
    out[k++] = (int)nan;
    out[k++] = (signed char)x300;              // float -> int8, 300
    out[k++] = (unsigned char)neg5;            // float -> uint8, -5
    out[k++] = (unsigned)(-big);               // float -> uint32, -3e9
    out[k++] = __half_as_ushort(__float2half_rn(h2049));
    out[k++] = __nv_fp8_e4m3(e500).__x;
    out[k++] = __nv_fp8_e4m3(inf).__x;
    out[k++] = __nv_fp8_e5m2(big).__x;
    out[k++] = __nv_fp8_e5m2(inf).__x;
    out[k++] = __nv_fp8_e4m3(nan).__x;
    out[k++] = one << s33;                     // shift by >= 32
    out[k++] = m8 >> s40;
    out[k++] = (unsigned)m8 >> s40;
    out[k++] = (signed char)(one << 7);         // narrow wrap
}

int main() {
    int bad = 0;
    bad += check<1, false>(); bad += check<1, true>();
    bad += check<2, false>(); bad += check<2, true>();
    bad += check<4, false>(); bad += check<4, true>();
    float hf[7] = {3e9f, __builtin_nanf(""), 300.f, -5.f, 2049.f, 500.f, __builtin_inff()};
    int hs[4] = {1, 33, 40, -8};
    float* df; int* ds; long long* dout;
    cudaMalloc(&df, sizeof hf); cudaMalloc(&ds, sizeof hs); cudaMalloc(&dout, 16 * 8);
    cudaMemcpy(df, hf, sizeof hf, cudaMemcpyHostToDevice);
    cudaMemcpy(ds, hs, sizeof hs, cudaMemcpyHostToDevice);
    scalars<<<1, 1>>>(df, ds, dout);
    long long o[16];
    cudaMemcpy(o, dout, sizeof o, cudaMemcpyDeviceToHost);
    const char* names[16] = {"int(3e9f)", "int(-3e9f)", "int(nan)", "int8(300f)", "uint8(-5f)", "uint32(-3e9f)",
                             "half_bits(2049f)", "e4m3(500f)", "e4m3(inf)", "e5m2(3e9f)", "e5m2(inf)", "e4m3(nan)",
                             "1<<33", "-8>>40", "uint(-8)>>40", "int8(1<<7)"};
    for (int i = 0; i < 16; i++) printf("%s %lld\n", names[i], o[i]);
    printf("%s\n", bad ? "FRAGMENT MISMATCH" : "fragments ok");
    return bad ? 1 : 0;
}
