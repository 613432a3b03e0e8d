"""The Python of an op's call alone: CPU tensors with every kernel launch stubbed (no GPU and no
simulation), best of five batches of calls, microseconds a call. What an op costs the host on
top of its launches, measurable on any machine (a decoding step or a small GEMM is host-bound).

    python python/bench/op_host_time.py [--calls 3000]
"""

import argparse
import sys
import time

import torch

import tirx.ops as ops
import tirx.runtime as rt


def stub_launches():
    """Every kernel's launch a no-op (its arguments unchecked); split-KV as a GPU would split."""
    rt.Kernel._run = lambda self, args: None
    rt.Kernel.launcher = lambda self, fixed_signature=False: (lambda *args: None)
    sys.modules["tirx.ops.attention"]._gpu_splits = lambda q, bhs, rows, sk: 4


def cases():
    bf = torch.bfloat16
    q, kc, vc = torch.randn(1, 1, 32, 128).to(bf), torch.randn(1, 1024, 8, 128).to(bf), torch.randn(1, 1024, 8, 128).to(bf)
    lens = torch.full((1,), 1000, dtype=torch.int32)
    qs, ks, vs = torch.randn(1, 32, 1, 128).to(bf), torch.randn(1, 8, 1024, 128).to(bf), torch.randn(1, 8, 1024, 128).to(bf)
    f8 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(1, 4, s, 64).to(f8) for s in (128, 1024, 1024))
    a, b = torch.randn(256, 128).to(bf), torch.randn(128, 64).to(bf)
    ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()

    def mm_train():
        y = ops.matmul(ag, bg)
        y.backward(torch.ones_like(y))

    x, r = torch.randn(1, 4096).to(bf), torch.randn(1, 4096).to(bf)
    w, bias = torch.rand(4096).to(bf), torch.randn(4096).to(bf)
    logits, target = torch.randn(16, 32000).to(bf), torch.randint(0, 32000, (16,))
    return {
        "rms_norm (one token of 4096)": lambda: ops.rms_norm(x, [4096], w),
        "add_rms_norm": lambda: ops.add_rms_norm(x, r, [4096], w),
        "layer_norm": lambda: ops.layer_norm(x, [4096], w, bias),
        "add_layer_norm": lambda: ops.add_layer_norm(x, r, [4096], w, bias),
        "softmax": lambda: ops.softmax(x, -1),
        "cross_entropy (16 rows of 32k)": lambda: ops.cross_entropy(logits, target),
        "kvcache_attention (32 over 8 heads, 1k cache, 4 splits)": lambda: ops.kvcache_attention(q, kc, vc, lens),
        "scaled_dot_product_attention decoding (split path)": lambda: ops.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True),
        "scaled_dot_product_attention FP8 (4 heads, 128 x 1024, number descales)": lambda: ops.scaled_dot_product_attention(q8, k8, v8, q_descale=0.5, v_descale=2.0),
        "matmul": lambda: ops.matmul(a, b),
        "matmul forward + backward (autograd)": mm_train,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    calls = p.parse_args().calls
    stub_launches()
    for name, f in cases().items():
        for _ in range(3):
            f()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times.append((time.perf_counter() - t0) / calls * 1e6)
        print(f"{name}: {min(times):.1f} us a call")


if __name__ == "__main__":
    main()
