"""The async syntax from Python (docs/tile-primitives.md §3.20, §3.21, §8.8): a TMA tiled copy and a
DSMEM exchange written as decorated functions, value-checked in the simulator; `T.decl_buffer`
over a pool allocation; a wrong `mbar=` is an error at the user's line."""

import numpy as np
import pytest

import tirx
from tirx import T, Tx, MBarrier

M, N, TM, TN = 128, 256, 64, 128


def tma_copy(stages: int):
    """B = A through shared memory: TMA loads on mbarriers, TMA stores in bulk groups."""
    box_bytes = TM * TN * 2

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (M, N), "float16")
        B = T.match_buffer(B_ptr, (M, N), "float16")
        T.device_entry()
        bx, by = T.cta_id([N // TN, M // TM])
        tid = T.thread_id([32])
        pool = T.SMEMPool()
        S_ = pool.alloc((stages, TM, TN), "float16")
        full = MBarrier(pool, stages)
        pool.commit()
        full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        r0 = by * TM
        c0 = bx * TN
        if tid == 0:
            Tx.copy_async(S_[0, 0:TM, 0:TN], A[r0 : r0 + TM, c0 : c0 + TN], dispatch="tma_auto", mbar=full.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), box_bytes)
            full.wait(0, 0)
            Tx.copy_async(B[r0 : r0 + TM, c0 : c0 + TN], S_[0, 0:TM, 0:TN], dispatch="tma_explicit")
            T.ptx.cp_async.bulk.commit_group()
            T.ptx.cp_async.bulk.wait_group(0)

    return kernel


def test_a_tma_tiled_copy_from_python():
    k = tirx.compile(tma_copy(2), target="sm_90a")
    assert "cp.async.bulk.tensor.2d" in k.cuda_source
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, a)


def dsmem_exchange(view: bool):
    """Each CTA of a 2-CTA cluster sends its tile to its peer's shared memory; B = A. With
    `view`, the tiles are `T.decl_buffer` views of flat pool allocations."""
    tile_bytes = 64 * 64 * 2

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 128), "float16")
        B = T.match_buffer(B_ptr, (64, 128), "float16")
        T.device_entry()
        bx = T.cta_id([2])
        rank = T.cta_id_in_cluster([2])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        if view:
            mine_raw = pool.alloc([64 * 64], "float16", align=128)
            theirs_raw = pool.alloc([64 * 64], "float16", align=128)
            mine = T.decl_buffer((64, 64), "float16", mine_raw.data, scope="shared.dyn", layout=T.TileLayout(T.S[64, 64]))
            theirs = T.decl_buffer((64, 64), "float16", theirs_raw.data, elem_offset=0)
        else:
            mine = pool.alloc((64, 64), "float16")
            theirs = pool.alloc((64, 64), "float16")
        bar = MBarrier(pool, 1)
        pool.commit()
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        Tx.cta.copy(mine[0:64, 0:64], A[0:64, bx * 64 : bx * 64 + 64])
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), tile_bytes)
            Tx.copy_async(theirs[0:64, 0:64], mine[0:64, 0:64], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=1 - rank)
        bar.wait(0, 0)
        peer = 1 - bx
        Tx.cta.copy(B[0:64, peer * 64 : peer * 64 + 64], theirs[0:64, 0:64])
        T.cuda.cluster_sync()

    return kernel


@pytest.mark.parametrize("view", [False, True], ids=["pool", "decl_buffer"])
def test_a_dsmem_exchange_from_python(view):
    k = tirx.compile(dsmem_exchange(view), target="sm_90a")
    assert "cp.async.bulk.shared::cluster.shared::cta" in k.cuda_source
    a = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float16)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, a)


def test_decl_buffer_over_a_narrower_dtype_is_an_error():
    with pytest.raises(tirx.TirxError, match="T.decl_buffer.*float32 over float16"):

        @T.prim_func
        def kernel(A: T.Buffer((64,), "float16")):
            T.device_entry()
            T.thread_id([32])
            pool = T.SMEMPool()
            raw = pool.alloc([64], "float16")
            V = T.decl_buffer((32,), "float32", raw.data)  # noqa: F841
            pool.commit()


def test_a_wrong_mbar_is_an_error_at_the_users_line():
    with pytest.raises(tirx.TirxError) as e:
        wrong_mbar()
    text = str(e.value)
    assert "test_async_syntax.py:" in text and "cannot hold mbarriers" in text
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if "│" in l and "mbar=S_.ptr_to" in l)
    assert "^" in lines[at + 1] and "not a barrier" in lines[at + 1]
    assert "MBarrier(pool, depth)" in text


def wrong_mbar():
    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 128), "float16")
        B = T.match_buffer(B_ptr, (64, 128), "float16")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        pool = T.SMEMPool()
        S_ = pool.alloc((64, 128), "float16")
        pool.commit()
        if tid == 0:
            Tx.copy_async(S_[0:64, 0:128], A[0:64, 0:128], dispatch="tma_auto", mbar=S_.ptr_to([0, 0]))
        Tx.cta.copy(B[0:64, 0:128], S_[0:64, 0:128])

    return tirx.compile(kernel, target="sm_90a")


def test_compat_lowers_one_dsmem_call_through_the_dispatcher():
    from tirx.compat import dispatch as d
    from tirx.layout import S, TileLayout

    def impl(shape, src, dst, config):
        a = d.decl_buffer(shape, "float16", "A", scope="shared.dyn", layout=TileLayout(src))
        b = d.decl_buffer(shape, "float16", "B", scope="shared.dyn", layout=TileLayout(dst))
        rng = [d.Range.from_min_extent(0, n) for n in shape]
        op = d.CopyAsync(d.BufferRegion(b, rng), d.BufferRegion(a, rng), config=config)
        sctx = d.DispatchContext(None, d.ExecScope("thread"))
        return d.impl_of("dsmem")(op, sctx)

    class Count(d.StmtExprVisitor):
        n = 0

        def visit_call_(self, op):
            Count.n += op.op.name == "tirx.ptx.cp_async_bulk_s2c"

    ok = impl((128, 64), S[128, 64], S[128, 64], {"mbar": d.Var("mbar", "handle"), "remote_cta_id": d.IntImm("int32", 1)})
    Count().visit_stmt(ok.body)
    assert Count.n == 1 and "cp.async.bulk.shared::cluster" in ok.kernel.cuda_source
    with pytest.raises(d.DispatchFail, match="remote_cta_id"):
        impl((64,), S[64], S[64], {"mbar": d.Var("mbar", "handle")})
    with pytest.raises(d.DispatchFail, match="dense"):
        impl((4, 64), S[4, 64], S[(4, 64):(1, 4)], {"mbar": d.Var("m", "handle"), "remote_cta_id": 1})


def test_compat_lowers_one_tma_load_through_the_dispatcher():
    from tirx.compat import dispatch as d
    from tirx.layout import S, TileLayout

    g = d.decl_buffer((64, 128), "float16", "A", layout=TileLayout(S[64, 128]))
    s = d.decl_buffer((64, 128), "float16", "A_smem", scope="shared.dyn", layout=TileLayout(S[64, 128]))
    rng = [d.Range.from_min_extent(0, 64), d.Range.from_min_extent(0, 128)]
    op = d.CopyAsync(d.BufferRegion(s, rng), d.BufferRegion(g, rng), config={"mbar": d.Var("mbar", "handle")})
    impl = d.impl_of("tma_auto")(op, d.DispatchContext(None, d.ExecScope("thread")))
    calls = [x.value.op.name for x in impl.body.seq if isinstance(x, d.Evaluate)]
    assert calls.count("tirx.ptx.cp_async_bulk_tensor_g2s_cluster") == 1
    with pytest.raises(NotImplementedError, match="launcher"):
        d.DispatchContext(None, d.ExecScope("thread")).callbacks.get("host_init_stmt", [])


def test_compat_tree_keeps_unrolled_loops_and_symbolic_ranges():
    from tirx.compat import dispatch as d

    lines = [
        "unroll for issue in 0..4 {",
        "  tma.load.2d A_smem[0]",
        "}",
        "for i in b..b + n {",
        "  if i < 3 {",
        "    cp.async.cg<16> S[i]",
        "  } else {",
        "    cta_sync",
        "  }",
        "}",
    ]
    tree = d._tree(lines)
    unrolled, loop = tree.seq
    assert isinstance(unrolled, d.For) and (unrolled.loop_var, unrolled.min, unrolled.extent) == ("issue", 0, 4)
    assert unrolled.body.seq[0].value.op.name == "tirx.ptx.cp_async_bulk_tensor_g2s_cluster"
    assert isinstance(loop, d.For) and (loop.min, loop.extent) == ("b", "n")
    # The if's two branches are walked through: both statements, once each.
    names = [s.value.op.name for s in loop.body.seq[0].seq]
    assert names == ["tirx.ptx.cp_async", "cta_sync"]
    with pytest.raises(tirx.TirxInternalError, match="neither `for` nor `if`"):
        d._tree(["while x {", "cta_sync", "}"])


def test_compat_call_block_counts_else_like_the_tree():
    from tirx.compat import dispatch as d

    lir = "\n".join(
        [
            "  // thread.copy_async -> tma_auto",
            "  if tid == 0 {",
            "    tma.load.2d S[0]",
            "  } else {",
            "    cta_sync",
            "  }",
            "  // warp.copy -> next",
            "  cta_sync",
        ]
    )
    block = d._call_block(lir, "tma_auto")
    assert [b.strip() for b in block] == ["if tid == 0 {", "tma.load.2d S[0]", "} else {", "cta_sync", "}"]


def test_compat_refuses_what_it_would_ignore():
    from tirx.compat import dispatch as d

    with pytest.raises(NotImplementedError, match="elem_offset"):
        d.decl_buffer((64,), "float16", "A", elem_offset=8)
    with pytest.raises(NotImplementedError, match="data="):
        d.decl_buffer((64,), "float16", "A", data=d.Var("p", "handle"))
    assert d.decl_buffer((64,), "float16", "A", elem_offset=0).elem_offset == 0
    with pytest.raises(NotImplementedError, match="exec scope 'cluster'"):
        d._threads(d.DispatchContext(None, d.ExecScope("cluster")))
    assert d._threads(d.DispatchContext(None, d.ExecScope("warp"))) == 32
