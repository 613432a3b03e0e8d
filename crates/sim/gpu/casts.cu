// Float → integer conversions as nvcc compiles C casts (what the CUDA generator prints):
//   nvcc -arch=sm_90 -o casts crates/sim/gpu/casts.cu && ./casts
// Prints `cast input result` lines; tirx-sim's `arith::cast` must give the same.
#include <cstdio>
#include <cstdint>

__global__ void casts(const float* f, const double* d, long long* out) {
    int k = 0;
    for (int i = 0; i < 8; i++) {
        float x = f[i];
        out[k++] = (int8_t)x;
        out[k++] = (uint8_t)x;
        out[k++] = (int16_t)x;
        out[k++] = (uint16_t)x;
        out[k++] = (int32_t)x;
        out[k++] = (uint32_t)x;
        out[k++] = (long long)x;
        out[k++] = (int8_t)d[i];
        out[k++] = (uint16_t)d[i];
    }
}

int main() {
    float hf[8] = {300.f, -300.f, 40000.f, -5.f, 70000.f, 3e9f, -3e9f, 1e20f};
    double hd[8];
    for (int i = 0; i < 8; i++) hd[i] = hf[i];
    float* df; double* dd; long long* dout;
    cudaMalloc(&df, sizeof hf); cudaMalloc(&dd, sizeof hd); cudaMalloc(&dout, 72 * 8);
    cudaMemcpy(df, hf, sizeof hf, cudaMemcpyHostToDevice);
    cudaMemcpy(dd, hd, sizeof hd, cudaMemcpyHostToDevice);
    casts<<<1, 1>>>(df, dd, dout);
    long long o[72];
    cudaMemcpy(o, dout, sizeof o, cudaMemcpyDeviceToHost);
    const char* names[9] = {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "i8<-f64", "u16<-f64"};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 9; j++) printf("%s %g %lld\n", names[j], hf[i], o[i * 9 + j]);
    return 0;
}
