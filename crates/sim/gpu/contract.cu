// Does nvcc contract `a * b + c` (as the CUDA generator prints it) into one FMA?
//   nvcc -arch=sm_90 -o contract crates/sim/gpu/contract.cu && ./contract
// a = b = 1 + 2^-12, c = -(1 + 2^-11): a*b rounds to 1 + 2^-11 (a tie, to even), so
// unfused gives 0 and fused gives 2^-24 = 5.96e-08. tirx-sim computes unfused.
#include <cstdio>

__global__ void k(const float* in, float* out) {
    float a = in[0], b = in[1], c = in[2];
    out[0] = a * b + c;
    float t = a * b;
    out[1] = t + c;
}

int main() {
    float h[3] = {1.0f + 1.0f / 4096, 1.0f + 1.0f / 4096, -(1.0f + 1.0f / 2048)};
    float *d, *o, r[2];
    cudaMalloc(&d, 12); cudaMalloc(&o, 8);
    cudaMemcpy(d, h, 12, cudaMemcpyHostToDevice);
    k<<<1, 1>>>(d, o);
    cudaMemcpy(r, o, 8, cudaMemcpyDeviceToHost);
    printf("one expression: %g\ntwo statements: %g\n", r[0], r[1]);
    return 0;
}
