"""Where an op's call spends its time on the GPU: the kernels one call of a `rows_sweep.py` op
launches (torch.profiler), each with its duration, beside the call's time per `rows_sweep`'s
timer. Answers "the call is slower than its kernel: which launch, or which gap?".

    python python/bench/op_trace.py layer_norm_bwd 16384 [--gb 1] [--calls 1]
"""

import argparse

import torch
from ops import per_call_us  # this directory
from rows_sweep import cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op")
    ap.add_argument("length", type=int)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--calls", type=int, default=1, help="calls profiled back to back")
    args = ap.parse_args()
    n = args.length
    m = max(1, int(args.gb * 2**30) // (2 * n))
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    t = torch.randint(0, n, (m,), device="cuda")
    mine = cases()[args.op][1](x, w, t)[0]
    print(f"{args.op} {m} x {n}: {per_call_us(mine):.1f} us a call (rows_sweep's timer)")
    for _ in range(3):
        mine()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):  # (back to back, as the timer calls it: the gaps between calls show)
            mine()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA), key=lambda e: e.time_range.start)
    start = events[0].time_range.start if events else 0
    for e in events:
        print(f"  +{e.time_range.start - start:8.1f} us  {e.time_range.elapsed_us():8.1f} us  {e.name[:110]}")


if __name__ == "__main__":
    main()
