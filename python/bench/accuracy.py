"""What the accuracy benches (attention_error.py, gemm_error.py, rows_error.py) share: a result's
error against a reference, and their rows written as JSON; and the dequantised product of FP8
operands with DeepGEMM's block scales, the reference of every block-scaled bench."""

import json


def errors(x, ref):
    """(largest, root-mean-square) of ``x - ref`` relative to ``ref``'s largest magnitude and norm."""
    x, ref = x.double(), ref.double()
    diff = x - ref
    return (diff.abs().max() / ref.abs().max()).item(), (diff.norm() / ref.norm()).item()


def block_scaled_product(a, b, sa, sb):
    """``a @ b`` of FP8 ``a`` (m x k) and ``b`` (k x n) dequantised with DeepGEMM's block scales,
    in float64: ``sa`` (m, ceil(k / 128)) a row's scale per 128 of K, ``sb`` (ceil(n / 128),
    ceil(k / 128)) a 128 x 128 block's of ``b`` (the last block of each ragged dim a partial one)."""
    (m, k), n = a.shape, b.shape[1]
    a_deq = a.double() * sa.double().repeat_interleave(128, 1)[:, :k]
    b_deq = b.double() * sb.double().t().repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
    return a_deq @ b_deq


def save(rows, path):
    """``rows`` as JSON at ``path`` (nothing without one)."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


def cell(errs, ratio=None):
    """``name largest/rms`` for each result of ``errs`` (name → (largest, rms)), then ``(x ratio)``."""
    text = " ".join(f"{name} {e[0]:.2e}/{e[1]:.1e}" for name, e in errs.items())
    return text if ratio is None else f"{text} (x{ratio:.2f})"
