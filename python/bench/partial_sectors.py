"""Why ragged tiles stay below memcpy on an H100: a hardware probe, not tirx code.

A 60 x 100 float16 tile row is 200 bytes; tile x starts 200 * bx bytes into a 8000-byte matrix
row, so each tile row's first and last 32-byte DRAM sectors are shared with the neighbouring
CTAs' tiles and are written partially by two CTAs. This script writes the tiles of
examples/bench/ragged_copy_f16.py (15360 x 4000, one tile per CTA of 128 threads) in parts and
times each against a flat 16-byte store of the same matrix:

  interior  only the whole 32-byte sectors of every tile row (16-byte stores)
  boundary  only the bytes of the shared sectors (8-byte stores, 1 to 5 per row)
  tile      both: every byte of the matrix, as a tiled copy's store phase writes it

`interior` runs at flat speed; `boundary` (a quarter of the bytes) takes about as long as
writing the whole matrix flat. Partial-sector writes from different CTAs are the cost, whatever
the vector width or the order of the stores. Needs CuPy (NVRTC) and a GPU.

    python python/bench/partial_sectors.py
"""

import cupy as cp

SRC = r"""
#define NN 4000
extern "C" __global__ void __launch_bounds__(256) flat(uint4* __restrict__ B, long n) {
  long i = (long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) if (i + k * 256 < n) B[i + k * 256] = make_uint4(0x10001u, 0x10001u, 0x10001u, 0x10001u);
}
// PART: 1 interior, 2 boundary, 3 both.
template <int PART> __device__ void tile(char* __restrict__ B) {
  const int tid = threadIdx.x;
  const long a0 = ((long)blockIdx.y * 60 * NN + blockIdx.x * 100) * 2;  // byte offset of row 0
  const int head = (32 - a0 % 32) % 32;                                  // bytes before a whole sector
  const int nvec = ((200 - head) / 32) * 2;                              // 16-byte vectors in whole sectors
  const int tail = 200 - head - nvec * 16, hp = head / 8, np = hp + tail / 8;
  if (PART & 2)
    for (int i = tid; i < 60 * 5; i += 128) {
      int r = i / 5, p = i % 5;
      if (p < np) *reinterpret_cast<uint2*>(B + a0 + (long)r * NN * 2 + (p < hp ? p * 8 : head + nvec * 16 + (p - hp) * 8)) = make_uint2(0x10001u, 0x10001u);
    }
  if (PART & 1)
    for (int i = tid; i < 720; i += 128) {
      int r = i / 12, c = i % 12;
      if (c < nvec) *reinterpret_cast<uint4*>(B + a0 + (long)r * NN * 2 + head + c * 16) = make_uint4(0x10001u, 0x10001u, 0x10001u, 0x10001u);
    }
}
extern "C" __global__ void __launch_bounds__(128) interior(char* B) { tile<1>(B); }
extern "C" __global__ void __launch_bounds__(128) boundary(char* B) { tile<2>(B); }
extern "C" __global__ void __launch_bounds__(128) both(char* B) { tile<3>(B); }
"""


def timed(fn, iters=50):
    for _ in range(10):
        fn()
    cp.cuda.Device().synchronize()
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    cp.cuda.Device().synchronize()
    ts = sorted(cp.cuda.get_elapsed_time(a, b) for a, b in ev)
    return ts[len(ts) // 2]


def main():
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    B = cp.zeros((15360, 4000), cp.float16)
    n16 = B.nbytes // 16
    flat = mod.get_function("flat")
    tf = timed(lambda: flat(((n16 + 1023) // 1024,), (256,), (B, cp.int64(n16))))
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: 15360 x 4000 float16, 60 x 100 tiles")
    print(f"flat      {tf * 1e3:7.1f} us  ({B.nbytes / tf / 1e6:.0f} GB/s)")
    for name in ("interior", "boundary", "both"):
        k = mod.get_function(name)
        B[...] = 0
        t = timed(lambda: k((40, 256), (128,), (B,)))
        print(f"{name:<9} {t * 1e3:7.1f} us  flat / this {tf / t:5.3f}")
    B[...] = 0
    mod.get_function("both")((40, 256), (128,), (B,))
    assert bool((B.view(cp.uint16) != 0).all()), "the tile decomposition misses bytes"


if __name__ == "__main__":
    main()
