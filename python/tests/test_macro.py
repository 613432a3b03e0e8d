"""`@T.macro` (issue 29 item 5): a helper whose body is kernel code — kernel loops, `if`s on
kernel values, a shared-memory pool, tile calls — inlined at each call, so one body serves a
static-length and a run-time-length kernel; hygiene, return values and errors."""

import re

import numpy as np
import pytest

import tirx
from tirx import T, Tx


@T.macro
def scale_rows(X, Y, rows, factor):
    """Y[r] = X[r] * factor for the first `rows` rows (a kernel loop and a kernel `if`),
    through a shared-memory tile declared here."""
    pool = T.SMEMPool()
    tile = pool.alloc((32,), "float32")
    pool.commit()
    tid = T.thread_id([32])
    for r in range(8):
        if r < rows:
            tile[tid] = X[r, tid] * factor
            Y[r, tid] = tile[tid]


def static_kernel():
    @T.prim_func
    def scale_static(X_ptr: T.handle, Y_ptr: T.handle):
        X = T.match_buffer(X_ptr, (8, 32), "float32")
        Y = T.match_buffer(Y_ptr, (8, 32), "float32")
        T.device_entry()
        T.cta_id([1])
        scale_rows(X, Y, 8, 2.0)

    return tirx.compile(scale_static, "sm_90a")


def runtime_kernel():
    @T.prim_func
    def scale_runtime(X_ptr: T.handle, Y_ptr: T.handle, n: T.int32):
        X = T.match_buffer(X_ptr, (8, 32), "float32")
        Y = T.match_buffer(Y_ptr, (8, 32), "float32")
        T.device_entry()
        T.cta_id([1])
        scale_rows(X, Y, n, 3.0)

    return tirx.compile(scale_runtime, "sm_90a")


def test_one_body_static_and_run_time():
    x = np.arange(256, dtype=np.float32).reshape(8, 32)
    y = np.zeros_like(x)
    static_kernel()(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    y = np.zeros_like(x)
    runtime_kernel()(x, y, 5)
    np.testing.assert_array_equal(y[:5], 3 * x[:5])
    np.testing.assert_array_equal(y[5:], 0)
    # Inlined: the script has the macro's loop and `if` in each kernel.
    src = static_kernel().prim.source
    assert "for r in range(8):" in src and "if r < 8:" in src and "pool.commit()" in src


@T.macro
def row_sum(X, r):
    acc = T.alloc_local((1,), "float32")
    acc[0] = 0.0
    for c in range(32):
        acc[0] = acc[0] + X[r, c]
    return acc[0]


def test_a_macro_returns_a_value_and_sees_only_its_names():
    @T.prim_func
    def sums(X_ptr: T.handle, S_ptr: T.handle):
        X = T.match_buffer(X_ptr, (4, 32), "float32")
        S_ = T.match_buffer(S_ptr, (4,), "float32")
        T.device_entry()
        T.cta_id([1])
        r = T.thread_id([4])
        S_[r] = row_sum(X, r)

    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    s = np.zeros(4, np.float32)
    tirx.compile(sums, "sm_90a")(x, s)
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-5)

    @T.macro
    def uses_callers_name():
        Z[0] = 1.0  # noqa: F821 (the caller's buffer: not visible to a hygienic macro)

    with pytest.raises(tirx.TirxError, match="unknown name `Z`"):

        @T.prim_func
        def bad(Z_ptr: T.handle):
            Z = T.match_buffer(Z_ptr, (1,), "float32")  # noqa: F841
            T.device_entry()
            T.cta_id([1])
            T.thread_id([1])
            uses_callers_name()

    @T.macro(hygienic=False)
    def sets_callers_name():
        Z[0] = 1.0  # noqa: F821 (the caller's buffer, at the call)

    @T.prim_func
    def good(Z_ptr: T.handle):
        Z = T.match_buffer(Z_ptr, (1,), "float32")  # noqa: F841
        T.device_entry()
        T.cta_id([1])
        T.thread_id([1])
        sets_callers_name()

    z = np.zeros(1, np.float32)
    tirx.compile(good, "sm_90a")(z)
    assert z[0] == 1.0

    with pytest.raises(tirx.TirxError, match="missing a required argument: 'factor'"):

        @T.prim_func
        def short(X_ptr: T.handle, Y_ptr: T.handle):
            X = T.match_buffer(X_ptr, (8, 32), "float32")
            Y = T.match_buffer(Y_ptr, (8, 32), "float32")
            T.device_entry()
            T.cta_id([1])
            scale_rows(X, Y, 8)


def test_outside_a_kernel_a_macro_says_so():
    with pytest.raises(Exception, match="inside a `@T.prim_func` kernel"):
        scale_rows(None, None, 1, 1.0)


@T.macro
def doubled_shift(X, r, c, by):
    v = X[r, c] + by  # the macro's own let
    return v * 2.0


@T.macro(hygienic=False)
def bump():
    acc = acc + 0.5  # noqa: F821 (the caller's mutable scalar, updated)


@T.macro
def tripled(X, r, c):
    acc = X[r, c]  # the macro's own mutable scalar
    acc = acc * 3.0
    return acc


def test_every_binding_of_a_let_is_a_let_of_its_own():
    """A single-assignment name is a let at every binding (`Frontend._let_name`), where the script
    would make a name bound twice one mutable scalar: a macro expanded twice beside a caller's
    binding of the same name, and the copies of a loop over a Python sequence, each bind a fresh
    script name (`v_2`, `off_2`) — so the caller's `v` is still its own after the calls, and an
    offset bound in each copy stays uniform over the CTA (a CTA-wide copy takes it); a macro's
    mutable scalar is not its caller's of the same name, which a macro that sees its caller's
    names (``hygienic=False``) updates by assigning it."""

    @T.prim_func
    def lets(X_ptr: T.handle, Y_ptr: T.handle, n: T.int32):
        X = T.match_buffer(X_ptr, (5, 32), "float32")
        Y = T.match_buffer(Y_ptr, (5, 32), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([32])
        pool = T.SMEMPool()
        S = pool.alloc((32,), "float32")
        pool.commit()
        v = X[0, t] * 10.0
        a = doubled_shift(X, 1, t, 1.0)
        b = doubled_shift(X, 2, t, 2.0)
        Y[0, t] = v
        Y[1, t] = a
        Y[2, t] = b
        for q in (0, 1):  # (two copies of the body)
            off = n + q * 16
            Tx.cta.copy(S[off : off + 16], X[3, off : off + 16])
        T.cuda.cta_sync()
        Y[3, t] = S[t]
        acc = X[4, t]
        acc = acc + 1.0
        c = tripled(X, 4, t)
        bump()
        Y[4, t] = acc * 100.0 + c

    k = tirx.compile(lets, "sm_90a")
    src = k.prim.source
    assert "v_2 = " in src and "v_3 = " in src and "off_2 = " in src, src
    assert not re.search(r"(float|int) (v|off)(_\d)?\[1\]", k.cuda_source), k.cuda_source  # (no scalars in memory)
    x = np.random.default_rng(1).standard_normal((5, 32)).astype(np.float32)
    y = np.zeros_like(x)
    k(x, y, 0)
    np.testing.assert_array_equal(y[0], x[0] * 10)
    np.testing.assert_array_equal(y[1], (x[1] + 1) * 2)
    np.testing.assert_array_equal(y[2], (x[2] + 2) * 2)
    np.testing.assert_array_equal(y[3], x[3])
    np.testing.assert_allclose(y[4], (x[4] + 1.5) * 100 + x[4] * 3, rtol=1e-6)
