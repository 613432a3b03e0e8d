"""Parameter buffers with strides (docs/tile-primitives.md §7.7, docs/python.md §5.3):
`strides=(lda, 1)` of scalar parameters, read and written by TMA copies and scalar accesses
(every other variant declines), called on NumPy views in the simulator and on strided
PyTorch views on the GPU; constant strides are a padded layout, passed the same way."""

import os

import numpy as np
import pytest

import tirx
from tirx import MBarrier, T, Tx

ROWS, COLS = 64, 128


@T.prim_func
def strided_tile(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, lda: T.int32, ldb: T.int32):
    A = T.match_buffer(A_ptr, (n, COLS), "float16", strides=(lda, 1))
    B = T.match_buffer(B_ptr, (n, COLS), "float16", strides=(ldb, 1))
    T.assume(lda % 8 == 0)  # TMA strides are multiples of 16 bytes
    T.assume(ldb % 8 == 0)
    T.device_entry()
    bx = T.cta_id([n // ROWS])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    S_ = pool.alloc((ROWS, COLS), "float16")
    full = MBarrier(pool, 1)
    pool.commit()
    full.init(1)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    if tid == 0:
        Tx.copy_async(S_[0:ROWS, 0:COLS], A[bx * ROWS : bx * ROWS + ROWS, 0:COLS], mbar=full.ptr_to([0]))
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), ROWS * COLS * 2)
        full.wait(0, 0)
        Tx.copy_async(B[bx * ROWS : bx * ROWS + ROWS, 0:COLS], S_[0:ROWS, 0:COLS])
        T.ptx.cp_async.bulk.commit_group()
        T.ptx.cp_async.bulk.wait_group(0)


@T.prim_func
def transpose_scaled(A_ptr: T.handle, B_ptr: T.handle, lda: T.int32, ldb: T.int32):
    A = T.match_buffer(A_ptr, (8, 4), "float32", strides=(lda, 1))
    B = T.match_buffer(B_ptr, (4, 8), "float32", strides=(1, ldb))
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    B[tid % 4, tid // 4] = A[tid // 4, tid % 4] * 2.0


@T.prim_func
def padded_rows(A: T.Buffer((4, 32), "float32", strides=(40, 1))):
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    for i in range(4):
        A[i, tid] = A[i, tid] + T.float32(i)


def _sim(k):
    return tirx.compile(k, "sm_90a")


def test_tma_tiles_of_column_slices_in_the_simulator():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((128, 256)).astype(np.float16)
    out = np.full((128, 200), 7, np.float16)
    a, b = big[:, 64 : 64 + COLS], out[:, 8 : 8 + COLS]  # views: rows 256 and 200 apart
    _sim(strided_tile).simulate(a, b, 128, 256, 200)
    np.testing.assert_array_equal(b, a)
    assert (out[:, :8] == 7).all() and (out[:, 8 + COLS :] == 7).all(), "nothing outside the view is written"


def test_strides_are_explained_and_described():
    k = _sim(strided_tile)
    text = k.explain()
    assert "strides [lda * 2] B" in text
    assert [p.strides for p in k.params if not p.is_scalar] == [("lda", 1), ("ldb", 1)]
    assert repr(k.params[0]) == "A: float16[n, 128] strides (lda, 1)"
    shapes, strides = k.layouts([128, 256, 136])
    assert strides == {0: (256, 1), 1: (136, 1)} and shapes[0] == (128, COLS)


def test_a_stride_tma_cannot_take_is_raised_before_anything_runs():
    a = np.zeros((64, COLS), np.float16)
    with pytest.raises(tirx.TirxError, match=r"launch check `lda % 8 == 0` fails with lda = 100"):
        _sim(strided_tile).simulate(a, a.copy(), 64, 100, 128)


def test_scalar_accesses_multiply_by_the_strides():
    a = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    b = np.zeros((4, 8), np.float32)
    _sim(transpose_scaled).simulate(a, b, 6, 5)
    np.testing.assert_array_equal(b, a.T * 2)


def test_a_dim_of_one_element_may_have_any_stride():
    """Torch tensors are checked against the evaluated strides (CPU ones run in the simulator), but
    where a dim has one element its stride addresses nothing and is not compared."""
    torch = pytest.importorskip("torch")
    a = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)[:, :4]  # (8, 4), strides (6, 1)
    b = torch.zeros(8, 4).t()  # (4, 8), strides (1, 4)
    transpose_scaled(a, b, 6, 4)
    torch.testing.assert_close(b, a.t() * 2)
    with pytest.raises(ValueError, match=r"has strides \(6, 1\), the kernel takes strides \(5, 1\)"):
        transpose_scaled(a, b, 5, 4)
    k = tirx.compile(one_row)
    x = torch.zeros(1, 64)[:, :32]  # (1, 32), strides (64, 1): dim 0's stride addresses nothing
    k(x, 40)
    assert (x == 1).all()


@T.prim_func
def one_row(A_ptr: T.handle, lda: T.int32):
    A = T.match_buffer(A_ptr, (1, 32), "float32", strides=(lda, 1))
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    A[0, tid] = 1.0


def test_a_padded_layout_takes_logical_arrays():
    a = np.ones((4, 32), np.float32)
    _sim(padded_rows).simulate(a)
    np.testing.assert_array_equal(a, 1 + np.arange(4, dtype=np.float32)[:, None] * np.ones((1, 32)))


def test_other_variants_decline_and_say_why():
    @T.prim_func
    def rows(A_ptr: T.handle, B_ptr: T.handle, lda: T.int32):
        A = T.match_buffer(A_ptr, (64, 128), "float32", strides=(lda, 1))
        B = T.match_buffer(B_ptr, (64, 128), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([128])
        S_ = T.alloc_buffer((64, 128), "float32", scope="shared")
        Tx.cta.copy(S_[0:64, 0:128], A[0:64, 0:128])
        T.cuda.cta_sync()
        Tx.cta.copy(B[0:64, 0:128], S_[0:64, 0:128])

    with pytest.raises(tirx.TirxError, match=r"`A` has run-time strides \(lda, 1\).*\[runtime_stride\]"):
        tirx.compile(rows, "sm_90a")


def _torch_cuda():
    if os.environ.get("TIRX_DEVICE") == "sim":
        pytest.skip("simulator run")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        if os.environ.get("TIRX_REQUIRE_GPU") == "1":
            pytest.fail("TIRX_REQUIRE_GPU=1 but no GPU")
        pytest.skip("needs a GPU")
    return torch


def test_strided_views_on_the_gpu():
    torch = _torch_cuda()
    big = torch.randn(4096, 512, device="cuda", dtype=torch.float16)
    out = torch.full((4096, 136), 7.0, device="cuda", dtype=torch.float16)
    a, b = big[:, 128 : 128 + COLS], out[:, :COLS]  # rows 512 and 136 apart, read and written in place
    strided_tile(a, b, 4096, 512, 136)
    torch.cuda.synchronize()
    assert torch.equal(b, a) and (out[:, COLS:] == 7).all()
    # The same kernel on the simulator's storage agrees.
    small_a, small_b = a[:128].cpu().numpy(), np.zeros((128, 136), np.float16)
    tirx.compile(strided_tile).simulate(small_a, small_b[:, :COLS], 128, 512, 136)
    np.testing.assert_array_equal(small_b[:, :COLS], b[:128].cpu().numpy())
    # A tensor whose strides are not the ones the kernel is told is refused, naming both.
    with pytest.raises(ValueError, match=r"has strides \(128, 1\), the kernel takes strides \(512, 1\)"):
        strided_tile(a.contiguous(), b, 4096, 512, 136)
    # Views of one pointer and shape with other strides: each launch's tensor maps are its own
    # (encoded maps are cached by pointer, dims and strides).
    buf, dst = torch.randn(128 * 256, device="cuda", dtype=torch.float16), torch.zeros(128, COLS, device="cuda", dtype=torch.float16)
    for lda in (256, 192, 128):
        view = buf[: 128 * lda].view(128, lda)[:, :COLS]
        strided_tile(view, dst, 128, lda, COLS)
        torch.cuda.synchronize()
        assert torch.equal(dst, view), lda
    x = torch.arange(32, device="cuda", dtype=torch.float32).reshape(8, 4)
    ct = torch.zeros(8, 4, device="cuda", dtype=torch.float32)
    transpose_scaled(x, ct.t(), 4, 4)  # B: the (4, 8) transposed view, strides (1, 4)
    torch.cuda.synchronize()
    assert torch.equal(ct.t(), x.t() * 2)
