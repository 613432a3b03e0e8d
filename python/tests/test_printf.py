"""``T.cuda.printf`` (docs/lir.md §2.15): in the simulator every thread's lines reach
``sys.stdout`` after the run, in thread order (CTA, then thread, then program order); on a
GPU they are CUDA's device ``printf`` and reach the process's standard output."""

import os

import numpy as np
import pytest

import tirx
from tirx import T


def make_print(n):
    @T.prim_func
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([n // 32])
        tid = T.thread_id([32])
        if tid % 16 == 0:
            T.cuda.printf("%d/%02d: %.2f\n", bx, tid, A[bx * 32 + tid])

    return kernel


def test_simulator_prints_in_thread_order(capsys):
    k = tirx.compile(make_print(64))
    a = np.arange(64, dtype=np.float32) / 4
    k.simulate(a)
    assert capsys.readouterr().out == "0/00: 0.00\n0/16: 4.00\n1/00: 8.00\n1/16: 12.00\n"


def test_bad_formats_are_errors_at_the_call():
    def build():
        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (32,), "float32")
            T.device_entry()
            T.cta_id([1])
            tid = T.thread_id([32])
            T.cuda.printf("%d\n", A[tid])

        return tirx.compile(kernel)

    with pytest.raises(tirx.TirxError, match="`%d` prints an integer or bool, but this value is float32"):
        build()


def _torch_cuda():
    if os.environ.get("TIRX_DEVICE") == "sim":
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@pytest.mark.skipif(_torch_cuda() is None, reason="needs a GPU and PyTorch")
def test_gpu_prints_the_same_lines(capfd):
    torch = _torch_cuda()
    k = tirx.compile(make_print(64))
    a = torch.arange(64, dtype=torch.float32, device="cuda") / 4
    k(a)
    torch.cuda.synchronize()
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == ["0/00: 0.00", "0/16: 4.00", "1/00: 8.00", "1/16: 12.00"]
