"""Diagnostics point into the user's Python file: file:line:col of the operand, the user's
line and a caret under what they wrote (docs/python.md §2.4, §3)."""

import inspect
import re
import warnings

import numpy as np
import pytest

import tirx
from tirx import T, Tx

HERE = __file__


def line_of(marker: str) -> int:
    """The 1-based line of this file that contains `marker` (once, outside this function)."""
    src = open(HERE).read().splitlines()
    hits = [i + 1 for i, ln in enumerate(src) if marker in ln and "line_of(" not in ln]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def location(msg: str):
    m = re.search(re.escape(HERE) + r":(\d+):(\d+)", msg)
    assert m, msg
    return int(m.group(1)), int(m.group(2))


def test_a_checker_error_points_at_the_operand_built_from_a_closure():
    rows = (slice(0, 32), slice(0, 16))  # 16 columns: out of bounds of (32, 8)

    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle):
            A = T.match_buffer(A_ptr, (32, 8), "float32")
            B = T.match_buffer(B_ptr, (32, 8), "float32")
            T.device_entry()
            T.cta_id([1])
            T.lane_id([32])
            T.thread_id([32])
            Tx.warp.copy(B[rows], A[rows])  # MARK-oob

    msg = str(e.value)
    line, col = location(msg)
    assert line == line_of("# MARK-oob")
    src_line = open(HERE).read().splitlines()[line - 1]
    assert src_line[col - 1 :].startswith("B[rows]"), (src_line, col)
    assert "out of bounds" in msg and src_line.strip() in msg
    assert "^^^^^^^" in msg


def test_an_unknown_name_is_reported_at_it_with_a_suggestion():
    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (4,), "float32")
            T.device_entry()
            T.cta_id([1])
            tid = T.thread_id([4])
            A[tid] = A[tidd]  # MARK-name

    msg = str(e.value)
    line, col = location(msg)
    assert line == line_of("# MARK-name")
    assert "unknown name `tidd`" in msg and "did you mean `tid`?" in msg


def test_an_unknown_t_name_is_reported_by_the_script_check_with_a_suggestion():
    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (4,), "float32")
            T.device_entry()
            T.cta_id([1])
            T.thread_id([4])
            T.cuda.cta_synk()  # MARK-unknown-attr

    msg = str(e.value)
    line, col = location(msg)
    assert line == line_of("# MARK-unknown-attr")
    assert open(HERE).read().splitlines()[line - 1][col - 1 :].startswith("cta_synk")
    assert "`T.cuda` has no attribute `cta_synk`" in msg and "did you mean `T.cuda.cta_sync`?" in msg


def test_an_unknown_ptx_instruction_in_a_helper_is_reported_at_the_helpers_line():
    def wait_all():
        T.ptx.cp_async.comit_group()  # MARK-unknown-ptx

    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (4,), "float32")
            T.device_entry()
            T.cta_id([1])
            T.thread_id([4])
            wait_all()

    msg = str(e.value)
    assert location(msg)[0] == line_of("# MARK-unknown-ptx")
    assert "did you mean `T.ptx.cp_async.commit_group`?" in msg


def test_a_python_error_in_a_helper_is_reported_at_the_kernel_line_that_called_it():
    def helper(x):
        return x // 0  # a Python error while the kernel is built

    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (4,), "int32")
            T.device_entry()
            T.cta_id([1])
            tid = T.thread_id([4])
            A[tid] = helper(4)  # MARK-helper

    msg = str(e.value)
    assert location(msg)[0] == line_of("# MARK-helper")
    assert "ZeroDivisionError" in msg and "x // 0" in msg


def test_a_tile_call_made_in_a_helper_is_reported_at_the_helpers_line():
    def bad_copy(dst, src):
        Tx.warp.copy(dst[0:32, 0:8], src[0:32, 0:8])  # MARK-in-helper

    with pytest.raises(tirx.TirxError) as e:

        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle):
            A = T.match_buffer(A_ptr, (32, 8), "float32")
            B = T.match_buffer(B_ptr, (32, 8), "float16")
            T.device_entry()
            T.cta_id([1])
            T.lane_id([32])
            T.thread_id([32])
            bad_copy(B, A)

    msg = str(e.value)
    assert location(msg)[0] == line_of("# MARK-in-helper")
    assert "copy dtype mismatch" in msg


def test_a_lowering_error_and_a_simulator_error_point_into_the_file():
    @T.prim_func
    def racy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32,), "int32")
        B = T.match_buffer(B_ptr, (1,), "int32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        B[0] = A[tid]  # MARK-race

    k = tirx.compile(racy, target="sm_90a")
    with pytest.raises(tirx.TirxError) as e:
        k(np.arange(32, dtype=np.int32), np.zeros(1, np.int32))
    msg = str(e.value)
    assert "data race" in msg
    assert location(msg)[0] == line_of("# MARK-race")


def test_a_slow_pick_is_a_warning_naming_the_variant():
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4, 6), "float32")
        B = T.match_buffer(B_ptr, (4, 6), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        T.thread_id([32])
        S_ = T.alloc_shared((4, 6), "float32")
        Tx.warp.copy(S_[:, :], A[:, :], dispatch="fallback")  # MARK-slow
        T.cuda.cta_sync()
        Tx.warp.copy(B[:, :], S_[:, :])

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tirx.compile(kernel, target="sm_90a")
    msgs = [str(x.message) for x in w if issubclass(x.category, tirx.TirxWarning)]
    assert any("copy/fallback" in m for m in msgs), msgs
    assert any(location(m)[0] == line_of("# MARK-slow") for m in msgs)


def test_bare_tile_op_is_thread_scope_and_a_shared_tile_update_races():
    """The reference's test_binary_op_vectorized[...-cta-shared-...] kernel: a bare `Tx.add` is
    thread scope (as in the reference), so every thread read-modify-writes the whole shared tile.
    The simulator reports the race at the call; with `Tx.cta.add` the kernel is correct."""

    def build(op):
        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle):
            A = T.match_buffer(A_ptr, (64, 32), "float16")
            B = T.match_buffer(B_ptr, (64, 32), "float16")
            T.device_entry()
            T.cta_id([1])
            T.thread_id([64])
            A_smem = T.alloc_buffer((64, 32), "float16", scope="shared")
            B_smem = T.alloc_buffer((64, 32), "float16", scope="shared")
            Tx.cta.copy(A_smem, A)
            Tx.cta.copy(B_smem, B)
            T.cuda.cta_sync()
            op(A_smem, A_smem, B_smem)  # MARK-bare-add
            T.cuda.cta_sync()
            Tx.cta.copy(A, A_smem)

        return kernel

    a = np.arange(64 * 32).reshape(64, 32).astype(np.float16) % 17
    b = np.ones((64, 32), np.float16)
    with pytest.raises(tirx.TirxError) as e:
        tirx.compile(build(Tx.add), target="sm_90a")(a.copy(), b)
    msg = str(e.value)
    assert "data race" in msg and "A_smem" in msg
    assert location(msg)[0] == line_of("# MARK-bare-add")
    out = a.copy()
    tirx.compile(build(Tx.cta.add), target="sm_90a")(out, b)
    np.testing.assert_array_equal(out, a + b)
