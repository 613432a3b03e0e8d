# A test file written the way the reference's test files are (tvm imports, kernel builders
# with closures, tvm.compile, tvm.runtime.tensor, run_with_gpu_lock): run by
# test_compat.py as `pytest --noconftest -p tirx.compat` (docs/python.md §6).
import numpy as np
import pytest

import tvm
import tvm.testing
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.testing import env
from tvm.tirx.layout import S, TileLayout, laneid


def _build(scope, n_threads, shape, dtype):
    s_layout = TileLayout(S[shape])
    full = tuple(slice(0, d) for d in shape)

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle) -> None:
        A = T.match_buffer(A_ptr, shape, dtype)
        B = T.match_buffer(B_ptr, shape, dtype)
        T.device_entry()
        T.cta_id([1])
        T.warp_id([n_threads // 32])
        T.lane_id([32])
        T.thread_id([n_threads])
        A_smem = T.alloc_buffer(shape, dtype, scope="shared", layout=s_layout)
        getattr(Tx, scope).copy(A_smem[full], A[full])
        T.cuda.cta_sync()
        getattr(Tx, scope).copy(B[full], A_smem[full])

    return kernel


@pytest.mark.gpu
@pytest.mark.skipif(not env.has_cuda_compute(9), reason="need cuda compute >= 9.0")
@pytest.mark.parametrize("scope,n_threads,shape", [("warp", 32, (32, 32)), ("cta", 128, (64, 64))])
@pytest.mark.parametrize("dtype", ["float16", "float32", "uint8", "bfloat16"])
def test_roundtrip(scope, n_threads, shape, dtype):
    kernel = _build(scope, n_threads, shape, dtype)
    target = tvm.target.Target("cuda")
    with target:
        mod = tvm.IRModule({"main": kernel})
        ex = tvm.compile(mod, target=target, tir_pipeline="tirx")
    assert "__global__" in ex.mod.imports[0].inspect_source()
    A_np = tvm.testing.generate_random_array(dtype, shape)
    B_np = np.zeros(shape, dtype=tvm.testing.np_dtype_from_str(dtype))

    def run_and_check():
        dev = tvm.cuda(0)
        A = tvm.runtime.tensor(A_np, dev)
        B = tvm.runtime.tensor(B_np, dev)
        ex(A, B)
        np.testing.assert_array_equal(B.numpy(), A_np)

    tvm.testing.run_with_gpu_lock(run_and_check)


def test_warp_sqrt_on_registers():
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle) -> None:
        A = T.match_buffer(A_ptr, (32, 8), "float32")
        B = T.match_buffer(B_ptr, (32, 8), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        T.thread_id([32])
        R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
        Tx.warp.copy(R[:, :], A[:, :])
        Tx.warp.sqrt(R[:, :], R[:, :])
        Tx.warp.copy(B[:, :], R[:, :])

    ex = tvm.compile(tvm.IRModule({"main": kernel}), target=tvm.target.Target("cuda"), tir_pipeline="tirx")
    a = np.random.rand(32, 8).astype("float32")
    dev = tvm.cuda(0)
    A, B = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(np.zeros_like(a), dev)
    ex["main"](A, B)
    tvm.testing.assert_allclose(B.numpy(), np.sqrt(a), rtol=1e-6, atol=1e-6)


def test_dispatch_errors_are_runtime_errors():
    @T.prim_func
    def kernel(A_ptr: T.handle) -> None:
        A = T.match_buffer(A_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        S_ = T.alloc_buffer((32,), "float32", scope="shared")
        Tx.copy(S_[0:32], A[0:32], dispatch="no_such_variant")

    with pytest.raises(RuntimeError, match="no variant named 'no_such_variant'"):
        tvm.compile(tvm.IRModule({"main": kernel}), target=tvm.target.Target("cuda"))


def test_a_call_no_variant_lowers_fails_with_the_reference_header_and_the_decline_table():
    @T.prim_func
    def kernel(A_ptr: T.handle) -> None:
        A = T.match_buffer(A_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([32])
        R = T.alloc_buffer((4,), "float32", scope="local")
        Tx.copy(R[0:4], R[0:4], dispatch="vec_auto")

    with pytest.raises(RuntimeError, match="TIRx schedule dispatch failed: op=tirx.tile.copy") as e:
        tvm.compile(tvm.IRModule({"main": kernel}), target=tvm.target.Target("cuda"))
    assert "no variant of the dispatch group 'vec_auto'" in str(e.value)
    assert "fallback" in str(e.value)


def test_target_arch_and_device():
    t = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    assert t.arch == "sm_80"
    assert tvm.target.Target("cuda").arch.startswith("sm_")
    assert tvm.cuda(0).exist
