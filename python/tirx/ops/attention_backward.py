"""`tirx.ops.scaled_dot_product_attention_backward(dout, q, k, v, out, lse, is_causal=False,
scale=None, enable_gqa=False, deterministic=None, attn_mask=None)` → ``(dq, dk, dv)``:
attention's backward on Hopper's tensor cores, written in TIRx, from the forward's output and
log-sum-exp (`scaled_dot_product_attention(..., return_lse=True)`), in one of two pipelines.
FlashAttention-3's: `attention_dd_kernel` (D = rowsum(dO ∘ O)), the dK / dV kernel below also
adding each step's dS K into a float32 dQ accumulator by a TMA reduction
(`attention_dkv_kernel(reduce_dq=True)`: no kernel recomputes S and dP for dQ; tuned between a
CTA of 64 keys, one warpgroup with one Q / dO stage so that two CTAs share an SM, and the
warp-specialised CTA of 128 keys of `_dkv_ws`), `attention_dq_convert_kernel` (dQ's scale and
rounding). Or, as
FlashAttention-2 splits it, two kernels that need no reductions (the result the same every run;
`deterministic=True`, and where measured faster: `_reduce_dq`):

* `attention_dq_kernel`, a CTA per 64 query rows of a head: D = rowsum(dO ∘ O) (written for the
  other kernel), then per K/V tile S = Q Kᵀ (Q from registers), P = exp2(S c − lse log2 e) (the
  forward's weights, rebuilt from its log-sum-exp), dP = dO Vᵀ (dO from registers), dS = P ∘ (dP
  − D), dQ += dS K (dS from registers: the accumulator's layout is the A fragment's); K and V
  tiles by TMA into two stages, loaded one tile ahead.
* `attention_dkv_kernel`, a CTA per 64 keys of a K/V head: K and V once, then per query tile of
  each query head of its group (grouped-query heads' gradients summed in registers) S, P, dP and
  dS as above (Q and dO by TMA, one tile ahead), dV += Pᵀ dO and dK += dSᵀ Q with P and dS
  rounded into shared memory and read transposed (`transA`).

Both are one warpgroup (the simulator checks every wait and fence: a wgmma the warpgroup waited
for has read its shared operands, so a stage is refilled without a barrier); past head dim 128 the
dQ kernel reads Q and dO from shared memory and the dK / dV kernel is two warpgroups, each with
half of dK's and dV's columns (the first computing S, dP, P and dS for both). P and dS are rounded
to the inputs' dtype for the tensor cores (as FlashAttention's), every sum is float32, each
gradient rounded once. Causal: PyTorch's ``is_causal`` (key j <= query i + ``offset``), the
tiles wholly above the diagonal skipped. Packed sequences (`varlen_attention_backward`): the same
two kernels over (total, heads, d) tensors, each CTA's sequence from the cumulative ends, its
rows and statistics moved by masked copies."""

import math
from typing import Optional

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from ..layout import R, S, TileLayout, mma_shared_layout, tx, wgmma_acc_layout, wgmma_row_layout
from . import _common as c
from .attention import HEAD_DIMS, LOG2E, _check, _dense, _heads_rows, _mask, _swap, causal_section, mask_index, mask_matrices, seq_major

# A row that saw no key (its log-sum-exp -inf: a causal diagonal below it, an empty sequence) has
# -lse log2 e = +inf, which would make its masked scores exp2(-inf + inf) = NaN: capped at float32's
# largest, its weights are exp2(-inf) = 0, as its gradients (FlashAttention's lse = +inf there).
FLT_MAX = 3.4028234663852886e38

BN = 64  # keys a K/V tile
BM = 64  # query rows a tile


def d_rows(seq_q: int) -> int:
    """D's rows a head: ``seq_q`` in whole query tiles (every tile writes its rows)."""
    return -(-seq_q // BM) * BM


class _Heads:
    """How the backward's per-head matrices — Q, K, V, O, dO and the gradients dQ, dK, dV — are
    stored: as ``(batch * n_heads, seq, d)``, or ``seq_major`` [batch, seq, heads, d] (the
    forward's seq-major tensors: a projection's (batch, seq, heads * d) output transposed, read
    and written in place, as the forward reads them and as it writes its output)."""

    def __init__(self, seq_major: bool, batch: int, d: int):
        self.seq_major, self.batch, self.d = seq_major, batch, d

    def shape(self, n_heads: int, seq: int) -> tuple:
        return (self.batch, seq, n_heads, self.d) if self.seq_major else (self.batch * n_heads, seq, self.d)

    def rows(self, X, head, n_heads: int, r0, n: int, c0=0, cols: int = 0):
        """Rows ``[r0, r0 + n)`` and columns ``[c0, c0 + cols)`` (all: ``cols`` 0) of head ``head``
        (of ``batch * n_heads``) of ``X``."""
        cols = cols or self.d
        if self.seq_major:
            return X[head // n_heads, r0 : r0 + n, head % n_heads, c0 : c0 + cols]
        return X[head, r0 : r0 + n, c0 : c0 + cols]


def _row(q0, tid, hf):
    """The query row of register ``hf`` of thread ``tid`` in a `wgmma_row_layout` statistic."""
    return q0 + tid // 32 * 16 + tid % 32 // 4 + 8 * hf


def _check_mask(mask: str, varlen: bool, causal: bool):
    if mask not in ("", "one", "batch", "heads", "all") or (mask and (varlen or causal)):
        raise ValueError(f"mask: {mask!r}; one of '' (none), 'one', 'batch', 'heads', 'all', not with varlen or causal (as the forward's)")


def _masked(mask: str, M, bh, heads: int, tile, scale: float):
    """`_weights_and_ds`'s ``masked`` for query head ``bh`` (None without a mask)."""
    return (M, mask_index(mask, bh, heads), tile, scale) if mask else None


def _weights_and_ds(s, dp, lse2, dd, k0, q0, seq_k, causal, offset, scale_log2, masked=None):
    """From S and dP (waited for): P = exp2(S c + lse2) in ``s`` (keys past the sequence and,
    causal, after the query weigh 0) and dS = P ∘ (dP − D) in ``dp`` (a kernel's statements).
    ``masked``: ``(M, mi, tile, scale)``, the forward's additive mask: S += M[mi]'s tile / scale
    first (staged in the 16-bit register ``tile``; outside the matrix -inf), as the forward adds it."""
    if masked is not None:
        M, mi, tile, scale = masked
        Tx.warpgroup.copy(tile[0:BM, 0:BN], M[mi, q0 : q0 + BM, k0 : k0 + BN], clip=True, other=float("-inf"))
        Tx.warpgroup.fma(s[0:BM, 0:BN], tile[0:BM, 0:BN], 1.0 / scale, s[0:BM, 0:BN])
    if causal:
        Tx.warpgroup.masked_fill(s[0:BM, 0:BN], s[0:BM, 0:BN], lambda i, j: j > T.min(seq_k - 1, q0 + i + offset) - k0, float("-inf"))
    else:
        Tx.warpgroup.masked_fill(s[0:BM, 0:BN], s[0:BM, 0:BN], lambda i, j: j >= seq_k - k0, float("-inf"))
    Tx.warpgroup.fma(s[0:BM, 0:BN], s[0:BM, 0:BN], scale_log2, lse2[0:BM, 0:1])
    Tx.warpgroup.exp2(s[0:BM, 0:BN], s[0:BM, 0:BN])
    Tx.warpgroup.sub(dp[0:BM, 0:BN], dp[0:BM, 0:BN], dd[0:BM, 0:1])
    Tx.warpgroup.mul(dp[0:BM, 0:BN], dp[0:BM, 0:BN], s[0:BM, 0:BN])


@T.macro
def _dq_step(j, s, dp, ds, dq, q_src, do_src, K_s, V_s, full, lse2, dd, q0, n_keys, causal, diag, scale_log2, d, masked):
    # K/V tile j (stage j % 2): S = Q Kᵀ and dP = dO Vᵀ (Q and dO from registers or shared
    # memory), P and dS (a mask's tile staged in dS's registers), dQ += dS K with dS from registers.
    full.wait(j % 2, (j // 2) % 2)
    Tx.warpgroup.gemm_async(s[0:BM, 0:BN], q_src[0:BM, 0:d], K_s[j % 2, 0:BN, 0:d])
    Tx.warpgroup.gemm_async(dp[0:BM, 0:BN], do_src[0:BM, 0:d], V_s[j % 2, 0:BN, 0:d])
    T.ptx.wgmma.wait_group(0)
    _weights_and_ds(s, dp, lse2, dd, j * BN, q0, n_keys, causal, diag, scale_log2, masked)
    Tx.warpgroup.cast(ds[0:BM, 0:BN], dp[0:BM, 0:BN])
    Tx.warpgroup.gemm_async(dq[0:BM, 0:d], ds[0:BM, 0:BN], K_s[j % 2, 0:BN, 0:d], transB=True, accum=True)
    T.ptx.wgmma.wait_group(0)  # (stage j % 2 read: thread 0 may refill it next step)


@T.macro
def _row_dots(dd, prod, do_r, o_r, DO, O, bh, q0, d, cols, L, heads):
    # D = rowsum(dO ∘ O) of query rows [q0, q0 + 64) of head bh (of batch * heads; `_Heads` L),
    # ``cols`` columns of dO and O in registers at a time (rows past the sequence 0; ``do_r``
    # holds the last chunk after).
    for c0 in list(range(0, d, cols)):  # (a Python loop: unrolled)
        Tx.warpgroup.copy(do_r[0:BM, 0:cols], L.rows(DO, bh, heads, q0, BM, c0, cols), clip=True, other=0.0)
        Tx.warpgroup.copy(o_r[0:BM, 0:cols], L.rows(O, bh, heads, q0, BM, c0, cols), clip=True, other=0.0)
        Tx.warpgroup.mul(prod[0:BM, 0:cols], do_r[0:BM, 0:cols], o_r[0:BM, 0:cols])
        Tx.warpgroup.sum(dd[0:BM, 0:1], prod[0:BM, 0:cols], accum=c0 > 0)


@T.macro
def _p_and_ds_to_shared(s, dp, p16, P_s, DS_s):
    # P and dS rounded into shared memory (read transposed by `_grads`).
    Tx.warpgroup.cast(p16[0:BM, 0:BN], s[0:BM, 0:BN])
    Tx.warpgroup.copy(P_s[0:BM, 0:BN], p16[0:BM, 0:BN])
    Tx.warpgroup.cast(p16[0:BM, 0:BN], dp[0:BM, 0:BN])
    Tx.warpgroup.copy(DS_s[0:BM, 0:BN], p16[0:BM, 0:BN])


@T.macro
def _grads(dk, dv, P_s, DS_s, Q_s, DO_s, stage, c0, dh):
    # dV += Pᵀ dO and dK += dSᵀ Q over columns [c0, c0 + dh) of the query tile in `stage`, issued.
    Tx.warpgroup.gemm_async(dv[0:BN, 0:dh], P_s[0:BM, 0:BN], DO_s[stage, 0:BM, c0 : c0 + dh], transA=True, transB=True, accum=True)
    Tx.warpgroup.gemm_async(dk[0:BN, 0:dh], DS_s[0:BM, 0:BN], Q_s[stage, 0:BM, c0 : c0 + dh], transA=True, transB=True, accum=True)


def _epilogue_prune(configs, varlen=False, **_):
    return [cfg for cfg in configs if not (varlen and cfg.get("tma_epilogue"))]


# The dQ kernel's epilogues: dQ stored from the accumulator's registers, or through shared
# memory by TMA (not packed sequences: a box past a sequence's end would reach the next one's).
DQ_CONFIGS = [{}, {"tma_epilogue": True}]


@autotune(
    configs=DQ_CONFIGS,
    key=["heads", "kv_heads", "batch", "seq_q", "seq_k", "d", "dtype", "causal", "scale", "offset", "varlen", "mask", "seq_major"],
    prune=_epilogue_prune,
)
def attention_dq_kernel(
    heads: int,
    kv_heads: int,
    batch: int,
    seq_q: int,
    seq_k: int,
    d: int,
    dtype: str,
    causal: bool,
    scale: float,
    offset: int = 0,
    varlen: bool = False,
    mask: str = "",
    seq_major: bool = False,
    tma_epilogue: bool = False,
):
    """``DQ[bh] = scale · dS K`` and ``DD[bh, i] = rowsum(dO ∘ O)`` (float32) for the ``batch *
    heads`` query heads (Q, O, dO, DQ ``(batch * heads, seq_q, d)``; K, V ``(batch * kv_heads,
    seq_k, d)``; LSE ``(batch * heads, d_rows(seq_q))`` float32, the forward's log-sum-exp, +inf
    past ``seq_q``; DD likewise padded). ``varlen``: packed sequences (`varlen_attention`'s: Q, O,
    dO, DQ ``(total_q, heads, d)``, K, V ``(total_k, kv_heads, d)``, sequence b's rows from
    ``CUQ[b]`` / ``CUK[b]``, causal on its lower-right diagonal; LSE and DD ``(total_q, heads)``).
    ``mask``: the forward's additive mask M (`attention.mask_matrices`' kinds,
    ``(matrices, seq_q, seq_k)``, after LSE) added to the scores as the forward adds it.
    ``seq_major``: Q, K, V, O, dO and DQ [batch, seq, heads, d] (`_Heads`). ``tma_epilogue``:
    dQ rounded into the first K/V stage's shared memory (free after the last step), then stored
    by TMA, a box per swizzle atom's columns (rows past the queries clipped)."""
    _check_mask(mask, varlen, causal)
    if varlen:
        if seq_major or tma_epilogue:
            raise ValueError("attention_dq_kernel(varlen=True): packed sequences have their own layout (not seq_major) and epilogue (not tma_epilogue)")
        return _dq_varlen(heads, kv_heads, d, dtype, causal, scale)
    L = _Heads(seq_major, batch, d)
    group = heads // kv_heads
    q_tiles = d_rows(seq_q) // BM
    k_tiles = -(-seq_k // BN)
    scale_log2 = scale * LOG2E
    swizzle = 3 if d % 64 == 0 else 2
    atom = (16 << swizzle) // 2  # (a swizzle atom's columns: `tma_epilogue`'s boxes)
    kv_smem = mma_shared_layout(dtype, swizzle, (2, BN, d))
    q_smem = mma_shared_layout(dtype, swizzle, (BM, d))
    tile_bytes = BN * d * 2
    # Head dims past 128: Q and dO in shared memory (their registers and dQ's would not fit), D
    # summed over 64-column chunks of dO and O.
    wide = d > 128

    def steps_of(qt):
        """The K/V tiles query tile ``qt`` reads (causal: to its last row's diagonal)."""
        if not causal:
            return k_tiles
        return T.min(k_tiles, T.max(0, ((qt + 1) * BM - 1 + offset) // BN + 1))

    @T.macro
    def body(Q, K, V, O, DO, LSE, DQ, DD, M):
        T.device_entry()
        bx = T.cta_id([batch * heads * q_tiles])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        K_s = pool.alloc((2, BN, d), dtype, layout=kv_smem)
        V_s = pool.alloc((2, BN, d), dtype, layout=kv_smem)
        if wide:
            Q_s = pool.alloc((BM, d), dtype, layout=q_smem)
            DO_s = pool.alloc((BM, d), dtype, layout=q_smem)
        full = MBarrier(pool, 2)
        if wide:
            q_full = MBarrier(pool, 1)
        pool.commit()
        full.init(1)
        if wide:
            q_full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        bh = bx // q_tiles
        qt = bx % q_tiles
        q0 = qt * BM
        kv = bh // heads * kv_heads + bh % heads // group
        steps = steps_of(qt)
        cols = 64 if wide else d  # (the columns of dO and O in registers at once)
        if not wide:
            q_r = T.alloc_buffer((BM, d), dtype, scope="local", layout=wgmma_acc_layout(d))
        do_r = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
        o_r = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
        prod = T.alloc_buffer((BM, cols), "float32", scope="local", layout=wgmma_acc_layout(cols))
        dq = T.alloc_buffer((BM, d), "float32", scope="local", layout=wgmma_acc_layout(d))
        s = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        dp = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        ds = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        lse2 = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        dd = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        out = T.alloc_buffer((BM, d), dtype, scope="local", layout=wgmma_acc_layout(d))
        if tid == 0:  # K/V tile 0 into stage 0 (and, wide, Q and dO)
            if wide:
                T.ptx.mbarrier.arrive.expect_tx(q_full.ptr_to([0]), 2 * BM * d * 2)
                Tx.copy_async(Q_s[0:BM, 0:d], L.rows(Q, bh, heads, q0, BM), dispatch="tma_auto", mbar=q_full.ptr_to([0]))
                Tx.copy_async(DO_s[0:BM, 0:d], L.rows(DO, bh, heads, q0, BM), dispatch="tma_auto", mbar=q_full.ptr_to([0]))
            for t in T.serial(T.min(steps, 1)):
                T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 2 * tile_bytes)
                Tx.copy_async(K_s[0, 0:BN, 0:d], L.rows(K, kv, kv_heads, 0, BN), dispatch="tma_auto", mbar=full.ptr_to([0]))
                Tx.copy_async(V_s[0, 0:BN, 0:d], L.rows(V, kv, kv_heads, 0, BN), dispatch="tma_auto", mbar=full.ptr_to([0]))
        # Q, dO and O rows into registers (rows past the sequence 0; wide: dO and O a chunk of
        # columns at a time), D = rowsum(dO ∘ O), the rows' -lse log2 e (rows past the sequence:
        # LSE's padding +inf, their weights 0).
        if not wide:
            Tx.warpgroup.copy(q_r[0:BM, 0:d], L.rows(Q, bh, heads, q0, BM), clip=True, other=0.0)
        _row_dots(dd, prod, do_r, o_r, DO, O, bh, q0, d, cols, L, heads)
        for hf in T.serial(2):  # (each lane of a row's quad its own copy: `wgmma_row_layout`)
            lse2.local()[hf] = T.min(LSE[bh, _row(q0, tid, hf)] * -LOG2E, FLT_MAX)
        if tid % 4 == 0:  # D for the dK / dV kernel: a quad's first lane writes its two rows
            for hf in T.serial(2):
                DD[bh, _row(q0, tid, hf)] = dd.local()[hf]
        Tx.warpgroup.fill(dq[0:BM, 0:d], 0.0)
        if wide:
            q_full.wait(0, 0)
        for j in T.serial(steps):
            if tid == 0:  # the next tile into the other stage (read by the warpgroup's wgmmas of step j - 1, waited for)
                for t in T.serial(T.min(steps - 1 - j, 1)):
                    T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(j + 1) % 2]), 2 * tile_bytes)
                    Tx.copy_async(K_s[(j + 1) % 2, 0:BN, 0:d], L.rows(K, kv, kv_heads, (j + 1) * BN, BN), dispatch="tma_auto", mbar=full.ptr_to([(j + 1) % 2]))
                    Tx.copy_async(V_s[(j + 1) % 2, 0:BN, 0:d], L.rows(V, kv, kv_heads, (j + 1) * BN, BN), dispatch="tma_auto", mbar=full.ptr_to([(j + 1) % 2]))
            if wide:  # (Q and dO in shared memory)
                _dq_step(j, s, dp, ds, dq, Q_s, DO_s, K_s, V_s, full, lse2, dd, q0, seq_k, causal, offset, scale_log2, d, _masked(mask, M, bh, heads, ds, scale))
            else:
                _dq_step(j, s, dp, ds, dq, q_r, do_r, K_s, V_s, full, lse2, dd, q0, seq_k, causal, offset, scale_log2, d, _masked(mask, M, bh, heads, ds, scale))
        Tx.warpgroup.mul(dq[0:BM, 0:d], dq[0:BM, 0:d], scale)
        Tx.warpgroup.cast(out[0:BM, 0:d], dq[0:BM, 0:d])
        if tma_epilogue:  # (K/V stage 0: its last wgmmas waited for, no load pending)
            Tx.warpgroup.copy(K_s[0, 0:BM, 0:d], out[0:BM, 0:d])
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if tid == 0:
                for c0 in list(range(0, d, atom)):
                    Tx.copy_async(L.rows(DQ, bh, heads, q0, BM, c0, atom), K_s[0, 0:BM, c0 : c0 + atom], dispatch="tma_auto")
                T.ptx.cp_async.bulk.commit_group()
                T.ptx.cp_async.bulk.wait_group_read(0)  # (read before the CTA's shared memory goes)
        else:
            Tx.warpgroup.copy(L.rows(DQ, bh, heads, q0, BM), out[0:BM, 0:d], clip=True)


    if mask:

        @T.prim_func
        def attention_dq_masked(
            Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, O_ptr: T.handle, DO_ptr: T.handle, L_ptr: T.handle, M_ptr: T.handle, DQ_ptr: T.handle, DD_ptr: T.handle
        ):
            Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
            K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
            O = T.match_buffer(O_ptr, L.shape(heads, seq_q), dtype)
            DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, q_tiles * BM), "float32")
            M = T.match_buffer(M_ptr, (mask_matrices(mask, batch, heads), seq_q, seq_k), dtype)
            DQ = T.match_buffer(DQ_ptr, L.shape(heads, seq_q), dtype)
            DD = T.match_buffer(DD_ptr, (batch * heads, q_tiles * BM), "float32")
            body(Q, K, V, O, DO, LSE, DQ, DD, M)

        return attention_dq_masked

    @T.prim_func
    def attention_dq(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, O_ptr: T.handle, DO_ptr: T.handle, L_ptr: T.handle, DQ_ptr: T.handle, DD_ptr: T.handle):
        Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
        K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
        V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
        O = T.match_buffer(O_ptr, L.shape(heads, seq_q), dtype)
        DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
        LSE = T.match_buffer(L_ptr, (batch * heads, q_tiles * BM), "float32")
        DQ = T.match_buffer(DQ_ptr, L.shape(heads, seq_q), dtype)
        DD = T.match_buffer(DD_ptr, (batch * heads, q_tiles * BM), "float32")
        body(Q, K, V, O, DO, LSE, DQ, DD, None)

    return attention_dq


def _dq_varlen(heads: int, kv_heads: int, d: int, dtype: str, causal: bool, scale: float):
    """`attention_dq_kernel` over packed sequences: a CTA per (sequence, head, query tile of the
    longest), the rows and keys its sequence's (masked copies in and out; the statistics through
    masked copies into `wgmma_row_layout`, D out through shared memory). Past head dim 128, as
    the dense kernel: Q and dO by TMA into shared memory (rows past the sequence: the next one's,
    weighted 0), D over 64-column chunks."""
    group = heads // kv_heads
    scale_log2 = scale * LOG2E
    swizzle = 3 if d % 64 == 0 else 2
    kv_smem = mma_shared_layout(dtype, swizzle, (2, BN, d))
    q_smem = mma_shared_layout(dtype, swizzle, (BM, d))
    tile_bytes = BN * d * 2
    wide = d > 128
    cols = 64 if wide else d  # (the columns of dO and O in registers at once)

    @T.prim_func
    def attention_dq_varlen(
        Q_ptr: T.handle,
        K_ptr: T.handle,
        V_ptr: T.handle,
        O_ptr: T.handle,
        DO_ptr: T.handle,
        L_ptr: T.handle,
        CUQ_ptr: T.handle,
        CUK_ptr: T.handle,
        DQ_ptr: T.handle,
        DD_ptr: T.handle,
        nb: T.int32,
        max_q: T.int32,
        total_q: T.int32,
        total_k: T.int32,
    ):
        Q = T.match_buffer(Q_ptr, (total_q, heads, d), dtype)
        K = T.match_buffer(K_ptr, (total_k, kv_heads, d), dtype)
        V = T.match_buffer(V_ptr, (total_k, kv_heads, d), dtype)
        O = T.match_buffer(O_ptr, (total_q, heads, d), dtype)
        DO = T.match_buffer(DO_ptr, (total_q, heads, d), dtype)
        LSE = T.match_buffer(L_ptr, (total_q, heads), "float32")
        CUQ = T.match_buffer(CUQ_ptr, (nb + 1,), "int32")
        CUK = T.match_buffer(CUK_ptr, (nb + 1,), "int32")
        DQ = T.match_buffer(DQ_ptr, (total_q, heads, d), dtype)
        DD = T.match_buffer(DD_ptr, (total_q, heads), "float32")
        T.device_entry()
        bx = T.cta_id([nb * heads * ((max_q + BM - 1) // BM)])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        K_s = pool.alloc((2, BN, d), dtype, layout=kv_smem)
        V_s = pool.alloc((2, BN, d), dtype, layout=kv_smem)
        if wide:
            Q_s = pool.alloc((BM, d), dtype, layout=q_smem)
            DO_s = pool.alloc((BM, d), dtype, layout=q_smem)
        full = MBarrier(pool, 2)
        if wide:
            q_full = MBarrier(pool, 1)
        pool.commit()
        D_s = T.alloc_buffer((BM,), "float32", scope="shared")  # D's way out
        full.init(1)
        if wide:
            q_full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        nqt = (max_q + BM - 1) // BM
        b = bx // (heads * nqt)
        h = bx // nqt % heads
        q0 = bx % nqt * BM
        q_start, n_rows, k_start, n_keys = _sequence(CUQ, CUK, b, nb)
        kvh = h // group
        diag = n_keys - n_rows  # (causal: the sequence's lower-right diagonal)
        steps = T.if_then_else(q0 < n_rows, _kv_steps(q0, n_keys, diag, causal), 0)
        if not wide:
            q_r = T.alloc_buffer((BM, d), dtype, scope="local", layout=wgmma_acc_layout(d))
        do_r = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
        o_r = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
        prod = T.alloc_buffer((BM, cols), "float32", scope="local", layout=wgmma_acc_layout(cols))
        dq = T.alloc_buffer((BM, d), "float32", scope="local", layout=wgmma_acc_layout(d))
        s = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        dp = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        ds = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        lse2 = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        dd = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        out = T.alloc_buffer((BM, d), dtype, scope="local", layout=wgmma_acc_layout(d))
        if tid == 0:  # K/V tile 0 into stage 0 (rows past the sequence: the next one's, masked); wide: Q and dO
            for t in T.serial(T.min(steps, 1)):
                if wide:
                    T.ptx.mbarrier.arrive.expect_tx(q_full.ptr_to([0]), 2 * BM * d * 2)
                    Tx.copy_async(Q_s[0:BM, 0:d], Q[q_start + q0 : q_start + q0 + BM, h, 0:d], dispatch="tma_auto", mbar=q_full.ptr_to([0]))
                    Tx.copy_async(DO_s[0:BM, 0:d], DO[q_start + q0 : q_start + q0 + BM, h, 0:d], dispatch="tma_auto", mbar=q_full.ptr_to([0]))
                T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 2 * tile_bytes)
                Tx.copy_async(K_s[0, 0:BN, 0:d], K[k_start : k_start + BN, kvh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([0]))
                Tx.copy_async(V_s[0, 0:BN, 0:d], V[k_start : k_start + BN, kvh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([0]))
        # The sequence's rows of Q, dO and O (others 0), D, and -lse log2 e (others +inf: weight 0).
        if not wide:
            Tx.warpgroup.copy(q_r[0:BM, 0:d], Q[q_start + q0 : q_start + q0 + BM, h, 0:d], clip=True, mask=lambda i, j: q0 + i < n_rows, other=0.0)
        for c0 in list(range(0, d, cols)):  # (a Python loop: unrolled; narrow: one chunk, dO kept in registers)
            Tx.warpgroup.copy(do_r[0:BM, 0:cols], DO[q_start + q0 : q_start + q0 + BM, h, c0 : c0 + cols], clip=True, mask=lambda i, j: q0 + i < n_rows, other=0.0)
            Tx.warpgroup.copy(o_r[0:BM, 0:cols], O[q_start + q0 : q_start + q0 + BM, h, c0 : c0 + cols], clip=True, mask=lambda i, j: q0 + i < n_rows, other=0.0)
            Tx.warpgroup.mul(prod[0:BM, 0:cols], do_r[0:BM, 0:cols], o_r[0:BM, 0:cols])
            Tx.warpgroup.sum(dd[0:BM, 0:1], prod[0:BM, 0:cols], accum=c0 > 0)
        Tx.warpgroup.copy(lse2[0:BM, 0:1], LSE[q_start + q0 : q_start + q0 + BM, h], clip=True, mask=lambda i, hh: q0 + i < n_rows, other=float("inf"))
        Tx.warpgroup.mul(lse2[0:BM, 0:1], lse2[0:BM, 0:1], -LOG2E)
        Tx.warpgroup.minimum(lse2[0:BM, 0:1], lse2[0:BM, 0:1], FLT_MAX)
        if tid % 4 == 0:  # D through shared memory (a quad's first lane per row), then the sequence's rows
            for hf in T.serial(2):
                D_s[_row(0, tid, hf)] = dd.local()[hf]
        T.cuda.cta_sync()
        Tx.warpgroup.copy(DD[q_start + q0 : q_start + q0 + BM, h], D_s[0:BM], clip=True, mask=lambda i, hh: q0 + i < n_rows)
        Tx.warpgroup.fill(dq[0:BM, 0:d], 0.0)
        if wide:
            for t in T.serial(T.min(steps, 1)):
                q_full.wait(0, 0)
        for j in T.serial(steps):
            if tid == 0:  # the next tile into the other stage (read by step j - 1's wgmmas, waited for)
                for t in T.serial(T.min(steps - 1 - j, 1)):
                    k1 = k_start + (j + 1) * BN
                    T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(j + 1) % 2]), 2 * tile_bytes)
                    Tx.copy_async(K_s[(j + 1) % 2, 0:BN, 0:d], K[k1 : k1 + BN, kvh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([(j + 1) % 2]))
                    Tx.copy_async(V_s[(j + 1) % 2, 0:BN, 0:d], V[k1 : k1 + BN, kvh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([(j + 1) % 2]))
            if wide:  # (Q and dO in shared memory)
                _dq_step(j, s, dp, ds, dq, Q_s, DO_s, K_s, V_s, full, lse2, dd, q0, n_keys, causal, diag, scale_log2, d, None)
            else:
                _dq_step(j, s, dp, ds, dq, q_r, do_r, K_s, V_s, full, lse2, dd, q0, n_keys, causal, diag, scale_log2, d, None)
        Tx.warpgroup.mul(dq[0:BM, 0:d], dq[0:BM, 0:d], scale)
        Tx.warpgroup.cast(out[0:BM, 0:d], dq[0:BM, 0:d])
        Tx.warpgroup.copy(DQ[q_start + q0 : q_start + q0 + BM, h, 0:d], out[0:BM, 0:d], clip=True, mask=lambda i, hh, j: q0 + i < n_rows)

    return attention_dq_varlen


def _sequence(CUQ, CUK, b, nb):
    """Packed sequence b's first query row, query rows, first key and keys (each read guarded by b
    < nb: b's range, for the bounds prover)."""
    q_start, k_start = T.if_then_else(b < nb, CUQ[b], 0), T.if_then_else(b < nb, CUK[b], 0)
    return q_start, T.if_then_else(b < nb, CUQ[b + 1], 0) - q_start, k_start, T.if_then_else(b < nb, CUK[b + 1], 0) - k_start


def _kv_steps(q0, n_keys, diag, causal):
    """The K/V tiles query rows [q0, q0 + 64) read of ``n_keys`` (causal: to the last row's
    diagonal, key j <= i + diag)."""
    if not causal:
        return (n_keys + BN - 1) // BN
    return T.min((n_keys + BN - 1) // BN, T.max(0, (q0 + BM - 1 + diag) // BN + 1))


# The dK / dV kernel's designs: one warpgroup a CTA of 64 keys, or (reducing dQ, head dims to
# 128, no mask, not packed) FlashAttention-3's warp-specialised CTA of 128 keys (`_dkv_ws`),
# at head dim 64 also over query tiles of 128 rows (FlashAttention-3's tiles there).
DKV_CONFIGS = [{}, {"tma_epilogue": True}, {"ws": True}, {"ws": True, "dq_overlap": True}] + [
    {"ws": True, "q_rows": 2 * BM, **more} for more in ({}, {"dq_overlap": True})
]
# ... and at head dim 128 with dQ's part in registers of its own, not Sᵀ's (they fit since the
# accumulators of non-accumulating GEMMs are fresh at their fences; at 64 its own measured faster).
DKV_CONFIGS += [{"ws": True, "own_dq": True, **more} for more in ({}, {"dq_overlap": True})]
# ... and those storing dQ during dK with its parts in register order (`flat_dq`: 16-byte stores
# free of bank conflicts; 1.01-1.07x the rows' dK / dV kernel at head dim 128 on an H200, their
# convert kernel as fast as the rows').
DKV_CONFIGS += [dict(cfg, flat_dq=True) for cfg in DKV_CONFIGS if cfg.get("dq_overlap")]


def _key_tile_order(bx, k_tiles: int, section: int):
    """``(kv, kt)``, the K/V head (of batch * kv_heads) and key tile of a dK / dV kernel's CTA
    ``bx``: a head's key tiles together (its query heads' Q and dO shared in L2), or (causal)
    in sections of ``section`` K/V heads whose Q and dO fit half the L2 (`causal_section`),
    each section's first key tiles (the most query tiles: every one at or below them) first,
    FlashAttention-3's longest-first order (a shorter tail)."""
    if section == 1:
        return bx // k_tiles, bx % k_tiles
    return bx // (section * k_tiles) * section + bx % section, bx // section % k_tiles


def _section(batch: int, heads: int, kv_heads: int, seq_q: int, d: int, causal: bool) -> int:
    """`_key_tile_order`'s section: causal, the K/V heads whose query heads' Q and dO fit half the L2."""
    return causal_section(batch * kv_heads, 1, seq_q * (heads // kv_heads), d, 2) if causal else 1


def _dkv_prune(configs, d, varlen, reduce_dq, mask, seq_q, **_):
    ws = reduce_dq and d <= 128 and not varlen and not mask
    wide = _wide_queries(d, seq_q)
    return [
        cfg
        for cfg in _epilogue_prune(configs, varlen)
        if (not cfg.get("ws") or ws) and (cfg.get("q_rows", BM) == BM or wide) and (not cfg.get("own_dq") or _dq_in_st(d, BM))
    ]


def _wide_queries(d: int, seq_q: int) -> bool:
    """Whether the warp-specialised dK / dV kernel takes query tiles of 128 rows (``q_rows``):
    at head dim 64 (its registers), ``seq_q`` in whole tiles of them (`d_rows`)."""
    return d <= 64 and d_rows(seq_q) % (2 * BM) == 0


def _dq_in_st(d: int, q_rows: int) -> bool:
    """Whether the warp-specialised kernel's dQ part (`_dkv_ws`) can take Sᵀ's registers, of its
    shape: half the columns of 64 query rows at head dim 128."""
    return q_rows == BM and d // 2 == BM


def fragment_order(parts: int, cols: int) -> TileLayout:
    """``parts`` float32 blocks of 64 x ``cols`` each stored in the register order of a warpgroup's
    accumulator (`wgmma_acc_layout(cols)`): thread t's registers 4i .. 4i + 3 at (128 i + t) · 4,
    so that the warpgroup writes a block with 16-byte stores free of bank conflicts
    (FlashAttention-3's dQaccum). The dQ parts' layout, in shared and in global memory, of the
    warp-specialised dK / dV kernel with ``flat_dq`` (`attention_dq_convert_kernel(part_cols=)`
    reads them back)."""
    return TileLayout(S[(parts, 4, 2, 8, cols // 8, 4, 2) : (64 * cols, 128, 2, 16, 512, 4, 1)])


def _dq_part(d: int, q_rows: int):
    """``(rows, cols)`` of each consumer's part of a step's dQ in the warp-specialised kernel
    (`_dkv_ws`): half the columns of query tiles of 64 rows, or half the rows of 128."""
    return (BM, d) if q_rows > BM else (q_rows, d // 2)


def _part_cols(cfg: dict, d: int) -> int:
    """The columns of a dQ part in `fragment_order` that the dK / dV kernel of configuration
    ``cfg`` adds into DQA (`attention_dq_convert_kernel(part_cols=)`; 0: DQA in row order)."""
    return _dq_part(d, cfg.get("q_rows", BM))[1] if cfg.get("flat_dq") else 0


@autotune(
    configs=DKV_CONFIGS,
    key=["heads", "kv_heads", "batch", "seq_q", "seq_k", "d", "dtype", "causal", "scale", "offset", "varlen", "reduce_dq", "mask", "seq_major"],
    prune=_dkv_prune,
)
def attention_dkv_kernel(
    heads: int,
    kv_heads: int,
    batch: int,
    seq_q: int,
    seq_k: int,
    d: int,
    dtype: str,
    causal: bool,
    scale: float,
    offset: int = 0,
    varlen: bool = False,
    reduce_dq: bool = False,
    mask: str = "",
    ws: bool = False,
    dq_overlap: bool = False,
    seq_major: bool = False,
    tma_epilogue: bool = False,
    q_rows: int = BM,
    own_dq: bool = False,
    flat_dq: bool = False,
):
    """``DK[kv] = scale · Σ dSᵀ Q`` and ``DV[kv] = Σ Pᵀ dO`` over the query heads of K/V head kv's
    group (Q, dO ``(batch * heads, seq_q, d)``; K, V, DK, DV ``(batch * kv_heads, seq_k, d)``;
    LSE and DD ``(batch * heads, d_rows(seq_q))``: the forward's log-sum-exp (+inf past
    ``seq_q``) and D = rowsum(dO ∘ O)). ``reduce_dq``: also dQ, as FlashAttention-3 accumulates
    it: each step's dS K (unscaled, float32) through shared memory into DQA ``(batch * heads,
    d_rows(seq_q), d)`` by a TMA reduce-add, so no dQ kernel recomputes S and dP (the sums'
    order varies from run to run; head dims to 128). ``varlen``: packed sequences, ``mask``: the
    forward's additive mask (M after DD), as `attention_dq_kernel`'s. ``ws``: `_dkv_ws`'s
    design (reducing dQ; its dK and dV stored through shared memory by TMA), ``dq_overlap`` its
    order of the last GEMMs, ``q_rows`` its query rows a step (64, or 128 at head dim 64,
    ``seq_q`` in whole tiles of them: `d_rows`), ``own_dq`` dQ's part in registers of its own
    where it would take Sᵀ's (head dim 128), ``flat_dq`` DQA's parts in `fragment_order`
    (`attention_dq_convert_kernel(part_cols=...)` rounds them); ``tma_epilogue``: the
    one-warpgroup design's dK and dV stored so too (through K's and V's shared memory, free after
    the last step). ``seq_major``: Q, K, V, dO, DK
    and DV [batch, seq, heads, d] (`_Heads`; DQA as ever)."""
    _check_mask(mask, varlen, causal)
    if varlen:
        if seq_major or tma_epilogue:
            raise ValueError("attention_dkv_kernel(varlen=True): packed sequences have their own layout (not seq_major) and epilogue (not tma_epilogue)")
        return _dkv_varlen(heads, kv_heads, d, dtype, causal, scale)
    L = _Heads(seq_major, batch, d)
    if ws:
        if not reduce_dq or d > 128 or mask or tma_epilogue:
            raise ValueError("attention_dkv_kernel(ws=True): reducing dQ, head dims to 128, without a mask (its epilogue TMA's always)")
        if q_rows != BM and not (q_rows == 2 * BM and _wide_queries(d, seq_q)):
            raise ValueError(
                f"attention_dkv_kernel(ws=True, q_rows={q_rows}): query tiles of 64 rows, or 128 at head dim 64 (registers; got {d}) "
                f"with seq_q in whole tiles of 128 rows (`d_rows`; got {seq_q})"
            )
        return _dkv_ws(heads, kv_heads, batch, seq_q, seq_k, d, dtype, causal, scale, offset, dq_overlap, L, q_rows, own_dq, flat_dq)
    if q_rows != BM or own_dq or flat_dq:
        raise ValueError(
            f"attention_dkv_kernel(q_rows={q_rows}, own_dq={own_dq}, flat_dq={flat_dq}): the warp-specialised design's (ws=True); the one-warpgroup design's query tiles are of {BM} rows"
        )
    if reduce_dq and d > 128:
        raise ValueError(f"attention_dkv_kernel(reduce_dq=True): head dims to 128 (got {d}; its shared memory would not fit)")
    group = heads // kv_heads
    q_tiles = d_rows(seq_q) // BM
    k_tiles = -(-seq_k // BN)
    section = _section(batch, heads, kv_heads, seq_q, d, causal)
    scale_log2 = scale * LOG2E
    # Head dims past 128: two warpgroups, each holding dK's and dV's half of the columns (one
    # warpgroup's registers hold 64 x 128 of each); the first computes S, dP, P and dS for both.
    wgs = 2 if d > 128 else 1
    dh = d // wgs
    swizzle = 3 if dh % 64 == 0 else 2  # (each warpgroup's columns whole swizzle atoms)
    atom = (16 << swizzle) // 2  # (a swizzle atom's columns: `tma_epilogue`'s boxes)
    kv_smem = mma_shared_layout(dtype, swizzle, (BN, d))
    # Reducing dQ: one stage of Q and dO (and of dQ's part), so that two CTAs share an SM as the
    # deterministic kernel's do (each hides the other's loads); otherwise two stages.
    stages = 1 if reduce_dq else 2
    q_smem = mma_shared_layout(dtype, swizzle, (stages, BM, d))
    p_smem = mma_shared_layout(dtype, 3, (BM, BN))
    dq_smem = mma_shared_layout("float32", 3 if d % 32 == 0 else 2, (BM, d))
    tile_bytes = BM * d * 2

    def first_of(kt):
        """The first query tile that sees K/V tile kt (causal: a row at or below its first key)."""
        if not causal:
            return 0
        return T.max(0, (kt * BN - offset) // BM)

    @T.macro
    def scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, LSE, DD, M, bh, q0, k0, stage, tid):
        # S = Q Kᵀ and dP = dO Vᵀ of the query tile in `stage`, P and dS (a mask's tile staged in
        # P's registers), rounded into shared memory.
        for hf in T.serial(2):  # the rows' -lse log2 e (past the sequence -inf: weights 0) and D
            lse2.local()[hf] = T.min(LSE[bh, _row(q0, tid, hf)] * -LOG2E, FLT_MAX)
            dd.local()[hf] = DD[bh, _row(q0, tid, hf)]
        Tx.warpgroup.gemm_async(s[0:BM, 0:BN], Q_s[stage, 0:BM, 0:d], K_s[0:BN, 0:d])
        Tx.warpgroup.gemm_async(dp[0:BM, 0:BN], DO_s[stage, 0:BM, 0:d], V_s[0:BN, 0:d])
        T.ptx.wgmma.wait_group(0)
        _weights_and_ds(s, dp, lse2, dd, k0, q0, seq_k, causal, offset, scale_log2, _masked(mask, M, bh, heads, p16, scale))
        _p_and_ds_to_shared(s, dp, p16, P_s, DS_s)

    @T.macro
    def store(dk, dv, out, DK, DV, K_s, V_s, kv, k0, c0):
        # dK's and dV's columns [c0, c0 + dh), rounded (the keys past the sequence clipped): to
        # global memory, or (`tma_epilogue`) into K_s's and V_s's columns for the TMA stores.
        Tx.warpgroup.cast(out[0:BN, 0:dh], dk[0:BN, 0:dh])
        if tma_epilogue:
            Tx.warpgroup.copy(K_s[0:BN, c0 : c0 + dh], out[0:BN, 0:dh])
        else:
            Tx.warpgroup.copy(L.rows(DK, kv, kv_heads, k0, BN, c0, dh), out[0:BN, 0:dh], clip=True)
        Tx.warpgroup.cast(out[0:BN, 0:dh], dv[0:BN, 0:dh])
        if tma_epilogue:
            Tx.warpgroup.copy(V_s[0:BN, c0 : c0 + dh], out[0:BN, 0:dh])
        else:
            Tx.warpgroup.copy(L.rows(DV, kv, kv_heads, k0, BN, c0, dh), out[0:BN, 0:dh], clip=True)

    @T.macro
    def dq_reduce(dq, DQ_s, DQA, bh, q0, tid):
        # dQ's part of the step (dS K, waited for) into DQ_s (the last step's reduction read:
        # thread 0 waited for it before this step's first barrier), then added into DQA by
        # thread 0 (read while the next step's scores are computed).
        Tx.warpgroup.copy(DQ_s[0:BM, 0:d], dq[0:BM, 0:d])
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            Tx.copy_async(DQA[bh, q0 : q0 + BM, 0:d], DQ_s[0:BM, 0:d], dispatch="tma_auto", use_tma_reduce="add")
            T.ptx.cp_async.bulk.commit_group()

    @T.macro
    def load_q(Q_s, DO_s, Q, DO, full, kv, first, per_head, steps, t):
        # The query tile of step t + 1 (if any) into its stage.
        for u in T.serial(T.min(steps - 1 - t, 1)):
            n_bh = kv * group + (t + 1) // per_head
            n_q0 = (first + (t + 1) % per_head) * BM
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(t + 1) % stages]), 2 * tile_bytes)
            Tx.copy_async(Q_s[(t + 1) % stages, 0:BM, 0:d], L.rows(Q, n_bh, heads, n_q0, BM), dispatch="tma_auto", mbar=full.ptr_to([(t + 1) % stages]))
            Tx.copy_async(DO_s[(t + 1) % stages, 0:BM, 0:d], L.rows(DO, n_bh, heads, n_q0, BM), dispatch="tma_auto", mbar=full.ptr_to([(t + 1) % stages]))

    @T.macro
    def body(Q, K, V, DO, LSE, DD, DK, DV, DQA, M):
        T.device_entry()
        bx = T.cta_id([batch * kv_heads * k_tiles])
        wg = T.warpgroup_id([wgs])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128 * wgs])
        pool = T.SMEMPool()
        K_s = pool.alloc((BN, d), dtype, layout=kv_smem)
        V_s = pool.alloc((BN, d), dtype, layout=kv_smem)
        Q_s = pool.alloc((stages, BM, d), dtype, layout=q_smem)
        DO_s = pool.alloc((stages, BM, d), dtype, layout=q_smem)
        P_s = pool.alloc((BM, BN), dtype, layout=p_smem)
        DS_s = pool.alloc((BM, BN), dtype, layout=p_smem)
        if reduce_dq:
            DQ_s = pool.alloc((BM, d), "float32", layout=dq_smem)
        kv_full = MBarrier(pool, 1)
        full = MBarrier(pool, stages)
        pool.commit()
        kv_full.init(1)
        full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        kv, kt = _key_tile_order(bx, k_tiles, section)
        k0 = kt * BN
        first = first_of(kt)
        per_head = q_tiles - first  # query tiles of each head of the group
        steps = group * per_head
        dk = T.alloc_buffer((BN, dh), "float32", scope="local", layout=wgmma_acc_layout(dh))
        dv = T.alloc_buffer((BN, dh), "float32", scope="local", layout=wgmma_acc_layout(dh))
        s = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        dp = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        p16 = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        lse2 = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        dd = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        out = T.alloc_buffer((BN, dh), dtype, scope="local", layout=wgmma_acc_layout(dh))
        if reduce_dq:
            dq = T.alloc_buffer((BM, d), "float32", scope="local", layout=wgmma_acc_layout(d))
        if tid == 0:  # K and V once; query tile 0 of the first head into stage 0
            T.ptx.mbarrier.arrive.expect_tx(kv_full.ptr_to([0]), 2 * BN * d * 2)
            Tx.copy_async(K_s[0:BN, 0:d], L.rows(K, kv, kv_heads, k0, BN), dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
            Tx.copy_async(V_s[0:BN, 0:d], L.rows(V, kv, kv_heads, k0, BN), dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
            for t in T.serial(T.min(steps, 1)):
                T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 2 * tile_bytes)
                Tx.copy_async(Q_s[0, 0:BM, 0:d], L.rows(Q, kv * group, heads, first * BM, BM), dispatch="tma_auto", mbar=full.ptr_to([0]))
                Tx.copy_async(DO_s[0, 0:BM, 0:d], L.rows(DO, kv * group, heads, first * BM, BM), dispatch="tma_auto", mbar=full.ptr_to([0]))
        Tx.warpgroup.fill(dk[0:BN, 0:dh], 0.0)
        Tx.warpgroup.fill(dv[0:BN, 0:dh], 0.0)
        kv_full.wait(0, 0)
        for hh in T.serial(group):  # the group's query heads, each's query tiles from the first that sees these keys
            for qt in T.serial(q_tiles):  # (causal: those from `first`; a loop over all keeps qt's range known)
                if qt >= first:
                    t = hh * per_head + qt - first  # the step (its stage t % stages)
                    bh = kv * group + hh
                    q0 = qt * BM
                    if stages > 1:
                        if tid == 0:  # the next query tile into the other stage (read by step t - 1's wgmmas, waited for)
                            load_q(Q_s, DO_s, Q, DO, full, kv, first, per_head, steps, t)
                    full.wait(t % stages, (t // stages) % 2)
                    # P and dS (the first warpgroup's) in shared memory, read transposed: dV += Pᵀ dO,
                    # dK += dSᵀ Q, each warpgroup its columns.
                    if wgs > 1:
                        if wg == 0:
                            scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, LSE, DD, M, bh, q0, k0, t % stages, tid)
                    else:
                        scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, LSE, DD, M, bh, q0, k0, t % stages, tid)
                    if reduce_dq:
                        if tid == 0:  # (the last step's dQ reduction has read DQ_s)
                            T.ptx.cp_async.bulk.wait_group_read(0)
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.cta_sync()
                    if wgs > 1:  # (each warpgroup its columns, constant slices for the descriptors)
                        for w in list(range(wgs)):
                            if wg == w:
                                _grads(dk, dv, P_s, DS_s, Q_s, DO_s, t % stages, w * dh, dh)
                    else:
                        _grads(dk, dv, P_s, DS_s, Q_s, DO_s, t % stages, 0, dh)
                    if reduce_dq:  # dQ's part: dS K (dS from shared memory)
                        Tx.warpgroup.gemm_async(dq[0:BM, 0:d], DS_s[0:BM, 0:BN], K_s[0:BN, 0:d], transB=True)
                    T.ptx.wgmma.wait_group(0)  # (the stage, P_s and DS_s read: they may be refilled)
                    if stages == 1:
                        if tid == 0:  # the next query tile into the stage just read
                            load_q(Q_s, DO_s, Q, DO, full, kv, first, per_head, steps, t)
                    if reduce_dq:
                        dq_reduce(dq, DQ_s, DQA, bh, q0, tid)
                    if wgs > 1:  # (by the other warpgroup's too)
                        T.cuda.cta_sync()
        if reduce_dq:
            if tid == 0:  # (the last reductions read before the CTA's shared memory goes)
                T.ptx.cp_async.bulk.wait_group_read(0)
        Tx.warpgroup.mul(dk[0:BN, 0:dh], dk[0:BN, 0:dh], scale)
        # (`tma_epilogue`: K_s's and V_s's last readers, the first warpgroup's wgmmas, waited
        # for before the last step's barrier; one warpgroup: by itself)
        if wgs > 1:
            for w in list(range(wgs)):
                if wg == w:
                    store(dk, dv, out, DK, DV, K_s, V_s, kv, k0, w * dh)
        else:
            store(dk, dv, out, DK, DV, K_s, V_s, kv, k0, 0)
        if tma_epilogue:
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if tid == 0:
                for c0 in list(range(0, d, atom)):
                    Tx.copy_async(L.rows(DK, kv, kv_heads, k0, BN, c0, atom), K_s[0:BN, c0 : c0 + atom], dispatch="tma_auto")
                    Tx.copy_async(L.rows(DV, kv, kv_heads, k0, BN, c0, atom), V_s[0:BN, c0 : c0 + atom], dispatch="tma_auto")
                T.ptx.cp_async.bulk.commit_group()
                T.ptx.cp_async.bulk.wait_group_read(0)  # (read before the CTA's shared memory goes)

    if reduce_dq and mask:

        @T.prim_func
        def attention_dkv_dq_masked(
            Q_ptr: T.handle,
            K_ptr: T.handle,
            V_ptr: T.handle,
            DO_ptr: T.handle,
            L_ptr: T.handle,
            DD_ptr: T.handle,
            M_ptr: T.handle,
            DK_ptr: T.handle,
            DV_ptr: T.handle,
            DQA_ptr: T.handle,
        ):
            Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
            K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
            DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, q_tiles * BM), "float32")
            DD = T.match_buffer(DD_ptr, (batch * heads, q_tiles * BM), "float32")
            M = T.match_buffer(M_ptr, (mask_matrices(mask, batch, heads), seq_q, seq_k), dtype)
            DK = T.match_buffer(DK_ptr, L.shape(kv_heads, seq_k), dtype)
            DV = T.match_buffer(DV_ptr, L.shape(kv_heads, seq_k), dtype)
            DQA = T.match_buffer(DQA_ptr, (batch * heads, q_tiles * BM, d), "float32")
            body(Q, K, V, DO, LSE, DD, DK, DV, DQA, M)

        return attention_dkv_dq_masked

    if reduce_dq:

        @T.macro
        def unmasked(Q, K, V, DO, LSE, DD, DK, DV, DQA):
            body(Q, K, V, DO, LSE, DD, DK, DV, DQA, None)

        return _dkv_dq_func(unmasked, heads, kv_heads, batch, seq_q, seq_k, d, dtype, L)

    if mask:

        @T.prim_func
        def attention_dkv_masked(
            Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DO_ptr: T.handle, L_ptr: T.handle, DD_ptr: T.handle, M_ptr: T.handle, DK_ptr: T.handle, DV_ptr: T.handle
        ):
            Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
            K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
            DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, q_tiles * BM), "float32")
            DD = T.match_buffer(DD_ptr, (batch * heads, q_tiles * BM), "float32")
            M = T.match_buffer(M_ptr, (mask_matrices(mask, batch, heads), seq_q, seq_k), dtype)
            DK = T.match_buffer(DK_ptr, L.shape(kv_heads, seq_k), dtype)
            DV = T.match_buffer(DV_ptr, L.shape(kv_heads, seq_k), dtype)
            body(Q, K, V, DO, LSE, DD, DK, DV, None, M)

        return attention_dkv_masked

    @T.prim_func
    def attention_dkv(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DO_ptr: T.handle, L_ptr: T.handle, DD_ptr: T.handle, DK_ptr: T.handle, DV_ptr: T.handle):
        Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
        K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
        V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
        DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
        LSE = T.match_buffer(L_ptr, (batch * heads, q_tiles * BM), "float32")
        DD = T.match_buffer(DD_ptr, (batch * heads, q_tiles * BM), "float32")
        DK = T.match_buffer(DK_ptr, L.shape(kv_heads, seq_k), dtype)
        DV = T.match_buffer(DV_ptr, L.shape(kv_heads, seq_k), dtype)
        body(Q, K, V, DO, LSE, DD, DK, DV, None, None)

    return attention_dkv


# `_dkv_ws`: the CTA's keys (two consumer warpgroups of 64) and its named barriers (the
# consumers' exchange of dS).
WS_KEYS = 128
DS_BARRIER = 9  # (scripts own ids 9-15)
EPILOGUE_BARRIER = 10  # each consumer's, 10 and 11, before its dK and dV's TMA stores
# The columns' statistics a consumer thread holds at a time (of a step's queries): 8 registers.
COLS = 32


def _dkv_ws(
    heads: int, kv_heads: int, batch: int, seq_q: int, seq_k: int, d: int, dtype: str, causal: bool, scale: float, offset: int, dq_overlap: bool, L: _Heads, q_rows: int, own_dq: bool, flat_dq: bool
):
    """`attention_dkv_kernel(reduce_dq=True)` as FlashAttention-3's backward: a CTA of 128 keys,
    three warpgroups. The producer's first thread loads K and V once and each step's query tile
    (Q and dO) into two stages; its second warp's first thread adds each step's dQ part into DQA
    (a TMA reduce-add from shared memory). Each consumer warpgroup holds 64 keys' dK and dV and
    computes, transposed (keys as rows, so Pᵀ and dSᵀ are the A operands of dV += Pᵀ dO and dK +=
    dSᵀ Q straight from registers), Sᵀ = K Qᵀ, dPᵀ = V dOᵀ, Pᵀ = exp2(Sᵀ c − lse log2 e) with each
    column's (query's) log-sum-exp, dSᵀ = Pᵀ ∘ (dPᵀ − D); dSᵀ goes to shared memory (two buffers),
    both warpgroups' halves are read for dQ's part, dS K, each warpgroup its half of dQ's
    columns. ``dq_overlap``: FlashAttention-3's order of the last GEMMs (dV, dQ, then dK, dQ's
    part stored while dK's runs, each warpgroup's half handed to the reduction on barriers of its
    own) rather than the three issued back to back (measured on an H200: faster at head dim 64,
    slower at 128). ``q_rows``: the query rows a step, 64, or at head dim 64 FlashAttention-3's
    128 (Sᵀ and dPᵀ 64 x 128 a consumer; each consumer's dQ part half the rows, a block of DQ_s
    each, not half the columns; measured on an H200: the whole backward 1.06-1.18x cuDNN's at
    head dim 64 from 0.96-0.98x with 64). ``own_dq``: at head dim 128 dQ's part in registers of
    its own rather than Sᵀ's. ``flat_dq``: dQ's parts written into shared memory, and added into
    DQA, in their accumulator's register order (`fragment_order`: 16-byte stores free of bank
    conflicts, where the swizzled tile's 8-byte stores had two-way conflicts and the proxy fence
    after them waited on them; Nsight Compute on an H200, head dim 128: 6 % of the warps' stall
    samples), a TMA box of 128 columns per part. dK and dV are rounded into K's and V's shared
    memory once both consumers' last GEMMs have read them, then stored by TMA, a box per swizzle
    atom's columns (measured on an H200 against stores from the accumulator's registers: the dK /
    dV kernel 6-12% faster at 1k queries, 0-3% from 4k). ``L``: how Q, K, V, dO, DK and DV are stored (`_Heads`)."""
    bq = q_rows  # query rows a step (`_wide_queries`)
    group = heads // kv_heads
    q_tiles = d_rows(seq_q) // bq
    k_tiles = -(-seq_k // WS_KEYS)
    section = _section(batch, heads, kv_heads, seq_q, d, causal)
    scale_log2 = scale * LOG2E
    # Each consumer's part of a step's dQ, pr x pc (`_dq_part`): half its rows with query tiles
    # of 128 (DQ_s a block of each, so that a part is one TMA box), else half its columns.
    split_rows = bq > BM
    pr, pc = _dq_part(d, bq)

    def dq_s(DQ_s, w):
        """Consumer w's part of DQ_s (`flat_dq`: of its view in register order)."""
        return DQ_s[w, 0:pr, 0:pc] if split_rows or flat_dq else DQ_s[0:pr, w * pc : w * pc + pc]

    def dqa(DQA, bh, q0, w):
        """... and where it is added: DQA's rows of the query tile from q0."""
        r0, c0 = (q0 + w * pr, 0) if split_rows else (q0, w * pc)
        return DQA[bh, r0 : r0 + pr, c0 : c0 + pc]

    # `flat_dq`: a part is rows of 128 columns of DQ_s (and of DQA's view DQA_f): part w of query
    # tile qt of head bh is part (bh * q_tiles + qt) * 2 + w.
    part_rows = pr * pc // 128

    def flat_dqa(DQA_f, bh, qt, w, n):
        """Where parts w .. w + n - 1 of query tile qt of head bh are added ..."""
        r0 = ((bh * q_tiles + qt) * 2 + w) * part_rows
        return DQA_f[r0 : r0 + n * part_rows, 0:128]

    def flat_dq_s(DQ_s, w, n):
        """... from DQ_s."""
        return DQ_s[w * part_rows : (w + n) * part_rows, 0:128]

    def ds_part(DS_s, stage, w):
        """The dSᵀ its part's GEMM reads (its queries' columns) ..."""
        return DS_s[stage, 0:WS_KEYS, w * pr : w * pr + pr] if split_rows else DS_s[stage, 0:WS_KEYS, 0:pr]

    def k_part(K_s, w):
        """... and K (its columns)."""
        return K_s[0:WS_KEYS, 0:pc] if split_rows else K_s[0:WS_KEYS, w * pc : w * pc + pc]

    dq_in_st = _dq_in_st(d, bq) and not own_dq  # (dQ's part accumulated in Sᵀ's registers)
    # K's columns are read by each of dQ's GEMMs: whole swizzle atoms of them.
    kv_swizzle = c.swizzle_for(pc, 2)
    kv_smem = mma_shared_layout(dtype, kv_swizzle, (WS_KEYS, d))
    atom = (16 << kv_swizzle) // 2  # (columns of a swizzle atom: a TMA box of 64 rows is dense within one)
    q_smem = mma_shared_layout(dtype, c.swizzle_for(d, 2), (2, bq, d))
    ds_smem = mma_shared_layout(dtype, 3, (2, WS_KEYS, bq))
    dq_shape = (2 * part_rows, 128) if flat_dq else (2, pr, pc) if split_rows else (bq, d)
    dq_smem = None if flat_dq else mma_shared_layout("float32", c.swizzle_for(pc, 4), dq_shape)
    tile_bytes = bq * d * 2
    producer_regs, consumer_regs = c.WARPGROUP_REGISTERS[2]
    # dQ's halves handed over one warpgroup at a time (with `dq_overlap`; measured: slower with
    # the GEMMs back to back, where both halves go in one reduction).
    halves = 1 if dq_overlap else 0
    # Keys past the sequence are masked (TMA's zero rows would weigh exp2(-lse)).
    ragged = seq_k % WS_KEYS != 0

    def first_of(kt):
        """The first query tile that sees the CTA's keys (causal: a row at or below its first key)."""
        if not causal:
            return 0
        return T.max(0, (kt * WS_KEYS - offset) // bq)

    # The step's log-sum-exps read into registers before its GEMMs are issued (read after them,
    # the loads waited behind the tensor cores' reads of shared memory: Nsight Compute on an
    # H200, head dim 128, 7 % of the warps' stall samples on their first use; read before, the
    # kernel takes 6 % fewer cycles), where the registers are free: not with query tiles of 128
    # rows (32 more registers spilled), read COLS at a time there. (D read so too spilled at
    # head dim 128.)
    early_lse = bq == BM

    @T.macro
    def row_bias(lc, L_s, stage, c0, n):
        # -lse log2 e of the stage's queries c0 .. c0 + n (capped: a row that saw no key) in `lc`.
        Tx.warpgroup.copy(lc[0:1, 0:n], L_s[stage : stage + 1, c0 : c0 + n])
        Tx.warpgroup.mul(lc[0:1, 0:n], lc[0:1, 0:n], -LOG2E)
        Tx.warpgroup.minimum(lc[0:1, 0:n], lc[0:1, 0:n], FLT_MAX)

    @T.macro
    def weights(st, lc, L_s, stage, k0, kk0, q0):
        # Pᵀ in `st` (keys kk0 + i, queries q0 + j; causal: masked only where the CTA's keys
        # reach past the query tile's diagonal) from the columns' biases (`row_bias`: in `lc`
        # already, or read COLS at a time).
        if causal:
            if k0 + WS_KEYS - 1 > q0 + offset:
                Tx.warpgroup.masked_fill(st[0:64, 0:bq], st[0:64, 0:bq], lambda i, j: i > T.min(seq_k - 1, q0 + j + offset) - kk0, float("-inf"))
        elif ragged:
            Tx.warpgroup.masked_fill(st[0:64, 0:bq], st[0:64, 0:bq], lambda i, j: i >= seq_k - kk0, float("-inf"))
        for h in list(range(1 if early_lse else bq // COLS)):
            c0, n = (0, bq) if early_lse else (h * COLS, COLS)
            if not early_lse:
                row_bias(lc, L_s, stage, c0, n)
            Tx.warpgroup.fma(st[0:64, c0 : c0 + n], st[0:64, c0 : c0 + n], scale_log2, lc[0:1, 0:n])
            Tx.warpgroup.exp2(st[0:64, c0 : c0 + n], st[0:64, c0 : c0 + n], ftz=True)

    @T.macro
    def hand_dq(dq, DQ_s, dq_full, dq_empty, cw, u, tid):
        # Step u's dQ part (this warpgroup's half: `dq_s`) into DQ_s once step u - 1's
        # reduction has read it, handed to the reduction (one arrival a warp); with
        # `dq_overlap` each warpgroup on barriers of its own (slot w), else both on slot 0.
        if halves:
            for w in list(range(2)):
                if cw == w:
                    if u >= 1:
                        dq_empty.wait(w, (u - 1) % 2)
                    Tx.warpgroup.copy(dq_s(DQ_s, w), dq[0:pr, 0:pc])
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warp_sync()
                    if tid % 32 == 0:
                        dq_full.arrive(w)
        else:
            if u >= 1:
                dq_empty.wait(0, (u - 1) % 2)
            for w in list(range(2)):
                if cw == w:
                    Tx.warpgroup.copy(dq_s(DQ_s, w), dq[0:pr, 0:pc])
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.warp_sync()
            if tid % 32 == 0:
                dq_full.arrive(0)

    @T.macro
    def ds_of(dpt, st, col, D_s, stage):
        # dSᵀ = Pᵀ ∘ (dPᵀ − D) in `dpt`.
        for h in list(range(bq // COLS)):
            Tx.warpgroup.copy(col[0:1, 0:COLS], D_s[stage : stage + 1, h * COLS : h * COLS + COLS])
            Tx.warpgroup.sub(dpt[0:64, h * COLS : h * COLS + COLS], dpt[0:64, h * COLS : h * COLS + COLS], col[0:1, 0:COLS])
        Tx.warpgroup.mul(dpt[0:64, 0:bq], dpt[0:64, 0:bq], st[0:64, 0:bq])

    @T.macro
    def body(Q, K, V, DO, LSE, DD, DK, DV, DQA):
        T.device_entry()
        bx = T.cta_id([batch * kv_heads * k_tiles])
        wg = T.warpgroup_id([3])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([384])
        pool = T.SMEMPool()
        K_s = pool.alloc((WS_KEYS, d), dtype, layout=kv_smem)
        V_s = pool.alloc((WS_KEYS, d), dtype, layout=kv_smem)
        Q_s = pool.alloc((2, bq, d), dtype, layout=q_smem)
        DO_s = pool.alloc((2, bq, d), dtype, layout=q_smem)
        DS_s = pool.alloc((2, WS_KEYS, bq), dtype, layout=ds_smem)
        DQ_s = pool.alloc(dq_shape, "float32", layout=dq_smem)
        L_s = pool.alloc((2, bq), "float32")  # the stage's rows' log-sum-exp
        D_s = pool.alloc((2, bq), "float32")  # ... and D
        kv_full = MBarrier(pool, 1)
        full = MBarrier(pool, 2)  # a query tile's Q and dO landed in the stage
        empty = MBarrier(pool, 2)  # both consumers read the stage
        dq_full = MBarrier(pool, 2)  # a consumer's dQ part (its half of the columns) in DQ_s
        dq_empty = MBarrier(pool, 2)  # ... read by the reduction
        pool.commit()
        kv_full.init(1)
        full.init(1)
        empty.init(8)  # one arrival per consumer warp
        dq_full.init(4 if halves else 8)  # every warp of the consumer(s), after its part's stores
        dq_empty.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        if flat_dq:  # the consumers' parts in register order, and DQA in rows of 128 columns
            DQ_w = DQ_s.view(2, pr, pc, layout=fragment_order(2, pc))
            DQA_f = DQA.view(batch * heads * q_tiles * bq * d // 128, 128)
        else:
            DQ_w = DQ_s
        kv, kt = _key_tile_order(bx, k_tiles, section)
        k0 = kt * WS_KEYS
        first = first_of(kt)
        per_head = q_tiles - first  # query tiles of each head of the group
        steps = group * per_head
        if wg == 0:
            T.ptx.setmaxnreg.dec(producer_regs)
            if tid == 0:  # K and V once, then each step's query tile into stage t % 2
                T.ptx.mbarrier.arrive.expect_tx(kv_full.ptr_to([0]), 2 * WS_KEYS * d * 2)
                Tx.copy_async(K_s[0:WS_KEYS, 0:d], L.rows(K, kv, kv_heads, k0, WS_KEYS), dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
                Tx.copy_async(V_s[0:WS_KEYS, 0:d], L.rows(V, kv, kv_heads, k0, WS_KEYS), dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
                for t in T.serial(steps):
                    p_bh = kv * group + t // per_head
                    p_q0 = (first + t % per_head) * bq
                    if t >= 2:
                        empty.wait(t % 2, (t // 2 + 1) % 2)
                    T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([t % 2]), 2 * tile_bytes + 2 * bq * 4)
                    Tx.copy_async(Q_s[t % 2, 0:bq, 0:d], L.rows(Q, p_bh, heads, p_q0, bq), dispatch="tma_auto", mbar=full.ptr_to([t % 2]))
                    Tx.copy_async(DO_s[t % 2, 0:bq, 0:d], L.rows(DO, p_bh, heads, p_q0, bq), dispatch="tma_auto", mbar=full.ptr_to([t % 2]))
                    Tx.copy_async(L_s[t % 2, 0:bq], LSE[p_bh, p_q0 : p_q0 + bq], dispatch="tma_auto", mbar=full.ptr_to([t % 2]))
                    Tx.copy_async(D_s[t % 2, 0:bq], DD[p_bh, p_q0 : p_q0 + bq], dispatch="tma_auto", mbar=full.ptr_to([t % 2]))
            if tid == 32:  # each step's dQ parts added into DQA, freed once read
                for u in T.serial(steps):
                    r_bh = kv * group + u // per_head
                    r_qt = first + u % per_head  # (the step's query tile)
                    r_q0 = r_qt * bq
                    if halves:  # each warpgroup's half on its own
                        for w in list(range(2)):
                            dq_full.wait(w, u % 2)
                            if flat_dq:
                                Tx.copy_async(flat_dqa(DQA_f, r_bh, r_qt, w, 1), flat_dq_s(DQ_s, w, 1), dispatch="tma_explicit", use_tma_reduce="add")
                            else:
                                Tx.copy_async(dqa(DQA, r_bh, r_q0, w), dq_s(DQ_s, w), dispatch="tma_auto", use_tma_reduce="add")
                            T.ptx.cp_async.bulk.commit_group()
                        for w in list(range(2)):
                            T.ptx.cp_async.bulk.wait_group_read(1 - w)
                            dq_empty.arrive(w)
                    else:
                        dq_full.wait(0, u % 2)
                        if flat_dq:
                            Tx.copy_async(flat_dqa(DQA_f, r_bh, r_qt, 0, 2), flat_dq_s(DQ_s, 0, 2), dispatch="tma_explicit", use_tma_reduce="add")
                        elif split_rows:
                            for w in list(range(2)):
                                Tx.copy_async(dqa(DQA, r_bh, r_q0, w), dq_s(DQ_s, w), dispatch="tma_auto", use_tma_reduce="add")
                        else:
                            Tx.copy_async(DQA[r_bh, r_q0 : r_q0 + bq, 0:d], DQ_s[0:bq, 0:d], dispatch="tma_auto", use_tma_reduce="add")
                        T.ptx.cp_async.bulk.commit_group()
                        T.ptx.cp_async.bulk.wait_group_read(0)
                        dq_empty.arrive(0)
        else:
            T.ptx.setmaxnreg.inc(consumer_regs)
            cw = wg - 1
            kk0 = k0 + cw * 64  # this warpgroup's first key
            dk = T.alloc_buffer((64, d), "float32", scope="local", layout=wgmma_acc_layout(d))
            dv = T.alloc_buffer((64, d), "float32", scope="local", layout=wgmma_acc_layout(d))
            st = T.alloc_buffer((64, bq), "float32", scope="local", layout=wgmma_acc_layout(bq))
            dpt = T.alloc_buffer((64, bq), "float32", scope="local", layout=wgmma_acc_layout(bq))
            pt16 = T.alloc_buffer((64, bq), dtype, scope="local", layout=wgmma_acc_layout(bq))
            dst16 = T.alloc_buffer((64, bq), dtype, scope="local", layout=wgmma_acc_layout(bq))
            if dq_in_st:
                # Sᵀ's registers, read by then, also take dQ's part at head dim 128 (a 64 x 64
                # accumulator of its own had left ptxas too few registers until the accumulators
                # of non-accumulating GEMMs were fresh at their fences: `own_dq` since). At 64 its
                # own is faster (measured on an H200).
                dq = st
            else:
                dq = T.alloc_buffer((pr, pc), "float32", scope="local", layout=wgmma_acc_layout(pc))
            col = T.alloc_buffer((1, COLS), "float32", scope="local", layout=c.acc_col_layout(COLS))  # D, COLS at a time
            n_lse = bq if early_lse else COLS  # (the columns' -lse log2 e: `row_bias`)
            lc = T.alloc_buffer((1, n_lse), "float32", scope="local", layout=c.acc_col_layout(n_lse))
            out = T.alloc_buffer((64, d), dtype, scope="local", layout=wgmma_acc_layout(d))
            Tx.warpgroup.fill(dk[0:64, 0:d], 0.0)
            Tx.warpgroup.fill(dv[0:64, 0:d], 0.0)
            kv_full.wait(0, 0)
            for hh in T.serial(group):  # the group's query heads, each's query tiles from `first`
                for qt in T.serial(q_tiles):  # (a loop over all keeps qt's range known)
                    if qt >= first:
                        t = hh * per_head + qt - first  # the step (its stage t % 2)
                        bh = kv * group + hh
                        q0 = qt * bq
                        full.wait(t % 2, (t // 2) % 2)
                        if early_lse:
                            row_bias(lc, L_s, t % 2, 0, bq)
                        Tx.warpgroup.gemm_async(st[0:64, 0:bq], K_s[cw * 64 : cw * 64 + 64, 0:d], Q_s[t % 2, 0:bq, 0:d])
                        Tx.warpgroup.gemm_async(dpt[0:64, 0:bq], V_s[cw * 64 : cw * 64 + 64, 0:d], DO_s[t % 2, 0:bq, 0:d])
                        # Pᵀ computed while dPᵀ's GEMM runs (dSᵀ after it: Pᵀ in float32 and in
                        # 16 bits beside dK, dV and dPᵀ would not fit 240 registers).
                        T.ptx.wgmma.wait_group(1)
                        weights(st, lc, L_s, t % 2, k0, kk0, q0)
                        T.ptx.wgmma.wait_group(0)
                        ds_of(dpt, st, col, D_s, t % 2)
                        # dSᵀ's half into buffer t % 2 (its last readers, step t - 2's dQ GEMMs,
                        # waited for before step t - 1's barrier; before a GEMM reads the
                        # registers), dV's GEMM (and dK's), then both halves there for dQ's.
                        Tx.warpgroup.cast(pt16[0:64, 0:bq], st[0:64, 0:bq])
                        if dq_overlap:
                            Tx.warpgroup.cast(dst16[0:64, 0:bq], dpt[0:64, 0:bq])
                            Tx.warpgroup.copy(DS_s[t % 2, cw * 64 : cw * 64 + 64, 0:bq], dst16[0:64, 0:bq])
                            Tx.warpgroup.gemm_async(dv[0:64, 0:d], pt16[0:64, 0:bq], DO_s[t % 2, 0:bq, 0:d], transB=True, accum=True)
                        else:  # (this order: ptxas spills fewer registers, 40 bytes rather than 168)
                            Tx.warpgroup.gemm_async(dv[0:64, 0:d], pt16[0:64, 0:bq], DO_s[t % 2, 0:bq, 0:d], transB=True, accum=True)
                            Tx.warpgroup.cast(dst16[0:64, 0:bq], dpt[0:64, 0:bq])
                            Tx.warpgroup.copy(DS_s[t % 2, cw * 64 : cw * 64 + 64, 0:bq], dst16[0:64, 0:bq])
                            Tx.warpgroup.gemm_async(dk[0:64, 0:d], dst16[0:64, 0:bq], Q_s[t % 2, 0:bq, 0:d], transB=True, accum=True)
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.ptx.bar.sync(DS_BARRIER, 256)
                        # dQ's part, this warpgroup's half (constant slices for the descriptors; one
                        # branch or the other, so that each GEMM's accumulator is fresh: not kept
                        # live from the last step, as it would be past a sibling branch's GEMM)
                        if cw == 0:
                            Tx.warpgroup.gemm_async(dq[0:pr, 0:pc], ds_part(DS_s, t % 2, 0), k_part(K_s, 0), transA=True, transB=True)
                        else:
                            Tx.warpgroup.gemm_async(dq[0:pr, 0:pc], ds_part(DS_s, t % 2, 1), k_part(K_s, 1), transA=True, transB=True)
                        if dq_overlap:  # FlashAttention-3's order: dQ's part stored while dK's GEMM runs
                            T.ptx.wgmma.wait_group(1)  # (dV's done: dQ's runs)
                            Tx.warpgroup.gemm_async(dk[0:64, 0:d], dst16[0:64, 0:bq], Q_s[t % 2, 0:bq, 0:d], transB=True, accum=True)
                            T.ptx.wgmma.wait_group(1)  # (dQ's done: dK's runs)
                            hand_dq(dq, DQ_w, dq_full, dq_empty, cw, t, tid)
                        T.ptx.wgmma.wait_group(0)
                        T.cuda.warp_sync()  # (each warp's reads of the stage's statistics, and its warpgroup's wgmmas', done)
                        if tid % 32 == 0:
                            empty.arrive(t % 2)
                        if not dq_overlap:  # (the three GEMMs issued back to back)
                            hand_dq(dq, DQ_w, dq_full, dq_empty, cw, t, tid)
            # dK and dV through K's and V's shared memory (read by both consumers' last GEMMs,
            # each waited for by its warpgroup: the barrier orders them), stored by TMA
            Tx.warpgroup.mul(dk[0:64, 0:d], dk[0:64, 0:d], scale)
            T.ptx.bar.sync(DS_BARRIER, 256)
            Tx.warpgroup.cast(out[0:64, 0:d], dk[0:64, 0:d])
            Tx.warpgroup.copy(K_s[cw * 64 : cw * 64 + 64, 0:d], out[0:64, 0:d])
            Tx.warpgroup.cast(out[0:64, 0:d], dv[0:64, 0:d])
            Tx.warpgroup.copy(V_s[cw * 64 : cw * 64 + 64, 0:d], out[0:64, 0:d])
            T.ptx.fence.proxy.async_.shared__cta()
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
            if tid % 128 == 0:  # (rows past the keys: TMA stores none)
                for c0 in list(range(0, d, atom)):
                    Tx.copy_async(L.rows(DK, kv, kv_heads, kk0, 64, c0, atom), K_s[cw * 64 : cw * 64 + 64, c0 : c0 + atom], dispatch="tma_auto")
                    Tx.copy_async(L.rows(DV, kv, kv_heads, kk0, 64, c0, atom), V_s[cw * 64 : cw * 64 + 64, c0 : c0 + atom], dispatch="tma_auto")
                T.ptx.cp_async.bulk.commit_group()
                T.ptx.cp_async.bulk.wait_group_read(0)  # (the CTA's shared memory read before it leaves)

    return _dkv_dq_func(body, heads, kv_heads, batch, seq_q, seq_k, d, dtype, L)


def _dkv_dq_func(body, heads: int, kv_heads: int, batch: int, seq_q: int, seq_k: int, d: int, dtype: str, L: _Heads):
    """The dQ-reducing dK / dV kernel whose statements are the macro ``body(Q, K, V, DO, LSE, DD,
    DK, DV, DQA)`` (`attention_dkv_kernel(reduce_dq=True)`'s parameters; the per-head matrices
    as `_Heads` ``L`` stores them)."""
    rows = d_rows(seq_q)

    @T.prim_func
    def attention_dkv_dq(
        Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DO_ptr: T.handle, L_ptr: T.handle, DD_ptr: T.handle, DK_ptr: T.handle, DV_ptr: T.handle, DQA_ptr: T.handle
    ):
        Q = T.match_buffer(Q_ptr, L.shape(heads, seq_q), dtype)
        K = T.match_buffer(K_ptr, L.shape(kv_heads, seq_k), dtype)
        V = T.match_buffer(V_ptr, L.shape(kv_heads, seq_k), dtype)
        DO = T.match_buffer(DO_ptr, L.shape(heads, seq_q), dtype)
        LSE = T.match_buffer(L_ptr, (batch * heads, rows), "float32")
        DD = T.match_buffer(DD_ptr, (batch * heads, rows), "float32")
        DK = T.match_buffer(DK_ptr, L.shape(kv_heads, seq_k), dtype)
        DV = T.match_buffer(DV_ptr, L.shape(kv_heads, seq_k), dtype)
        DQA = T.match_buffer(DQA_ptr, (batch * heads, rows, d), "float32")
        body(Q, K, V, DO, LSE, DD, DK, DV, DQA)

    return attention_dkv_dq


@autotune(configs=[{}], key=["rows", "seq_q", "d", "dtype", "heads"])
def attention_dd_kernel(rows: int, seq_q: int, d: int, dtype: str, heads: int = 0):
    """``DD[r, i] = rowsum(dO ∘ O)`` (float32) of the ``rows`` heads' query rows (O, dO ``(rows,
    seq_q, d)``, or with ``heads`` seq-major [rows / heads, seq_q, heads, d] (`_Heads`); DD
    ``(rows, d_rows(seq_q))``, 0 past ``seq_q``), and DQA ``(rows, d_rows(seq_q), d)`` zeroed
    (float32): the backward's preprocessing where no dQ kernel computes D
    (`attention_dkv_kernel(reduce_dq=True)`, which adds dQ's parts into DQA). Each thread 8
    consecutive elements of a row at a time (16-byte loads; a row's sum over its lanes by
    shuffles) where a row's vectors divide the threads, else the accumulator's layout."""
    q_tiles = d_rows(seq_q) // BM
    L, nh = _Heads(heads > 0, rows // max(heads, 1), d), max(heads, 1)
    vecs = d // 8  # a row's vectors of 8 (16 bytes of dO or O)
    if 128 % vecs == 0:
        tile = TileLayout(S[(BM * vecs // 128, 128 // vecs, vecs, 8) : (8, vecs @ tx, 1 @ tx, 1)])
        row_sum = TileLayout(S[(BM * vecs // 128, 128 // vecs, 1) : (1, vecs @ tx, 1)] + R[vecs : 1 @ tx])
    zeros = TileLayout(S[(BM * d // 512, 512 // d, d // 4, 4) : (4, d // 4 @ tx, 1 @ tx, 1)]) if 512 % d == 0 else wgmma_acc_layout(d)

    @T.prim_func
    def attention_dd(O_ptr: T.handle, DO_ptr: T.handle, DD_ptr: T.handle, DQA_ptr: T.handle):
        O = T.match_buffer(O_ptr, L.shape(nh, seq_q), dtype)
        DO = T.match_buffer(DO_ptr, L.shape(nh, seq_q), dtype)
        DD = T.match_buffer(DD_ptr, (rows, q_tiles * BM), "float32")
        DQA = T.match_buffer(DQA_ptr, (rows, q_tiles * BM, d), "float32")
        T.device_entry()
        bx = T.cta_id([rows * q_tiles])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128])
        bh = bx // q_tiles
        q0 = bx % q_tiles * BM
        zero = T.alloc_buffer((BM, d), "float32", scope="local", layout=zeros)
        Tx.cta.fill(zero[0:BM, 0:d], 0.0)
        Tx.cta.copy(DQA[bh, q0 : q0 + BM, 0:d], zero[0:BM, 0:d])
        if 128 % vecs == 0:
            do_r = T.alloc_buffer((BM, d), dtype, scope="local", layout=tile)
            o_r = T.alloc_buffer((BM, d), dtype, scope="local", layout=tile)
            prod = T.alloc_buffer((BM, d), "float32", scope="local", layout=tile)
            dd = T.alloc_buffer((BM, 1), "float32", scope="local", layout=row_sum)
            Tx.cta.copy(do_r[0:BM, 0:d], L.rows(DO, bh, nh, q0, BM), clip=True, other=0.0)
            Tx.cta.copy(o_r[0:BM, 0:d], L.rows(O, bh, nh, q0, BM), clip=True, other=0.0)
            Tx.cta.mul(prod[0:BM, 0:d], do_r[0:BM, 0:d], o_r[0:BM, 0:d])
            Tx.cta.sum(dd[0:BM, 0:1], prod[0:BM, 0:d])
            if tid % vecs == 0:  # a row's first lane writes it
                for i in T.serial(BM * vecs // 128):
                    DD[bh, q0 + i * (128 // vecs) + tid // vecs] = dd.local()[i]
        else:
            cols = 64 if d > 128 else d
            do_a = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
            o_a = T.alloc_buffer((BM, cols), dtype, scope="local", layout=wgmma_acc_layout(cols))
            prod_a = T.alloc_buffer((BM, cols), "float32", scope="local", layout=wgmma_acc_layout(cols))
            dd_a = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
            _row_dots(dd_a, prod_a, do_a, o_a, DO, O, bh, q0, d, cols, L, nh)
            if tid % 4 == 0:  # a quad's first lane writes its two rows
                for hf in T.serial(2):
                    DD[bh, _row(q0, tid, hf)] = dd_a.local()[hf]

    return attention_dd


@autotune(configs=[{}], key=["rows", "seq_q", "d", "dtype", "scale", "heads", "part_cols"])
def attention_dq_convert_kernel(rows: int, seq_q: int, d: int, dtype: str, scale: float, heads: int = 0, part_cols: int = 0):
    """``DQ = scale · DQA`` rounded to ``dtype`` (DQA ``(rows, d_rows(seq_q), d)`` float32, the
    reductions of `attention_dkv_kernel(reduce_dq=True)`; DQ ``(rows, seq_q, d)``, or with
    ``heads`` seq-major [rows / heads, seq_q, heads, d] (`_Heads`)): each thread
    8 consecutive elements of a row at a time (16-byte stores; the accumulator's layout would load
    and store 8 and 4 bytes), where a row's vectors divide the threads. ``part_cols``: DQA in
    parts of 64 rows x ``part_cols`` columns in `fragment_order` (``flat_dq``'s), each read
    into the accumulator's layout (16-byte loads) and stored through shared memory by TMA (from
    the accumulator's layout a thread's stores would be 4 bytes: 1.7x the time, on an H200)."""
    q_tiles = d_rows(seq_q) // BM
    vecs = d // 8  # a row's vectors of 8
    tile = TileLayout(S[(BM * vecs // 128, 128 // vecs, vecs, 8) : (8, vecs @ tx, 1 @ tx, 1)]) if 128 % vecs == 0 else wgmma_acc_layout(d)
    L, nh = _Heads(heads > 0, rows // max(heads, 1), d), max(heads, 1)
    if part_cols and (d % part_cols or part_cols % 16):
        raise ValueError(f"attention_dq_convert_kernel(part_cols={part_cols}): parts of whole 16-column groups that divide the head dim ({d})")
    # `part_cols`: a warpgroup reads the 64 rows' d // pc parts one at a time (part (bh * q_tiles
    # + tile) * (d // pc) + w of DQA's: columns [w pc, (w + 1) pc)) into the accumulator's layout.
    pc = part_cols or d
    per_tile = d // pc
    parts = rows * q_tiles * per_tile
    regs = wgmma_acc_layout(pc) if part_cols else tile
    # A part's rows in shared memory in the widest swizzle whose atom divides them, a TMA box per
    # atom's columns (each dense).
    eb = c.elem_bytes(dtype)
    swizzle = c.swizzle_for(pc, eb)
    atom = (16 << swizzle) // eb
    parts_smem = mma_shared_layout(dtype, swizzle, (per_tile, BM, pc))

    @T.prim_func
    def attention_dq_convert(DQA_ptr: T.handle, DQ_ptr: T.handle):
        DQA = T.match_buffer(DQA_ptr, (rows, q_tiles * BM, d), "float32")
        DQ = T.match_buffer(DQ_ptr, L.shape(nh, seq_q), dtype)
        T.device_entry()
        bx = T.cta_id([rows * q_tiles])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128])
        bh = bx // q_tiles
        q0 = bx % q_tiles * BM
        dq = T.alloc_buffer((BM, pc), "float32", scope="local", layout=regs)
        out = T.alloc_buffer((BM, pc), dtype, scope="local", layout=regs)
        if part_cols:
            pool = T.SMEMPool()
            DQ_s = pool.alloc((per_tile, BM, pc), dtype, layout=parts_smem)
            pool.commit()
            DQA_p = DQA.view(parts, BM, pc, layout=fragment_order(parts, pc))
            for w in list(range(per_tile)):
                Tx.warpgroup.copy(dq[0:BM, 0:pc], DQA_p[bx * per_tile + w, 0:BM, 0:pc])
                Tx.warpgroup.mul(dq[0:BM, 0:pc], dq[0:BM, 0:pc], scale)
                Tx.warpgroup.cast(out[0:BM, 0:pc], dq[0:BM, 0:pc])
                Tx.warpgroup.copy(DQ_s[w, 0:BM, 0:pc], out[0:BM, 0:pc])
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if tid == 0:  # TMA clips the rows past the sequence
                for w in list(range(per_tile)):
                    for c0 in list(range(0, pc, atom)):
                        Tx.copy_async(L.rows(DQ, bh, nh, q0, BM, w * pc + c0, atom), DQ_s[w, 0:BM, c0 : c0 + atom], dispatch="tma_auto")
                T.ptx.cp_async.bulk.commit_group()
                T.ptx.cp_async.bulk.wait_group_read(0)  # (DQ_s lives until the stores have read it)
        else:
            Tx.cta.copy(dq[0:BM, 0:d], DQA[bh, q0 : q0 + BM, 0:d])
            Tx.cta.mul(dq[0:BM, 0:d], dq[0:BM, 0:d], scale)
            Tx.cta.cast(out[0:BM, 0:d], dq[0:BM, 0:d])
            Tx.cta.copy(L.rows(DQ, bh, nh, q0, BM), out[0:BM, 0:d], clip=True)

    return attention_dq_convert


def _dkv_varlen(heads: int, kv_heads: int, d: int, dtype: str, causal: bool, scale: float):
    """`attention_dkv_kernel` over packed sequences: a CTA per (sequence, K/V head, key tile of the
    longest), the query tiles of its sequence's rows (a run-time count), Q and dO by TMA (rows
    past the sequence: the next one's, weighted 0 by their +inf log-sum-exp), the statistics
    through masked copies, dK and dV stored within the sequence's keys. Past head dim 128, as the
    dense kernel: two warpgroups, each holding dK's and dV's half of the columns, the first
    computing S, dP, P and dS for both."""
    group = heads // kv_heads
    scale_log2 = scale * LOG2E
    wgs = 2 if d > 128 else 1
    dh = d // wgs
    swizzle = 3 if dh % 64 == 0 else 2
    kv_smem = mma_shared_layout(dtype, swizzle, (BN, d))
    q_smem = mma_shared_layout(dtype, swizzle, (2, BM, d))
    p_smem = mma_shared_layout(dtype, 3, (BM, BN))
    tile_bytes = BM * d * 2

    @T.macro
    def load_q(Q_s, DO_s, Q, DO, full, q_start, hh, kvh, qt, qi):
        # Query tile qt of the group's head hh (the sequence's rows) into stage qi % 2, on its
        # barrier hh * 2 + qi % 2 (a pair per head: no product of run-time values in a phase).
        # (Its rows an expression, not a name: a name bound at each of the macro's uses is a
        # mutable scalar.)
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([hh * 2 + qi % 2]), 2 * tile_bytes)
        Tx.copy_async(Q_s[qi % 2, 0:BM, 0:d], Q[q_start + qt * BM : q_start + qt * BM + BM, kvh * group + hh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([hh * 2 + qi % 2]))
        Tx.copy_async(DO_s[qi % 2, 0:BM, 0:d], DO[q_start + qt * BM : q_start + qt * BM + BM, kvh * group + hh, 0:d], dispatch="tma_auto", mbar=full.ptr_to([hh * 2 + qi % 2]))

    @T.macro
    def stats(lse2, dd, LSE, DD, q_start, h, q0, n_rows):
        # The rows' -lse log2 e (past the sequence +inf: weight 0) and D.
        Tx.warpgroup.copy(lse2[0:BM, 0:1], LSE[q_start + q0 : q_start + q0 + BM, h], clip=True, mask=lambda i, c: q0 + i < n_rows, other=float("inf"))
        Tx.warpgroup.mul(lse2[0:BM, 0:1], lse2[0:BM, 0:1], -LOG2E)
        Tx.warpgroup.minimum(lse2[0:BM, 0:1], lse2[0:BM, 0:1], FLT_MAX)
        Tx.warpgroup.copy(dd[0:BM, 0:1], DD[q_start + q0 : q_start + q0 + BM, h], clip=True, mask=lambda i, c: q0 + i < n_rows, other=0.0)

    @T.macro
    def scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, q0, k0, n_keys, diag, stage):
        # S = Q Kᵀ and dP = dO Vᵀ of the query tile in `stage`, P and dS, rounded into shared memory.
        Tx.warpgroup.gemm_async(s[0:BM, 0:BN], Q_s[stage, 0:BM, 0:d], K_s[0:BN, 0:d])
        Tx.warpgroup.gemm_async(dp[0:BM, 0:BN], DO_s[stage, 0:BM, 0:d], V_s[0:BN, 0:d])
        T.ptx.wgmma.wait_group(0)
        _weights_and_ds(s, dp, lse2, dd, k0, q0, n_keys, causal, diag, scale_log2)
        _p_and_ds_to_shared(s, dp, p16, P_s, DS_s)

    @T.macro
    def store(dk, dv, out, DK, DV, k_start, k0, kvh, n_keys, c0):
        # dK's and dV's columns [c0, c0 + dh), rounded, within the sequence's keys.
        Tx.warpgroup.cast(out[0:BN, 0:dh], dk[0:BN, 0:dh])
        Tx.warpgroup.copy(DK[k_start + k0 : k_start + k0 + BN, kvh, c0 : c0 + dh], out[0:BN, 0:dh], clip=True, mask=lambda i, hh, j: k0 + i < n_keys)
        Tx.warpgroup.cast(out[0:BN, 0:dh], dv[0:BN, 0:dh])
        Tx.warpgroup.copy(DV[k_start + k0 : k_start + k0 + BN, kvh, c0 : c0 + dh], out[0:BN, 0:dh], clip=True, mask=lambda i, hh, j: k0 + i < n_keys)

    @T.prim_func
    def attention_dkv_varlen(
        Q_ptr: T.handle,
        K_ptr: T.handle,
        V_ptr: T.handle,
        DO_ptr: T.handle,
        L_ptr: T.handle,
        DD_ptr: T.handle,
        CUQ_ptr: T.handle,
        CUK_ptr: T.handle,
        DK_ptr: T.handle,
        DV_ptr: T.handle,
        nb: T.int32,
        max_k: T.int32,
        total_q: T.int32,
        total_k: T.int32,
    ):
        Q = T.match_buffer(Q_ptr, (total_q, heads, d), dtype)
        K = T.match_buffer(K_ptr, (total_k, kv_heads, d), dtype)
        V = T.match_buffer(V_ptr, (total_k, kv_heads, d), dtype)
        DO = T.match_buffer(DO_ptr, (total_q, heads, d), dtype)
        LSE = T.match_buffer(L_ptr, (total_q, heads), "float32")
        DD = T.match_buffer(DD_ptr, (total_q, heads), "float32")
        CUQ = T.match_buffer(CUQ_ptr, (nb + 1,), "int32")
        CUK = T.match_buffer(CUK_ptr, (nb + 1,), "int32")
        DK = T.match_buffer(DK_ptr, (total_k, kv_heads, d), dtype)
        DV = T.match_buffer(DV_ptr, (total_k, kv_heads, d), dtype)
        T.device_entry()
        bx = T.cta_id([nb * kv_heads * ((max_k + BN - 1) // BN)])
        wg = T.warpgroup_id([wgs])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128 * wgs])
        pool = T.SMEMPool()
        K_s = pool.alloc((BN, d), dtype, layout=kv_smem)
        V_s = pool.alloc((BN, d), dtype, layout=kv_smem)
        Q_s = pool.alloc((2, BM, d), dtype, layout=q_smem)
        DO_s = pool.alloc((2, BM, d), dtype, layout=q_smem)
        P_s = pool.alloc((BM, BN), dtype, layout=p_smem)
        DS_s = pool.alloc((BM, BN), dtype, layout=p_smem)
        kv_full = MBarrier(pool, 1)
        full = MBarrier(pool, 2 * group)  # (a pair per head of the group: `load_q`)
        pool.commit()
        kv_full.init(1)
        full.init(1)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        nkt = (max_k + BN - 1) // BN
        b = bx // (kv_heads * nkt)
        kvh = bx // nkt % kv_heads
        k0 = bx % nkt * BN
        q_start, n_rows, k_start, n_keys = _sequence(CUQ, CUK, b, nb)
        diag = n_keys - n_rows  # (causal: the sequence's lower-right diagonal)
        # The query tiles that see this key tile (causal: from the first row at or below its
        # first key), none past the sequence's keys.
        first = T.max(0, (k0 - diag) // BM) if causal else 0
        per_head = T.if_then_else(k0 < n_keys, T.max(0, (n_rows + BM - 1) // BM - first), 0)
        dk = T.alloc_buffer((BN, dh), "float32", scope="local", layout=wgmma_acc_layout(dh))
        dv = T.alloc_buffer((BN, dh), "float32", scope="local", layout=wgmma_acc_layout(dh))
        s = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        dp = T.alloc_buffer((BM, BN), "float32", scope="local", layout=wgmma_acc_layout(BN))
        p16 = T.alloc_buffer((BM, BN), dtype, scope="local", layout=wgmma_acc_layout(BN))
        lse2 = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        dd = T.alloc_buffer((BM, 1), "float32", scope="local", layout=wgmma_row_layout())
        out = T.alloc_buffer((BN, dh), dtype, scope="local", layout=wgmma_acc_layout(dh))
        if tid == 0:  # K and V once (rows past the sequence: the next one's, masked)
            T.ptx.mbarrier.arrive.expect_tx(kv_full.ptr_to([0]), 2 * BN * d * 2)
            Tx.copy_async(K_s[0:BN, 0:d], K[k_start + k0 : k_start + k0 + BN, kvh, 0:d], dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
            Tx.copy_async(V_s[0:BN, 0:d], V[k_start + k0 : k_start + k0 + BN, kvh, 0:d], dispatch="tma_auto", mbar=kv_full.ptr_to([0]))
        Tx.warpgroup.fill(dk[0:BN, 0:dh], 0.0)
        Tx.warpgroup.fill(dv[0:BN, 0:dh], 0.0)
        kv_full.wait(0, 0)
        # The group's head hh, its query tile first + qi: each head's first tile loaded as it
        # starts, the next one during a step (loops, not a division by the run-time per_head: the
        # TMA coordinates stay affine); stage qi % 2, read by the step before's wgmmas, waited for.
        for hh in T.serial(group):
            if tid == 0:
                for u in T.serial(T.min(per_head, 1)):
                    load_q(Q_s, DO_s, Q, DO, full, q_start, hh, kvh, first, 0)
            for qi in T.serial(per_head):
                h = kvh * group + hh
                q0 = (first + qi) * BM
                if tid == 0:  # the head's next query tile into the other stage
                    for u in T.serial(T.min(per_head - 1 - qi, 1)):
                        load_q(Q_s, DO_s, Q, DO, full, q_start, hh, kvh, first + qi + 1, qi + 1)
                if wgs > 1:  # (P and dS: the first warpgroup's)
                    if wg == 0:
                        stats(lse2, dd, LSE, DD, q_start, h, q0, n_rows)
                else:
                    stats(lse2, dd, LSE, DD, q_start, h, q0, n_rows)
                full.wait(hh * 2 + qi % 2, (qi // 2) % 2)
                if wgs > 1:
                    if wg == 0:
                        scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, q0, k0, n_keys, diag, qi % 2)
                else:
                    scores(s, dp, p16, lse2, dd, Q_s, DO_s, K_s, V_s, P_s, DS_s, q0, k0, n_keys, diag, qi % 2)
                T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.cta_sync()
                if wgs > 1:  # (each warpgroup its columns, constant slices for the descriptors)
                    for w in list(range(wgs)):
                        if wg == w:
                            _grads(dk, dv, P_s, DS_s, Q_s, DO_s, qi % 2, w * dh, dh)
                else:
                    _grads(dk, dv, P_s, DS_s, Q_s, DO_s, qi % 2, 0, dh)
                T.ptx.wgmma.wait_group(0)
                if wgs > 1:  # (P_s and DS_s read by the other warpgroup's too)
                    T.cuda.cta_sync()
        Tx.warpgroup.mul(dk[0:BN, 0:dh], dk[0:BN, 0:dh], scale)
        if wgs > 1:
            for w in list(range(wgs)):
                if wg == w:
                    store(dk, dv, out, DK, DV, k_start, k0, kvh, n_keys, w * dh)
        else:
            store(dk, dv, out, DK, DV, k_start, k0, kvh, n_keys, 0)

    return attention_dkv_varlen


def _reduce_dq(q, d: int, causal: bool, seq_q: int, seq_k: int, deterministic: Optional[bool]) -> bool:
    """Whether dQ is reduced into float32 by the dK / dV kernel (`attention_dkv_kernel(reduce_dq=
    True)`) rather than computed by its own kernel: never past head dim 128 (its shared memory) nor
    ``deterministic``; with ``deterministic=False`` always; by default where that was measured
    faster (H200, bf16, the whole backward: non-causal at every length measured, 1k-16k,
    1.02-1.24x; causal at d = 128 from 1k keys, 1.06-1.20x; at d = 64 from 2k, 1.10-1.30x, and
    from 1k where its dK / dV kernel may take query tiles of 128 rows, 1.08-1.11x; causal 512
    0.87-0.91x, 1k over tiles of 64 rows 0.93-0.97x), unless PyTorch is asked for deterministic
    algorithms."""
    if d > 128 or deterministic:
        return False
    if deterministic is not None:
        return True
    if causal and d <= 64 and seq_k < (1024 if _wide_queries(d, seq_q) else 2048):
        return False
    if c.is_torch(q):
        import torch

        return not torch.are_deterministic_algorithms_enabled()
    return True


def _kernel_key(b, h, hk, sq, sk, d, dtype, is_causal, scale: float, offset: int, mode: str, major: bool = False) -> dict:
    """The key of the backward's dQ and dK / dV kernels (and their tuners)."""
    causal = bool(is_causal)
    return dict(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=scale, offset=int(offset) if causal else 0, mask=mode, seq_major=major
    )



def dkv_kernel_for(q, k, is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False, deterministic: Optional[bool] = None):
    """``(reduce, tuned)``: whether the backward of attention over ``q`` and ``k`` (without a mask)
    reduces dQ (`_reduce_dq`), and its dK / dV kernel's tuner entry (`TunedKernel`: its choice
    once a backward has run), as `_backward` looks them up."""
    b, h, sq, sk, hk, d, dtype = _check(q, k, k, enable_gqa)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    reduce = _reduce_dq(q, d, bool(is_causal), sq, sk, deterministic)
    kw = _kernel_key(b, h, hk, sq, sk, d, dtype, is_causal, scale, 0, "", seq_major(q, k))
    return reduce, attention_dkv_kernel(**kw, **({"reduce_dq": True} if reduce else {}))


def _backward(
    dout, q, k, v, out, lse, is_causal: bool, scale: Optional[float], enable_gqa: bool, offset: int = 0, deterministic: Optional[bool] = None, attn_mask=None
):
    """``(dq, dk, dv)``: `_new_plan`'s, made once per call signature for torch tensors without a
    mask (as the forward's: a training step calls the same shapes over and over, and the checks
    and kernel lookups were most of the backward's host time), per call otherwise."""
    if c.is_torch(q) and attn_mask is None:
        import torch

        det = torch.are_deterministic_algorithms_enabled()  # (`_reduce_dq` reads it)
        key = ("sdpa_backward", bool(is_causal), scale, bool(enable_gqa), int(offset), deterministic, det)
        dout, q, k, v, out, lse = c.aligned((dout, q, k, v, out, lse))
        new = lambda: _new_plan(dout, q, k, v, out, lse, is_causal, scale, enable_gqa, offset, deterministic)  # noqa: E731
        return c.signature_plan((dout, q, k, v, out, lse), key, new)(dout, q, k, v, out, lse)
    return _new_plan(dout, q, k, v, out, lse, is_causal, scale, enable_gqa, offset, deterministic, attn_mask)(dout, q, k, v, out, lse)


def _new_plan(
    dout, q, k, v, out, lse, is_causal: bool, scale: Optional[float], enable_gqa: bool, offset: int, deterministic: Optional[bool], attn_mask=None
):
    """`_backward`'s checks and choices for operands like these, made once: ``run(dout, q, k, v,
    out, lse)`` allocates the gradients and launches, over contiguous copies of the operands (a
    view where they are contiguous already), or, where q, k, v and out are seq-major, over them in
    place (dout too, or a seq-major copy of it: `_dout_rows`): D, then dK / dV with dQ
    reduced in float32, then dQ rounded; or the dQ kernel (with D) and the dK / dV kernel
    (`_reduce_dq` chooses, ``deterministic`` with it). ``attn_mask``: the forward's (bool or
    additive), added to the scores as the forward adds it."""
    b, h, sq, sk, hk, d, dtype = _check(q, k, v, enable_gqa)
    name = "tirx.ops.scaled_dot_product_attention_backward"
    for what, t, shape in (("dout", dout, (b, h, sq, d)), ("out", out, (b, h, sq, d)), ("lse", lse, (b, h, sq))):
        if tuple(t.shape) != shape:
            raise ValueError(f"{name}: {what} of shape {list(t.shape)}; expected {list(shape)} (the forward's, for query {list(q.shape)})")
    if c.dtype_name(dout) != dtype or c.dtype_name(out) != dtype or c.dtype_name(lse) != "float32":
        raise TypeError(f"{name}: dout and out of the query's dtype ({dtype}), lse float32; got {c.dtype_name(dout)}, {c.dtype_name(out)}, {c.dtype_name(lse)}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    m, mode = (), ""
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{name}: attn_mask and is_causal together (the forward refuses them too): fold the causal mask into attn_mask")
        if scale == 0:
            raise ValueError(f"{name}: attn_mask with scale=0 is not supported (as the forward's)")
        mask, mode = _mask(attn_mask, b, h, sq, sk, dtype)
        m = (mask,)
    major = seq_major(q, k, v, out)  # (dout read so too: `_dout_rows`)

    def gradients(q, k):
        if major:  # (in the operands' memory order too, as PyTorch's flash backward writes them)
            return _swap(c.new_array(q, (b, sq, h, d))), _swap(c.new_array(k, (b, sk, hk, d))), _swap(c.new_array(k, (b, sk, hk, d)))
        return c.new_array(q, (b, h, sq, d)), c.new_array(k, (b, hk, sk, d)), c.new_array(k, (b, hk, sk, d))

    if b * h * sq == 0 or sk == 0:

        def run_empty(dout, q, k, v, out, lse):
            grads = gradients(q, k)
            for t in grads:
                t[...] = 0
            return grads

        return run_empty
    rows = d_rows(sq)
    kw = _kernel_key(b, h, hk, sq, sk, d, dtype, is_causal, scale, offset, mode, major)
    reduce = _reduce_dq(q, d, bool(is_causal), sq, sk, deterministic)
    heads = h if major else 0  # (the dd and convert kernels' seq-major layout)
    if reduce:
        dd_of = attention_dd_kernel(rows=b * h, seq_q=sq, d=d, dtype=dtype, heads=heads).launcher()
        tuned = attention_dkv_kernel(**kw, reduce_dq=True)
        dkv = tuned.launcher()
        convert = []

        def dq_of(dqa, dq_):
            # DQA's order is the chosen dK / dV kernel's (`flat_dq`), chosen at its first call
            if not convert:
                cols = _part_cols(tuned.config, d)
                convert.append(attention_dq_convert_kernel(rows=b * h, seq_q=sq, d=d, dtype=dtype, scale=scale, heads=heads, part_cols=cols).launcher())
            convert[0](dqa, dq_)

    else:
        dq_dd = attention_dq_kernel(**kw).launcher()
        dkv = attention_dkv_kernel(**kw).launcher()
    if major:
        dout_rows = _dout_rows(dout)
    else:  # [batch * heads, seq, d]: views where contiguous, else copies (`_heads_rows`)
        q_rows, k_rows, v_rows, out_rows, dout_rows = (_heads_rows(t, d) for t in (q, k, v, out, dout))

    def run(dout, q, k, v, out, lse):
        dq, dk, dv = gradients(q, k)
        if rows == sq:  # (whole query tiles: the forward's log-sum-exp as it is)
            lse_p = c.contiguous(lse).reshape(b * h, rows)
        else:
            lse_p = c.new_array(q, (b * h, rows), "float32", float("inf"))  # (+inf past seq_q: those rows weigh 0)
            lse_p[:, :sq] = lse.reshape(b * h, sq)
        dd = c.new_array(q, (b * h, rows), "float32")
        if major:  # [batch, seq, heads, d] views of the memory as it is
            qs, os_, dos, dq_ = _swap(q), _swap(out), dout_rows(dout), _swap(dq)
            ks, vs, dk_, dv_ = (_swap(t) for t in (k, v, dk, dv))
        else:
            qs, ks, vs, os_, dos = q_rows(q), k_rows(k), v_rows(v), out_rows(out), dout_rows(dout)
            dq_, dk_, dv_ = dq.reshape(b * h, sq, d), dk.reshape(b * hk, sk, d), dv.reshape(b * hk, sk, d)
        if reduce:
            dqa = c.new_array(q, (b * h, rows, d), "float32")  # (zeroed by the D kernel)
            dd_of(os_, dos, dd, dqa)
            dkv(qs, ks, vs, dos, lse_p, dd, *m, dk_, dv_, dqa)
            dq_of(dqa, dq_)
        else:
            dq_dd(qs, ks, vs, os_, dos, lse_p, *m, dq_, dd)
            dkv(qs, ks, vs, dos, lse_p, dd, *m, dk_, dv_)
        return dq, dk, dv

    return run


def _dout_rows(dout):
    """How the backward over seq-major operands reads tensors like ``dout`` as [batch, seq,
    heads, d]: a view where seq-major, else a copy into that order (one copy, not one of each
    other operand: autograd's gradient of the output often reaches the backward contiguous, where
    a view of the output took it apart, as ``out[0]`` does)."""
    if _dense(dout, (0, 2, 1, 3)):
        return _swap
    return (lambda t: _swap(t).contiguous()) if c.is_torch(dout) else (lambda t: np.ascontiguousarray(_swap(t)))


def scaled_dot_product_attention_backward(
    dout, q, k, v, out, lse, is_causal: bool = False, scale=None, enable_gqa: bool = False, deterministic: Optional[bool] = None, attn_mask=None
):
    """The gradients ``(dq, dk, dv)`` of `scaled_dot_product_attention(q, k, v, is_causal=,
    scale=, enable_gqa=)` for the output's gradient ``dout``, from its output ``out`` and
    log-sum-exp ``lse`` ([batch, heads, seq_q] float32: ``return_lse=True``): bf16/f16
    [batch, heads, seq, head_dim] tensors (or NumPy arrays: the simulator), the forward's head dims
    (64, 96, 128, 192, 256); grouped-query heads' dK and dV summed over each group. Where it
    was measured faster (head dims to 128, but not causal at head dim 64 under 2k keys, or 1k where the
    queries are whole tiles of 128 rows), dQ is
    summed in float32 by TMA reductions in an order that varies from run to run, unless
    `torch.are_deterministic_algorithms_enabled()`; elsewhere, or with ``deterministic=True``, a
    second kernel recomputes the scores for dQ (the same result every run).
    ``deterministic=False`` reduces dQ at any size (head dims to 128). ``attn_mask``: the
    forward's (bool or additive; its own gradient is not computed). Also ``loss.backward()`` through `scaled_dot_product_attention`."""
    deterministic = None if deterministic is None else bool(deterministic)
    if c.is_torch(q):
        if c.compiling():
            if deterministic is not None:
                raise ValueError("tirx.ops.scaled_dot_product_attention_backward: under torch.compile, choose deterministic mode with torch.use_deterministic_algorithms()")
            return register_backward_op()(dout, q, k, v, out, lse, bool(is_causal), None if scale is None else float(scale), bool(enable_gqa), 0, attn_mask)
        return _backward(dout, q, k, v, out, lse, bool(is_causal), scale, bool(enable_gqa), deterministic=deterministic, attn_mask=attn_mask)
    args = tuple(np.asarray(t) for t in (dout, q, k, v, out, lse))
    m = None if attn_mask is None else np.asarray(attn_mask)
    return _backward(*args, bool(is_causal), scale, bool(enable_gqa), deterministic=deterministic, attn_mask=m)


def register_backward_op():
    """`torch.ops.tirx.scaled_dot_product_attention_backward(dout, q, k, v, out, lse, is_causal,
    scale, enable_gqa, offset) -> (dq, dk, dv)` (registered on the first call; the forward op's
    backward calls it)."""
    return c.torch_op("scaled_dot_product_attention_backward", _backward_op_parts)


def _backward_op_parts():
    import torch
    from typing import Tuple

    def schema(
        dout: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        out: torch.Tensor,
        lse: torch.Tensor,
        is_causal: bool,
        scale: Optional[float],
        enable_gqa: bool,
        offset: int,
        attn_mask: Optional[torch.Tensor],
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _backward(dout, q, k, v, out, lse, is_causal, scale, enable_gqa, offset, attn_mask=attn_mask)

    def fake(dout, q, k, v, out, lse, is_causal, scale, enable_gqa, offset, attn_mask):
        # (the gradients in the memory order `_backward` gives them: seq-major for seq-major operands)
        if seq_major(q, k, v, out):
            return tuple(_swap(t.new_empty((t.shape[0], t.shape[2], t.shape[1], t.shape[3]))) for t in (q, k, v))
        cont = torch.contiguous_format
        return torch.empty_like(q, memory_format=cont), torch.empty_like(k, memory_format=cont), torch.empty_like(v, memory_format=cont)

    return schema, fake


def varlen_attention_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False, scale=None):
    """The gradients ``(dq, dk, dv)`` of `varlen_attention` (FlashAttention's
    ``flash_attn_varlen_func`` backward): ``dout``, ``q``, ``out`` ``(total_q, heads, d)``, ``k``,
    ``v`` ``(total_k, kv_heads, d)``, ``lse (heads, total_q)`` float32 (``return_lse=True``), the
    int32 cumulative ends and the longest query and key counts; causal on each sequence's
    lower-right diagonal; the forward's head dims (64, 96, 128, 192, 256). Rows outside every
    sequence get 0."""
    name = "tirx.ops.varlen_attention_backward"
    dtype = c.dtype_name(q)
    (tq, h, d), (tk, hk, _) = q.shape, k.shape
    if tuple(dout.shape) != tuple(q.shape) or tuple(out.shape) != tuple(q.shape) or tuple(lse.shape) != (h, tq) or tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"{name}: dout and out like q {list(q.shape)}, v like k {list(k.shape)}, lse (heads, total_q) = ({h}, {tq}); got {list(lse.shape)}")
    if d not in HEAD_DIMS or hk == 0 or h % hk or dtype not in ("bfloat16", "float16") or c.dtype_name(lse) != "float32":
        raise ValueError(f"{name}: {dtype} q, k, v of head dim {d} ({h} heads over {hk}); bfloat16 / float16, head dims {', '.join(map(str, HEAD_DIMS))}, float32 lse")
    nb = len(cu_seqlens_q) - 1
    dq, dk, dv = c.new_array(q, (tq, h, d), fill=0), c.new_array(k, (tk, hk, d), fill=0), c.new_array(k, (tk, hk, d), fill=0)
    if nb <= 0 or tq == 0 or tk == 0 or max_seqlen_q <= 0 or max_seqlen_k <= 0:
        return dq, dk, dv
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    kw = dict(heads=h, kv_heads=hk, batch=0, seq_q=0, seq_k=0, d=d, dtype=dtype, causal=bool(is_causal), scale=scale, varlen=True)
    qs, ks, vs, os_, dos = (c.contiguous(t) for t in (q, k, v, out, dout))
    lse_t = c.contiguous(lse.T)  # (total_q, heads): the kernels' (a run-time size is a tensor's first dim)
    dd = c.new_array(q, (tq, h), "float32")
    cuq, cuk = c.contiguous(cu_seqlens_q), c.contiguous(cu_seqlens_k)
    attention_dq_kernel(**kw)(qs, ks, vs, os_, dos, lse_t, cuq, cuk, dq, dd, nb, int(max_seqlen_q), tq, tk)
    attention_dkv_kernel(**kw)(qs, ks, vs, dos, lse_t, dd, cuq, cuk, dk, dv, nb, int(max_seqlen_k), tq, tk)
    return dq, dk, dv


def register_varlen_backward_op():
    """`torch.ops.tirx.varlen_attention_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k, is_causal, scale) -> (dq, dk, dv)` (registered on the first call;
    `varlen_attention`'s registered op's backward calls it)."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            dout: torch.Tensor,
            q: torch.Tensor,
            k: torch.Tensor,
            v: torch.Tensor,
            out: torch.Tensor,
            lse: torch.Tensor,
            cu_seqlens_q: torch.Tensor,
            cu_seqlens_k: torch.Tensor,
            max_seqlen_q: int,
            max_seqlen_k: int,
            is_causal: bool,
            scale: Optional[float],
        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return varlen_attention_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, scale)

        def fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, scale):
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        return schema, fake

    return c.torch_op("varlen_attention_backward", parts)
