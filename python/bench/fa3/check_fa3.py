#!/usr/bin/env python3
"""Correctness check of libfa3.so via fa3.py (timing: ../fa3_compare.py, beside tirx).  Needs an
sm_90 GPU + torch.

  python check_fa3.py [--dtypes fp8,bf16] [--dims 64,128,256]   # x causal{0,1} x seq{1000,512} + extras

Reference: torch SDPA (math backend, float32, TF32 off) on the *dequantised* inputs; lse reference is
torch.logsumexp of the scaled float32 scores (natural log, which is what FA3 stores:
softmax.h finalize(): lse = max * scale_log2 * ln2 + log(sum)).
Output error is max|out - ref| / max|ref|; tolerances: bf16 2e-2, fp8 6e-2; lse: max abs error <= 2e-2 (bf16) / 5e-2 (fp8).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn.functional as F

import fa3

FP8 = getattr(torch, "float8_e4m3fn", None)
DTYPES = {"fp8": FP8, "bf16": torch.bfloat16}
OUT_TOL = {"fp8": 6e-2, "bf16": 2e-2}
LSE_TOL = {"fp8": 5e-2, "bf16": 2e-2}


def make_inputs(dname, b, sq, sk, h, hk, d, gen, packed=False):
    dev = "cuda"
    if packed:  # q, k, v as views into one [b, s, 3, h, d] tensor (non-trivial row strides)
        assert sq == sk and h == hk
        base = torch.randn(b, sq, 3, h, d, generator=gen, device=dev)
        base = base.to(DTYPES[dname]) if dname == "bf16" else base.to(FP8)
        return base[:, :, 0], base[:, :, 1], base[:, :, 2]
    qs = torch.randn(b, sq, h, d, generator=gen, device=dev)
    ks = torch.randn(b, sk, hk, d, generator=gen, device=dev)
    vs = torch.randn(b, sk, hk, d, generator=gen, device=dev)
    dt = DTYPES[dname]
    return qs.to(dt), ks.to(dt), vs.to(dt)


def reference(q, k, v, causal, scale, descales=(None, None, None)):
    """float32 reference on dequantised inputs; returns out [b,sq,h,d], lse [b,h,sq]."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    g = h // hk

    def deq(x, ds):
        x = x.float()
        if ds is not None:  # ds [b, hk] -> broadcast over [b, s, hk, d]
            x = x * ds.float()[:, None, :, None]
        return x

    qf, kf, vf = deq(q, None), deq(k, descales[1]), deq(v, descales[2])
    if descales[0] is not None:  # q_descale is indexed by kv head
        qf = qf * descales[0].float().repeat_interleave(g, dim=1)[:, None, :, None]
    kf = kf.repeat_interleave(g, dim=2)
    vf = vf.repeat_interleave(g, dim=2)
    qt, kt, vt = qf.transpose(1, 2), kf.transpose(1, 2), vf.transpose(1, 2)  # [b, h, s, d]
    # FA3 causal = bottom-right aligned; SDPA is_causal = top-left. Use an explicit mask when they differ.
    mask = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        mask = j <= i + (sk - sq)  # True = keep
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel(SDPBackend.MATH)
    except Exception:  # older torch
        import contextlib
        ctx = contextlib.nullcontext()
    with ctx:
        if causal and sq == sk:
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale)
        else:
            o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return o.transpose(1, 2), lse


def check_case(dname, d, causal, b, sq, sk, h, hk, gen, packed=False, descale=False, repeat=False, tag=""):
    name = f"{dname:4s} d={d:3d} causal={int(causal)} b={b} sq={sq:4d} sk={sk:4d} h={h}/{hk}{(' ' + tag) if tag else ''}"
    dt = DTYPES[dname]
    if dt is None:
        print(f"SKIP {name}: torch has no float8_e4m3fn")
        return None
    if not fa3.available(dt, d):
        print(f"SKIP {name}: instantiation {dname}_hd{d} not compiled into {fa3.lib_path()}")
        return None
    q, k, v = make_inputs(dname, b, sq, sk, h, hk, d, gen, packed=packed)
    scale = d ** -0.5
    ds = (None, None, None)
    if descale:
        ds = tuple(torch.rand(b, hk, generator=gen, device="cuda") * 1.5 + 0.25 for _ in range(3))
    try:
        out, lse = fa3.forward(q, k, v, causal=causal, softmax_scale=scale,
                               q_descale=ds[0], k_descale=ds[1], v_descale=ds[2])
        torch.cuda.synchronize()
        rep_ok = True
        if repeat:  # same inputs again: must be bitwise identical (also verifies the causal tile-counter reset)
            for _ in range(3):
                out2, lse2 = fa3.forward(q, k, v, causal=causal, softmax_scale=scale,
                                         q_descale=ds[0], k_descale=ds[1], v_descale=ds[2])
            torch.cuda.synchronize()
            rep_ok = torch.equal(out, out2) and torch.equal(lse, lse2)
    except RuntimeError as e:
        print(f"FAIL {name}: {e}")
        return False
    ref_o, ref_lse = reference(q, k, v, causal, scale, ds)
    max_ref = ref_o.abs().max().item()
    err = (out.float() - ref_o).abs().max().item()
    rel = err / max(max_ref, 1e-6)
    lse_err = (lse - ref_lse).abs().max().item()
    finite = bool(torch.isfinite(out.float()).all().item() and torch.isfinite(lse).all().item())
    ok = finite and rel <= OUT_TOL[dname] and lse_err <= LSE_TOL[dname] and rep_ok
    print(f"{'PASS' if ok else 'FAIL'} {name}: out max_abs_err={err:.3e} max|ref|={max_ref:.3f} rel={rel:.2e} "
          f"(tol {OUT_TOL[dname]:.0e}) lse max_abs_err={lse_err:.2e} (tol {LSE_TOL[dname]:.0e})"
          f"{'' if finite else ' NON-FINITE'}{'' if not repeat else (' repeat=identical' if rep_ok else ' repeat=DIFFERENT')}")
    return ok


def run_checks(args):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    results = []
    for dname in args.dtypes:
        for d in args.dims:
            for causal in (False, True):
                for s in (1000, 512):
                    results.append(check_case(dname, d, causal, 2, s, s, 4, 4, gen, repeat=(s == 1000)))
    # extras
    for dname in args.dtypes:
        d = 128 if 128 in args.dims else args.dims[0]
        results.append(check_case(dname, d, True, 2, 777, 777, 8, 2, gen, tag="GQA"))
        results.append(check_case(dname, d, False, 1, 640, 640, 4, 1, gen, tag="MQA"))
        results.append(check_case(dname, d, True, 2, 300, 1000, 4, 4, gen, tag="sq<sk bottom-right causal"))
        results.append(check_case(dname, d, True, 2, 1, 513, 4, 4, gen, tag="sq=1 (causal->non-causal)"))
        results.append(check_case(dname, d, True, 2, 1000, 1000, 4, 4, gen, packed=True, tag="packed-qkv strides"))
        if dname == "fp8":
            results.append(check_case(dname, d, True, 2, 1000, 1000, 4, 2, gen, descale=True, tag="descale"))
            results.append(check_case(dname, d, False, 2, 1000, 1000, 4, 4, gen, descale=True, tag="descale"))
    # error path: heads % heads_k != 0 must raise RuntimeError from the C side, not crash
    for dname in args.dtypes:
        d = args.dims[0]
        if DTYPES[dname] is None or not fa3.available(DTYPES[dname], d):
            continue
        q, k, v = make_inputs(dname, 1, 128, 128, 4, 3, d, gen)
        try:
            fa3.forward(q, k, v)
            print(f"FAIL error-path {dname}: heads=4, heads_k=3 did not raise")
            results.append(False)
        except RuntimeError as e:
            print(f"PASS error-path {dname}: got RuntimeError: {e}")
            results.append(True)
        break
    n_pass = sum(r is True for r in results)
    n_fail = sum(r is False for r in results)
    n_skip = sum(r is None for r in results)
    print(f"== correctness: {n_pass} passed, {n_fail} failed, {n_skip} skipped")
    return n_fail == 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="fp8,bf16")
    p.add_argument("--dims", default="64,128,256")
    args = p.parse_args()
    args.dtypes = [x for x in args.dtypes.split(",") if x]
    args.dims = [int(x) for x in args.dims.split(",") if x]
    for x in args.dtypes:
        if x not in DTYPES:
            p.error(f"unknown dtype {x}")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), device: {torch.cuda.get_device_name(0)} "
          f"cc={torch.cuda.get_device_capability(0)}")
    print(f"library: {fa3.lib_path()}")
    rc, txt = fa3.info()
    print(f"fa3_info (rc={rc}): {txt}")
    if rc != 0:
        print("WARNING: fa3_info reports a problem (see above); launches will probably fail")
    sys.exit(0 if run_checks(args) else 1)


if __name__ == "__main__":
    main()
