"""`tirx.ops.grouped_mm(a, b, offs)`: a mixture-of-experts layer's grouped GEMM as
`torch._grouped_mm` takes it: ``a`` (total_m, k) holds the groups' rows one after another, group
g's rows ``offs[g - 1]`` to ``offs[g]`` (int32 cumulative ends, ``offs[-1]`` at most total_m),
``b`` (groups, k, n) a matrix per group; ``out[rows of g] = a[rows of g] @ b[g]``, bf16/f16, float32
sums rounded once. Groups of any size, 0 included, in one launch; ``b`` row-major or column-major
(torch._grouped_mm's), read in place.

The kernel reads ``offs`` on the GPU (no host synchronisation): a CTA per 64-row tile of a group
and 128 columns, the grid sized for the most tiles the rows can make (``total_m / 64`` rounded up,
plus one partial tile per group), each CTA finding its group by scanning the cumulative ends (CTAs
past the last tile exit). One warpgroup: A's tile (rows past the group's end belong to the next
group or are TMA's zeros: computed, never stored) and B's by TMA into a ring of stages loaded
``stages - 1`` ahead, `wgmma` from shared memory, the tile stored from registers within its
group's rows. Rows of ``a`` past ``offs[-1]`` give zero rows. Its FP8 form is `scaled_grouped_mm`;
its backward dA by the same kernel, dB by `grouped_wgrad_kernel`."""

from typing import Optional

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from ..layout import mma_shared_layout, wgmma_acc_layout, wgmma_row_layout
from . import _common as c

BM, BN = 64, 128  # a tile's rows, its columns
STAGES = 4


@autotune(configs=[{}], key=["groups", "n", "k", "dtype", "b_kmajor", "out_dtype", "fast_accum"])
def grouped_mm_kernel(groups: int, n: int, k: int, dtype: str, b_kmajor: bool = False, out_dtype: str = "", fast_accum: bool = True):
    """``C[rows of g] = A[rows of g] @ B[g]`` for ``groups`` groups (``A`` (total_m, k), ``C``
    (total_m, n), ``B`` (groups, k, n), or with ``b_kmajor`` its transpose (groups, n, k): a
    column-major b, as torch._grouped_mm takes it and experts' weights are stored; ``OFFS``
    (groups,) int32 cumulative ends; ``total_m`` a run-time size, the grid ``max_tiles * ceil(n /
    128)`` CTAs for ``max_tiles`` = ceil(total_m / 64) + groups). FP8 (``dtype`` float8_e4m3fn or
    float8_e5m2; ``b_kmajor``, as wgmma takes 8-bit operands): torch._scaled_grouped_mm's
    row-wise scales, ``C = (A @ B[g]) SA[row] SB[g, col]`` in float32, rounded once to
    ``out_dtype`` (bfloat16 or float16); not ``fast_accum``, each 128 of K's product is added to
    the accumulator in float32 registers (Hopper's FP8 wgmma accumulates with fewer bits)."""
    fp8 = dtype.startswith("float8")
    od = out_dtype or dtype
    if fp8 and (not b_kmajor or od not in ("bfloat16", "float16") or k % 16):
        raise ValueError(f"{dtype} operands: b K-major (b_kmajor), out_dtype bfloat16 or float16 (got {od!r}), K a multiple of 16")
    if not fp8 and od != dtype:
        raise ValueError(f"out_dtype {od!r}: 16-bit operands give their own dtype")
    promote = fp8 and not fast_accum
    bk = 128 if fp8 else 64  # K per stage: a 128-byte swizzled row
    tn, kt_steps = -(-n // BN), -(-k // bk)
    a_smem = mma_shared_layout(dtype, 3, (STAGES, BM, bk))
    b_shape = (STAGES, BN, bk) if b_kmajor else (STAGES, bk, BN)
    b_smem = mma_shared_layout(dtype, 3, b_shape)
    # B's box: whole tile rows where N is a whole number of 64-column swizzle atoms, else atom by
    # atom (each box's columns a dimension of N itself: the last may leave the matrix).
    b_boxes = ((0, BN),) if n % 64 == 0 else tuple((c0, 64) for c0 in range(0, BN, 64))
    stage_bytes = (BM + BN) * bk * c.elem_bytes(dtype)

    @T.macro
    def load(A, B, A_s, B_s, full, grp, m0, n0, kt):
        # K step kt of the tile into stage kt % STAGES: A's rows from the tile's first, B's of its
        # group (K-major: a box of BN rows of its transpose).
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([kt % STAGES]), stage_bytes)
        Tx.copy_async(A_s[kt % STAGES, 0:BM, 0:bk], A[m0 : m0 + BM, kt * bk : kt * bk + bk], dispatch="tma_auto", mbar=full.ptr_to([kt % STAGES]))
        if b_kmajor:
            Tx.copy_async(B_s[kt % STAGES, 0:BN, 0:bk], B[grp, n0 : n0 + BN, kt * bk : kt * bk + bk], dispatch="tma_auto", mbar=full.ptr_to([kt % STAGES]))
        else:
            for c0, cols in b_boxes:
                Tx.copy_async(B_s[kt % STAGES, 0:bk, c0 : c0 + cols], B[grp, kt * bk : kt * bk + bk, n0 + c0 : n0 + c0 + cols], dispatch="tma_auto", mbar=full.ptr_to([kt % STAGES]))

    @T.macro
    def body(A, B, OFFS, C, SA, SB, total_m):
        T.device_entry()
        bx = T.cta_id([((total_m + BM - 1) // BM + groups) * tn])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        A_s = pool.alloc((STAGES, BM, bk), dtype, layout=a_smem)
        B_s = pool.alloc(b_shape, dtype, layout=b_smem)
        full = MBarrier(pool, STAGES)
        pool.commit()
        full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        # This CTA's tile (group, first row, the group's end; group -1 past the last tile), found
        # by one thread scanning the cumulative ends (the m-tiles of group g follow those of
        # groups 0..g-1) into shared memory: values the whole CTA agrees on.
        tile = T.alloc_buffer((4,), "int32", scope="shared")  # (the 4th: the m-tiles scanned)
        mt = bx // tn
        n0 = bx % tn * BN
        if tid == 0:
            tile[0] = -1
            tile[1] = 0
            tile[2] = 0
            tile[3] = 0
            for g in T.serial(groups):
                start = T.if_then_else(g == 0, 0, OFFS[T.max(g - 1, 0)])
                count = (OFFS[g] - start + BM - 1) // BM
                if tile[0] < 0:
                    if mt < tile[3] + count:
                        tile[0] = g
                        tile[1] = start + (mt - tile[3]) * BM
                        tile[2] = OFFS[g]
                tile[3] = tile[3] + count
        T.cuda.cta_sync()
        grp = tile[0]
        m0 = tile[1]
        m_end = tile[2]
        acc = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        out = T.alloc_buffer((BM, BN), od, scope="local", layout=wgmma_acc_layout(BN))
        if promote:  # a K step's product, added to the accumulator in float32 once waited for
            part = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        if fp8:  # the rows' and the columns' scales
            srow = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
            scol = T.alloc_buffer((1, BN), "float32", scope="local", layout=c.acc_col_layout(BN))
        if grp >= 0:
            if tid == 0:  # the first stages - 1 K steps
                for kt in T.serial(T.min(kt_steps, STAGES - 1)):
                    load(A, B, A_s, B_s, full, grp, m0, n0, kt)
            Tx.warpgroup.fill(acc[0:BM, 0:BN], 0.0)
            for kt in T.serial(kt_steps):
                if tid == 0:  # K step kt + stages - 1 into the stage step kt - 1 read (waited for)
                    for u in T.serial(T.min(kt_steps - kt - (STAGES - 1), 1)):
                        load(A, B, A_s, B_s, full, grp, m0, n0, kt + STAGES - 1)
                full.wait(kt % STAGES, (kt // STAGES) % 2)
                if promote:  # (K-major both) the step's product into its partial, waited for, added
                    Tx.warpgroup.gemm_async(part[0:BM, 0:BN], A_s[kt % STAGES, 0:BM, 0:bk], B_s[kt % STAGES, 0:BN, 0:bk])
                    T.ptx.wgmma.wait_group(0)
                    Tx.warpgroup.add(acc[0:BM, 0:BN], acc[0:BM, 0:BN], part[0:BM, 0:BN])
                elif b_kmajor:
                    Tx.warpgroup.gemm_async(acc[0:BM, 0:BN], A_s[kt % STAGES, 0:BM, 0:bk], B_s[kt % STAGES, 0:BN, 0:bk], accum=True)
                    T.ptx.wgmma.wait_group(0)
                else:
                    Tx.warpgroup.gemm_async(acc[0:BM, 0:BN], A_s[kt % STAGES, 0:BM, 0:bk], B_s[kt % STAGES, 0:bk, 0:BN], transB=True, accum=True)
                    T.ptx.wgmma.wait_group(0)
            if fp8:  # the row-wise scales, in float32 (rows past the group's: never stored)
                Tx.warpgroup.copy(srow[0:BM, 0:1], SA[m0 : m0 + BM, 0:1], clip=True, other=0.0)
                Tx.warpgroup.copy(scol[0:1, 0:BN], SB[grp : grp + 1, n0 : n0 + BN], clip=True, other=0.0)
                Tx.warpgroup.mul(acc[0:BM, 0:BN], acc[0:BM, 0:BN], srow[0:BM, 0:1])
                Tx.warpgroup.mul(acc[0:BM, 0:BN], acc[0:BM, 0:BN], scol[0:1, 0:BN])
            Tx.warpgroup.cast(out[0:BM, 0:BN], acc[0:BM, 0:BN])
            Tx.warpgroup.copy(C[m0 : m0 + BM, n0 : n0 + BN], out[0:BM, 0:BN], clip=True, mask=lambda i, j: m0 + i < m_end)

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
    out = c.new_array(a, (tm, n), fill=0)
    if tm == 0 or n == 0 or k == 0 or g == 0:
        return out
    # A column-major b (each group's matrix stored n x k, as torch._grouped_mm takes it) is read
    # in place, K-major; any other layout is made row-major.
    kmajor = c.strides(b)[1:] == (1, k) and k > 1
    bt = b.transpose(1, 2) if c.is_torch(b) else np.swapaxes(b, 1, 2)
    a, offs = c.contiguous(a), c.contiguous(offs)
    b = c.contiguous(bt) if kmajor else c.contiguous(b)
    grouped_mm_kernel(groups=g, n=n, k=k, dtype=dtype, b_kmajor=kmajor)(a, b, offs, out, tm)
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
    out = c.new_array(a, (tm, n), out_dtype, 0)
    if tm == 0 or n == 0 or k == 0 or g == 0:
        return out
    bt = b.transpose(1, 2) if c.is_torch(b) else np.swapaxes(b, 1, 2)  # (groups, n, k), contiguous
    sa = c.contiguous(scale_a).reshape(tm, 1)
    kern = grouped_mm_kernel(groups=g, n=n, k=k, dtype=da, b_kmajor=True, out_dtype=out_dtype, fast_accum=bool(use_fast_accum))
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
