"""What the accuracy benches (attention_error.py, gemm_error.py, rows_error.py) share: a result's
error against a reference, and their rows written as JSON."""

import json


def errors(x, ref):
    """(largest, root-mean-square) of ``x - ref`` relative to ``ref``'s largest magnitude and norm."""
    x, ref = x.double(), ref.double()
    diff = x - ref
    return (diff.abs().max() / ref.abs().max()).item(), (diff.norm() / ref.norm()).item()


def save(rows, path):
    """``rows`` as JSON at ``path`` (nothing without one)."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


def cell(errs, ratio=None):
    """``name largest/rms`` for each result of ``errs`` (name → (largest, rms)), then ``(x ratio)``."""
    text = " ".join(f"{name} {e[0]:.2e}/{e[1]:.1e}" for name, e in errs.items())
    return text if ratio is None else f"{text} (x{ratio:.2f})"
