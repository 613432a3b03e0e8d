"""`tirx.ops.grouped_mm(a, b, offs)`: a mixture-of-experts layer's grouped GEMM as
`torch._grouped_mm` takes it: ``a`` (total_m, k) holds the groups' rows one after another, group
g's rows ``offs[g - 1]`` to ``offs[g]`` (int32 cumulative ends, ``offs[-1]`` at most total_m),
``b`` (groups, k, n) a matrix per group; ``out[rows of g] = a[rows of g] @ b[g]``, bf16/f16, float32
sums rounded once. Groups of any size, 0 included, in one launch; ``b`` row-major or column-major
(torch._grouped_mm's), read in place.

The kernel reads ``offs`` on the GPU (no host synchronisation): persistent CTAs (one per SM),
each a producer warpgroup and one or two consumers, walk the tiles (64 or 128 rows of one group x
128 or 256 columns, tuned); one thread sums the groups' tile counts into shared memory at the
start, and each tile's group is found by a binary search over them. The producer loads A's tile
(rows past the group's end belong to the next group or are TMA's zeros: computed, never stored)
and B[g]'s by TMA into a ring of stages; the consumers `wgmma` them and store their rows within
the group from registers; C's rows past ``offs[-1]`` are zeroed by the consumers afterwards
(C is allocated uninitialised: no memset of all of it). Its FP8 form is
`scaled_grouped_mm`; its backward dA by the same kernel, dB by `grouped_wgrad_kernel`."""

from typing import Optional

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from ..layout import mma_shared_layout, wgmma_acc_layout, wgmma_row_layout
from . import _common as c
from .matmul import _ctas as mm_ctas  # (persistent CTAs: one per SM; 2 in the simulator)

BM, BN = 64, 128  # the weight-gradient kernel's tile: 64 of k, 128 of n
EPILOGUE_BARRIER = 13  # (+ the consumer: its named barrier)
CONFIGS = [
    {"consumers": 2, "bn": 256},
    {"consumers": 2, "bn": 128},
    {"consumers": 1, "bn": 256},
    {"consumers": 1, "bn": 128},
]


def _prune(configs, dtype="", fast_accum=True, **_):
    """FP8 promoted (not ``fast_accum``): tiles of 128 columns (the accumulator and a step's
    partial in registers)."""
    promote = dtype.startswith("float8") and not fast_accum
    return [cfg for cfg in configs if not (promote and cfg["bn"] > 128)]


# Timed per size class of the rows of all groups (`_common.rows_class`): a mixture of experts' first
# call (a warm-up's few tokens) does not choose the tile for its later batches.
@autotune(configs=CONFIGS, key=["groups", "n", "k", "dtype", "ctas", "b_kmajor", "out_dtype", "fast_accum"], prune=_prune, size=c.rows_class)
def grouped_mm_kernel(
    groups: int, n: int, k: int, dtype: str, ctas: int, consumers: int, bn: int, b_kmajor: bool = False, out_dtype: str = "", fast_accum: bool = True
):
    """``C[rows of g] = A[rows of g] @ B[g]`` for ``groups`` groups (``A`` (total_m, k), ``C``
    (total_m, n), ``B`` (groups, k, n), or with ``b_kmajor`` its transpose (groups, n, k): a
    column-major b, as torch._grouped_mm takes it and experts' weights are stored; ``OFFS``
    (groups,) int32 cumulative ends; ``total_m`` a run-time size). ``ctas`` persistent CTAs of a
    producer warpgroup and ``consumers`` consumer warpgroups walk the tiles (``64 * consumers``
    rows of one group x ``bn`` columns; a group's tiles after those of the groups before it, the
    columns innermost): the producer's thread loads A's and B[g]'s K steps into a ring of
    swizzled stages with TMA, the consumers `wgmma` them (one step in flight) and store their
    rows within the group from registers (A's rows past the group belong to the next one or are
    TMA's zeros: computed, never stored), then zeros in C's rows past the last group. FP8
    (``dtype`` float8_e4m3fn or float8_e5m2; ``b_kmajor``, as wgmma takes 8-bit operands): torch._scaled_grouped_mm's row-wise scales, ``C
    = (A @ B[g]) SA[row] SB[g, col]`` in float32, rounded once to ``out_dtype`` (bfloat16 or
    float16); not ``fast_accum``, each 128 of K's product is added to the accumulator in float32
    registers (Hopper's FP8 wgmma accumulates with fewer bits), the other consumer's GEMMs
    filling the tensor cores meanwhile."""
    fp8 = dtype.startswith("float8")
    od = out_dtype or dtype
    if fp8 and (not b_kmajor or od not in ("bfloat16", "float16") or k % 16):
        raise ValueError(f"{dtype} operands: b K-major (b_kmajor), out_dtype bfloat16 or float16 (got {od!r}), K a multiple of 16")
    if not fp8 and od != dtype:
        raise ValueError(f"out_dtype {od!r}: 16-bit operands give their own dtype")
    if consumers not in (1, 2) or bn not in (128, 256):
        raise ValueError(f"consumers={consumers}, bn={bn}: 1 or 2 consumer warpgroups, tiles of 128 or 256 columns")
    promote = fp8 and not fast_accum
    if promote and bn > 128:
        raise ValueError(f"fast_accum=False: tiles of 128 columns (bn={bn}: its partials exceed the registers)")
    bm = 64 * consumers
    bk = 128 if fp8 else 64  # K per stage: a 128-byte swizzled row
    tn, kt_steps = -(-n // bn), -(-k // bk)
    stage_bytes = (bm + bn) * bk * c.elem_bytes(dtype)
    stages = min(8, (c.SMEM_BYTES - 2048 - 4 * (groups + 1 + 2 * consumers)) // stage_bytes)
    a_smem = mma_shared_layout(dtype, 3, (stages, bm, bk))
    b_shape = (stages, bn, bk) if b_kmajor else (stages, bk, bn)
    b_smem = mma_shared_layout(dtype, 3, b_shape)
    # B's box: whole tile rows where N is a whole number of 64-column swizzle atoms, else atom by
    # atom (each box's columns a dimension of N itself: the last may leave the matrix).
    b_boxes = ((0, bn),) if n % 64 == 0 else tuple((c0, 64) for c0 in range(0, bn, 64))
    acc_layout = wgmma_acc_layout(bn)
    producer_regs, consumer_regs = c.WARPGROUP_REGISTERS[consumers]

    def first_row(OFFS, g):  # group g's first row
        return T.if_then_else(g == 0, 0, OFFS[T.max(g - 1, 0)])

    def tile_row(OFFS, starts, g, t):  # tile t's first row (its m-tile, t // tn, within group g's)
        return first_row(OFFS, g) + (t // tn - starts[g]) * bm

    def in_range(x, hi):  # x, known to lie in [0, hi]: clamped so that the bounds checker sees it
        return T.min(T.max(x, 0), hi)

    search_steps = max(1, (groups - 1).bit_length())  # (a binary search over the groups)

    @T.macro
    def find_group(grp, hi, starts, mt):
        # grp[0] = the group of m-tile mt: the first g with starts[g + 1] > mt, found in
        # `search_steps` halvings of [grp[0], groups - 1] (a CTA's tiles come in order).
        hi[0] = groups - 1
        for _ in list(range(search_steps)):  # (unrolled)
            if starts[in_range((grp[0] + hi[0]) // 2 + 1, groups)] <= mt:
                grp[0] = (grp[0] + hi[0]) // 2 + 1
            else:
                hi[0] = (grp[0] + hi[0]) // 2

    @T.macro
    def load(A, B, A_s, B_s, full, g, m0, n0, kt, i):
        # K step kt of the tile into stage i % stages: A's rows from the tile's first, B[g]'s
        # (K-major: a box of bn rows of its transpose).
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([i % stages]), stage_bytes)
        Tx.copy_async(A_s[i % stages, 0:bm, 0:bk], A[m0 : m0 + bm, kt * bk : kt * bk + bk], dispatch="tma_auto", mbar=full.ptr_to([i % stages]))
        if b_kmajor:
            Tx.copy_async(B_s[i % stages, 0:bn, 0:bk], B[g, n0 : n0 + bn, kt * bk : kt * bk + bk], dispatch="tma_auto", mbar=full.ptr_to([i % stages]))
        else:
            for c0, cols in b_boxes:
                Tx.copy_async(B_s[i % stages, 0:bk, c0 : c0 + cols], B[g, kt * bk : kt * bk + bk, n0 + c0 : n0 + c0 + cols], dispatch="tma_auto", mbar=full.ptr_to([i % stages]))

    @T.macro
    def mma(acc, part, A_s, B_s, cw, i, kt):
        # K step kt (ring step i): acc += A B, or promoted: into the partial, waited for, added.
        if promote:
            Tx.warpgroup.gemm_async(part[0:64, 0:bn], A_s[i % stages, cw * 64 : cw * 64 + 64, 0:bk], B_s[i % stages, 0:bn, 0:bk])
            T.ptx.wgmma.wait_group(0)
            Tx.warpgroup.add(acc[0:64, 0:bn], acc[0:64, 0:bn], part[0:64, 0:bn])
        elif b_kmajor:
            Tx.warpgroup.gemm_async(acc[0:64, 0:bn], A_s[i % stages, cw * 64 : cw * 64 + 64, 0:bk], B_s[i % stages, 0:bn, 0:bk], accum=kt > 0)
        else:
            Tx.warpgroup.gemm_async(acc[0:64, 0:bn], A_s[i % stages, cw * 64 : cw * 64 + 64, 0:bk], B_s[i % stages, 0:bk, 0:bn], transB=True, accum=kt > 0)

    @T.macro
    def store(C, SA, SB, acc, out, srow, scol, g, row0, m_end, n0):
        # The consumer's 64 rows of the tile (those within its group), FP8's scales applied first;
        # 128 columns at a time (fewer live registers).
        if fp8:
            Tx.warpgroup.copy(srow[0:64, 0:1], SA[row0 : row0 + 64, 0:1], clip=True, other=0.0)
            Tx.warpgroup.copy(scol[0:1, 0:bn], SB[g : g + 1, n0 : n0 + bn], clip=True, other=0.0)
            Tx.warpgroup.mul(acc[0:64, 0:bn], acc[0:64, 0:bn], srow[0:64, 0:1])
            Tx.warpgroup.mul(acc[0:64, 0:bn], acc[0:64, 0:bn], scol[0:1, 0:bn])
        for h in list(range(bn // 128)):  # (unrolled)
            Tx.warpgroup.cast(out[0:64, h * 128 : h * 128 + 128], acc[0:64, h * 128 : h * 128 + 128])
            Tx.warpgroup.copy(
                C[row0 : row0 + 64, n0 + h * 128 : n0 + h * 128 + 128], out[0:64, h * 128 : h * 128 + 128], clip=True, mask=lambda i, j: row0 + i < m_end
            )

    @T.macro
    def zero_rows(C, zeros, row0, n0):
        # C[row0 : row0 + 64, n0 : n0 + bn] = 0 (rows past C's end clipped), 128 columns at a time.
        for h in list(range(bn // 128)):  # (unrolled)
            Tx.warpgroup.copy(C[row0 : row0 + 64, n0 + h * 128 : n0 + h * 128 + 128], zeros[0:64, h * 128 : h * 128 + 128], clip=True)

    @T.macro
    def body(A, B, OFFS, C, SA, SB, total_m):
        T.device_entry()
        bx = T.cta_id([ctas])
        wg = T.warpgroup_id([consumers + 1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128 * (consumers + 1)])
        pool = T.SMEMPool()
        A_s = pool.alloc((stages, bm, bk), dtype, layout=a_smem)
        B_s = pool.alloc(b_shape, dtype, layout=b_smem)
        # starts[g]: the m-tiles of the groups before g (starts[groups]: all of them)
        starts = pool.alloc((groups + 1,), "int32")
        group_of = pool.alloc((consumers, 2), "int32")  # each consumer's tile's group
        full = MBarrier(pool, stages)
        empty = MBarrier(pool, stages)
        pool.commit()
        full.init(1)  # the producer's expect_tx arrival (+ the stage's transaction bytes)
        empty.init(consumers)  # one arrival per consumer warpgroup
        if tid == 0:
            starts[0] = 0
            for g in T.serial(groups):
                starts[g + 1] = starts[g] + (OFFS[g] - first_row(OFFS, g) + bm - 1) // bm
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        tiles = starts[groups] * tn
        # (at most: each group's rows in whole tiles and one partial)
        rounds = (((total_m + bm - 1) // bm + groups) * tn + ctas - 1) // ctas
        grp = T.alloc_buffer((1,), "int32", scope="local")  # the group of the tile (and the search's bound)
        hi = T.alloc_buffer((1,), "int32", scope="local")
        grp[0] = 0
        acc = T.alloc_buffer((64, bn), "float32", scope="local", layout=acc_layout)
        out = T.alloc_buffer((64, bn), od, scope="local", layout=acc_layout)
        if promote:
            part = T.alloc_buffer((64, bn), "float32", scope="local", layout=acc_layout)
        srow = scol = None
        if fp8:  # the rows' and the columns' scales
            srow = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            scol = T.alloc_buffer((1, bn), "float32", scope="local", layout=c.acc_col_layout(bn))
        if wg == 0:
            T.ptx.setmaxnreg.dec(producer_regs)
            if tid == 0:
                for r in T.serial(rounds):
                    if r * ctas + bx < tiles:
                        find_group(grp, hi, starts, (r * ctas + bx) // tn)
                        m0 = tile_row(OFFS, starts, in_range(grp[0], groups - 1), r * ctas + bx)  # (a name: TMA's box starts there)
                        for kt in range(kt_steps):  # ring step i = r * kt_steps + kt
                            if r * kt_steps + kt >= stages:
                                empty.wait((r * kt_steps + kt) % stages, ((r * kt_steps + kt) // stages + 1) % 2)
                            load(A, B, A_s, B_s, full, in_range(grp[0], groups - 1), m0, (r * ctas + bx) % tn * bn, kt, r * kt_steps + kt)
        else:
            T.ptx.setmaxnreg.inc(consumer_regs)
            cw = wg - 1
            for r in T.serial(rounds):
                if r * ctas + bx < tiles:
                    # the tile's group, found by one thread, read by all from shared memory (a
                    # value the warpgroup agrees on; a slot per round's parity: the barrier of
                    # round r + 1 orders round r's reads before round r + 2's write)
                    if tid % 128 == 0:
                        find_group(grp, hi, starts, (r * ctas + bx) // tn)
                        group_of[cw, r % 2] = grp[0]
                    T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
                    if promote:
                        Tx.warpgroup.fill(acc[0:64, 0:bn], 0.0)
                    for kt in range(kt_steps):
                        full.wait((r * kt_steps + kt) % stages, ((r * kt_steps + kt) // stages) % 2)
                        mma(acc, part if promote else None, A_s, B_s, cw, r * kt_steps + kt, kt)
                        if promote:  # (the step waited for: its stage free)
                            if tid % 128 == 0:
                                empty.arrive((r * kt_steps + kt) % stages)
                        else:  # (the step before done: its stage free)
                            T.ptx.wgmma.wait_group(1)
                            if kt > 0:
                                if tid % 128 == 0:
                                    empty.arrive((r * kt_steps + kt - 1) % stages)
                    if not promote:
                        T.ptx.wgmma.wait_group(0)
                        if tid % 128 == 0:
                            empty.arrive((r * kt_steps + kt_steps - 1) % stages)
                    # (names: the store's region begins at them)
                    g = in_range(group_of[cw, r % 2], groups - 1)
                    row0 = tile_row(OFFS, starts, in_range(group_of[cw, r % 2], groups - 1), r * ctas + bx) + cw * 64
                    m_end = OFFS[in_range(group_of[cw, r % 2], groups - 1)]
                    store(C, SA, SB, acc, out, srow, scol, g, row0, m_end, (r * ctas + bx) % tn * bn)
            # C's rows past the last group (a's rows no group takes) are zeros: tiles of bm of them
            # x bn, tile z ctas + bx to the CTA in round z, each consumer its 64 rows (the caller
            # allocates C uninitialised: no memset of all of it).
            Tx.warpgroup.fill(out[0:64, 0:bn], 0.0)
            tail = OFFS[groups - 1]  # (a name: the zero tiles' regions begin at it)
            for z in T.serial(((total_m + bm - 1) // bm * tn + ctas - 1) // ctas):
                if z * ctas + bx < (total_m - tail + bm - 1) // bm * tn:
                    zero_rows(C, out, tail + (z * ctas + bx) // tn * bm + cw * 64, (z * ctas + bx) % tn * bn)

    if fp8:

        @T.prim_func
        def scaled_grouped_mm(A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, OFFS_ptr: T.handle, C_ptr: T.handle, total_m: T.int32):
            A = T.match_buffer(A_ptr, (total_m, k), dtype)
            B = T.match_buffer(B_ptr, (groups, n, k), dtype)  # (b transposed: K-major)
            SA = T.match_buffer(SA_ptr, (total_m, 1), "float32")
            SB = T.match_buffer(SB_ptr, (groups, n), "float32")
            OFFS = T.match_buffer(OFFS_ptr, (groups,), "int32")
            C = T.match_buffer(C_ptr, (total_m, n), od)
            body(A, B, OFFS, C, SA, SB, total_m)

        return scaled_grouped_mm

    @T.prim_func
    def grouped_mm(A_ptr: T.handle, B_ptr: T.handle, OFFS_ptr: T.handle, C_ptr: T.handle, total_m: T.int32):
        A = T.match_buffer(A_ptr, (total_m, k), dtype)
        B = T.match_buffer(B_ptr, (groups, n, k) if b_kmajor else (groups, k, n), dtype)
        OFFS = T.match_buffer(OFFS_ptr, (groups,), "int32")
        C = T.match_buffer(C_ptr, (total_m, n), dtype)
        body(A, B, OFFS, C, None, None, total_m)

    return grouped_mm


@autotune(configs=[{}], key=["groups", "k", "n", "dtype"])
def grouped_wgrad_kernel(groups: int, k: int, n: int, dtype: str):
    """``DB[g] = A[rows of g]ᵀ @ D[rows of g]`` (``A`` (total_m, k), ``D`` (total_m, n), ``DB``
    (groups, k, n); ``OFFS`` as `grouped_mm_kernel`'s): the weights' gradient of a grouped GEMM,
    summed over each group's rows (an empty group's 0). A CTA per group, 64 of k and 128 of n;
    per 64 rows of the group, A's and D's tiles through registers into shared memory (rows past
    the group's end 0: the next group's must add nothing), ``wgmma`` with A read M-major."""
    tk, tn = -(-k // BM), -(-n // BN)
    a_smem = mma_shared_layout(dtype, 3, (BM, BM))  # (rows, 64 of k): K x M, read transposed
    d_smem = mma_shared_layout(dtype, 3, (BM, BN))  # (rows, 128 of n): K x N, N-major

    @T.prim_func
    def grouped_wgrad(A_ptr: T.handle, D_ptr: T.handle, OFFS_ptr: T.handle, DB_ptr: T.handle, total_m: T.int32):
        A = T.match_buffer(A_ptr, (total_m, k), dtype)
        D = T.match_buffer(D_ptr, (total_m, n), dtype)
        OFFS = T.match_buffer(OFFS_ptr, (groups,), "int32")
        DB = T.match_buffer(DB_ptr, (groups, k, n), dtype)
        T.device_entry()
        bx = T.cta_id([groups * tk * tn])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        T.thread_id([128])
        pool = T.SMEMPool()
        A_s = pool.alloc((BM, BM), dtype, layout=a_smem)
        D_s = pool.alloc((BM, BN), dtype, layout=d_smem)
        pool.commit()
        grp = bx // (tk * tn)
        k0 = bx // tn % tk * BM
        n0 = bx % tn * BN
        start = T.if_then_else(grp == 0, 0, OFFS[T.max(grp - 1, 0)])
        end = OFFS[grp]
        acc = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        a_r = T.alloc_buffer((BM, BM), dtype, scope="local", layout=wgmma_acc_layout(BM))
        d_r = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        out = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        Tx.warpgroup.fill(acc[0:BM, 0:BN], 0.0)
        for s in T.serial((end - start + BM - 1) // BM):
            Tx.warpgroup.copy(a_r[0:BM, 0:BM], A[start + s * BM : start + s * BM + BM, k0 : k0 + BM], clip=True, mask=lambda i, j: start + s * BM + i < end, other=0.0)
            Tx.warpgroup.copy(d_r[0:BM, 0:BN], D[start + s * BM : start + s * BM + BM, n0 : n0 + BN], clip=True, mask=lambda i, j: start + s * BM + i < end, other=0.0)
            Tx.warpgroup.copy(A_s[0:BM, 0:BM], a_r[0:BM, 0:BM])  # (the step before's wgmma read them: each thread waited)
            Tx.warpgroup.copy(D_s[0:BM, 0:BN], d_r[0:BM, 0:BN])
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            Tx.warpgroup.gemm_async(acc[0:BM, 0:BN], A_s[0:BM, 0:BM], D_s[0:BM, 0:BN], transA=True, transB=True, accum=True)
            T.ptx.wgmma.wait_group(0)
        Tx.warpgroup.cast(out[0:BM, 0:BN], acc[0:BM, 0:BN])
        Tx.warpgroup.copy(DB[grp, k0 : k0 + BM, n0 : n0 + BN], out[0:BM, 0:BN], clip=True)

    return grouped_wgrad


def _check(a, b, offs, fp8: bool = False):
    name = "tirx.ops.scaled_grouped_mm" if fp8 else "tirx.ops.grouped_mm"
    if len(a.shape) != 2 or len(b.shape) != 3:
        raise NotImplementedError(
            f"{name}: a of shape {list(a.shape)}, b {list(b.shape)}; the kernel takes a 2-D a (total_m, k) of the groups' rows and a 3-D b "
            "(groups, k, n), torch._grouped_mm's mixture-of-experts form (3-D a and 2-D b: not yet)"
        )
    da, db = c.dtype_name(a), c.dtype_name(b)
    if da != db or (da not in ("bfloat16", "float16") and not fp8):
        raise TypeError(f"{name}: a is {da}, b {db}; both bfloat16 or both float16 (FP8: scaled_grouped_mm)")
    (tm, k), (g, k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"{name}: a (total_m, k) = {list(a.shape)} and b (groups, k, n) = {list(b.shape)}: k differs")
    if offs is None or tuple(offs.shape) != (g,) or c.dtype_name(offs) != "int32":
        got = "None" if offs is None else f"{list(offs.shape)} {c.dtype_name(offs)}"
        raise ValueError(f"{name}: offs must be int32 of shape [{g}] (the groups' cumulative row ends); got {got}")
    if n % 8 or k % 8:
        raise ValueError(f"{name}: n = {n}, k = {k}; TMA needs 16-byte row strides: n and k multiples of 8")
    if not c.is_torch(offs):  # (NumPy: checked here; on a GPU reading them would synchronise)
        o = np.asarray(offs, np.int64)
        if (np.diff(o) < 0).any() or (g and (o[0] < 0 or o[-1] > tm)):
            raise ValueError(f"{name}: offs {o.tolist()} must be non-decreasing cumulative ends within a's {tm} rows")
    return tm, k, g, n, da


def _grouped_mm(a, b, offs):
    tm, k, g, n, dtype = _check(a, b, offs)
    if tm == 0 or n == 0 or k == 0 or g == 0:
        return c.new_array(a, (tm, n), fill=0)
    out = c.new_array(a, (tm, n))  # (the kernel writes every row: the rows past the groups' zeros)
    # A column-major b (each group's matrix stored n x k, as torch._grouped_mm takes it) is read
    # in place, K-major; any other layout is made row-major.
    kmajor = c.strides(b)[1:] == (1, k) and k > 1
    bt = b.transpose(1, 2) if c.is_torch(b) else np.swapaxes(b, 1, 2)
    a, offs = c.contiguous(a), c.contiguous(offs)
    b = c.contiguous(bt) if kmajor else c.contiguous(b)
    grouped_mm_kernel(groups=g, n=n, k=k, dtype=dtype, ctas=mm_ctas(a), b_kmajor=kmajor)(a, b, offs, out, tm)
    return out


def _scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype: str, use_fast_accum: bool):
    name = "tirx.ops.scaled_grouped_mm"
    da, db = c.dtype_name(a), c.dtype_name(b)
    if da not in c.FP8 or db != da:
        raise TypeError(f"{name}: a is {da}, b {db}; both float8_e4m3fn or both float8_e5m2 (16-bit operands: grouped_mm)")
    if out_dtype not in ("bfloat16", "float16"):
        raise TypeError(f"{name}: out_dtype {out_dtype}; bfloat16 or float16")
    if len(a.shape) != 2 or len(b.shape) != 3 or a.shape[1] != b.shape[1]:
        raise ValueError(f"{name}: a (total_m, k) and b (groups, k, n); got {list(a.shape)} and {list(b.shape)}")
    (tm, k), (g, _, n) = a.shape, b.shape
    if k % 16 or n % 16:
        raise ValueError(f"{name}: k = {k}, n = {n}; FP8 TMA rows: multiples of 16")
    if g and k > 1 and c.strides(b)[1:] != (1, k):
        raise ValueError(f"{name}: b must be column-major per group (each group's matrix stored n x k, as torch._scaled_grouped_mm takes it): pass b.transpose(1, 2).contiguous().transpose(1, 2)")
    for what, t, shape in (("scale_a", scale_a, (tm,)), ("scale_b", scale_b, (g, n))):
        if tuple(t.shape) != shape or c.dtype_name(t) != "float32":
            raise ValueError(f"{name}: {what} of shape {list(t.shape)} ({c.dtype_name(t)}); float32 of shape {list(shape)} (row-wise scales)")
    _check(a, b, offs, fp8=True)
    if tm == 0 or n == 0 or k == 0 or g == 0:
        return c.new_array(a, (tm, n), out_dtype, 0)
    out = c.new_array(a, (tm, n), out_dtype)  # (the kernel writes every row)
    bt = b.transpose(1, 2) if c.is_torch(b) else np.swapaxes(b, 1, 2)  # (groups, n, k), contiguous
    sa = c.contiguous(scale_a).reshape(tm, 1)
    kern = grouped_mm_kernel(groups=g, n=n, k=k, dtype=da, ctas=mm_ctas(a), b_kmajor=True, out_dtype=out_dtype, fast_accum=bool(use_fast_accum))
    kern(c.contiguous(a), c.contiguous(bt), sa, c.contiguous(scale_b), c.contiguous(offs), out, tm)
    return out


def scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, *, out_dtype=None, use_fast_accum: bool = False):
    """``torch._scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype=out_dtype,
    use_fast_accum=use_fast_accum)`` for FP8 (e4m3 or e5m2) a 2-D ``a`` (total_m, k) of the
    groups' rows and a 3-D ``b`` (groups, k, n), column-major per group (each group's matrix
    stored n x k, read in place): row-wise scales, ``scale_a`` (total_m,) and ``scale_b``
    (groups, n) float32, ``out[rows of g] = (a[rows of g] @ b[g]) * scale_a[row] *
    scale_b[g, col]`` in float32, rounded once to ``out_dtype`` (bfloat16, the default, or
    float16). Unless ``use_fast_accum``, each 128 of K is added to the float32 accumulator in
    registers (Hopper's FP8 tensor cores accumulate with fewer bits). No backward; the registered
    op `torch.ops.tirx.scaled_grouped_mm` under torch.compile."""
    od = "bfloat16" if out_dtype is None else str(out_dtype).replace("torch.", "")
    if c.is_torch(a):
        c.refuse_grad("scaled_grouped_mm", a, b)
        if c.compiling():
            return register_scaled_torch_op()(a, b, scale_a, scale_b, offs, od, bool(use_fast_accum))
        return _scaled_grouped_mm(a, b, scale_a, scale_b, offs, od, use_fast_accum)
    args = [None if t is None else np.asarray(t) for t in (a, b, scale_a, scale_b, offs)]
    return _scaled_grouped_mm(*args, od, use_fast_accum)


def register_scaled_torch_op():
    """`torch.ops.tirx.scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype, use_fast_accum)`
    (registered on the first call; ``out_dtype`` a dtype name)."""
    return c.torch_op("scaled_grouped_mm", _scaled_torch_op_parts)


def _scaled_torch_op_parts():
    import torch

    def schema(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, offs: torch.Tensor, out_dtype: str, use_fast_accum: bool) -> torch.Tensor:
        return _scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype, use_fast_accum)

    def fake(a, b, scale_a, scale_b, offs, out_dtype, use_fast_accum):
        return a.new_empty((a.shape[0], b.shape[2]), dtype=getattr(torch, out_dtype))

    return schema, fake


def _grouped_wgrad(a, d, offs):
    """``db[g] = a[rows of g]ᵀ @ d[rows of g]`` (groups, k, n): `grouped_wgrad_kernel`."""
    (tm, k), n, g = a.shape, d.shape[1], offs.shape[0]
    db = c.new_array(a, (g, k, n), fill=0)
    if tm and g and k and n:
        grouped_wgrad_kernel(groups=g, k=k, n=n, dtype=c.dtype_name(a))(c.contiguous(a), c.contiguous(d), c.contiguous(offs), db, tm)
    return db


def _wgrad_parts():
    import torch

    def schema(a: torch.Tensor, d: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return _grouped_wgrad(a, d, offs)

    def fake(a, d, offs):
        return a.new_empty((offs.shape[0], a.shape[1], d.shape[1]))

    return schema, fake


def _grouped_autograd(op):
    """dA[rows of g] = dC[rows of g] @ B[g]ᵀ (this kernel, B's transpose read in place: its other
    major order) and dB[g] = A[rows of g]ᵀ @ dC[rows of g] (`grouped_wgrad_kernel`); rows outside
    every group get 0."""
    c.torch_op("grouped_mm_wgrad", _wgrad_parts)  # (now, outside any trace: under torch.compile the backward calls it)

    def setup_context(ctx, inputs, output):
        a, b, offs = inputs
        ctx.save_for_backward(a, b, offs)

    def backward(ctx, dc):
        a, b, offs = ctx.saved_tensors
        dc = dc.contiguous()
        da = c.inner_op("grouped_mm", _torch_op_parts, _grouped_autograd)(dc, b.transpose(1, 2), offs) if ctx.needs_input_grad[0] else None
        db = c.inner_op("grouped_mm_wgrad", _wgrad_parts)(a, dc, offs) if ctx.needs_input_grad[1] else None
        return da, db, None

    op.register_autograd(backward, setup_context=setup_context)


def register_torch_op():
    """`torch.ops.tirx.grouped_mm(a, b, offs)` (registered on the first call), differentiable in
    a and b."""
    return c.torch_op("grouped_mm", _torch_op_parts, _grouped_autograd)


def _torch_op_parts():
    import torch

    def schema(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return _grouped_mm(a, b, offs)

    def fake(a, b, offs):
        _check(a, b, offs)
        return a.new_empty((a.shape[0], b.shape[2]))

    return schema, fake


def grouped_mm(a, b, offs=None, *, out_dtype: Optional[object] = None):
    """``torch._grouped_mm(a, b, offs)`` for a 2-D ``a`` (total_m, k) of the groups' rows and a 3-D
    ``b`` (groups, k, n): group g's rows ``offs[g - 1]:offs[g]`` (``offs`` int32 cumulative ends,
    non-decreasing, the last at most total_m) times ``b[g]``; bf16/f16, float32 sums rounded once,
    a new (total_m, n) array or tensor; rows past ``offs[-1]`` are 0. A column-major ``b`` (each
    group's matrix stored n x k: torch._grouped_mm's layout, experts' weights transposed) is read
    in place, as is a row-major one; others are copied. Tensors on a GPU are not checked for
    ``offs``' order (that would synchronise). Differentiable in ``a`` and ``b`` (`loss.backward()`,
    also under torch.compile): dA by this kernel, dB by `grouped_wgrad_kernel`."""
    if out_dtype is not None and str(out_dtype).replace("torch.", "") != c.dtype_name(a):
        raise TypeError(f"tirx.ops.grouped_mm: out_dtype {out_dtype} differs from the operands' dtype; only theirs is supported yet")
    if c.is_torch(a):
        if c.compiling() or c.wants_grad(a) or c.wants_grad(b):  # (with its backward)
            return c.differentiable("grouped_mm", _torch_op_parts, _grouped_autograd)(a, b, offs)
        return _grouped_mm(a, b, offs)
    return _grouped_mm(np.asarray(a), np.asarray(b), None if offs is None else np.asarray(offs))
