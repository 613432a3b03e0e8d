"""The Python front end (docs/python.md §2): what a decorated function may do, checked by
running each kernel in the simulator against NumPy."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx
from tirx.layout import S, TileLayout, laneid


def run(kernel, *arrays):
    tirx.compile(kernel, target="sm_90a")(*arrays)


def rand(*shape, dtype="float32"):
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


# A module-level helper: runs on kernel values and returns expressions.
def affine(x, scale, bias):
    return x * scale + bias


def test_factory_closures_helpers_and_getattr_scope():
    def make(shape, dtype, scope, factor):
        lay = TileLayout(S[shape : (1 @ laneid, 1)])
        full = tuple(slice(0, d) for d in shape)

        def twice(j):  # a local helper closing over nothing kernel-side
            return 2 * j

        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle):
            A = T.match_buffer(A_ptr, shape, dtype)
            B = T.match_buffer(B_ptr, shape, dtype)
            T.device_entry()
            T.cta_id([1])
            T.lane_id([32])
            T.thread_id([32])
            R = T.alloc_local(shape, dtype, layout=lay)
            getattr(Tx, scope).copy(R[full], A[full])
            R_local = R.local()
            for j in range(shape[1]):
                R_local[j] = affine(R_local[j], factor, T.cast(twice(j), dtype))
            getattr(Tx, scope).copy(B[full], R[full])

        return kernel

    for factor in (2.0, -0.5):
        k = make((32, 8), "float32", "warp", factor)
        a, b = rand(32, 8), np.zeros((32, 8), np.float32)
        run(k, a, b)
        np.testing.assert_allclose(b, a * factor + 2 * np.arange(8), rtol=1e-6)


def test_dict_held_ops_splats_meta_var_and_star_args():
    ops = {"add": Tx.add, "mul": Tx.mul}
    shape = (8,)
    cfg = {"dispatch": "reg"}
    for name, ref in (("add", np.add), ("mul", np.multiply)):
        op = ops[name]

        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, (*shape,), "float32")
            B = T.match_buffer(B_ptr, shape, "float32")
            C = T.match_buffer(C_ptr, shape, "float32")
            T.device_entry()
            T.cta_id([1])
            T.thread_id([1])
            n = T.meta_var(shape[0])
            ra = T.alloc_local((n,), "float32")
            rb = T.alloc_local((n,), "float32")
            Tx.copy(ra[0:n], A[0:n], **cfg)
            Tx.copy(rb[0:n], B[0:n])
            op(ra[0:n], ra[0:n], rb[0:n])
            Tx.copy(C[0:n], ra[0:n])

        a, b, c = rand(8), rand(8) + 3, np.zeros(8, np.float32)
        run(kernel, a, b, c)
        np.testing.assert_allclose(c, ref(a, b), rtol=1e-6)


def test_compile_time_if_kernel_if_and_loops():
    def make(mode):
        @T.prim_func
        def kernel(A_ptr: T.handle, B_ptr: T.handle):
            A = T.match_buffer(A_ptr, (64, 4), "float32")
            B = T.match_buffer(B_ptr, (64, 4), "float32")
            T.device_entry()
            T.cta_id([1])
            T.warp_id([2])
            T.lane_id([32])
            tid = T.thread_id([64])
            if mode == "double":  # a Python condition: one branch is built
                scale = 2.0
            else:
                scale = 3.0
            for j in T.unroll(4):
                if tid % 2 == 0:  # a kernel condition
                    B[tid, j] = A[tid, j] * scale
                else:
                    B[tid, j] = A[tid, j] if j < 2 else -A[tid, j]
            for i, j in T.grid(1, 2):
                B[tid + i, j] = B[tid + i, j] + 0.0

        return kernel

    for mode, scale in (("double", 2.0), ("triple", 3.0)):
        k = make(mode)
        assert ("3.0" in k.source) == (mode == "triple")
        a, b = rand(64, 4), np.zeros((64, 4), np.float32)
        run(k, a, b)
        want = np.where(np.arange(64)[:, None] % 2 == 0, a * scale, np.where(np.arange(4) < 2, a, -a))
        np.testing.assert_allclose(b, want, rtol=1e-6)


def test_python_sequences_unroll_and_mutable_scalars():
    cols = [0, 2, 3]

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32, 4), "float32")
        B = T.match_buffer(B_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        acc = 0.0
        for c in cols:  # unrolled now: `c` is a Python int in each copy
            acc = acc + A[tid, c]
        n: T.int32 = 0
        for j in range(4):
            n += 1
        B[tid] = acc / T.cast(n, "float32")

    a, b = rand(32, 4), np.zeros(32, np.float32)
    run(kernel, a, b)
    np.testing.assert_allclose(b, a[:, cols].sum(1) / 4, rtol=1e-5)


def test_typed_constants_fstrings_comprehensions_and_nested_def():
    c = T.float16(1.25)
    assert c.value == 1.25 and c.dtype == "float16"
    names = {f"col{j}": j for j in range(4)}

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32, 4), "float16")
        B = T.match_buffer(B_ptr, (32, 4), "float16")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])

        def scaled(j):
            return A[tid, j] * c

        for j in [names[f"col{k}"] for k in range(4)]:
            B[tid, j] = scaled(j)

    a, b = rand(32, 4, dtype="float16"), np.zeros((32, 4), np.float16)
    run(kernel, a, b)
    np.testing.assert_allclose(b, (a.astype(np.float32) * 1.25).astype(np.float16), rtol=1e-3)


def test_statements_made_inside_helpers_land_where_called():
    def load_row(dst, src, row):
        Tx.copy(dst[0:8], src[row, 0:8])

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32, 8), "float32")
        B = T.match_buffer(B_ptr, (32, 8), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        r = T.alloc_local((8,), "float32")
        load_row(r, A, tid)
        Tx.copy(B[tid, 0:8], r[0:8])

    a, b = rand(32, 8), np.zeros((32, 8), np.float32)
    run(kernel, a, b)
    np.testing.assert_array_equal(b, a)


def test_unnamed_views_are_bound_before_their_statement():
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32, 8), "float32")
        B = T.match_buffer(B_ptr, (256,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        R = T.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
        Tx.warp.copy(R[:, :], A[:, :])
        Tx.copy(B[tid * 8 : tid * 8 + 8], R.local()[0:8])

    a, b = rand(32, 8), np.zeros(256, np.float32)
    run(kernel, a, b)
    np.testing.assert_array_equal(b, a.reshape(-1))


def test_typed_buffer_parameters():
    @T.prim_func
    def kernel(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        B[tid] = A[tid] + 1.0

    a, b = rand(32), np.zeros(32, np.float32)
    run(kernel, a, b)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)


def test_annotations_see_the_builders_locals_and_carry_layouts():
    # `lay` and `rows` appear only in annotations, so they are no closure cells of the kernel:
    # they come from the builder's frame, as in the reference.
    def build(rows):
        lay = TileLayout(S[(rows, 8) : (1, rows)])  # column-major

        @T.prim_func
        def kernel(A: T.Buffer((rows, 8), "float32", layout=lay), B: T.Buffer((32, 8), "float32")):
            T.device_entry()
            T.cta_id([1])
            T.lane_id([32])
            tid = T.thread_id([32])
            for j in range(8):
                B[tid, j] = A[tid, j] * 2.0

        return kernel

    k = build(32)
    assert "S[(32, 8):(1, 32)]" in k.script()
    a, b = rand(32, 8), np.zeros((32, 8), np.float32)
    run(k, a, b)
    np.testing.assert_allclose(b, 2 * a.reshape(8, 32).T, rtol=1e-6)


def test_prim_func_with_arguments_and_reprs():
    @T.prim_func(private=True)
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4,), "int32")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([4])
        A[tid] = tid

    assert kernel.name == "kernel"
    assert "T.match_buffer" in kernel.script()
    k = tirx.compile(kernel, target="sm_80")
    assert k.target == "sm_80"
    assert "A[tid] = tid" in k.lir()
    a = np.zeros(4, np.int32)
    k(a)
    np.testing.assert_array_equal(a, np.arange(4))
    assert "kernel" in repr(k) and "int32" in repr(k)


def test_python_values_that_are_not_kernel_values_are_refused():
    with pytest.raises(tirx.TirxError, match="no truth value at compile time"):

        @T.prim_func
        def kernel(A_ptr: T.handle):
            A = T.match_buffer(A_ptr, (4,), "int32")
            T.device_entry()
            T.cta_id([1])
            tid = T.thread_id([4])
            if bool(tid < 2):
                A[tid] = 0


def test_sub_views_of_unnamed_views_evaluate_and_forced_vector_copies():
    hints = {"cache": "nc", "l1_evict": "L1::no_allocate", "prefetch_size": "L2::256B"}

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (1024,), "int32")
        B = T.match_buffer(B_ptr, (4, 4), "int32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([1])
        reg = T.alloc_local((4, 4), "int32")
        # rows 4..7 of column block 1 of the (16, 4, 4, 4) view: [4, 4] at stride 16 from 4
        blk = A.view(16, 4, 4, 4).sub[0, :, 1, :]
        for i in [0, 1, 2, 3]:  # unrolled by Python: register regions need constant begins
            Tx.copy(reg[i, :], blk[i, :], dispatch="vec_128b", **hints)
        for i in T.unroll(4):
            T.evaluate(reg[i, 0])
        Tx.copy(B[:, :], reg[:, :])

    assert ".sub[0, :, 1, :]" in kernel.source and "T.evaluate(reg[i, 0])" in kernel.source
    k = tirx.compile(kernel, target="sm_90a")
    assert k.cuda_source.count("ld.global.nc.L1::no_allocate.L2::256B.v4.u32") == 4
    a, b = np.arange(1024, dtype=np.int32), np.zeros((4, 4), np.int32)
    k(a, b)
    np.testing.assert_array_equal(b, a.reshape(16, 4, 4, 4)[0, :, 1, :])


def test_static_shared_memory_over_48_kib_is_dynamic_with_a_note():
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (128, 128), "float32")
        B = T.match_buffer(B_ptr, (128, 128), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([128])
        S_ = T.alloc_buffer((128, 128), "float32", scope="shared")
        Tx.cta.copy(S_[:, :], A[:, :])
        T.cuda.cta_sync()
        Tx.cta.copy(B[:, :], S_[:, :])

    k = tirx.compile(kernel, target="sm_90a")
    assert k.warnings == []
    assert len(k.notes) == 1 and "placed in dynamic shared memory" in k.notes[0], k.notes
    assert "extern __shared__" in k.cuda_source
    a, b = rand(128, 128), np.zeros((128, 128), np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a)


def _local_view_kernel(n: int):
    @T.prim_func
    def k(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (n,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.thread_id([1])
        acc = T.alloc_buffer((1,), "float32", scope="local")
        if n > 1:
            x = T.alloc_buffer((n,), "float32", scope="local")
            for i in T.serial(n):
                x[i] = A[i]
            Tx.sum(acc[0:1], x.local()[0:n])  # an unnamed view, named while the kernel is built
            A[0] = acc[0]

    return k


def test_kernels_build_in_parallel_threads():
    """The autotuner builds its configurations in threads: the front end's naming of unnamed
    views is per thread (once a module global, one build could name another's views), and a
    file's table of definitions is published whole (once, a build could read it half-filled)."""
    from concurrent.futures import ThreadPoolExecutor

    import sys

    import tirx.ops  # noqa: F401

    sizes = list(range(2, 34))
    with ThreadPoolExecutor(8) as pool:
        kernels = list(pool.map(lambda n: tirx.compile(_local_view_kernel(n)), sizes))
        # What failed on the GPU: cross_entropy's configurations, each with unnamed views.
        # And the first look-up of definitions in a file, by several builds at once.
        from tirx.script.frontend import Source

        ce = sys.modules["tirx.ops.cross_entropy"].cross_entropy_kernel.factory
        for v in (3000, 3001, 3002):
            Source._cache.clear()
            list(pool.map(lambda t: tirx.compile(ce(v=v, dtype="float32", smoothing=True, threads=t)), (32, 64, 128, 256, 512, 1024)))
    for n, k in zip(sizes, kernels):
        a = np.arange(n, dtype=np.float32)
        k(a)
        assert a[0] == n * (n - 1) / 2
