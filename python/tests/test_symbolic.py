"""Scalar parameters and run-time sizes from Python (docs/python.md §5.3): a kernel with
``n: T.int32`` called on NumPy arrays of two sizes, its scalar arguments typed, its shapes
evaluated per call, and a failed launch check raised in the user's file before anything runs."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx
from tirx.layout import S, TileLayout, laneid

ROWS = TileLayout(S[(32, 64) : (1 @ laneid, 1)])


@T.prim_func
def scale_rows(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, alpha: T.float32):
    A = T.match_buffer(A_ptr, (n, 64), "float32")
    B = T.match_buffer(B_ptr, (n, 64), "float32")
    T.assume(n % 32 == 0)
    T.device_entry()
    bx = T.cta_id([n // 32])
    T.lane_id([32])
    T.thread_id([32])
    R = T.alloc_local((32, 64), "float32", layout=ROWS)
    Tx.warp.copy(R[0:32, 0:64], A[bx * 32 : bx * 32 + 32, 0:64])
    Tx.warp.mul(R[0:32, 0:64], R[0:32, 0:64], alpha)
    Tx.warp.copy(B[bx * 32 : bx * 32 + 32, 0:64], R[0:32, 0:64])


@T.prim_func
def copy_tiles(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n, 128), "float32")
    B = T.match_buffer(B_ptr, (n, 128), "float32")
    T.device_entry()
    bx = T.cta_id([(n + 63) // 64])
    T.thread_id([128])
    S_ = T.alloc_shared((64, 128), "float32")
    Tx.cta.copy(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])
    T.cuda.cta_sync()
    Tx.cta.copy(B[bx * 64 : bx * 64 + 64, 0:128], S_[0:64, 0:128])


def kernel(f):
    return tirx.compile(f, target="sm_90a")


def test_two_sizes_of_one_kernel():
    k = kernel(scale_rows)
    assert repr(k) == "<tirx.Kernel scale_rows for sm_90a: A: float32[n, 64], B: float32[n, 64], n: int32, alpha: float32>"
    assert [p.kind for p in k.params] == ["buffer", "buffer", "scalar", "scalar"]
    for n, alpha in ((64, 0.5), (160, -2.0)):
        a = np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32)
        b = np.zeros_like(a)
        k(a, b, n, alpha)
        np.testing.assert_array_equal(b, a * np.float32(alpha))
    # NumPy integers are ints too; an int is a fine float.
    a = np.ones((32, 64), np.float32)
    b = np.zeros_like(a)
    k(a, b, np.int64(32), 3)
    assert (b == 3).all()


def test_scalar_arguments_are_typed():
    k = kernel(scale_rows)
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(TypeError, match=r"argument 2 \(`n: int32`\) must be an int, got float"):
        k(a, a.copy(), 64.0, 1.0)
    with pytest.raises(TypeError, match=r"argument 3 \(`alpha: float32`\) must be a float, got str"):
        k(a, a.copy(), 64, "1")
    with pytest.raises(TypeError, match=r"must be a number, got a bool"):
        k(a, a.copy(), True, 1.0)
    with pytest.raises(TypeError, match=r"takes 4 arguments"):
        k(a, a.copy(), 64)
    with pytest.raises(tirx.TirxError, match="outside the range of int32"):
        k(a, a.copy(), 1 << 40, 1.0)


def test_shapes_follow_the_scalars():
    k = kernel(scale_rows)
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(ValueError, match=r"must have shape \(96, 64\) \(A: float32\[n, 64\]\), got \(64, 64\)"):
        k(a, a.copy(), 96, 1.0)


def test_a_failed_launch_check_is_raised_in_the_users_file():
    k = kernel(copy_tiles)
    a = np.arange(100 * 128, dtype=np.float32).reshape(100, 128)
    b = np.zeros_like(a)
    with pytest.raises(tirx.TirxError) as e:
        k(a, b, 100)
    text = str(e.value)
    assert "launch check `(n + 63) // 64 * 64 <= n` fails with n = 100" in text
    assert "test_symbolic.py:38:" in text  # the region of `A` in this file
    assert "A[bx * 64 : bx * 64 + 64, 0:128]" in text
    assert not b.any(), "nothing ran"
    a = a[:64].copy()
    b = np.zeros_like(a)
    k(a, b, 64)
    np.testing.assert_array_equal(a, b)
    assert "assumed at launch: (n + 63) // 64 * 64 <= n (rows of `A[bx * 64:bx * 64 + 64, 0:128]`)" in k.explain()
    meta = k.meta
    assert meta["grid_dims"] == ["(n + 63) // 64", None, None]
    assert meta["checks"] == ["(n + 63) // 64 * 64 <= n"]
    assert meta["params"][0]["shape"] == ["n", 128]
    assert "int n" in k.cuda_source


def test_scalars_in_the_python_front_end_round_trip():
    text = scale_rows.source
    assert "def scale_rows(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, alpha: T.float32):" in text
    assert "T.assume(n % 32 == 0)" in scale_rows.script()


def test_buffer_annotations_may_use_a_scalar_declared_after_them():
    # Python evaluates annotations when it defines the function: a later parameter's name
    # needs postponed (string) annotations, as `from __future__ import annotations` makes them.
    @T.prim_func
    def double(A: "T.Buffer((n, 8), 'float32')", B: "T.Buffer((n, 8), 'float32')", n: T.int32):
        T.device_entry()
        bx = T.cta_id([n])
        t = T.thread_id([8])
        B[bx, t] = A[bx, t] * T.float32(2)

    k = kernel(double)
    a = np.arange(24, dtype=np.float32).reshape(3, 8)
    b = np.zeros_like(a)
    k(a, b, 3)
    np.testing.assert_array_equal(b, 2 * a)
    assert "def double(A: T.Buffer((n, 8), \"float32\"), B: T.Buffer((n, 8), \"float32\"), n: T.int32):" in double.script()


def test_integers_beyond_the_parameter_type_are_refused():
    k = kernel(scale_rows)
    a = np.zeros((64, 64), np.float32)
    for n in (2**31, -(2**31) - 1, 2**70):
        with pytest.raises(tirx.TirxError, match=f"{n} is outside the range of int32"):
            k(a, a.copy(), n, 1.0)
