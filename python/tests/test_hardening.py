"""Issue 27 (hardening, round 3): the defects that live in the Python front end
and in the package's array interop, each with its reproducer."""

import math

import numpy as np
import pytest

import tirx
from tirx import T


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
