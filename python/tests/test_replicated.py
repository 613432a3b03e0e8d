"""Replicated operands (issue 29 item 1), from Python: an online-softmax step on an MMA
accumulator written as tile calls — the row max replicated over each quad's lanes, subtracted
from the tile (broadcast along the columns), `exp2`, the row sum, and the normalisation —
against NumPy in float64 (simulator) and against PyTorch on the GPU."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx
from tirx.layout import mma_acc_layout, mma_row_layout

ACC = mma_acc_layout(16, 128)  # a warp's accumulator
ROWS = mma_row_layout(16)  # a row statistic of it, replicated over each quad
LOG2E = 1.4426950408889634


def softmax_rows():
    @T.prim_func
    def softmax_acc(A_ptr: T.handle, P_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32, 128), "float32")
        P = T.match_buffer(P_ptr, (32, 128), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([64])
        w = T.warp_id([2])
        T.lane_id([32])
        X = T.alloc_buffer((16, 128), "float32", scope="local", layout=ACC)
        m = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        s = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        Tx.warp.copy(X[0:16, 0:128], A[w * 16 : w * 16 + 16, 0:128])
        Tx.warp.max(m[0:16, 0:1], X[0:16, 0:128])
        Tx.warp.mul(m[0:16, 0:1], m[0:16, 0:1], -LOG2E)
        Tx.warp.fma(X[0:16, 0:128], X[0:16, 0:128], LOG2E, m[0:16, 0:1])
        Tx.warp.exp2(X[0:16, 0:128], X[0:16, 0:128])
        Tx.warp.sum(s[0:16, 0:1], X[0:16, 0:128])
        Tx.warp.fdiv(X[0:16, 0:128], X[0:16, 0:128], s[0:16, 0:1])
        Tx.warp.copy(P[w * 16 : w * 16 + 16, 0:128], X[0:16, 0:128])

    return tirx.compile(softmax_acc, "sm_90a")


def test_online_softmax_step_on_an_accumulator_matches_float64():
    a = (np.random.default_rng(5).standard_normal((32, 128)) * 4).astype(np.float32)
    p = np.zeros_like(a)
    k = softmax_rows()
    k(a, p)
    x = a.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)
    assert "read from each thread's copy over [4:1@laneid]" in k.explain()


def test_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    a = torch.randn(32, 128, device="cuda") * 4
    p = torch.empty_like(a)
    softmax_rows()(a, p)
    # MUFU.EX2 and the f32 division against PyTorch's expf: a few ulp.
    torch.testing.assert_close(p, torch.softmax(a, dim=1), rtol=1e-5, atol=1e-7)


def causal_softmax():
    """Row softmax of a 16 x 128 accumulator under a causal mask with a run-time diagonal
    offset: `masked_fill` with a lambda of the element's coordinates (issue 29 item 2)."""

    @T.prim_func
    def causal_softmax_acc(A_ptr: T.handle, P_ptr: T.handle, off: T.int32):
        A = T.match_buffer(A_ptr, (16, 128), "float32")
        P = T.match_buffer(P_ptr, (16, 128), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        T.lane_id([32])
        X = T.alloc_buffer((16, 128), "float32", scope="local", layout=ACC)
        m = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        s = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
        Tx.warp.masked_fill(X[0:16, 0:128], X[0:16, 0:128], lambda i, j: j > i + off, float("-inf"))
        Tx.warp.max(m[0:16, 0:1], X[0:16, 0:128])
        Tx.warp.sub(X[0:16, 0:128], X[0:16, 0:128], m[0:16, 0:1])
        Tx.warp.exp(X[0:16, 0:128], X[0:16, 0:128])
        Tx.warp.sum(s[0:16, 0:1], X[0:16, 0:128])
        Tx.warp.fdiv(X[0:16, 0:128], X[0:16, 0:128], s[0:16, 0:1])
        Tx.warp.copy(P[0:16, 0:128], X[0:16, 0:128])

    return tirx.compile(causal_softmax_acc, "sm_90a")


def _causal_ref(a, off):
    x = a.astype(np.float64)
    i, j = np.indices(x.shape)
    x = np.where(j > i + off, -np.inf, x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_causal_mask_matches_float64():
    k = causal_softmax()
    assert "lambda i, j: j > (i + off)" in k.prim.source
    # A parameter with a default is a captured value, not a coordinate.
    from tirx.script import ir

    w = ir.Writer()
    ir.render(w, lambda i, j, o=3: j > i + o)
    assert w.text() == "lambda i, j: j > (i + 3)"
    a = (np.random.default_rng(6).standard_normal((16, 128)) * 3).astype(np.float32)
    for off in (0, 7, 100):
        p = np.zeros_like(a)
        k(a, p, off)
        np.testing.assert_allclose(p, _causal_ref(a, off), rtol=1e-5, atol=1e-7)


def test_a_mask_capturing_a_kernel_name_its_parameter_also_has():
    """``lambda i, j: k0 + j >= n`` where ``k0`` holds a loop's ``j``: the script's lambda names
    its parameter ``j_`` (as written, it would bind the loop's ``j`` inside ``k0`` too and mask by
    the wrong keys); a mask that captures no such name keeps its names."""
    from tirx.script import ir

    w = ir.Writer()
    k0 = ir.Var("j") * 64
    ir.render(w, lambda i, j: k0 + j >= 100)
    assert w.text() == "lambda i, j_: ((j * 64) + j_) >= 100"

    @T.prim_func
    def tail_mask(A_ptr: T.handle, P_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 256), "float32")
        P = T.match_buffer(P_ptr, (16, 256), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        T.lane_id([32])
        X = T.alloc_buffer((16, 128), "float32", scope="local", layout=ACC)
        for j in T.serial(2):  # two column tiles; columns from 200 on masked
            k0 = j * 128
            Tx.warp.copy(X[0:16, 0:128], A[0:16, k0 : k0 + 128])
            Tx.warp.masked_fill(X[0:16, 0:128], X[0:16, 0:128], lambda i, j: k0 + j >= 200, -1.0)
            Tx.warp.copy(P[0:16, k0 : k0 + 128], X[0:16, 0:128])

    a = np.random.default_rng(7).standard_normal((16, 256)).astype(np.float32)
    p = np.zeros_like(a)
    tirx.compile(tail_mask, "sm_90a")(a, p)
    want = a.copy()
    want[:, 200:] = -1.0
    np.testing.assert_array_equal(p, want)


def test_causal_mask_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    a = torch.randn(16, 128, device="cuda") * 3
    p = torch.empty_like(a)
    causal_softmax()(a, p, 7)
    want = torch.from_numpy(_causal_ref(a.cpu().numpy(), 7)).float().cuda()
    torch.testing.assert_close(p, want, rtol=1e-5, atol=1e-7)


def test_a_row_statistic_broadcast_into_the_accumulator():
    # A copy into a layout that owns more elements along the replicated lanes is a `cast` to the
    # same dtype (elementwise ops broadcast).
    @T.prim_func
    def bcast(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 128), "float32")
        O = T.match_buffer(O_ptr, (16, 128), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        T.lane_id([32])
        X = T.alloc_buffer((16, 128), "float32", scope="local", layout=ACC)
        m = T.alloc_buffer((16, 1), "float32", scope="local", layout=ROWS)
        Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
        Tx.warp.max(m[0:16, 0:1], X[0:16, 0:128])
        Tx.warp.cast(X[0:16, 0:128], m[0:16, 0:1])
        Tx.warp.copy(O[0:16, 0:128], X[0:16, 0:128])

    a = np.random.default_rng(7).standard_normal((16, 128)).astype(np.float32)
    o = np.zeros_like(a)
    tirx.compile(bcast, "sm_90a")(a, o)
    np.testing.assert_array_equal(o, np.repeat(a.max(axis=1, keepdims=True), 128, axis=1))


def test_a_load_fills_every_copy_of_a_replicated_tile():
    """A row vector loaded into a layout replicated over the rows' threads (every copy reads it),
    then broadcast into a warpgroup accumulator (a bias epilogue): against NumPy; a store from
    a replicated tile still needs one owner per element."""
    from tirx.layout import R, S, TileLayout, laneid, wgmma_acc_layout, wid_in_wg

    col = TileLayout(S[(1, 16, 4, 2) : (1, 2, 1 @ laneid, 1)] + R[(4, 8) : (1 @ wid_in_wg, 4 @ laneid)])

    def kernel(store):
        @T.prim_func
        def bias_add(A_ptr: T.handle, B_ptr: T.handle, O_ptr: T.handle):
            A = T.match_buffer(A_ptr, (64, 128), "float32")
            B = T.match_buffer(B_ptr, (1, 128), "float32")
            O = T.match_buffer(O_ptr, (64, 128), "float32")
            T.device_entry()
            T.cta_id([1])
            T.warpgroup_id([1])
            T.warp_id_in_wg([4])
            T.lane_id([32])
            T.thread_id([128])
            acc = T.alloc_buffer((64, 128), "float32", scope="local", layout=wgmma_acc_layout(128))
            b = T.alloc_buffer((1, 128), "float32", scope="local", layout=col)
            Tx.warpgroup.copy(acc[0:64, 0:128], A[0:64, 0:128])
            Tx.warpgroup.copy(b[0:1, 0:128], B[0:1, 0:128])
            Tx.warpgroup.add(acc[0:64, 0:128], acc[0:64, 0:128], b[0:1, 0:128])
            Tx.warpgroup.copy(O[0:64, 0:128], acc[0:64, 0:128])
            if store:
                Tx.warpgroup.copy(B[0:1, 0:128], b[0:1, 0:128])

        return tirx.compile(bias_add, "sm_90a")

    rng = np.random.default_rng(8)
    a, bias = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((1, 128)).astype(np.float32)
    out = np.zeros_like(a)
    kernel(False)(a, bias, out)
    np.testing.assert_array_equal(out, a + bias)
    with pytest.raises(tirx.TirxError, match="replicates elements over threads"):
        kernel(True)
