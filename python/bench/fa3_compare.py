"""tirx's attention beside FlashAttention-3 on the same card, in one process: FP8 (e4m3, descales
1) and bf16 forward TFLOP/s (4·seq²·d per head, halved for causal), both reading the same
[batch, seq, heads, d] tensors (tirx's seq-major stride order), batch × seq = 32k tokens, 16 heads.
Each point: bursts (`sustained.burst`: 20 calls after an idle second; three rounds taken in turn,
the best kept) and 3 s back to back (`sustained.sustained`, with the SM clock and power), and the
largest difference between the two outputs. tirx's call is the op's (`scaled_dot_product_attention`,
its V transposition for FP8 included, as FlashAttention-3's kernel transposes V itself).

FlashAttention-3 is not part of this repository: build its forward from a fetched copy of
Dao-AILab/flash-attention (hopper/) and CUTLASS into ``fa3/libfa3.so`` (``fa3/build.sh``, ``fa3/README.md``),
which ``fa3/fa3.py`` calls through ctypes (``forward(q, k, v, causal=...)`` returns ``(out, lse)``).

    cd python/bench && python fa3_compare.py [--fa3 fa3] [--dims 128,256] [--seqs 4096,16384] [--dtypes fp8,bf16] [--head-major]
"""

import argparse
import importlib
import os
import sys

import torch
from attention import forward_config  # this directory
from sustained import burst, sustained

import tirx.ops as ops


def point(fa3, dtype, d, seq, causal, seconds, head_major):
    b, h = max(1, 32768 // seq), 16
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, seq, h, d, device="cuda").to(dtype) for _ in range(3))
    fp8 = dtype == torch.float8_e4m3fn
    scales = {"q_descale": 1.0, "k_descale": 1.0, "v_descale": 1.0} if fp8 else {}
    # [b, h, s, d] views of the seq-major tensors (``head_major``: contiguous copies)
    qt, kt, vt = (x.transpose(1, 2).contiguous() if head_major else x.transpose(1, 2) for x in (q, k, v))
    calls = {
        "tirx": lambda: ops.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **scales),
        "fa3": lambda: fa3.forward(q, k, v, causal=causal)[0],
    }
    ours, theirs = calls["tirx"]().transpose(1, 2).float(), calls["fa3"]().float()
    diff = (ours - theirs).abs().max().item()
    flops = 4 * b * h * seq * seq * d / (2 if causal else 1)
    name = f"{'fp8' if fp8 else 'bf16'} d={d} seq={seq} b={b} h={h}{' causal' if causal else ''}{' (tirx head-major)' if head_major else ''}"
    print(f"{name}: tirx's tuned tile {forward_config(b, h, seq, d, causal, 'float8_e4m3fn' if fp8 else 'bfloat16', not head_major)}", flush=True)
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(3):
        for who, fn in calls.items():
            best[who] = min(best[who], burst(f"{who} {name}", fn, flops))
    held = {who: sustained(f"{who} {name}", fn, flops, seconds) for who, fn in calls.items()}
    t = {who: (flops / best[who] / 1e9, flops / held[who] / 1e9) for who in calls}
    print(
        f"== {name}: tirx {t['tirx'][0]:.0f} / {t['tirx'][1]:.0f}, FlashAttention-3 {t['fa3'][0]:.0f} / {t['fa3'][1]:.0f} "
        f"TFLOP/s (burst / sustained; tirx ÷ FA3 {t['tirx'][0] / t['fa3'][0]:.2f} / {t['tirx'][1] / t['fa3'][1]:.2f}), "
        f"max |tirx - FA3| {diff:.3g}",
        flush=True,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--fa3", default=os.path.join(here, "fa3"), help="the directory of the FlashAttention-3 ctypes module fa3.py (default: ./fa3, its libfa3.so built by build.sh)")
    p.add_argument("--dims", default="128,256")
    p.add_argument("--seqs", default="4096,16384")
    p.add_argument("--dtypes", default="fp8", help="fp8, bf16 or both")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--head-major", action="store_true", help="tirx reads contiguous [batch, heads, seq, d] copies")
    a = p.parse_args()
    sys.path.insert(0, a.fa3)
    fa3 = importlib.import_module("fa3")
    print(torch.cuda.get_device_name(), flush=True)
    for dtype in [{"fp8": torch.float8_e4m3fn, "bf16": torch.bfloat16}[x] for x in a.dtypes.split(",")]:
        for d in map(int, a.dims.split(",")):
            for seq in map(int, a.seqs.split(",")):
                for causal in (False, True):
                    point(fa3, dtype, d, seq, causal, a.seconds, a.head_major)


if __name__ == "__main__":
    main()
