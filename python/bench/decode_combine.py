"""Split-KV decoding's combine in the kernel's own launch (`attention_kernel(..., combine=True)`:
the split that takes a block's last ticket combines every split's parts) against the combine
kernel launched after it (what `kvcache_attention` launches) and that combine kernel launched as
the split-KV kernel's programmatic dependent ("dependent": `T.ptx.griddepcontrol`, its CTAs
scheduled while the parts are written), one query row a sequence (32
query heads over 8 K/V heads, d = 128, bfloat16) over a contiguous cache: GB/s of K and V read,
÷ a device copy moving the same bytes (half read, half written), each launcher called eagerly
from Python and replayed from a CUDA graph (as serving engines launch a decoding step); the
op's own call beside them, and whether the two forms' outputs are equal bit for bit.

    cd python/bench && python decode_combine.py [--batches 1,4,8] [--caches 1024,8192,32768,131072]
"""

import argparse

import torch
from gemm_sweep import graph_us  # this directory
from ops import per_call_us

from tirx.ops import attention as at


def launchers(b, cache, h, hk, d):
    """``(splits, inputs, {form: (launch, out)})``: the two-launch form and, where the keys are
    split, the one-launch and dependent forms, over the same inputs (as `kvcache_attention`
    chooses them)."""
    g = h // hk
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(b, cache, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((b,), cache, dtype=torch.int32, device="cuda")
    splits = at._gpu_splits(q, b * hk, g, cache)
    forms = {}
    for name, one, dependent in (("two launches", False, False), ("one launch", True, False), ("dependent", False, True)):
        if (one or dependent) and splits == 1:
            continue
        kernel = at.attention_kernel(
            heads=hk, kv_heads=hk, batch=b, seq_q=g, seq_k=cache, d=d, dtype="bfloat16", causal=False, scale=d**-0.5, lse=False,
            seq_major=True, splits=splits, kv_lens=True, q_group=g, **({"combine": True} if one else {}),
            **({"launch_dependents": True} if dependent else {}),
        )
        launch = at._launcher(kernel, splits, b * hk, g, d, "bfloat16", False, hk, group=g, combined=one, dependent=dependent)
        forms[name] = (launch, torch.empty_like(q))
    return splits, (q, kc, vc, lens), forms


def point(b, cache, h=32, hk=8, d=128):
    splits, (q, kc, vc, lens), forms = launchers(b, cache, h, hk, d)
    q_rows = q.reshape(b * hk, h // hk, d)
    lse = torch.empty(b * hk, at.lse_rows(h // hk), device="cuda")
    nbytes = 2 * kc.numel() * kc.element_size()
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    calls = {name: (lambda launch, out: lambda: launch((q_rows, kc, vc, lens), out, lse))(*form) for name, form in forms.items()}
    calls["op"] = lambda: at.kvcache_attention(q, kc, vc, lens)
    calls["copy"] = lambda: dst.copy_(src)
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    outs = [out for _, out in forms.values()]
    equal = "-" if len(outs) == 1 else "equal" if all(torch.equal(outs[0], o) for o in outs[1:]) else "DIFFERENT"
    rates = {}
    for name, call in calls.items():
        moved = 2 * nbytes if name == "copy" else nbytes
        rates[name] = (moved / per_call_us(call) / 1e3, moved / graph_us(call) / 1e3)
    (copy_eager, copy_graph) = rates.pop("copy")
    line = f"b={b:3d} cache={cache:6d} splits={splits:2d} {equal:9s}"
    for name, (eager, graph) in rates.items():
        line += f" | {name} {eager:5.0f} ({eager / copy_eager:.2f}), graph {graph:5.0f} ({graph / copy_graph:.2f})"
    print(line + f" | copy {copy_eager:.0f} / {copy_graph:.0f} GB/s", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="1,4,8")
    p.add_argument("--caches", default="1024,8192,32768,131072")
    args = p.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for b in map(int, args.batches.split(",")):
        for cache in map(int, args.caches.split(",")):
            point(b, cache)


if __name__ == "__main__":
    main()
