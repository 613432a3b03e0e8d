"""Guarded copies from Python (issue 29 items 2 and 3): `clip=True`, `other=` and `mask=` with a
Python lambda (its default parameters captured values) on register and shared-memory tiles — a
causal softmax over a key block whose end passes the sequence, rows past a run-time count —
against NumPy in float64 (simulator) and against PyTorch on the GPU."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx
from tirx.layout import mma_acc_layout, mma_row_layout

ACC = mma_acc_layout(16, 64)
ROWS = mma_row_layout(16)


def causal_softmax(seq: int, offset: int):
    """Row softmax of a (16 x 64) query-key block of a `seq` x `seq` score matrix starting at key
    `k0`, causal with query i seeing keys <= i + offset; keys past `seq` are not read."""

    @T.prim_func
    def block(S_ptr: T.handle, P_ptr: T.handle, k0: T.int32):
        S = T.match_buffer(S_ptr, (16, seq), "float32")
        P = T.match_buffer(P_ptr, (16, seq), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        T.lane_id([32])
        X = T.alloc_buffer((16, 64), "float32", scope="local", layout=ACC)
        m = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        s = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        Tx.warp.copy(X[0:16, 0:64], S[0:16, k0 : k0 + 64], clip=True,
                     mask=lambda i, j, o=offset: k0 + j <= i + o, other=-float("inf"))
        Tx.warp.max(m[0:16, 0:1], X[0:16, 0:64])
        Tx.warp.sub(X[0:16, 0:64], X[0:16, 0:64], m[0:16, 0:1])
        Tx.warp.exp(X[0:16, 0:64], X[0:16, 0:64])
        Tx.warp.sum(s[0:16, 0:1], X[0:16, 0:64])
        Tx.warp.fdiv(X[0:16, 0:64], X[0:16, 0:64], s[0:16, 0:1])
        Tx.warp.copy(P[0:16, k0 : k0 + 64], X[0:16, 0:64], clip=True)

    return tirx.compile(block, "sm_90a")


def _want(s, k0, offset):
    seq = s.shape[1]
    x = s.astype(np.float64).copy()
    cols = np.arange(seq)[None, :]
    rows = np.arange(16)[:, None]
    keep = (cols >= k0) & (cols < k0 + 64) & (cols <= rows + offset)
    x[~keep] = -np.inf
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return p, (cols >= k0) & (cols < k0 + 64)


@pytest.mark.parametrize("seq,k0", [(100, 64), (100, 0), (64, 0)])
def test_causal_block_past_the_sequence_matches_float64(seq, k0):
    offset = 70
    s = (np.random.default_rng(seq + k0).standard_normal((16, seq)) * 3).astype(np.float32)
    p = np.full_like(s, 7.0)
    k = causal_softmax(seq, offset)
    k(s, p, k0)
    want, block = _want(s, k0, offset)
    np.testing.assert_allclose(p[block.repeat(16, 0)], want[block.repeat(16, 0)], rtol=2e-6, atol=1e-7)
    assert (p[~block.repeat(16, 0)] == 7.0).all()  # nothing outside the block, nothing past seq
    assert "guarded per vector" in k.explain()


def shared_rows():
    @T.prim_func
    def tile(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
        A = T.match_buffer(A_ptr, (m, 40), "float16")
        B = T.match_buffer(B_ptr, (m, 40), "float16")
        T.device_entry()
        by = T.cta_id([(m + 15) // 16])
        T.thread_id([64])
        T.warp_id([2])
        T.lane_id([32])
        Sh = T.alloc_buffer((16, 64), "float16", scope="shared")
        Tx.cta.copy(Sh[0:16, 0:64], A[by * 16 : by * 16 + 16, 0:64], clip=True, other=0.0)
        T.cuda.cta_sync()
        Tx.cta.mul(Sh[0:16, 0:64], Sh[0:16, 0:64], 2.0)
        T.cuda.cta_sync()
        Tx.cta.copy(B[by * 16 : by * 16 + 16, 0:64], Sh[0:16, 0:64], clip=True)

    return tirx.compile(tile, "sm_90a")


def test_shared_tiles_past_rows_and_columns():
    a = np.random.default_rng(9).standard_normal((37, 40)).astype(np.float16)
    b = np.zeros_like(a)
    shared_rows()(a, b, 37)
    np.testing.assert_array_equal(b, a * np.float16(2))


def test_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    s = torch.randn(16, 100, device="cuda") * 3
    p = torch.full_like(s, 7.0)
    causal_softmax(100, 70)(s, p, 64)
    want, block = _want(s.cpu().numpy(), 64, 70)
    got = p.cpu().numpy()
    mask = block.repeat(16, 0)
    np.testing.assert_allclose(got[mask], want[mask], rtol=2e-6, atol=1e-7)
    assert (got[~mask] == 7.0).all()
    a = torch.randn(37, 40, device="cuda", dtype=torch.float16)
    b = torch.zeros_like(a)
    shared_rows()(a, b, 37)
    assert torch.equal(b, a * 2)
