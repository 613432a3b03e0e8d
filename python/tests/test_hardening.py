"""Issue 27 (hardening, round 3): the defects that live in the Python front end
and in the package's array interop, each with its reproducer."""

import math

import numpy as np
import pytest

import tirx
from tirx import T, Tx


def test_infinities_and_nan_reach_the_kernel():
    # Defect 19: the front end writes -float("inf"), which the script now reads.
    ninf = -math.inf

    @T.prim_func
    def kernel(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32,), "float32")
        O = T.match_buffer(O_ptr, (3, 32), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([32])
        O[0, t] = T.max(A[t], ninf)
        O[1, t] = -float("inf")
        O[2, t] = float("nan")

    k = tirx.compile(kernel)
    assert '-float("inf")' in kernel.source
    a = np.arange(32, dtype=np.float32) - 16
    o = np.zeros((3, 32), np.float32)
    k.simulate(a, o)
    np.testing.assert_array_equal(o[0], a)
    assert np.all(o[1] == -np.inf) and np.all(np.isnan(o[2]))


def _scale():
    """O = 2 * A over 64 elements, two warps (a kernel that can run in place)."""

    @T.prim_func
    def scale(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64,), "float32")
        O = T.match_buffer(O_ptr, (64,), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([64])
        O[t] = A[t] * 2.0

    return tirx.compile(scale)


def test_in_place_call_updates_the_array():
    # Defect 1: k(x, x) left x unchanged (the input's copy was written back last).
    k = _scale()
    x = np.arange(64, dtype=np.float32)
    k(x, x)
    np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32) * 2)
    # The output named first, as in the report.
    y = np.arange(64, dtype=np.float32)
    k.simulate(y[:], y)
    np.testing.assert_array_equal(y, np.arange(64, dtype=np.float32) * 2)


def test_in_place_race_is_reported():
    # Sharing the memory, as on the GPU: thread t reads what thread t-1 writes.
    @T.prim_func
    def shift(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (65,), "float32")
        O = T.match_buffer(O_ptr, (65,), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([64])
        O[t + 1] = A[t]

    k = tirx.compile(shift)
    a, o = np.zeros(65, np.float32), np.zeros(65, np.float32)
    k(a, o)  # separate arrays: no race
    x = np.zeros(65, np.float32)
    with pytest.raises(tirx.TirxError, match="race"):
        k(x, x)


def test_overlapping_arguments_are_refused():
    k = _scale()
    x = np.arange(128, dtype=np.float32)
    with pytest.raises(ValueError, match="overlap in memory without being the same array"):
        k(x[:64], x[32:96])


def test_read_only_or_broadcast_output_is_an_error():
    # Defect 11: such outputs were silently not written back.
    k = _scale()
    a = np.arange(64, dtype=np.float32)
    ro = np.zeros(64, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 1 \(`O`\) is written by the kernel but the array is read-only"):
        k(a, ro)
    bc = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(64,), strides=(0,))
    with pytest.raises(ValueError, match="broadcast view"):
        k(a, bc)
    # A read-only or broadcast input is fine: the kernel only reads it.
    a.flags.writeable = False
    o = np.zeros(64, np.float32)
    k(a, o)
    np.testing.assert_array_equal(o, np.arange(64, dtype=np.float32) * 2)
    o2 = np.zeros(64, np.float32)
    k(np.broadcast_to(np.float32(3), (64,)), o2)
    assert np.all(o2 == 6)


def test_numpy_scalars_build_kernels():
    # Defect 13: np.int64 / np.float32 / np.bool_ captured by a kernel were refused, and
    # `T.Buffer` and `alloc_buffer` disagreed about them.
    n, f, b = np.int64(64), np.float32(2.5), np.bool_(True)

    @T.prim_func
    def kernel(A: T.Buffer((n,), "float32"), O_ptr: T.handle):
        O = T.match_buffer(O_ptr, (np.int32(64),), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([n])
        S = T.alloc_buffer((n,), "float32", scope="shared")
        S[t] = A[t] * f + np.float16(1)
        if b:
            O[t] = S[t]

    k = tirx.compile(kernel)
    a = np.arange(64, dtype=np.float32)
    o = np.zeros(64, np.float32)
    k(a, o)
    np.testing.assert_array_equal(o, a * 2.5 + 1)


def _scaled():
    @T.prim_func
    def scaled(A_ptr: T.handle, O_ptr: T.handle, n: T.int32, alpha: T.float32):
        A = T.match_buffer(A_ptr, (64,), "float32")
        O = T.match_buffer(O_ptr, (64,), "float32")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([64])
        O[t] = A[t] * alpha + T.float32(n)

    return tirx.compile(scaled)


def test_argument_errors_name_the_argument():
    # Defect 14: raw PyO3 errors that named nothing; a float32 of 1e300 became inf.
    k = _scaled()
    a, o = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(tirx.TirxError, match=r"argument 3 \(`alpha: float32`\): 1e\+300 overflows float32"):
        k(a, o, 1, 1e300)
    with pytest.raises(tirx.TirxError, match="overflows float32"):
        k(a, o, 1, -np.float64(3.5e38))
    with pytest.raises(TypeError, match="tirx.compile\\(\\): `target` must be a string"):
        tirx.compile(_scaled().prim, target=90)
    with pytest.raises(TypeError, match="`grid_limit` must be an int"):
        k.simulate(a, o, 1, 1.0, grid_limit="2")
    with pytest.raises(ValueError, match="grid_limit must be at least 1"):
        k.simulate(a, o, 1, 1.0, grid_limit=-1)
    with pytest.raises(TypeError, match="`check_races` must be a bool"):
        k.simulate(a, o, 1, 1.0, check_races="no")
    with pytest.raises(TypeError, match="`json` must be a bool"):
        k.explain(json="yes")
    # In range, and inf or nan given as such, pass; the largest float32 is not an overflow.
    k(a, o, 1, float(np.finfo(np.float32).max))
    k(a, o, 1, -math.inf)
    assert o[1] == -np.inf
    k.simulate(a, o, 1, 2.0, grid_limit=np.int64(1))
    np.testing.assert_array_equal(o, a * 2 + 1)


def test_invalid_grid_is_reported_at_cta_id():
    # Defect 12: it was reported at line 1, column 1.
    @T.prim_func
    def kernel(A_ptr: T.handle, n: T.int32):
        A = T.match_buffer(A_ptr, (n,), "float32")
        T.device_entry()
        b = T.cta_id([n // 64])
        t = T.thread_id([64])
        A[b * 64 + t] = 1.0

    k = tirx.compile(kernel)
    with pytest.raises(tirx.TirxError) as e:
        k(np.zeros(0, np.float32), 0)
    msg = str(e.value)
    assert "grid dimension x `n // 64` is 0 with n = 0" in msg
    assert "b = T.cta_id([n // 64])" in msg and ":1:1" not in msg


def test_uint64_arrays_and_mbarriers():
    # Defect 17: "uint64" is a dtype (unsigned 64-bit arithmetic), and the reference's
    # `T.alloc_shared([1], "uint64")` holds an mbarrier.
    @T.prim_func
    def kernel(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (2,), "uint64")
        O = T.match_buffer(O_ptr, (4,), "uint64")
        T.device_entry()
        T.cta_id([1])
        t = T.thread_id([32])
        bar = T.alloc_shared([1], "uint64")
        if t == 0:
            T.ptx.mbarrier.init(bar.ptr_to([0]), 32)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        T.ptx.mbarrier.arrive(bar.ptr_to([0]))
        T.ptx.mbarrier.try_wait.parity(bar.ptr_to([0]), 0)
        if t == 0:
            O[0] = A[0] // 7
            O[1] = T.max(A[0], A[1])
            O[2] = A[0] >> 60
            O[3] = T.cast(A[0] > A[1], "uint64")

    k = tirx.compile(kernel)
    big = 2**64 - 11
    a = np.array([big, 5], dtype=np.uint64)
    want = np.array([big // 7, big, big >> 60, 1], dtype=np.uint64)
    for run in (k.simulate, k):
        o = np.zeros(4, np.uint64)
        run(a, o)
        np.testing.assert_array_equal(o, want)


def test_explain_with_the_simulators_bank_statistics():
    # Issue 28 item 5: bank conflicts from Python, as `tirx explain --sim` prints them.
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
        A = T.match_buffer(A_ptr, (32, 32), "float32")
        B = T.match_buffer(B_ptr, (32, 32), "float32")
        T.device_entry()
        T.cta_id([n])
        T.warp_id([1])
        T.lane_id([32])
        S = T.alloc_buffer((32, 32), "float32", scope="shared")
        Tx.warp.copy(S[0:32, 0:32], A[0:32, 0:32])
        Tx.warp.copy(B[0:32, 0:32], S[0:32, 0:32])

    k = tirx.compile(kernel)
    text = k.explain(sim=True, scalars={"n": 2})
    assert text.count("  bank: ") >= 2 and "ways on average over" in text, text
    assert "(simulated)" in text and "`S`" in text, text
    import json

    calls = json.loads(k.explain(json=True, sim=True, sim_ctas=1, scalars={"n": 2}))
    assert len(calls) == 2 and all("bank" in c for c in calls)
    assert calls[0]["bank"][0]["buf"] == "S" and calls[0]["bank"][0]["executions"] > 0
    with pytest.raises(TypeError, match=r"scalars=\{'n': \.\.\.\}"):
        k.explain(sim=True)
    with pytest.raises(TypeError, match="no scalar parameter `m`"):
        k.explain(sim=True, scalars={"n": 1, "m": 2})
    with pytest.raises(TypeError, match="pass sim=True"):
        k.explain(scalars={"n": 1})


def test_calls_with_scalar_arguments_seen_before_bind_as_new_ones():
    # The per-arguments caches of launches (shapes, grid, checks): every argument set binds
    # its own sizes, and a failing check still fails after others passed.
    @T.prim_func
    def add_n(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
        A = T.match_buffer(A_ptr, (n,), "float32")
        B = T.match_buffer(B_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([(n + 31) // 32])
        tid = T.thread_id([32])
        i = bx * 32 + tid
        if i < n:
            B[i] = A[i] + 1.0

    k = tirx.compile(add_n)
    for n in (32, 70, 32, 5, 70):
        a = np.arange(n, dtype=np.float32)
        b = np.zeros(n, np.float32)
        k(a, b, n)
        np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(ValueError, match=r"must have shape \(33,\)"):
        k(np.zeros(32, np.float32), np.zeros(32, np.float32), 33)
    assert k.shapes([70]) == {0: (70,), 1: (70,)}
