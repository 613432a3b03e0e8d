"""`tirx.ops.matmul(a, b)`: C = A @ B for bfloat16 or float16 matrices (and `torch.matmul`'s other
ranks, `_matmul_nd`), float32 accumulation, one rounding, on Hopper's tensor cores
(examples/gemm_hopper.py, generalised);
`tirx.ops.addmm(input, a, b, beta=, alpha=)`: PyTorch's addmm, the input (a bias row, a bias
column, a number or a matrix) added in the epilogue; both with ``activation=`` ("relu", "gelu",
"gelu_tanh", "silu") applied there too, in float32 before the one rounding.

Each CTA is a producer warpgroup and one to three consumer warpgroups (64 rows of the tile each):
the producer's one thread loads A (BM x 64) and B (64 x BN) tiles into swizzled shared-memory
stages with TMA, announcing each stage's bytes on its `full` mbarrier; consumers wait on it,
issue `wgmma` from shared memory (`gemm_async`), keep one K step in flight and free the stage
before it (`empty`). The epilogue rounds the accumulator, stores it to a shared tile with
`stmatrix` and writes it with TMA, 128 columns at a time. CTAs are persistent (one per SM) and
walk the output tiles grouped along M, so the CTAs running at once share A rows and B columns
in L2. The autotuner picks the tile (BM 128 or 64, BN 256 or 128, for decode's M also 64 and 32,
192 where it saves a partial round; promoted FP8 also 192 x 128, and 128 x 192 or 128 x 208 at every shape) per shape; the stage count is as many as shared memory holds. Where
the tiles leave most SMs idle, the autotuner also times K split over the CTAs of a cluster, the first
adding the others' float32 parts in one launch; ``split_k=``: each part's sums in a slice of a
workspace, then a second kernel (`matmul_finish_kernel`) adding them in order.

Any M; N a multiple of 8 and K one too, or else M (TMA's 16-byte row strides: ``a`` then read
transposed, as the weight gradient Aᵀ dC of any number of rows is). Tiles cover the matrices: what a
load box reads outside A or B is filled with zeros by TMA (adding nothing to the sums), what a
store box writes outside C is clipped. Sizes are compile-time (a kernel per shape, compiled
once and cached on disk)."""

import math
from typing import Callable, Optional

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from ..layout import mma_shared_layout, wgmma_acc_layout, wgmma_row_layout
from . import _common as c

BK = 64  # K per stage: one 128-byte swizzled row of 16-bit elements
EPI = 128  # epilogue columns per TMA store
FIN = 64  # columns per warpgroup of split-K's finish kernel
# Named barriers of the consumers' epilogues: one per consumer warpgroup (9..15 are the script's).
EPILOGUE_BARRIER = 13
# Ping-pong's turns (`matmul_kernel`'s ``pingpong``): consumer w waits on TURN_BARRIER + w.
TURN_BARRIER = 9
# FP8 promoted ahead (`matmul_kernel`'s ``promote_ahead``): K steps per run of the pipeline.
AHEAD_RUN = 4
# Tile widths of DeepGEMM's block scales (`matmul_kernel`'s ``scales="block"``): 128 columns, one
# block of B's scales; 192, three runs of 64 columns, each inside one block (a tile starts on a
# block or half-way into one), each run's partial times its own block's scale.
BLOCK_TILES = (128, 192)

CONFIGS = [
    {"consumers": 2, "bn": 256},
    {"consumers": 3, "bn": 128},
    {"consumers": 2, "bn": 128},
    {"consumers": 1, "bn": 256},
    {"consumers": 1, "bn": 128},
    # Skinny tiles for decode's M (one tile row): more CTAs stream B (the whole traffic) at once,
    # as split-K would, in one launch.
    {"consumers": 1, "bn": 64},
    {"consumers": 1, "bn": 32},
    # Between them where N over 128-column tiles leaves a quarter of the SMs idle and 64-column
    # ones take two rounds (16 x 12288 x 4096: 128 tiles, 27.9 µs against 32.0 and 30.9, H200).
    {"consumers": 1, "bn": 96},
    # Where 128-column tiles take a second, partial round and 192-column ones one round.
    {"consumers": 2, "bn": 192},
    {"consumers": 1, "bn": 192},
    # Two consumers of 64 columns: 128-row tiles where 128-column ones leave half the SMs idle.
    {"consumers": 2, "bn": 64},
    # ... and of 96 (777 x 1232 x 4096: 91 tiles, 23.1 µs against 24.1-24.9 in 64 x 128 tiles, H200).
    {"consumers": 2, "bn": 96},
    # FP8 promoted to float32 with the next K step in flight during each add (`promote_ahead`).
    {"consumers": 1, "bn": 128, "promote_ahead": True},
    {"consumers": 1, "bn": 64, "promote_ahead": True},
    {"consumers": 1, "bn": 32, "promote_ahead": True},
    {"consumers": 2, "bn": 64, "promote_ahead": True},
    {"consumers": 2, "bn": 128, "promote_ahead": True},
    # FP8 promoted in wider tiles (the accumulator and a step's partial in 232 and 240 of a
    # consumer's registers), the epilogue's stores all written before any is issued: a third
    # fewer loads a product than 128 x 128 (the L2 traffic that bounds those) and no wait for a
    # store's reads inside a tile's epilogue (8192^3: 740 µs against 758 with one store's buffer
    # and 825 promoted ahead in 128 x 128, cuBLASLt 766, H200).
    {"consumers": 2, "bn": 192, "whole_epilogue": True},
    {"consumers": 2, "bn": 208, "whole_epilogue": True},
]
# Split-K over a cluster's CTAs (``cluster_k``: K in 2 or 4 parts, a tile's parts the CTAs of a
# cluster, one launch), for shapes whose tiles leave most SMs idle (decode's M against a short N):
# timed beside the one-CTA tiles, each tile of 128 columns at most in both counts.
CONFIGS += [dict(cfg, cluster_k=parts) for parts in (2, 4) for cfg in CONFIGS if cfg["bn"] <= 128]
# B's tile multicast to a cluster's two CTAs (`matmul_kernel`'s ``multicast``, ``multicast_b``),
# 128 x 256 tiles where they take more than one round, 128 x 192 where those are candidates
# (`multicast_fits`). (A's multicast, ``multicast_b=False``, was slower at every shape timed.)
CONFIGS += [{"consumers": 2, "bn": 256, "multicast": 2, "multicast_b": True}, {"consumers": 2, "bn": 192, "multicast": 2, "multicast_b": True}]


def k_tile(dtype: str) -> int:
    """K per stage: one 128-byte swizzled row of the operands (64 16-bit or 128 8-bit elements)."""
    return BK * 2 if dtype.startswith("float8") else BK


def k_steps(k: int, dtype: str) -> int:
    """The K steps of a product: K in stages of `k_tile` (the last one partial, zero-filled)."""
    return -(-k // k_tile(dtype))


def stages_for(consumers: int, bn: int, out_bytes: int = 2, pingpong: bool = False, whole_epilogue: bool = False) -> int:
    """The shared-memory stages a tile configuration has room for (at most 8, 16 for tiles of
    fewer than 128 columns: their stages carry a few KB of B, the loads a CTA needs in flight to
    stream at its share of the bandwidth): A and B per stage (``pingpong``: a stage holds one
    consumer's 64 rows of A), one 64 x `epilogue_cols` epilogue tile per consumer (of
    ``out_bytes`` elements; ``whole_epilogue``: 64 x ``bn``), 1 KiB for the mbarriers and alignment."""
    stage = (64 * (1 if pingpong else consumers) * BK + BK * bn) * 2
    epilogue = consumers * 64 * (bn if whole_epilogue else epilogue_cols(bn)) * out_bytes
    return min(8 if bn >= 128 else 16, (c.SMEM_BYTES - epilogue - 1024) // stage)


def epilogue_cols(bn: int) -> int:
    """Columns per epilogue store: 128 where they divide the tile, else the widest of 64, 32, 16
    and 8 that does (a gated tile's 96 output columns: 32)."""
    return next(c for c in (EPI, 64, 32, 16, 8) if bn % c == 0)


def _prune(configs, m, n, k=0, dtype="", fast_accum=True, scales="tensor", ctas=132, splits=1, clusters=True, gated=False, a_major="k", b_major="", **_):
    """Every tile covers any shape; a tile of several consumers' rows is kept only where M reaches
    its last consumer's rows (M = 100 in one 128-row tile reads B once, where two 64-row tiles
    read it twice: 100 x 12344 x 4096 36.0 against 40.7 µs, H200); FP8 with its K steps promoted to float32 (not ``fast_accum``) in tiles whose
    accumulator and a step's partial fit a consumer's registers (`promote_fits`), the only form with three consumers (more
    warpgroups to hide each one's wait for its partial and its adds), and the only one with
    ``whole_epilogue`` (two consumers' tiles of 192 and 208 columns at every shape; block scales
    in tiles of `BLOCK_TILES` columns only); a tile narrower than 128
    columns only where twice as wide a one leaves CTAs idle (decode's M) and K is not split in
    parts of its own (`split_k`: the other way to more CTAs); a cluster's parts (`cluster_fits`)
    in tiles of 128 columns at most, whose CTAs all run in one round, only where the output's
    tiles of 128 x 128 keep at most half the ``ctas`` busy, each part at least 4 K steps, and
    ``clusters`` (a call that asks for no split has none; nor has split-K's own or a gated
    product); tiles of 192 columns only where they take one round, and tiles of 128 a second,
    partial one (16 x 22016: 115 tiles against 172) or the tiles are two consumers' (100 x 12344
    x 4096, B's read the bound: 65 tiles of 128 x 192 33.7 µs against 97 of 128 x 128 36.5,
    cuBLAS 33.2, H200); a
    gated product (``gated``: two B matrices, half a tile's columns each) in any tile where B is
    K-major (each half a run of B's rows), else in tiles of 128 or 256 columns (halves of whole
    64-column swizzle atoms); ``promote_ahead`` where FP8 is promoted and its two partials fit
    beside the accumulator (`matmul_kernel`); ``multicast`` where `multicast_fits`."""

    def tiles(consumers, bn):  # the tiles of 64 * consumers x bn (a gated tile: bn / 2 output columns)
        return -(-m // (64 * consumers)) * -(-(2 * n if gated else n) // bn)

    promote = dtype.startswith("float8") and not fast_accum
    return [
        cfg
        for cfg in configs
        if (cfg["consumers"] == 1 or m > 64 * (cfg["consumers"] - 1))
        and (not promote or promote_fits(cfg["consumers"], cfg["bn"]) and (scales != "block" or cfg["bn"] in BLOCK_TILES))
        and (cfg["consumers"] < 3 or promote)
        and (cfg["bn"] >= 128 or (tiles(1, 2 * cfg["bn"]) < ctas and scales != "block" and splits == 1))
        and (cfg.get("cluster_k", 1) == 1 or cluster_fits(cfg, m, n, k, dtype, ctas, clusters and splits == 1 and not gated))
        and (not cfg.get("whole_epilogue") or promote)
        and (cfg["bn"] != 192 or cfg.get("whole_epilogue") or ctas >= tiles(cfg["consumers"], 192) * splits and (cfg["consumers"] == 2 or tiles(1, 128) * splits > ctas))
        and (not gated or cfg["bn"] % 128 == 0 or b_major == "k")
        and (not cfg.get("promote_ahead") or (promote and promote_fits(cfg["consumers"], cfg["bn"], partials=2)))
        and (cfg.get("multicast", 1) == 1 or multicast_fits(m, n, cfg["bn"], dtype, ctas, splits == 1 and not gated and a_major == "k"))
    ]


def multicast_fits(m: int, n: int, bn: int, dtype: str, ctas: int, allowed: bool) -> bool:
    """Whether B multicast to a cluster's two CTAs in 128 x ``bn`` tiles (a pair: neighbouring
    tiles of a tile column) is a candidate for an m x n product of ``dtype`` on ``ctas`` SMs
    (`_prune`): 16-bit operands, a K-major A, no split or
    gating (``allowed``), two tile rows or more; 128 x 256 tiles where they outnumber the SMs,
    128 x 192 wherever those are candidates (one round of them). Timed on an H200 against the
    one-CTA tile of the same shape and A's multicast (µs, cuBLAS in the same process): 1000 x 3000
    x 2048 20.2 against 23.8 and 22.7 in 128 x 192 (cuBLAS 19.8); 1000 x 3000 x 8192 68.6 against
    89.6 and 76.7 (68.2); 3000 x 5000 x 1000 50.8 against 65.3 and 55.2 in 128 x 256 (49.8); 4096^3
    173.1 against 171.5 and 178.3 (171.9); 2048^3 in 128 x 128 24.7 against 23.7 and 26.4 (23.9):
    cuBLAS's own design at the first three (1 x 2 clusters multicasting B), each CTA reading half
    of B's tile from L2. The autotuner times it beside the one-CTA tiles. FP8 promoted to float32
    runs it too (bit for bit the one-CTA design's, and `torch._scaled_mm`'s), but was slower at
    every shape timed (128 x 128 tiles, `promote_ahead`: 8192^3 926 against 893 µs, 16384 x 6144
    x 4096 671 against 638, 4096^3 106.5 against 104.6; H200): not a candidate."""
    if not (allowed and dtype in ("bfloat16", "float16")):
        return False
    return m > 128 and (bn == 192 or -(-m // 128) * -(-n // 256) > ctas)


def cluster_fits(cfg: dict, m: int, n: int, k: int, dtype: str, ctas: int, allowed: bool) -> bool:
    """Whether the tile configuration ``cfg``, a tile's K over a cluster of ``cfg["cluster_k"]``
    CTAs, is a candidate for an m x n x k product on ``ctas`` SMs (`_prune`): one round of clusters
    only. (Over several rounds the design runs, but lost to one CTA a tile wherever it evens out
    the last round, H200: 1000 x 3000 x 2048 in 128 x 128 pairs 36.2 µs against 128 x 256 tiles'
    27.0; 777 x 1232 x 4096 33.9-53.1 against 24.1; 128 x 12288 x 4096 42.1 against 28.9 — the
    tiles' rows read twice, a phase a round, the parts' round trip; K in whole parts cannot split
    97 tiles over 132 SMs finer than rounds; ``stream_k``'s even shares of K steps, measured, were no faster.)"""
    parts, steps = cfg["cluster_k"], k_steps(k, dtype)
    units = -(-m // (64 * cfg["consumers"])) * -(-n // cfg["bn"]) * parts
    idle = -(-m // 128) * -(-n // 128) <= ctas // 2
    return allowed and idle and units <= cluster_room(ctas, parts) and steps % parts == 0 and steps // parts >= 4


def promote_registers(consumers: int, bn: int, partials: int = 1) -> tuple:
    """``(needed, held)``: a consumer's registers FP8 promoted to float32 needs — the accumulator
    and ``partials`` steps' partials (64 x ``bn`` float32 each, ``bn / 2`` a thread; two promoted
    ahead) and 32 more for addresses and the loop, 40 with two partials (ptxas, no spills: one
    partial at 64 x 208 over two consumers; two at 64 x 128 over one or two consumers, 64 x 64
    over three; two at 64 x 128 over three spill) — and those it holds."""
    return (1 + partials) * bn // 2 + 24 + 8 * partials, c.WARPGROUP_REGISTERS.get(consumers, (0, 0))[1]


def promote_fits(consumers: int, bn: int, partials: int = 1) -> bool:
    """Whether FP8 promoted to float32 fits a consumer's registers (`promote_registers`)."""
    needed, held = promote_registers(consumers, bn, partials)
    return needed <= held


# How addmm's input is added (`matmul_kernel`'s ``bias``): none, a row (1 x n), a column (m x 1)
# or a matrix (m x n).
BIASES = ("", "row", "column", "matrix")


def input_shape(bias: str, m: int, n: int) -> tuple:
    """The shape of addmm's input as the kernels take it (``bias`` one of `BIASES` but none)."""
    return {"row": (1, n), "column": (m, 1), "matrix": (m, n)}[bias]


# The epilogue's activations (`activation=`), as PyTorch names them: F.relu, F.gelu (erf form),
# F.gelu(approximate="tanh"), F.silu.
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")


def _epilogue(alpha: float, beta: float, activation: str):
    """The epilogue's macros on a slice of a float32 accumulator: ``add_input(acc_h, i)``,
    ``alpha acc_h + beta i``; ``activate(acc_h)``."""

    @T.macro
    def add_input(acc_h, i_tile):
        # acc_h = alpha acc_h + beta i_tile (each factor only where it is not 1)
        if alpha != 1.0:
            Tx.warpgroup.mul(acc_h, acc_h, alpha)
        if beta == 1.0:
            Tx.warpgroup.add(acc_h, acc_h, i_tile)
        else:
            Tx.warpgroup.fma(acc_h, i_tile, beta, acc_h)

    @T.macro
    def activate(acc_h):
        # The activation of the float32 sums, before their one rounding (relu: NaN stays NaN, as
        # torch.relu's).
        if activation == "relu":
            Tx.warpgroup.maximum(acc_h, acc_h, 0.0)
        elif activation == "gelu":
            Tx.warpgroup.gelu(acc_h, acc_h)
        elif activation == "gelu_tanh":
            Tx.warpgroup.gelu(acc_h, acc_h, approximate="tanh")
        else:
            Tx.warpgroup.silu(acc_h, acc_h)

    return add_input, activate


@T.macro
def scale_rows_and_columns(acc_h, srow, scol, sa_rows, sb_cols):
    # torch._scaled_mm's row-wise scales on a slice of a float32 accumulator: each row's scale
    # (``sa_rows`` into ``srow``), then each column's (``sb_cols`` into ``scol``); rows and columns
    # past the matrix read as 0, never stored.
    Tx.warpgroup.copy(srow, sa_rows, clip=True, other=0.0)
    Tx.warpgroup.copy(scol, sb_cols, clip=True, other=0.0)
    Tx.warpgroup.mul(acc_h, acc_h, srow)
    Tx.warpgroup.mul(acc_h, acc_h, scol)


@autotune(
    configs=CONFIGS,
    key=["m", "n", "k", "dtype", "ctas", "bias", "alpha", "beta", "activation", "out_dtype", "fast_accum", "scales", "a_major", "b_major", "splits", "clusters", "gated", "b_dtype"],
    prune=_prune,
    launch_args=lambda kernel, args: _with_workspace(kernel, args),  # (defined below)
    adapts=lambda cfg: cfg.get("cluster_k", 1) > 1 or cfg.get("stream_k", False),  # (the other designs take no workspace)
)
def matmul_kernel(
    m: int,
    n: int,
    k: int,
    dtype: str,
    ctas: int,
    consumers: int,
    bn: int,
    bias: str = "",
    alpha: float = 1.0,
    beta: float = 1.0,
    activation: str = "",
    out_dtype: str = "",
    fast_accum: bool = True,
    scales: str = "tensor",
    a_major: str = "k",
    b_major: str = "",
    splits: int = 1,
    cluster_k: int = 1,
    gated: bool = False,
    promote_ahead: bool = False,
    clusters: bool = True,
    multicast: int = 1,
    multicast_b: bool = False,
    pingpong: bool = False,
    b_dtype: str = "",
    stream_k: bool = False,
    spread_units: bool = True,
    whole_epilogue: bool = False,
):
    """``C = A @ B`` (``A``: m x k, ``B``: k x n, row-major) with ``ctas`` persistent CTAs of
    ``consumers`` consumer warpgroups and ``64 * consumers`` x ``bn`` output tiles. ``bias``:
    PyTorch's ``addmm``, ``C = beta * I + alpha * (A @ B)`` in float32, rounded once, ``I`` a row
    (``"row"``: n, each accumulator row's; loaded into a layout replicated over the rows' threads),
    a column (``"column"``: m x 1, each row's value, loaded in the rows' layout) or a
    matrix (``"matrix"``: m x n, its tile staged in the output's registers). FP8 (``dtype``
    float8_e4m3fn or float8_e5m2): PyTorch's ``_scaled_mm`` with per-tensor scales, ``C = (A @ B)
    SA[0] SB[0]`` in float32, rounded once to ``out_dtype`` (bfloat16 or float16); B is given
    K-major, as ``Bt`` (n x k: ``b`` column-major), as wgmma takes 8-bit operands; ``b_dtype``: B's
    FP8 type where it is not A's (e4m3 times e5m2, as a backward pass's gradients meet the
    weights; wgmma mixes them). Not
    ``fast_accum`` (PyTorch's default): each K step's product (128 of K) lands in a partial of its
    own and is added to the accumulator in float32 registers (Hopper's FP8 wgmma accumulates with
    fewer bits than float32: the promotion DeepGEMM and cuBLAS make); ``fast_accum``: wgmma
    accumulates all of K, one K step kept in flight. (Promoting, each step is waited for before
    its add: the other consumer's GEMMs fill the tensor cores meanwhile, as in DeepGEMM;
    ``promote_ahead``: each step's product is issued into a second partial before the step
    before it is waited for and added, so a consumer's own GEMMs keep the tensor cores busy
    during its adds, one consumer per SM included.)
    ``scales="block"``: DeepGEMM's recipe, ``SA`` (m x ceil(k / 128): a scale per row and 128 of
    K) and ``SB`` (ceil(n / 128) x ceil(k / 128): per 128 x 128 block of B), each K step's
    partial multiplied by its rows' and its block's scales as it is promoted (in tiles of
    `BLOCK_TILES` columns: 192, each run of 64 columns by its own block's). ``scales="row"``:
    torch._scaled_mm's row-wise scales, ``SA`` (m x 1: a scale per row of A) and ``SB`` (1 x n: per
    column of B), ``C = (A @ B) SA[row] SB[col]`` in float32 in the epilogue (split-K: by the
    finishing kernel, as per-tensor scales are). ``a_major`` /
    ``b_major``: the operands' contiguous dim, so that a transposed view is read in place (16-bit
    operands): ``a_major="m"`` takes A as ``At`` (k x m, read M-major by the tensor cores),
    ``b_major="k"`` takes B as ``Bt`` (n x k, K-major; FP8's only form), ``"n"`` as k x n.
    ``splits`` > 1: split-K, for shapes whose tiles do not fill the GPU (skinny M, small
    squares): each tile's K steps in ``splits`` equal parts, a work unit each, each unit's
    float32 partial stored in its own slice of ``C`` (splits x m x n float32: every element
    written, no zeroing, no atomics); the parts' sum (in order), the scales, input, activation
    and rounding are `matmul_finish_kernel`'s. ``cluster_k`` > 1: split-K in one launch: a
    tile's parts are the CTAs of a cluster, the others storing their float32 sums (rows past M
    clipped) into ``W`` (cluster_k - 1 x m x n float32) and arriving at a cluster barrier, whose
    phase the first waits for before adding them in rank order (the same result every run) and
    applying the epilogue alone. As many clusters as the GPU holds at once (`cluster_room`), in
    rounds where the units outnumber them: a round's phase each, the storing CTAs going on to
    their next unit without waiting for it (each thread waits for a phase before arriving at
    the next; the producer arrives once a round's loads are issued). Rounds of clusters are
    simulator- and GPU-checked but not the autotuner's candidates (measured slower: `cluster_fits`). ``gated``: a
    gated linear unit (SwiGLU's ``activation="silu"``, GeGLU's "gelu"), ``C = act(A @ B) * (A @
    U)`` for a second matrix ``U`` of B's shape: each tile's columns are half B's, half U's at
    the same output columns (both products in one accumulator), the epilogue multiplies the
    activated first half by the second in float32 and rounds once; no bias, split or cluster; a
    K-major B in any tile (its halves are runs of rows), a row-major one in 128 or 256 columns.
    ``clusters``: whether the autotuner may take ``cluster_k`` > 1 (False: a call's ``split_k=1``).
    ``multicast=2``: A's tile loaded once per cluster of two CTAs, which compute neighbouring tiles
    of one tile row (a pair: the unit the cluster walks; an odd last pair's second tile lies
    outside C, its loads TMA's zeros and its stores clipped): each producer loads half of the A
    tile's rows into both CTAs' stage (`cta_mask`), each consumer frees a stage in its CTA and its
    peer's (`MBarrier.arrive(stage, cta_id=peer, scope="cta")`: both producers refill both; at
    CTA scope, CUTLASS's remote arrive, as a cluster-scope release put MEMBAR.ALL.GPU before each,
    2-5x slower); after the barriers' init `fence.mbarrier_init` and a `.relaxed` cluster barrier
    (CUTLASS's start: no MEMBAR), at the end the producer's tail (every stage's last release
    waited for, so no CTA exits while its peer's arrives may reach it: no end barrier, 0.4-0.7 µs
    less than one); a K-major A of whole tiles, no split, no cluster of K, no gating, FP8
    promotion over two consumers at most (on the GPU bit for bit the one-CTA design's, slower:
    `multicast_fits`). Simulator- and GPU-checked, compute-sanitizer clean (128 x 128, 128 x
    256). With
    ``multicast_b``, B's tile instead (cuBLAS's choice at
    1000 x 3000 x 2048: the larger operand of a 128 x 192 tile): the pair's tiles neighbour in one
    tile column (an odd last pair's second tile lies below C), each producer loading half of each
    K step's rows of B (K-major B: half of the tile's columns) into both CTAs, a box per swizzle
    atom, A whole: faster than A's at every shape timed, a candidate in 128 x 256 and 128 x 192
    tiles (`multicast_fits`); GPU-checked, compute-sanitizer clean (128, 192, 256 columns).
    ``pingpong`` (two consumers): each consumer warpgroup computes tiles of its own (64 x ``bn``),
    the CTA's units alternating between them (CUTLASS's ping-pong schedule): the producer fills
    the ring in unit order, a consumer frees the stages it read, and the consumers take turns
    through their K loops (named barriers ``TURN_BARRIER + w``: a consumer starts its unit's K
    loop once the other has waited for all of its own unit's stages), so one consumer's epilogue
    runs beside the other's tensor-core work; a turn also keeps a consumer from waiting on a
    stage two fills ahead (an mbarrier's parity names one of two phases). No split, cluster of
    K, multicast or FP8 promotion. Simulator-checked, not yet timed on a GPU: not a candidate.
    ``stream_k``: the product's K steps, all tiles' in tile order, shared out evenly over the
    ``ctas`` CTAs of a cooperative grid (CTA ``b`` takes steps ``[b T / ctas, (b + 1) T / ctas)``
    of the ``T``), so that tiles that do not fill the GPU in whole rounds still keep every SM busy
    (Stream-K, Osama et al. 2023): a CTA's steps are pieces of consecutive tiles; a tile's whole
    K in one piece goes through the epilogue as without it; a piece that starts a tile and ends
    early (a CTA's last) keeps its sums in registers, and one that ends a tile but starts late (a
    CTA's first) stores its float32 sums into the CTA's slot of ``W`` (ctas x BM x BN); after one
    grid group barrier (``G``, an int32 word whose low 31 bits are 0) the tile's first CTA adds
    the later pieces' sums in CTA order (the same result every run) and applies the epilogue.
    16-bit operands or FP8 with ``fast_accum``; no split, cluster, multicast, ping-pong or gating.
    Simulator- and GPU-checked, slower than one CTA a tile wherever timed (README): not a candidate.
    ``spread_units`` (the default): where the units are fewer than the CTAs, unit j runs on CTA
    ``floor(j ctas / units)``, spread over the grid rather than on its first CTAs (False: the
    first; multicast spreads its pairs over the clusters; clusters of K and stream-K place theirs
    as they must). ``whole_epilogue``: a consumer's epilogue stores each from a shared buffer of
    its own, all written before the first is issued, so a tile's epilogue waits only for the tile
    before's stores (read long since), not for each store in turn; the buffers take the room of a
    stage or two (`stages_for`)."""
    if bias not in BIASES:
        raise ValueError(f"bias: {bias!r}; '' (none), 'row' (1 x n), 'column' (m x 1) or 'matrix' (m x n)")
    if activation and activation not in ACTIVATIONS:
        raise ValueError(f"activation: {activation!r}; one of {', '.join(ACTIVATIONS)} (or none)")
    fp8 = dtype.startswith("float8")
    bd = b_dtype or dtype  # B's dtype
    if bd != dtype and not (fp8 and bd.startswith("float8")):
        raise ValueError(f"b_dtype={bd!r} with {dtype} A: B's type differs from A's only between FP8 types (e4m3 and e5m2)")
    b_major = b_major or ("k" if fp8 else "n")
    if a_major not in ("k", "m") or b_major not in ("k", "n") or (fp8 and (a_major, b_major) != ("k", "k")):
        raise ValueError(f"a_major={a_major!r}, b_major={b_major!r}: 'k' or 'm' and 'n' or 'k' (FP8 operands both K-major)")
    a_mn, b_k = a_major == "m", b_major == "k"  # (an MN-major A; a K-major B)
    od = out_dtype or dtype  # the output's dtype
    if fp8 and (od not in ("bfloat16", "float16") or bias not in ("", "row") or k % 16):
        raise ValueError(f"{dtype} operands: out_dtype bfloat16 or float16 (got {od!r}), a bias row at most, K a multiple of 16")
    if not fp8 and od not in (dtype, "float32"):
        raise ValueError(f"out_dtype {od!r}: 16-bit operands give their own dtype or float32")
    bk, kt_steps = k_tile(dtype), k_steps(k, dtype)
    block, rowwise = scales == "block", scales == "row"
    if scales not in ("tensor", "block", "row") or (block and (not fp8 or fast_accum or bn not in BLOCK_TILES)) or (rowwise and not fp8):
        raise ValueError(
            f"scales={scales!r}: 'tensor', 'block' with FP8 operands promoted (fast_accum=False) in tiles of "
            f"{' or '.join(map(str, BLOCK_TILES))} columns, or 'row' with FP8 operands"
        )
    promote = fp8 and not fast_accum
    if promote and not promote_fits(consumers, bn):
        needed, held = promote_registers(consumers, bn)
        raise ValueError(
            f"fast_accum=False: a step's partial beside the accumulator in a consumer's registers (bn={bn}, consumers={consumers}: "
            f"{needed} with addresses and the loop, {held} a thread)"
        )
    ahead = promote_ahead
    if ahead and (not promote or not promote_fits(consumers, bn, partials=2)):
        needed, held = promote_registers(consumers, bn, partials=2)
        raise ValueError(
            f"promote_ahead: FP8 promoted to float32 (fast_accum=False), two partials beside the accumulator in a consumer's "
            f"registers (bn={bn}, consumers={consumers}: {needed} with addresses and the loop, {held} a thread)"
        )
    if splits < 1 or kt_steps % splits:
        raise ValueError(f"splits={splits}: 1 (no split-K) or a divisor of the {kt_steps} K steps")
    split = splits > 1
    clustered = cluster_k > 1
    if clustered and not clusters:
        raise ValueError(f"cluster_k={cluster_k} with clusters=False (no split of K asked for)")
    if gated and (fp8 or split or clustered or bias or not activation or (bn % 128 and b_major != "k")):
        raise ValueError(f"gated: 16-bit operands, an activation, no bias, split-K or cluster; a row-major B in tiles of 128 or 256 columns (bn={bn})")
    hb = bn // 2 if gated else bn  # a tile's output columns
    if cluster_k not in (1, 2, 4, 8) or (clustered and (split or bn > 128)):
        raise ValueError(f"cluster_k={cluster_k}: 1, 2, 4 or 8, not with splits, in tiles of 128 columns at most (a part's sums in registers beside the accumulator)")
    if clustered and kt_steps % cluster_k:
        raise ValueError(f"cluster_k={cluster_k}: a divisor of the {kt_steps} K steps")
    if split and (bias or alpha != 1.0 or beta != 1.0 or activation):
        raise ValueError(f"splits={splits}: the parts' sums are float32; bias, alpha, beta and the activation are matmul_finish_kernel's")
    cd = "float32" if split else od  # C's dtype
    if pingpong and (consumers != 2 or split or clustered or multicast != 1 or promote):
        raise ValueError("pingpong: two consumer warpgroups, each on tiles of its own; no split-K, cluster of K, multicast or FP8 promotion")
    if stream_k and (split or clustered or multicast != 1 or pingpong or promote or gated):
        raise ValueError("stream_k: 16-bit operands or FP8 with fast_accum; no split-K, cluster of K, multicast, ping-pong or gating")
    bm = 64 if pingpong else 64 * consumers  # (an output tile's rows)
    stages = stages_for(consumers, bn, c.elem_bytes(cd), pingpong, whole_epilogue)
    # Tiles cover the matrices; TMA fills what a box reads outside them with zeros (adding
    # nothing to the sums) and clips what it writes outside C.
    tm, tn = -(-m // bm), -(-n // hb)
    nb = -(-n // 128)  # (block scales: B's blocks of 128 columns)
    tiles = tm * tn
    parts = max(splits, cluster_k)  # (a tile's K in parts: split-K's units, or a cluster's CTAs)
    kps = kt_steps // parts  # K steps per unit
    units = tiles * parts
    # (clusters: whole clusters, as many as the GPU holds at once, each CTA a unit a round)
    grid = min(units, max(cluster_k, cluster_room(ctas, cluster_k) // cluster_k * cluster_k)) if clustered else ctas
    # Decode's M (one tile row of one consumer, K-major A): A's box is its rows only (to 8),
    # the tile's other rows zeroed once (a box's rows past M, filled by TMA at every step, made
    # M = 1 as slow as M = 64 at best).
    a_rows = -(-m // 8) * 8 if m < bm and consumers == 1 and not a_mn else bm
    # Multicast: the two CTAs of a cluster compute neighbouring tiles of one tile row (a pair),
    # each loading half of their A tile into both; a pair is the unit a cluster walks
    # (``multicast_b``: of one tile column, each loading half of their B tile into both).
    mc = multicast == 2
    if multicast not in (1, 2) or (mc and (clustered or split or gated or (promote and consumers > 2) or a_mn or a_rows < bm or ctas < 2)):
        raise ValueError(
            f"multicast={multicast}: 1, or 2 (A shared by a cluster's two CTAs) without split-K, clusters of K, gating or FP8 "
            "promotion over three consumers, for a K-major A of whole tiles, on two CTAs or more"
        )
    if multicast_b and not mc:
        raise ValueError("multicast_b: with multicast=2 (B's tile shared by a cluster's two CTAs, computing neighbouring tiles of a tile column)")
    mc_a, mc_b = mc and not multicast_b, mc and multicast_b
    # (multicast: tile pairs per tile row or column; an odd last pair's second tile lies outside C)
    tm2, tn2 = -(-tm // 2), -(-tn // 2)
    if mc:
        grid, units = ctas - ctas % 2, (tm2 * tn if mc_b else tm * tn2)
    walk_rows = tm2 if mc_b else tm  # (the rows of tiles, or of pairs, the grid walks)
    group = next(g for g in (8, 4, 2, 1) if walk_rows % g == 0)  # rows walked together
    rounds = (units + grid // multicast - 1) // (grid // multicast)
    total = tiles * kt_steps  # (stream-K: the product's K steps, shared out over the CTAs)
    if stream_k and not ctas <= total < 2**31 // (ctas + 1):
        raise ValueError(f"stream_k: at least a K step per CTA ({total} steps over {ctas} CTAs) and CTA ranges within int32")
    # (stream-K: the most CTAs ending one tile after its first: pieces of the shortest range)
    sk_most = kt_steps // max(1, total // grid) + 2
    stage_bytes = (a_rows + bn) * bk * c.elem_bytes(dtype)
    # Registers per thread: a CTA starts with the register file over its threads (128 at 512
    # threads, 168 at 384, 248 at 256); the producer gives most of its share to the consumers.
    if consumers not in (1, 2, 3):
        raise ValueError(f"consumers={consumers}: 1, 2 or 3 consumer warpgroups")
    producer_regs, consumer_regs = c.WARPGROUP_REGISTERS[consumers]
    epi = epilogue_cols(hb)
    halves = tuple(range(hb // epi))  # the epilogue's stores of epi columns, unrolled
    # ``whole_epilogue``: a buffer per store, all written before the stores are issued (one wait
    # for the last tile's stores a tile, a tile's work after them), else one, each store's
    # reads waited for before the next is written.
    buffers = len(halves) if whole_epilogue else 1
    # B and C move in TMA boxes of whole tile rows when N is a whole number of 64 columns (a
    # whole number of their swizzle's atoms: one instruction); otherwise atom by atom, so that
    # each box's columns are a dimension of N itself and the last one can leave the matrix.
    eb, ceb = c.elem_bytes(dtype), c.elem_bytes(cd)
    b_swizzle = 3 if b_k else c.swizzle_for(bn, eb)  # (K-major: rows of bk, 128 bytes)
    c_swizzle = c.swizzle_for(epi, ceb)
    b_atom, c_atom = (16 << b_swizzle) // eb, (16 << c_swizzle) // ceb
    b_boxes = ((0, hb),) if n % 64 == 0 else tuple((c0, b_atom) for c0 in range(0, hb, b_atom))  # (gated: each half's)
    c_boxes = ((0, epi),) if n % 64 == 0 else tuple((c0, c_atom) for c0 in range(0, epi, c_atom))
    a_boxes = ((0, bm),) if m % 64 == 0 else tuple((c0, 64) for c0 in range(0, bm, 64))  # (At's, as B's)
    a_smem = mma_shared_layout(dtype, 3, (stages, bk, bm) if a_mn else (stages, bm, bk))
    b_shape = (stages, bn, bk) if b_k else (stages, BK, bn)  # (8-bit: K-major, as wgmma takes them)
    b_smem = mma_shared_layout(bd, b_swizzle, b_shape)
    c_smem = mma_shared_layout(cd, c_swizzle, (consumers, buffers, 64, epi))
    acc_layout = wgmma_acc_layout(bn)  # one consumer's accumulator (64 x bn)
    # A row of epi columns over an accumulator's 64 rows: each thread holds its columns' values,
    # replicated over the warps and the quads' rows (`wgmma_acc_layout`'s column iters).
    bias_layout = c.acc_col_layout(epi)
    add_input, activate = _epilogue(alpha, beta, activation)

    # Fewer units than CTAs are spread evenly over the grid (unit j on CTA floor(j grid / units);
    # multicast: pair j on cluster floor(j clusters / pairs)), not given to its first CTAs: 97
    # units on CTAs 0-96 of 132 took 36.5-42.6 µs from one measurement to the next (100 x 12344 x
    # 4096, H200; 44.6-45.2 under Nsight Compute with clocks and caches left alone), spread over
    # the 132 35.2-35.9 (36.1-36.6); 128 x 12288 x 4096 33.0 -> 29.4 µs. (Not a cluster's parts,
    # which are neighbouring CTAs.)
    slots = grid // multicast  # (what takes a unit: a CTA, or a multicast cluster)
    spread = spread_units and units < slots and not clustered and not stream_k

    def slot(bx):  # this CTA's slot (multicast: its cluster)
        return bx // 2 if mc else bx

    def unit_of(r, bx):  # this CTA's unit of round r (while `live`)
        if spread:  # (the one round's)
            return (slot(bx) * units + slots - 1) // slots
        return r * slots + slot(bx)

    def tile(r, bx):  # the tile of this CTA's round r (its unit's: a tile's parts in turn; multicast: its cluster's pair)
        return unit_of(r, bx) // parts

    def live(r, bx):  # whether this CTA has a unit in round r (a cluster's two CTAs alike)
        if spread:  # (round 0 alone, and an integer j in [slot units / slots, (slot + 1) units / slots): unit j)
            mine = unit_of(r, bx) < ((slot(bx) + 1) * units + slots - 1) // slots
            if isinstance(r, int):
                return mine if r == 0 else False
            return (r == 0) & mine
        return unit_of(r, bx) < units

    def grouped_row(t, cols):  # tile t's tile row: the tiles walked in groups of `group` tile rows
        return t // (group * cols) % (walk_rows // group) * group + t % group

    def grouped_col(t, cols):  # tile t's tile column (of `cols`)
        return t % (group * cols) // group

    def tile_m(r, bx):  # the output tile row of this CTA's round r (grouped order)
        if mc_b:  # (the pair's first or second tile: the CTA's rank)
            return grouped_row(tile(r, bx), tn) * 2 + bx % 2
        return grouped_row(tile(r, bx), tn2 if mc_a else tn)

    def tile_n(r, bx):
        if mc_a:  # (the pair's first or second tile: the CTA's rank)
            return grouped_col(tile(r, bx), tn2) * 2 + bx % 2
        return grouped_col(tile(r, bx), tn)

    def sk_start(b):  # stream-K: CTA b's first K step of all tiles' (CTA b + 1's: its end)
        return b * total // grid

    def part_of(r, bx):  # the unit's part of K (split-K; clusters: the CTA's rank)
        return unit_of(r, bx) % parts

    def kstep(r, bx, kt):  # the unit's K step kt in K
        return part_of(r, bx) * kps + kt if parts > 1 else kt

    def a_row(cw):  # consumer cw's first row of a stage's A tile (ping-pong: a tile each)
        return 0 if pingpong else cw * 64

    def row0(tm_, cw):  # consumer cw's first output row in tile row tm_ (expressions, not names: the halves are unrolled)
        return tm_ * bm + a_row(cw)

    def col0(tn_, h):  # the epilogue half h's first output column in tile column tn_
        return tn_ * hb + h * epi

    def out_row(r, bx, cw):  # consumer cw's first output row in round r
        return row0(tile_m(r, bx), cw)

    @T.macro(hygienic=False)
    def promoted(acc, part):
        # A K step's partial added to the float32 accumulator (zeroed before the first: a copy
        # at the first step instead makes ptxas move the accumulator's registers between the
        # wgmmas of every step); block scales: times the step's scales (`step_scales`; 192
        # columns: each run of 64 its own).
        if block and bn == 192:
            Tx.warpgroup.fma(acc[0:64, 0:64], part[0:64, 0:64], srow[0:64, 0:1], acc[0:64, 0:64])
            Tx.warpgroup.fma(acc[0:64, 64:128], part[0:64, 64:128], srow_mid[0:64, 0:1], acc[0:64, 64:128])
            Tx.warpgroup.fma(acc[0:64, 128:192], part[0:64, 128:192], srow_hi[0:64, 0:1], acc[0:64, 128:192])
        elif block:
            Tx.warpgroup.fma(acc[0:64, 0:bn], part[0:64, 0:bn], srow[0:64, 0:1], acc[0:64, 0:bn])
        else:
            Tx.warpgroup.add(acc[0:64, 0:bn], acc[0:64, 0:bn], part[0:64, 0:bn])

    def scale_block(r, bx, c0):  # the block of B's scales holding column c0 of round r's tile (past N: the last)
        if bn == 128:  # (a tile is a block: never past N)
            return tile_n(r, bx)
        return T.min((tile_n(r, bx) * bn + c0) // 128, nb - 1)

    @T.macro(hygienic=False)
    def fetch_into(sa_k, sb_k, r, bx, kt, cw):
        # K step kt's block scales, its rows' (rows past m: 0, never stored) and its 128 x 128
        # blocks' (a block per run of 64 columns in 192-column tiles), into sa_k and sb_k.
        Tx.warpgroup.copy(sa_k[0:64, 0:1], SA[out_row(r, bx, cw) : out_row(r, bx, cw) + 64, kstep(r, bx, kt) : kstep(r, bx, kt) + 1], clip=True, other=0.0)
        sb_k[0] = SB[scale_block(r, bx, 0), kstep(r, bx, kt)]
        if bn == 192:  # (the runs of 64 columns after the first)
            sb_k[1] = SB[scale_block(r, bx, 64), kstep(r, bx, kt)]
            sb_k[2] = SB[scale_block(r, bx, 128), kstep(r, bx, kt)]

    @T.macro(hygienic=False)
    def fetch_scales(p, r, bx, kt, cw):
        # Block scales: K step kt's into the registers of parity p (static), a step before they
        # are used (`step_scales`): the loads' latency under two steps' wgmmas (a step's own hid
        # too little of it: 1,118 against 868 µs per tensor at 8192^3, H200).
        if block:
            if p == 0:
                fetch_into(sa_even, sb_even, r, bx, kt, cw)
            else:
                fetch_into(sa_odd, sb_odd, r, bx, kt, cw)

    @T.macro(hygienic=False)
    def scale_rows(sa_k, sb_k):
        Tx.warpgroup.mul(srow[0:64, 0:1], sa_k[0:64, 0:1], sb_k[0])
        if bn == 192:
            Tx.warpgroup.mul(srow_mid[0:64, 0:1], sa_k[0:64, 0:1], sb_k[1])
            Tx.warpgroup.mul(srow_hi[0:64, 0:1], sa_k[0:64, 0:1], sb_k[2])

    @T.macro(hygienic=False)
    def step_scales(p):
        # Block scales: the step's (fetched into parity p's registers) each row's times its
        # blocks', for the add.
        if block:
            if p == 0:
                scale_rows(sa_even, sb_even)
            else:
                scale_rows(sa_odd, sb_odd)

    @T.macro(hygienic=False)
    def issue_step(now, r, kt, cw):
        # The unit's K step kt into the partial ``now`` (both operands K-major), once loaded (the
        # caller's stages and barriers).
        full.wait((r * kps + kt) % stages, ((r * kps + kt) // stages) % 2)
        Tx.warpgroup.gemm_async(now[0:64, 0:bn], A_s[(r * kps + kt) % stages, cw * 64 : cw * 64 + 64, 0:bk], B_s[(r * kps + kt) % stages, 0:bn, 0:bk], accum=False)

    @T.macro(hygienic=False)
    def promote_step(done, r, kt):
        # Step kt's product (``done``, waited for; its scales in srow) promoted, its stage freed.
        promoted(acc, done)
        if tid % 128 == 0:
            empty.arrive((r * kps + kt) % stages)
            if mc:  # (in the peer too, at CTA scope: `mma_step`'s)
                empty.arrive((r * kps + kt) % stages, cta_id=1 - rank, scope="cta")

    @T.macro(hygienic=False)
    def promote_run(r, bx, k0, u, cw):
        # Steps k0 .. k0 + u - 1 (``u`` static) into part and part2 in turn, each issued before the
        # one before it is waited for and promoted (block scales: each step's fetched as it is
        # issued, into the registers of its parity); none in flight after the run (ptxas
        # serializes every wgmma where a partial in flight across a loop's back edge is read
        # after its wait). part defined anew before its first wgmma: left live from the run
        # before, NVVM copies its registers there and ptxas waits for the wgmmas before them.
        fetch_scales(0, r, bx, k0, cw)
        Tx.warpgroup.fill(part[0:64, 0:bn], 0.0)
        issue_step(part, r, k0, cw)
        for j in list(range(1, u)):  # (unrolled)
            if j % 2 == 1:
                issue_step(part2, r, k0 + j, cw)
                fetch_scales(1, r, bx, k0 + j, cw)
                T.ptx.wgmma.wait_group(1)
                step_scales(0)
                promote_step(part, r, k0 + j - 1)
            else:
                issue_step(part, r, k0 + j, cw)
                fetch_scales(0, r, bx, k0 + j, cw)
                T.ptx.wgmma.wait_group(1)
                step_scales(1)
                promote_step(part2, r, k0 + j - 1)
        T.ptx.wgmma.wait_group(0)
        step_scales((u - 1) % 2)
        if u % 2 == 0:
            promote_step(part2, r, k0 + u - 1)
        else:
            promote_step(part, r, k0 + u - 1)

    @T.macro(hygienic=False)
    def block_step(p, r, bx, kt, cw):
        # Block scales, one step at a time: step kt issued, the next step's scales fetched (after
        # the unit's last: its first again, unused), kt waited for and promoted by the scales
        # fetched with the step before (into the registers of parity p; the next step's: 1 - p).
        # (Multiplying them before the wgmmas and the next loads instead, so that no multiply
        # waits on those loads' scoreboard, was slower in 128 x 192 tiles: 1,010-1,041 against
        # 861-870 µs at 8192³.)
        issue_step(part, r, kt, cw)
        fetch_scales(1 - p, r, bx, (kt + 1) % kps, cw)
        T.ptx.wgmma.wait_group(0)
        step_scales(p)
        promote_step(part, r, kt)

    @T.macro
    def mma_mn(acc, A_s, B_s, stage, w, later):
        # acc (+)= A B for an M-major A (consumer w's columns of the At stage), B either way.
        if b_k:
            Tx.warpgroup.gemm_async(acc[0:64, 0:bn], A_s[stage, 0:BK, w * 64 : w * 64 + 64], B_s[stage, 0:bn, 0:BK], transA=True, accum=later)
        else:
            Tx.warpgroup.gemm_async(acc[0:64, 0:bn], A_s[stage, 0:BK, w * 64 : w * 64 + 64], B_s[stage, 0:BK, 0:bn], transA=True, transB=True, accum=later)

    @T.macro(hygienic=False)
    def mma_step(i, later, cw):
        # Consumer cw's ring step i: acc (+)= its stage's A B once loaded (``later``: the unit's
        # steps after its first, which accumulate), one step kept in flight, the step before's
        # stage freed (multicast: in both CTAs).
        full.wait(i % stages, (i // stages) % 2)
        if a_mn:  # (consumer w's 64 columns of At: a constant slice for the descriptor)
            for w in list(range(consumers)):  # (unrolled)
                if wg == w + 1:
                    mma_mn(acc, A_s, B_s, i % stages, a_row(w) // 64, later)
        elif b_k:  # (both K-major)
            Tx.warpgroup.gemm_async(
                acc[0:64, 0:bn],
                A_s[i % stages, a_row(cw) : a_row(cw) + 64, 0:bk],
                B_s[i % stages, 0:bn, 0:bk],
                accum=later,
            )
        else:
            Tx.warpgroup.gemm_async(
                acc[0:64, 0:bn],
                A_s[i % stages, a_row(cw) : a_row(cw) + 64, 0:BK],
                B_s[i % stages, 0:BK, 0:bn],
                transB=True,
                accum=later,
            )
        T.ptx.wgmma.wait_group(1)
        if later:  # the step before is done: free its stage
            if tid % 128 == 0:
                empty.arrive((i - 1) % stages)
                if mc:  # (CTA scope: the stage's reads are done, nothing to publish; no fence)
                    empty.arrive((i - 1) % stages, cta_id=1 - rank, scope="cta")

    @T.macro(hygienic=False)
    def mma_done(i):
        # The unit's last ring step i waited for, its stage freed.
        T.ptx.wgmma.wait_group(0)
        if tid % 128 == 0:
            empty.arrive(i % stages)
            if mc:
                empty.arrive(i % stages, cta_id=1 - rank, scope="cta")

    @T.macro(hygienic=False)
    def epilogue(tm_, tn_, cw, part):
        # Consumer cw's accumulator, the tile at tile row tm_ and column tn_, through the epilogue
        # into C (split-K: as it is, into C's slice ``part``), epi columns at a time.
        for h in halves:
            if h == 0 or buffers == 1:
                if tid % 128 == 0:
                    T.ptx.cp_async.bulk.wait_group_read(0)  # the last stores have read C_s[cw]
                T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
            if split:  # (the partial, as it is)
                Tx.warpgroup.copy(C_s[cw, h % buffers, 0:64, 0:epi], acc[0:64, h * epi : h * epi + epi])
            if rowwise and not split:  # (split-K: the finishing kernel's)
                scale_rows_and_columns(
                    acc[0:64, h * epi : h * epi + epi],
                    srow[0:64, 0:1],
                    scol[0:1, 0:epi],
                    SA[row0(tm_, cw) : row0(tm_, cw) + 64, 0:1],
                    SB[0:1, col0(tn_, h) : col0(tn_, h) + epi],
                )
            elif fp8 and not block and not split:  # the per-tensor scales, in float32 (before a bias, as torch._scaled_mm)
                Tx.warpgroup.mul(acc[0:64, h * epi : h * epi + epi], acc[0:64, h * epi : h * epi + epi], SA[0] * SB[0])
            if bias == "row":  # alpha * acc + beta * I in float32 (I past m and n: 0, never stored)
                Tx.warpgroup.copy(brow[0:1, 0:epi], I[0:1, col0(tn_, h) : col0(tn_, h) + epi], clip=True, other=0.0)
                add_input(acc[0:64, h * epi : h * epi + epi], brow[0:1, 0:epi])
            elif bias == "column":  # (read again each half: held across them, ptxas spills at 128 columns a consumer)
                Tx.warpgroup.copy(bcol[0:64, 0:1], I[row0(tm_, cw) : row0(tm_, cw) + 64, 0:1], clip=True, other=0.0)
                add_input(acc[0:64, h * epi : h * epi + epi], bcol[0:64, 0:1])
            elif bias == "matrix":  # (the tile of I through the output's registers)
                Tx.warpgroup.copy(
                    out[0:64, h * epi : h * epi + epi],
                    I[row0(tm_, cw) : row0(tm_, cw) + 64, col0(tn_, h) : col0(tn_, h) + epi],
                    clip=True,
                    other=0.0,
                )
                add_input(acc[0:64, h * epi : h * epi + epi], out[0:64, h * epi : h * epi + epi])
            if activation:
                activate(acc[0:64, h * epi : h * epi + epi])
            if gated:  # (the gate times the up projection's same columns)
                Tx.warpgroup.mul(acc[0:64, h * epi : h * epi + epi], acc[0:64, h * epi : h * epi + epi], acc[0:64, hb + h * epi : hb + h * epi + epi])
            if not split:
                Tx.warpgroup.cast(out[0:64, h * epi : h * epi + epi], acc[0:64, h * epi : h * epi + epi])
                Tx.warpgroup.copy(C_s[cw, h % buffers, 0:64, 0:epi], out[0:64, h * epi : h * epi + epi])
            if buffers == 1 or h == halves[-1]:
                epilogue_stores(tm_, tn_, cw, part, (h,) if buffers == 1 else halves)

    @T.macro(hygienic=False)
    def epilogue_stores(tm_, tn_, cw, part, hs):
        # The epilogue's stores ``hs`` (static) from C_s[cw], once its threads' writes are there.
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
        if tid % 128 == 0:
            for h in hs:
                for c0, cw_ in c_boxes:
                    if split:  # (the unit's part of K: its own slice of C)
                        Tx.copy_async(
                            C[
                                part,
                                row0(tm_, cw) : row0(tm_, cw) + 64,
                                col0(tn_, h) + c0 : col0(tn_, h) + c0 + cw_,
                            ],
                            C_s[cw, h % buffers, 0:64, c0 : c0 + cw_],
                            dispatch="tma_auto",
                        )
                    else:
                        Tx.copy_async(
                            C[row0(tm_, cw) : row0(tm_, cw) + 64, col0(tn_, h) + c0 : col0(tn_, h) + c0 + cw_],
                            C_s[cw, h % buffers, 0:64, c0 : c0 + cw_],
                            dispatch="tma_auto",
                        )
            T.ptx.cp_async.bulk.commit_group()

    @T.macro(hygienic=False)
    def unit(r, cw):
        # Consumer cw's unit of round r: its K loop (or its cluster part), then the epilogue (the
        # caller's registers, stages, barriers and matrices).
        if pingpong and r > 0:  # (its turn: the other consumer has waited for its unit's stages)
            T.ptx.bar.sync(TURN_BARRIER + cw, 256)
        if promote:
            Tx.warpgroup.fill(acc[0:64, 0:bn], 0.0)
        if ahead:  # runs of AHEAD_RUN steps, each step issued before the one before it is promoted
            for it in range(kps // AHEAD_RUN):
                promote_run(r, bx, it * AHEAD_RUN, AHEAD_RUN, cw)
            if kps % AHEAD_RUN:
                promote_run(r, bx, kps - kps % AHEAD_RUN, kps % AHEAD_RUN, cw)
        elif block:  # each K step into the partial, waited for, scaled and added; two steps a turn (the scales' registers of each parity)
            fetch_scales(0, r, bx, 0, cw)
            for kt in range(kps // 2):
                block_step(0, r, bx, 2 * kt, cw)
                block_step(1, r, bx, 2 * kt + 1, cw)
            if kps % 2:
                block_step(0, r, bx, kps - 1, cw)
        elif promote:  # each K step into the partial, waited for, added
            for kt in range(kps):
                issue_step(part, r, kt, cw)
                T.ptx.wgmma.wait_group(0)
                promote_step(part, r, kt)
        else:
            for kt in range(kps):
                mma_step(r * kps + kt, kt > 0, cw)
            if pingpong and live(r + 1, bx):  # (the other consumer's turn: this one's waits are done)
                T.ptx.bar.arrive(TURN_BARRIER + 1 - cw, 256)
            mma_done(r * kps + kps - 1)
        if clustered:  # the cluster's parts of the tile summed in its first CTA (a cluster barrier phase a round)
            if part_of(r, bx) > 0:  # (its part stored, released by its arrival; it goes on to its next unit)
                Tx.warpgroup.copy(
                    W[part_of(r, bx) - 1, out_row(r, bx, cw) : out_row(r, bx, cw) + 64, tile_n(r, bx) * bn : tile_n(r, bx) * bn + bn],
                    acc[0:64, 0:bn],
                    clip=True,
                )
                if r > 0:  # (a thread arrives once a phase: the round before's waited for first)
                    T.ptx.barrier.cluster.wait()
                T.ptx.barrier.cluster.arrive()
            else:  # (acquire: the peers' parts)
                T.ptx.barrier.cluster.arrive()
                T.ptx.barrier.cluster.wait()
                for q in list(range(1, cluster_k)):  # (rank order)
                    Tx.warpgroup.copy(
                        part[0:64, 0:bn],
                        W[q - 1, out_row(r, bx, cw) : out_row(r, bx, cw) + 64, tile_n(r, bx) * bn : tile_n(r, bx) * bn + bn],
                        clip=True,
                        other=0.0,
                    )
                    Tx.warpgroup.add(acc[0:64, 0:bn], acc[0:64, 0:bn], part[0:64, 0:bn])
        if not clustered or part_of(r, bx) == 0:  # (the epilogue: the cluster's first CTA's)
            epilogue(tile_m(r, bx), tile_n(r, bx), cw, part_of(r, bx))

    @T.macro
    def cluster_round(r):
        # The producer warpgroup's arrival at round r's cluster barrier phase, once the round's
        # loads are issued (a thread arrives once a phase: the round before's waited for first;
        # the last one's after the loop). The warp together first: the barrier is `.aligned`.
        T.cuda.warp_sync()
        if r > 0:
            T.ptx.barrier.cluster.wait()
        T.ptx.barrier.cluster.arrive()

    @T.macro(hygienic=False)
    def load_step(i, ks, tm_, tn_):
        # The producer's ring step i (stage i % stages): K step ks of the tile at tile row tm_,
        # tile column tn_ (the caller's stages and barriers).
        if i >= stages:
            empty.wait(i % stages, (i // stages + 1) % 2)
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([i % stages]), stage_bytes)
        if a_mn:  # (At: k x m, boxes of 64 of M as B's)
            for c0, cw_ in a_boxes:
                Tx.copy_async(
                    A_s[i % stages, 0:BK, c0 : c0 + cw_],
                    A[ks * BK : ks * BK + BK, tm_ * bm + c0 : tm_ * bm + c0 + cw_],
                    dispatch="tma_auto",
                    mbar=full.ptr_to([i % stages]),
                )
        elif mc_a:  # (this CTA's half of the rows, into both CTAs of the cluster)
            Tx.copy_async(
                A_s[i % stages, rank * (bm // 2) : rank * (bm // 2) + bm // 2, 0:bk],
                A[
                    tm_ * bm + rank * (bm // 2) : tm_ * bm + rank * (bm // 2) + bm // 2,
                    ks * bk : ks * bk + bk,
                ],
                dispatch="tma_auto",
                mbar=full.ptr_to([i % stages]),
                cta_mask=3,
            )
        else:
            Tx.copy_async(
                A_s[i % stages, 0:a_rows, 0:bk],
                A[tm_ * bm : tm_ * bm + a_rows, ks * bk : ks * bk + bk],
                dispatch="tma_auto",
                mbar=full.ptr_to([i % stages]),
            )
        if mc_b and b_k:  # (this CTA's half of Bt's rows, into both CTAs of the cluster)
            Tx.copy_async(
                B_s[i % stages, rank * (bn // 2) : rank * (bn // 2) + bn // 2, 0:bk],
                B[tn_ * bn + rank * (bn // 2) : tn_ * bn + rank * (bn // 2) + bn // 2, ks * bk : ks * bk + bk],
                dispatch="tma_auto",
                mbar=full.ptr_to([i % stages]),
                cta_mask=3,
            )
        elif mc_b:  # (this CTA's half of the K rows, into both CTAs of the cluster: a box per swizzle atom)
            for c0, cw_ in tuple((c0, b_atom) for c0 in range(0, bn, b_atom)):
                Tx.copy_async(
                    B_s[i % stages, rank * (BK // 2) : rank * (BK // 2) + BK // 2, c0 : c0 + cw_],
                    B[ks * BK + rank * (BK // 2) : ks * BK + rank * (BK // 2) + BK // 2, tn_ * bn + c0 : tn_ * bn + c0 + cw_],
                    dispatch="tma_auto",
                    mbar=full.ptr_to([i % stages]),
                    cta_mask=3,
                )
        elif b_k:  # (Bt: n x k, a box of bn rows; gated: hb of B's, hb of U's)
            Tx.copy_async(
                B_s[i % stages, 0:hb, 0:bk],
                B[tn_ * hb : tn_ * hb + hb, ks * bk : ks * bk + bk],
                dispatch="tma_auto",
                mbar=full.ptr_to([i % stages]),
            )
            if gated:
                Tx.copy_async(
                    B_s[i % stages, hb:bn, 0:bk],
                    U[tn_ * hb : tn_ * hb + hb, ks * bk : ks * bk + bk],
                    dispatch="tma_auto",
                    mbar=full.ptr_to([i % stages]),
                )
        else:
            for c0, cw_ in b_boxes:
                Tx.copy_async(
                    B_s[i % stages, 0:BK, c0 : c0 + cw_],
                    B[ks * BK : ks * BK + BK, tn_ * hb + c0 : tn_ * hb + c0 + cw_],
                    dispatch="tma_auto",
                    mbar=full.ptr_to([i % stages]),
                )
            if gated:
                for c0, cw_ in b_boxes:
                    Tx.copy_async(
                        B_s[i % stages, 0:BK, hb + c0 : hb + c0 + cw_],
                        U[ks * BK : ks * BK + BK, tn_ * hb + c0 : tn_ * hb + c0 + cw_],
                        dispatch="tma_auto",
                        mbar=full.ptr_to([i % stages]),
                    )

    def loads_of(bx):  # the producer's ring steps: its live rounds' K steps (the live rounds are a prefix)
        if spread:
            return T.if_then_else(live(0, bx), kps, 0)
        return T.min((T.max(units - slot(bx), 0) + slots - 1) // slots, rounds) * kps

    @T.macro(hygienic=False)
    def producer_tail(bx):
        # Multicast: every stage's last release waited for (this CTA's consumers' and the peer's
        # remote ones), so no CTA exits while a peer's arrive may still reach it (CUTLASS's
        # producer tail; the peer's multicasts into this CTA its consumers waited for): no cluster
        # barrier at the end, each CTA of a pair leaves when done.
        loads = loads_of(bx)
        for j in range(stages):
            if loads + j >= stages:
                empty.wait((loads + j) % stages, ((loads + j) // stages + 1) % 2)

    @T.macro(hygienic=False)
    def load_round(r, bx):
        # The producer's loads of round r's unit, a ring step each.
        for kt in range(kps):  # ring step i = r * kps + kt, stage i % stages
            load_step(r * kps + kt, kstep(r, bx, kt), tile_m(r, bx), tile_n(r, bx))

    def sk_piece(bx, tt):
        # Stream-K: this CTA's piece tt (its tiles in order): (tile, first K step in the tile,
        # first ring step, K steps), each index provably non-negative (plain `%` and `/` in CUDA).
        s0, e0 = sk_start(bx), sk_start(bx + 1)
        t = s0 // kt_steps + tt
        lead = T.max(s0 - t * kt_steps, 0)
        return t, lead, T.max(t * kt_steps - s0, 0), T.min(e0 - t * kt_steps, kt_steps) - lead

    def sk_pieces(bx):  # the tiles this CTA's K steps touch
        return (sk_start(bx + 1) + kt_steps - 1) // kt_steps - sk_start(bx) // kt_steps

    @T.macro(hygienic=False)
    def stream_k_loads(bx):
        # The producer's loads of this CTA's K steps (stream-K), piece by piece, the ring running on.
        for tt in T.serial(sk_pieces(bx)):
            t, lead, base, steps = sk_piece(bx, tt)
            for kt in T.serial(steps):
                load_step(base + kt, lead + kt, grouped_row(t, tn), grouped_col(t, tn))

    @T.macro(hygienic=False)
    def stream_k_pieces(bx, cw):
        # Consumer cw's pieces of this CTA's K steps (stream-K), tile by tile: a whole tile through
        # the epilogue; a tile's later steps (the CTA's first piece) into its slot of W; a tile's
        # first steps that others finish (its last piece) left in acc for `stream_k_finish`.
        for tt in T.serial(sk_pieces(bx)):
            t, lead, base, steps = sk_piece(bx, tt)
            for kt in T.serial(steps):
                mma_step(base + kt, kt > 0, cw)
            mma_done(base + steps - 1)
            if lead > 0:  # (a later piece: its sums for the tile's first CTA)
                Tx.warpgroup.copy(W[bx, a_row(cw) : a_row(cw) + 64, 0:bn], acc[0:64, 0:bn])
            elif steps == kt_steps:
                epilogue(grouped_row(t, tn), grouped_col(t, tn), cw, 0)

    @T.macro(hygienic=False)
    def stream_k_meet():
        # Every thread of every CTA, once the CTA's later pieces are stored: the grid group
        # barrier orders them before the tiles' first CTAs read them.
        T.cuda.grid_group_sync(G.ptr_to([0]), grid)

    @T.macro(hygienic=False)
    def stream_k_finish(bx, cw):
        # After the grid group barrier: where this CTA's last piece starts a tile that later CTAs
        # end, their sums added in CTA order, then the epilogue.
        s0, e0 = sk_start(bx), sk_start(bx + 1)
        t = (e0 - 1) // kt_steps
        if s0 <= t * kt_steps and e0 < t * kt_steps + kt_steps:
            for j in T.serial(1, sk_most):
                if bx + j < grid and sk_start(bx + j) < t * kt_steps + kt_steps:
                    for h in halves:
                        Tx.warpgroup.copy(part[0:64, 0:epi], W[(bx + j) % grid, a_row(cw) : a_row(cw) + 64, h * epi : h * epi + epi])
                        Tx.warpgroup.add(acc[0:64, h * epi : h * epi + epi], acc[0:64, h * epi : h * epi + epi], part[0:64, 0:epi])
            epilogue(grouped_row(t, tn), grouped_col(t, tn), cw, 0)

    @T.macro
    def body(A, B, C, I, SA, SB, W, U, G=None):
        T.device_entry()
        bx = T.cta_id([grid])
        if clustered:
            T.cta_id_in_cluster([cluster_k])
        if mc:
            rank = T.cta_id_in_cluster([2])
        wg = T.warpgroup_id([consumers + 1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128 * (consumers + 1)])
        pool = T.SMEMPool()
        A_s = pool.alloc((stages, bk, bm) if a_mn else (stages, bm, bk), dtype, layout=a_smem)
        B_s = pool.alloc(b_shape, bd, layout=b_smem)
        C_s = pool.alloc((consumers, buffers, 64, epi), cd, layout=c_smem)
        full = MBarrier(pool, stages)
        empty = MBarrier(pool, stages)
        pool.commit()
        full.init(1)  # the producer's expect_tx arrival (+ the stage's transaction bytes)
        empty.init(1 if pingpong else consumers * multicast)  # one arrival per consumer warpgroup reading it (multicast: of both CTAs)
        T.ptx.fence.mbarrier_init()
        if mc:  # (the peer's barriers initialised before its multicasts and arrives reach them: the fence releases the inits, so the arrive need not — CUTLASS's start, no MEMBAR)
            T.ptx.barrier.cluster.arrive.relaxed()
            T.ptx.barrier.cluster.wait()
        else:
            T.cuda.cta_sync()
        acc = T.alloc_buffer((64, bn), "float32", scope="local", layout=acc_layout)
        if not split:
            out = T.alloc_buffer((64, bn), od, scope="local", layout=acc_layout)
        if promote or clustered:  # a K step's product, added to the accumulator in float32 once waited for; a peer's part
            part = T.alloc_buffer((64, bn), "float32", scope="local", layout=acc_layout)
        if stream_k:  # a later piece's sums, epi columns at a time (beside a 64 x 256 accumulator)
            part = T.alloc_buffer((64, epi), "float32", scope="local", layout=wgmma_acc_layout(epi))
        if ahead:  # the next step's product, in flight while part's is added
            part2 = T.alloc_buffer((64, bn), "float32", scope="local", layout=acc_layout)
        if block or rowwise:  # the step's (row-wise: the epilogue's) scale of each of the consumer's rows
            srow = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
        if block:  # a step's scales as fetched (`fetch_scales`), for the even steps and the odd ones: its rows', its blocks'
            sa_even = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            sa_odd = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            sb_even = T.alloc_buffer((3 if bn == 192 else 1,), "float32", scope="local")
            sb_odd = T.alloc_buffer((3 if bn == 192 else 1,), "float32", scope="local")
        if block and bn == 192:  # (block scales over 192 columns: the second and third runs of 64's)
            srow_mid = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            srow_hi = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
        if rowwise:  # each of the epilogue half's columns' scale
            scol = T.alloc_buffer((1, epi), "float32", scope="local", layout=bias_layout)
        if bias == "row":
            brow = T.alloc_buffer((1, epi), od, scope="local", layout=bias_layout)
        if bias == "column":  # each of the consumer's rows' value (rows past m: 0, never stored)
            bcol = T.alloc_buffer((64, 1), od, scope="local", layout=wgmma_row_layout())
        if wg == 0:
            T.ptx.setmaxnreg.dec(producer_regs)
            if clustered:  # (every thread of the cluster arrives at a round's phase: the warpgroup goes through the rounds)
                for r in range(rounds):
                    if live(r, bx):
                        if tid == 0:
                            load_round(r, bx)
                        cluster_round(r)
            elif stream_k:
                if tid == 0:
                    stream_k_loads(bx)
                T.cuda.warp_sync()  # (the loading lane's warp together before the CTA barrier)
                stream_k_meet()
            elif tid == 0:
                for r in range(rounds):
                    if live(r, bx):
                        load_round(r, bx)
                if mc:
                    producer_tail(bx)
        else:
            T.ptx.setmaxnreg.inc(consumer_regs)
            cw = wg - 1
            if a_rows < bm:  # (A's rows past M, in every stage: zeros for the tensor cores)
                for st in range(stages):
                    Tx.warpgroup.fill(A_s[st, a_rows:bm, 0:bk], 0.0)
                T.ptx.fence.proxy.async_.shared__cta()
                T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
            if pingpong:  # (the consumers' units alternate: consumer w takes rounds 2j + w)
                for j in range((rounds + 1) // 2):
                    for w in list(range(2)):  # (unrolled: each consumer's condition a constant warpgroup)
                        if wg == w + 1 and live(2 * j + w, bx):
                            unit(2 * j + w, w)
            elif stream_k:  # (each role meets the grid group barrier in its branch: acc is not live in the producer's few registers)
                stream_k_pieces(bx, cw)
                stream_k_meet()
                stream_k_finish(bx, cw)
            else:
                for r in range(rounds):
                    if live(r, bx):
                        unit(r, cw)
            if clustered and part_of(0, bx) > 0:  # (the last round's phase)
                T.ptx.barrier.cluster.wait()
            if tid % 128 == 0:  # (the last stores' reads of C_s; their writes complete by the grid's end)
                T.ptx.cp_async.bulk.wait_group_read(0)
        if clustered and wg == 0:  # (the last round's phase)
            T.ptx.barrier.cluster.wait()

    # FP8's scales: per tensor, or DeepGEMM's blocks (a row and 128 of K; 128 x 128 of B).
    sa_shape = (m, kt_steps) if block else (m, 1) if rowwise else (1,)
    sb_shape = (nb, kt_steps) if block else (1, n) if rowwise else (1,)
    a_dims = (k, m) if a_mn else (m, k)
    c_shape = (splits, m, n) if split else (m, n)
    b_dims = (n, k) if b_k else (k, n)

    w_shape = (cluster_k - 1, m, n)  # (clusters: the parts of ranks 1 ...)
    if clustered:
        return _clustered_entry(body, fp8, bias, (dtype, bd), od, (m, n, k), a_dims, b_dims, sa_shape, sb_shape, w_shape)
    if stream_k:  # (each CTA's later piece's sums; the grid group barrier's word)
        return _stream_k_entry(body, fp8, bias, (dtype, bd), od, (m, n, k), a_dims, b_dims, sa_shape, sb_shape, (grid, bm, bn))

    if fp8 and bias:

        @T.prim_func
        def scaled_mm_bias(A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)  # b transposed: K-major
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            I = T.match_buffer(I_ptr, (1, n), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            body(A, B, C, I, SA, SB, None, None)

        return scaled_mm_bias

    if fp8:

        @T.prim_func
        def scaled_mm(A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)  # b transposed: K-major
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            C = T.match_buffer(C_ptr, c_shape, cd)  # (split: the parts' float32 sums)
            body(A, B, C, None, SA, SB, None, None)

        return scaled_mm

    if bias == "row":

        @T.prim_func
        def addmm_row(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)
            I = T.match_buffer(I_ptr, (1, n), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            body(A, B, C, I, None, None, None, None)

        return addmm_row

    if bias == "column":

        @T.prim_func
        def addmm_column(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)
            I = T.match_buffer(I_ptr, (m, 1), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            body(A, B, C, I, None, None, None, None)

        return addmm_column

    if bias == "matrix":

        @T.prim_func
        def addmm(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)
            I = T.match_buffer(I_ptr, (m, n), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            body(A, B, C, I, None, None, None, None)

        return addmm

    if gated:

        @T.prim_func
        def matmul_gated(A_ptr: T.handle, B_ptr: T.handle, U_ptr: T.handle, C_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)  # the gate's weights
            U = T.match_buffer(U_ptr, b_dims, dtype)  # the up projection's
            C = T.match_buffer(C_ptr, (m, n), od)
            body(A, B, C, None, None, None, None, U)

        return matmul_gated

    @T.prim_func
    def matmul(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, a_dims, dtype)
        B = T.match_buffer(B_ptr, b_dims, dtype)
        C = T.match_buffer(C_ptr, c_shape, cd)  # (split: the parts' float32 sums)
        body(A, B, C, None, None, None, None, None)

    return matmul


def _clustered_entry(body, fp8: bool, bias: str, dtypes: tuple, od: str, mnk, a_dims, b_dims, sa_shape, sb_shape, w_shape):
    """`matmul_kernel`'s entry with ``cluster_k`` > 1: its usual parameters, then ``W`` (the
    cluster's parts past the first, float32); ``dtypes``: A's and B's."""
    m, n, k = mnk
    dtype, bd = dtypes

    if fp8 and bias:

        @T.prim_func
        def scaled_mm_bias_clustered(
            A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle
        ):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            I = T.match_buffer(I_ptr, (1, n), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            body(A, B, C, I, SA, SB, W, None)

        return scaled_mm_bias_clustered

    if fp8:

        @T.prim_func
        def scaled_mm_clustered(A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            body(A, B, C, None, SA, SB, W, None)

        return scaled_mm_clustered

    if bias:
        i_shape = input_shape(bias, m, n)

        @T.prim_func
        def addmm_clustered(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)
            I = T.match_buffer(I_ptr, i_shape, od)
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            body(A, B, C, I, None, None, W, None)

        return addmm_clustered

    @T.prim_func
    def matmul_clustered(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle):
        A = T.match_buffer(A_ptr, a_dims, dtype)
        B = T.match_buffer(B_ptr, b_dims, dtype)
        C = T.match_buffer(C_ptr, (m, n), od)
        W = T.match_buffer(W_ptr, w_shape, "float32")
        body(A, B, C, None, None, None, W, None)

    return matmul_clustered


@autotune(configs=[{}], key=["m", "n", "out_dtype", "splits", "scales", "bias", "alpha", "beta", "activation"])
def matmul_finish_kernel(
    m: int, n: int, out_dtype: str, splits: int, scales: str = "", bias: str = "", alpha: float = 1.0, beta: float = 1.0, activation: str = ""
):
    """Split-K's second kernel: ``C = act(alpha S [SA SB] + beta I)`` rounded once to
    ``out_dtype``, ``S`` the sum of ``W``'s slices (splits x m x n float32, `matmul_kernel`'s
    parts' sums) added in part order (the same result every run); ``scales``: FP8's scales it
    applies, as `matmul_kernel`'s ``scales`` names them ("": none; "tensor": ``SA[0] SB[0]``;
    "row": torch._scaled_mm's row-wise ``SA`` m x 1 and ``SB`` 1 x n, each row's then each
    column's); ``bias`` and the activation as `matmul_kernel`'s. A warpgroup per 64 x 64 tile, in
    the accumulator's layout (the same epilogue macros; 64 columns: with GELU's erf inlined, 128
    made ptxas spill)."""
    if bias not in BIASES:
        raise ValueError(f"bias: {bias!r}; one of {', '.join(map(repr, BIASES))}")
    add_input, activate = _epilogue(alpha, beta, activation)
    tm, tn = -(-m // 64), -(-n // FIN)
    acc_layout = wgmma_acc_layout(FIN)
    w_shape = (splits, m, n)

    @T.macro
    def body(W, SA, SB, I, C):
        T.device_entry()
        bx = T.cta_id([tm * tn])
        T.warpgroup_id([1])
        T.warp_id_in_wg([4])
        T.lane_id([32])
        T.thread_id([128])
        acc = T.alloc_buffer((64, FIN), "float32", scope="local", layout=acc_layout)
        part = T.alloc_buffer((64, FIN), "float32", scope="local", layout=acc_layout)
        out = T.alloc_buffer((64, FIN), out_dtype, scope="local", layout=acc_layout)
        if bias == "row":
            brow = T.alloc_buffer((1, FIN), out_dtype, scope="local", layout=c.acc_col_layout(FIN))
        if bias == "column":
            bcol = T.alloc_buffer((64, 1), out_dtype, scope="local", layout=wgmma_row_layout())
        if scales == "row":
            srow = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            scol = T.alloc_buffer((1, FIN), "float32", scope="local", layout=c.acc_col_layout(FIN))
        row0 = bx // tn * 64
        col0 = bx % tn * FIN
        Tx.warpgroup.copy(acc[0:64, 0:FIN], W[0, row0 : row0 + 64, col0 : col0 + FIN], clip=True, other=0.0)
        for p in range(1, splits):
            Tx.warpgroup.copy(part[0:64, 0:FIN], W[p, row0 : row0 + 64, col0 : col0 + FIN], clip=True, other=0.0)
            Tx.warpgroup.add(acc[0:64, 0:FIN], acc[0:64, 0:FIN], part[0:64, 0:FIN])
        if scales == "row":
            scale_rows_and_columns(acc[0:64, 0:FIN], srow[0:64, 0:1], scol[0:1, 0:FIN], SA[row0 : row0 + 64, 0:1], SB[0:1, col0 : col0 + FIN])
        elif scales == "tensor":
            Tx.warpgroup.mul(acc[0:64, 0:FIN], acc[0:64, 0:FIN], SA[0] * SB[0])
        if bias == "row":
            Tx.warpgroup.copy(brow[0:1, 0:FIN], I[0:1, col0 : col0 + FIN], clip=True, other=0.0)
            add_input(acc[0:64, 0:FIN], brow[0:1, 0:FIN])
        elif bias == "column":
            Tx.warpgroup.copy(bcol[0:64, 0:1], I[row0 : row0 + 64, 0:1], clip=True, other=0.0)
            add_input(acc[0:64, 0:FIN], bcol[0:64, 0:1])
        elif bias == "matrix":
            Tx.warpgroup.copy(out[0:64, 0:FIN], I[row0 : row0 + 64, col0 : col0 + FIN], clip=True, other=0.0)
            add_input(acc[0:64, 0:FIN], out[0:64, 0:FIN])
        if activation:
            activate(acc[0:64, 0:FIN])
        Tx.warpgroup.cast(out[0:64, 0:FIN], acc[0:64, 0:FIN])
        Tx.warpgroup.copy(C[row0 : row0 + 64, col0 : col0 + FIN], out[0:64, 0:FIN], clip=True)

    i_shape = input_shape(bias, m, n) if bias else ()
    if scales not in ("", "tensor", "row"):
        raise ValueError(f"scales={scales!r}: '' (none), 'tensor' or 'row' (block scales apply in the parts, as each K step is promoted)")
    sa_shape, sb_shape = ((m, 1), (1, n)) if scales == "row" else ((1,), (1,))
    if scales and bias:

        @T.prim_func
        def finish_scaled_bias(W_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            W = T.match_buffer(W_ptr, w_shape, "float32")
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            I = T.match_buffer(I_ptr, i_shape, out_dtype)
            C = T.match_buffer(C_ptr, (m, n), out_dtype)
            body(W, SA, SB, I, C)

        return finish_scaled_bias

    if scales:

        @T.prim_func
        def finish_scaled(W_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, C_ptr: T.handle):
            W = T.match_buffer(W_ptr, w_shape, "float32")
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            C = T.match_buffer(C_ptr, (m, n), out_dtype)
            body(W, SA, SB, None, C)

        return finish_scaled

    if bias:

        @T.prim_func
        def finish_bias(W_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle):
            W = T.match_buffer(W_ptr, w_shape, "float32")
            I = T.match_buffer(I_ptr, i_shape, out_dtype)
            C = T.match_buffer(C_ptr, (m, n), out_dtype)
            body(W, None, None, I, C)

        return finish_bias

    @T.prim_func
    def finish(W_ptr: T.handle, C_ptr: T.handle):
        W = T.match_buffer(W_ptr, w_shape, "float32")
        C = T.match_buffer(C_ptr, (m, n), out_dtype)
        body(W, None, None, None, C)

    return finish


def _stream_k_entry(body, fp8: bool, bias: str, dtypes: tuple, od: str, mnk, a_dims, b_dims, sa_shape, sb_shape, w_shape):
    """`matmul_kernel`'s entry with ``stream_k``: its usual parameters, then ``W`` (each CTA's
    later piece's float32 sums) and ``G`` (the grid group barrier's int32 word, its low 31 bits
    0 before the first launch; each launch leaves them so)."""
    m, n, k = mnk
    dtype, bd = dtypes

    if fp8 and bias:

        @T.prim_func
        def scaled_mm_bias_stream_k(
            A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle, G_ptr: T.handle
        ):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            I = T.match_buffer(I_ptr, (1, n), od)
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            G = T.match_buffer(G_ptr, (1,), "int32")
            body(A, B, C, I, SA, SB, W, None, G)

        return scaled_mm_bias_stream_k

    if fp8:

        @T.prim_func
        def scaled_mm_stream_k(A_ptr: T.handle, B_ptr: T.handle, SA_ptr: T.handle, SB_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle, G_ptr: T.handle):
            A = T.match_buffer(A_ptr, (m, k), dtype)
            B = T.match_buffer(B_ptr, (n, k), bd)
            SA = T.match_buffer(SA_ptr, sa_shape, "float32")
            SB = T.match_buffer(SB_ptr, sb_shape, "float32")
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            G = T.match_buffer(G_ptr, (1,), "int32")
            body(A, B, C, None, SA, SB, W, None, G)

        return scaled_mm_stream_k

    if bias:
        i_shape = input_shape(bias, m, n)

        @T.prim_func
        def addmm_stream_k(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle, G_ptr: T.handle):
            A = T.match_buffer(A_ptr, a_dims, dtype)
            B = T.match_buffer(B_ptr, b_dims, dtype)
            I = T.match_buffer(I_ptr, i_shape, od)
            C = T.match_buffer(C_ptr, (m, n), od)
            W = T.match_buffer(W_ptr, w_shape, "float32")
            G = T.match_buffer(G_ptr, (1,), "int32")
            body(A, B, C, I, None, None, W, None, G)

        return addmm_stream_k

    @T.prim_func
    def matmul_stream_k(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, W_ptr: T.handle, G_ptr: T.handle):
        A = T.match_buffer(A_ptr, a_dims, dtype)
        B = T.match_buffer(B_ptr, b_dims, dtype)
        C = T.match_buffer(C_ptr, (m, n), od)
        W = T.match_buffer(W_ptr, w_shape, "float32")
        G = T.match_buffer(G_ptr, (1,), "int32")
        body(A, B, C, None, None, None, W, None, G)

    return matmul_stream_k


def _gemm(a, b, out, *, sab=(), input=None, splits=None, op="matmul", **kw):
    """``out`` = the product of ``a`` and ``b`` (as `matmul_kernel` takes them: ``kw`` its key),
    with FP8's scales ``sab`` (SA, SB) and addmm's ``input`` (`_gemm_launch`)."""
    (m, n) = out.shape
    launch = _gemm_launch(m, n, c.dtype_name(out), splits=splits, op=op, scaled=bool(sab), **kw)
    launch(a, b, sab, () if input is None else (input,), out)


# Split-K's parts (`_gemm_launch`; `_common.scratch`, per stream).
_SPLIT_PARTS: dict = {}


def _gemm_launch(m: int, n: int, result_dtype: str, *, splits: Optional[int] = None, op="matmul", scaled=False, **kw):
    """``launch(a, b, sab, extra, out)`` for an ``m`` x ``n`` product of ``result_dtype``: one
    kernel, or with ``splits`` > 1 split-K's two (the parts' float32 sums, each in its slice of a
    workspace, then `matmul_finish_kernel`); ``splits`` None: the autotuner's choice, which may
    split K over a cluster's CTAs in one launch (``cluster_k``, its workspace `_with_workspace`'s);
    1: no split. The kernels looked up once."""
    k = kw["k"]
    steps = k_steps(k, kw["dtype"])
    if splits is None:
        kernel = matmul_kernel(m=m, n=n, **kw).launcher(fixed_signature=True)
        single = lambda a, b, sab, extra, out: kernel(a, b, *sab, *extra, out)  # noqa: E731
        ways = split_ways(m, n, **kw)
        if not ways:
            return single
        key = (m, n, result_dtype, op, scaled, tuple(sorted(kw.items())))  # (a call without a plan: its choice once)
        choice = _SPLIT_CHOICES.get(key)
        if choice is None:
            choice = _SPLIT_CHOICES[key] = _split_choice(m, n, result_dtype, op, scaled, kw, single, ways)
        return choice
    if splits < 1 or steps % splits:
        ok = [d for d in range(1, steps + 1) if steps % d == 0]
        raise ValueError(f"tirx.ops.{op}: split_k={splits}; K = {k} is {steps} steps of the kernel's K tile: split_k one of {ok}")
    if splits == 1:
        kernel = matmul_kernel(m=m, n=n, clusters=False, **kw).launcher(fixed_signature=True)
        return lambda a, b, sab, extra, out: kernel(a, b, *sab, *extra, out)
    epilogue = {key: kw.pop(key) for key in ("bias", "alpha", "beta", "activation") if key in kw}
    parts = matmul_kernel(m=m, n=n, splits=splits, **kw).launcher(fixed_signature=True)
    # FP8's scales per tensor or row-wise: the finishing kernel's (block scales: the parts', as each step is promoted)
    after = kw.get("scales", "tensor") if scaled else ""
    after = "" if after == "block" else after
    finish = matmul_finish_kernel(m=m, n=n, out_dtype=result_dtype, splits=splits, scales=after, **epilogue).launcher(fixed_signature=True)

    def launch(a, b, sab, extra, out):
        w = c.scratch(a, (splits, m, n), "float32", _SPLIT_PARTS)  # (each part writes all of its slice: no zeroing)
        parts(a, b, *sab, w)
        finish(w, *(sab if after else ()), *extra, out)

    return launch


# Split-K in two launches is timed against the one-kernel choice (`split_ways`) where it cuts the
# K steps the busiest SM runs to at most this fraction.
SPLIT_GAIN = 0.85
# `autotune.choose`'s ``timer`` for the split-K choice (None: CUDA events on the GPU; tests set it).
SPLIT_TIMER = None
# The split-K choices' launches, per product (`_gemm_launch`).
_SPLIT_CHOICES: dict = {}


def split_ways(m: int, n: int, k: int, dtype: str, ctas: int, gated: bool = False, clusters: bool = True, **_) -> list:
    """The split-K part counts (at most two) timed beside the one-kernel choice for an m x n x k
    product of 16-bit operands on ``ctas`` SMs, where 128 x 128 tiles leave the last round of
    SMs part idle: a count ``s`` that divides K's steps into parts of 8 or more and brings the
    steps of the busiest SM (rounds of ``tiles * s`` units times ``steps / s``) to `SPLIT_GAIN`
    of the unsplit or less (100 x 12344 x 4096: 97 tiles, 64 steps on one round; in 4 parts 388
    units, 3 rounds of 16). None where K over a cluster's CTAs is among the kernel's candidates
    (tiles for half the SMs at most), for FP8 or gated products, nor without ``clusters`` (a
    call's ``split_k=1``)."""
    if dtype.startswith("float8") or gated or not clusters:
        return []
    steps = k_steps(k, dtype)
    tiles = -(-m // 128) * -(-n // 128)
    if 2 * tiles <= ctas:
        return []

    def work(s):  # K steps on the busiest SM
        return -(-tiles * s // ctas) * (steps // s)

    ways = [s for s in range(2, 9) if steps % s == 0 and steps // s >= 8 and work(s) <= SPLIT_GAIN * work(1)]
    return sorted(ways, key=lambda s: (work(s), s))[:2]


def _split_choice(m: int, n: int, result_dtype: str, op: str, scaled: bool, kw: dict, single: Callable, ways: list) -> Callable:
    """``launch(a, b, sab, extra, out)``: on its first call the fastest of the one-kernel choice
    (``single``) and split-K in each of ``ways`` parts (`autotune.choose`: timed on the call's
    arguments on the GPU, kept per shape; the one kernel in the simulator), then that one."""
    from ..autotune import choose

    options = ["one kernel"] + [f"split_k={s}" for s in ways]
    name = f"{op}(m={m}, n={n}, {', '.join(f'{key}={kw[key]!r}' for key in sorted(kw))}, out={result_dtype})"
    chosen: list = []

    def build(i: int) -> Callable:
        return single if i == 0 else _gemm_launch(m, n, result_dtype, splits=ways[i - 1], op=op, scaled=scaled, **dict(kw))

    def launch(a, b, sab, extra, out):
        if not chosen:

            def timed(i: int) -> Callable:  # option i's run on the call's arguments
                run = build(i)
                return lambda: run(a, b, sab, extra, out)

            chosen.append(build(choose(name, options, timed, c.is_torch(a) and a.is_cuda, SPLIT_TIMER)))
        chosen[0](a, b, sab, extra, out)

    return launch


# The cluster and stream-K designs' workspaces, stream-K's barrier words (`_with_workspace`;
# `_common.scratch`, per stream).
_WORKSPACES: dict = {}
_WORDS: dict = {}


def _with_workspace(kernel, args) -> tuple:
    """A candidate's arguments (`autotune`'s ``launch_args``): the call's, and for a design that
    splits K over a cluster the float32 ``W`` its CTAs past the first store their parts in
    (``cluster_k - 1`` x m x n), for stream-K its CTAs' float32 ``W`` (ctas x BM x BN) and the
    grid group barrier's int32 word ``G`` (zeroed once, when the buffer is made: each launch
    leaves its low 31 bits 0); work buffers per stream (`_common.scratch`)."""
    extra = kernel.params[len(args) :]
    if not extra:
        return args
    w = c.scratch(args[0], extra[0].shape, "float32", _WORKSPACES)
    if len(extra) == 1:
        return (*args, w)
    return (*args, w, c.scratch(args[0], extra[1].shape, "int32", _WORDS, fill=0))


def cluster_room(ctas: int, size: int) -> int:
    """The CTAs in clusters of ``size`` that a GPU of ``ctas`` SMs surely holds at once: all in
    pairs; an eighth fewer in fours (an H200's GPCs hold 120 of its 132 SMs' CTAs in clusters of
    4), a quarter fewer in eights."""
    return ctas if size <= 2 else ctas * 7 // 8 if size == 4 else ctas * 3 // 4


def _ctas(x) -> int:
    """Persistent CTAs: one per SM of the tensor's GPU; 2 in the simulator (the tile loop still
    takes several rounds at the small sizes it runs)."""
    return c.gpu_sms(x) or 2


def _check(a, b) -> str:
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError(
            f"tirx.ops.matmul: operands of shapes {list(a.shape)} and {list(b.shape)}; this kernel multiplies "
            "2-D matrices (flatten leading dims into M: a.reshape(-1, a.shape[-1]))"
        )
    da, db = c.dtype_name(a), c.dtype_name(b)
    if da != db:
        raise TypeError(f"tirx.ops.matmul: expected both operands of one dtype, got {da} and {db}")
    if da not in ("bfloat16", "float16"):
        raise TypeError(f"tirx.ops.matmul: {da} operands; the kernel takes bfloat16 or float16 (wgmma)")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"tirx.ops.matmul: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")
    # K is a row stride only of a row-major a (`_majors`): a column-major one (a transpose, as
    # the weight gradient Aᵀ dC reads the activations) takes any K, its tail TMA's zeros.
    if m and n and k and (n % 8 or k % 8 and _majors(a, b)[0] == "k"):
        raise ValueError(
            f"tirx.ops.matmul: {m}x{n}x{k} (M x N x K); TMA needs 16-byte row strides: N a multiple of 8, and K or M "
            "(pad the matrices: torch.nn.functional.pad)"
        )
    return da


def _activation(op: str, activation) -> str:
    """``activation`` (None or one of `ACTIVATIONS`) as the kernel's key; an error names the choices."""
    if activation is None or activation == "":
        return ""
    if activation not in ACTIVATIONS:
        raise ValueError(f"tirx.ops.{op}: activation={activation!r}; one of {', '.join(map(repr, ACTIVATIONS))} or None")
    return activation


def _host_activation(x, activation: str):
    """The activation of a float32 host array or tensor (k = 0: no product to fuse it into)."""
    if not activation:
        return x
    if c.is_torch(x):
        import torch.nn.functional as F

        return {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}[activation](x)
    import math

    if activation == "relu":
        return np.where(np.isnan(x), x, np.maximum(x, 0))
    if activation == "gelu":
        return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if activation == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x / (1 + np.exp(-x))


def _majors(a, b):
    """``(a_major, b_major)``: how the kernel reads each operand: a column-major ``a`` as ``At``
    ("m"), a column-major ``b`` as ``Bt`` ("k"), where their rows are 16-byte aligned; else
    row-major ("k", "n"). Where K is no multiple of 8, ``a`` as ``At`` however it is stored
    (copied so unless it is column-major): its rows are M long."""
    (m, k), n = a.shape, b.shape[1]
    a_major = "m" if (c.strides(a) == (1, m) or k % 8) and m > 1 and m % 8 == 0 else "k"
    b_major = "k" if c.strides(b) == (1, k) and k > 1 and n > 1 and k % 8 == 0 else "n"
    return a_major, b_major


def _operands(a, b):
    """``(a, a_major, b, b_major)``: each operand as the kernel reads it (`_majors`), a transposed
    view in place where it is stored so, else a copy."""
    a_major, b_major = _majors(a, b)
    a = c.contiguous(a.T) if a_major == "m" else c.contiguous(a)
    b = c.contiguous(b.T) if b_major == "k" else c.contiguous(b)
    return a, a_major, b, b_major


# `_run`'s plan key of a product without activation, split or out_dtype (`matmul`'s fast path).
_PLAIN_MM = ("mm", "", None, "")


def _run(a, b, activation: str = "", splits: Optional[int] = None, out_dtype: str = ""):
    if c.is_torch(a):
        key = ("mm", activation, splits, out_dtype)
        a, b = c.aligned((a, b))
        return c.signature_plan((a, b), key, lambda: _new_mm_plan(a, b, activation, splits, out_dtype))(a, b)
    return _run_general(a, b, activation, splits, out_dtype)


def _run_general(a, b, activation: str = "", splits: Optional[int] = None, out_dtype: str = ""):
    dtype = _check(a, b)
    (m, k), n = a.shape, b.shape[1]
    a, a_major, b, b_major = _operands(a, b)
    out = c.new_array(a, (m, n), out_dtype or None)
    if m == 0 or n == 0:
        return out
    if k == 0:  # (every activation maps 0 to 0)
        out[...] = 0
        return out
    kw = dict(k=k, dtype=dtype, ctas=_ctas(a), activation=activation, a_major=a_major, b_major=b_major)
    _gemm(a, b, out, splits=splits, **kw, **({"out_dtype": out_dtype} if out_dtype else {}))
    return out


def _operand_views(a, b):
    """`_operands`' choices for torch tensors ``a`` and ``b`` as functions of tensors of their
    shapes and strides (a plan's: `signature_plan`): the transposed view in place where the
    operand is stored so, the tensor itself where it is contiguous, else a copy (decided here,
    once: no `.contiguous()` per call)."""
    a_major, b_major = _majors(a, b)
    return _view(a, a_major == "m"), a_major, _view(b, b_major == "k"), b_major


def _view(x, transposed: bool) -> Callable:
    """How a plan reads tensors like ``x``: ``x.T`` (``transposed``) or ``x``, copied where that
    is not contiguous."""
    if (x.T if transposed else x).is_contiguous():
        return (lambda y: y.T) if transposed else (lambda y: y)
    return (lambda y: y.T.contiguous()) if transposed else (lambda y: y.contiguous())


def _new_mm_plan(a, b, activation: str, splits: Optional[int], out_dtype: str = ""):
    import torch

    dtype = _check(a, b)
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0 or k == 0:  # (every activation maps 0 to 0)
        return lambda a, b: _run_general(a, b, activation, splits, out_dtype)
    view_a, a_major, view_b, b_major = _operand_views(a, b)
    kw = dict(k=k, dtype=dtype, ctas=_ctas(a), activation=activation, a_major=a_major, b_major=b_major)
    launch = _gemm_launch(m, n, out_dtype or dtype, splits=splits, **kw, **({"out_dtype": out_dtype} if out_dtype else {}))
    tout = getattr(torch, out_dtype or dtype)

    def run(a, b):
        out = a.new_empty((m, n), dtype=tout)  # (a third faster than torch.empty's arguments)
        launch(view_a(a), view_b(b), (), (), out)
        return out

    return run


def _new_addmm_plan(input, a, b, beta: float, alpha: float, activation: str, splits: Optional[int], out_dtype: str = ""):
    import torch

    dtype, kind = _addmm_check(input, a, b, out_dtype)
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return lambda input, a, b: _addmm_general(input, a, b, beta, alpha, activation, splits, out_dtype)
    view_a, a_major, view_b, b_major = _operand_views(a, b)
    kw = dict(k=k, dtype=dtype, ctas=_ctas(a), bias=kind, alpha=alpha, beta=beta, activation=activation, a_major=a_major, b_major=b_major)
    launch = _gemm_launch(m, n, out_dtype or dtype, splits=splits, op="addmm", **kw, **({"out_dtype": out_dtype} if out_dtype else {}))
    tout = getattr(torch, out_dtype or dtype)
    view_i = _input_view(kind, tuple(input.shape), m, n)

    def run(input, a, b):
        out = a.new_empty((m, n), dtype=tout)
        i = input.to(tout).contiguous()
        launch(view_a(a), view_b(b), (), (view_i(i),), out)
        return out

    return run


def _addmm(input, a, b, beta: float, alpha: float, activation: str = "", splits: Optional[int] = None, out_dtype: str = ""):
    if c.is_torch(a):
        key = ("addmm", beta, alpha, activation, splits, out_dtype)
        input, a, b = c.aligned((input, a, b))
        new = lambda: _new_addmm_plan(input, a, b, beta, alpha, activation, splits, out_dtype)  # noqa: E731
        return c.signature_plan((input, a, b), key, new)(input, a, b)
    return _addmm_general(input, a, b, beta, alpha, activation, splits, out_dtype)


def _addmm_check(input, a, b, out_dtype: str = ""):
    """``(dtype, kind)``: the operands' dtype and how ``input`` is added (`matmul_kernel`'s
    ``bias``: "matrix", "row" (also a number, (), (1,) or (1, 1), repeated along the row by
    `_input_view`) or "column"), PyTorch's broadcasting to the (m, n) product; ``input`` of
    their dtype, or with a float32 ``out_dtype`` of either."""
    dtype = _check(a, b)
    m, n = a.shape[0], b.shape[1]
    shape = tuple(input.shape)
    if shape == (m, n):
        kind = "matrix"
    elif shape in ((n,), (1, n), (), (1,), (1, 1)):
        kind = "row"
    elif shape == (m, 1):
        kind = "column"
    else:
        raise ValueError(
            f"tirx.ops.addmm: input of shape {list(shape)} does not broadcast to the {m}x{n} product; give a row ({n},) / (1, {n}), "
            f"a column ({m}, 1), a number or the whole ({m}, {n})"
        )
    if c.dtype_name(input) not in (dtype, out_dtype or dtype):
        raise TypeError(f"tirx.ops.addmm: input is {c.dtype_name(input)}, the matrices {dtype}: give all one dtype (or a float32 input with out_dtype float32)")
    return dtype, kind


def _input_view(kind: str, shape: tuple, m: int, n: int):
    """The function giving addmm's (contiguous) input of ``shape`` as the kernel takes it: a row
    (1, n) (a number repeated along it), a column (m, 1) or the matrix (chosen once per call
    signature)."""
    if kind == "row" and int(np.prod(shape)) != n:  # (a number)
        return lambda i: i.reshape(1, 1).expand(1, n).contiguous() if c.is_torch(i) else np.ascontiguousarray(np.broadcast_to(i.reshape(1, 1), (1, n)))
    if kind == "row":
        return lambda i: i.reshape(1, n)
    return (lambda i: i.reshape(m, 1)) if kind == "column" else (lambda i: i)


def _addmm_general(input, a, b, beta: float, alpha: float, activation: str = "", splits: Optional[int] = None, out_dtype: str = ""):
    dtype, kind = _addmm_check(input, a, b, out_dtype)
    (m, k), n = a.shape, b.shape[1]
    if out_dtype and c.dtype_name(input) != out_dtype:  # (exact: a 16-bit input in float32)
        input = input.float() if c.is_torch(input) else input.astype(np.float32)
    i = _input_view(kind, tuple(input.shape), m, n)(c.contiguous(input))
    a, a_major, b, b_major = _operands(a, b)
    out = c.new_array(a, (m, n), out_dtype or None)
    if m == 0 or n == 0:
        return out
    if k == 0:  # beta * input alone (and its activation), computed in float32 and rounded once
        wide = i.float() if c.is_torch(i) else i.astype(np.float32)
        out[...] = _host_activation(beta * wide, activation)
        return out
    kw = dict(k=k, dtype=dtype, ctas=_ctas(a), bias=kind, alpha=float(alpha), beta=float(beta), activation=activation, a_major=a_major, b_major=b_major)
    _gemm(a, b, out, input=i, splits=splits, op="addmm", **kw, **({"out_dtype": out_dtype} if out_dtype else {}))
    return out


def register_addmm_torch_op():
    """`torch.ops.tirx.addmm` (registered on the first call)."""
    return c.torch_op("addmm", _addmm_parts, _addmm_autograd)


def _addmm_parts():
    import torch

    def schema(input: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: float, alpha: float, activation: str, out_dtype: str) -> torch.Tensor:
        return _addmm(input, a, b, beta, alpha, activation, None, out_dtype)

    def fake(input, a, b, beta, alpha, activation, out_dtype):
        _check(a, b)
        return a.new_empty((a.shape[0], b.shape[1]), dtype=getattr(torch, out_dtype) if out_dtype else None)

    return schema, fake


def _activation_grad(z, y, dc, activation: str):
    """The gradient at the pre-activation ``z`` (recomputed by the kernel without the activation,
    rounded to the dtype) of ``y = act(z)``, in float32, rounded once: relu from the output, the
    others from their derivatives (gelu: Φ(z) + z φ(z); gelu_tanh and silu as PyTorch's
    formulas)."""
    import torch

    if activation == "relu":
        return torch.where(y > 0, dc, torch.zeros_like(dc))
    x, g = z.float(), dc.float()
    if activation == "gelu":
        d = 0.5 * (1 + torch.erf(x * 0.7071067811865476)) + x * torch.exp(-0.5 * x * x) * 0.3989422804014327
    elif activation == "gelu_tanh":
        t = torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x)
    else:
        sig = torch.sigmoid(x)
        d = sig * (1 + x * (1 - sig))
    return (g * d).to(dc.dtype)


def _mm(x, y):
    """``x @ y`` as a backward formula computes it (`_common.inner_op`: traced under torch.compile)."""
    return c.inner_op("matmul", _torch_op_parts, _matmul_autograd)(x, y, "", "")


def _matmul_autograd(op):
    """dA = dZ Bᵀ and dB = Aᵀ dZ, by this kernel (the transposes read in place); dZ = dC, or
    with an activation its gradient at the pre-activation (`_activation_grad`)."""

    def setup_context(ctx, inputs, output):
        a, b, activation, _ = inputs
        # (the output only where relu's gradient reads it: as torch.mm, a product's backward keeps
        # its operands alive, not its result)
        ctx.save_for_backward(a, b, output if activation == "relu" else None)
        ctx.activation, ctx.out_dtype = activation, output.dtype

    def backward(ctx, dc):
        a, b, y = ctx.saved_tensors
        if ctx.activation:
            dc = _activation_grad(None if ctx.activation == "relu" else _mm(a, b).to(ctx.out_dtype), y, dc, ctx.activation)
        dc = dc.to(a.dtype)  # (a float32 output's gradient: rounded once to the operands' dtype)
        da = _mm(dc, b.t()) if ctx.needs_input_grad[0] else None
        db = _mm(a.t(), dc) if ctx.needs_input_grad[1] else None
        return da, db, None, None

    op.register_autograd(backward, setup_context=setup_context)


def _addmm_autograd(op):
    """d(input) = beta dZ (summed over the rows for a bias row, the columns for a bias column, all
    for a number), dA = alpha dZ Bᵀ, dB = alpha Aᵀ
    dZ; dZ = dC, or with an activation its gradient at the pre-activation (`_activation_grad`)."""

    def setup_context(ctx, inputs, output):
        input, a, b, beta, alpha, activation, out_dtype = inputs
        # (the input only where the pre-activation is recomputed, the output only for relu's
        # gradient: neither is kept alive otherwise)
        recompute = activation not in ("", "relu")
        ctx.save_for_backward(input if recompute else None, a, b, output if activation == "relu" else None)
        ctx.shape, ctx.beta, ctx.alpha, ctx.activation, ctx.out_dtype = tuple(input.shape), beta, alpha, activation, out_dtype
        ctx.input_dtype = input.dtype

    def backward(ctx, dc):
        input, a, b, y = ctx.saved_tensors
        if ctx.activation:  # (the pre-activation recomputed without it)
            z = None if ctx.activation == "relu" else c.inner_op("addmm", _addmm_parts, _addmm_autograd)(input, a, b, ctx.beta, ctx.alpha, "", ctx.out_dtype)
            dc = _activation_grad(z, y, dc, ctx.activation)
        di = da = db = None
        if ctx.needs_input_grad[0]:  # (summed over what the input was broadcast along)
            di = dc.float() if ctx.shape == tuple(dc.shape) else dc.float().sum_to_size(ctx.shape) if ctx.shape else dc.float().sum()
            di = (di * ctx.beta).reshape(ctx.shape).to(ctx.input_dtype)
        dc = dc.to(a.dtype)  # (a float32 output's gradient: rounded once to the operands' dtype)
        if ctx.needs_input_grad[1]:
            da = _mm(dc, b.t()) if ctx.alpha == 1 else (_mm(dc, b.t()).float() * ctx.alpha).to(dc.dtype)
        if ctx.needs_input_grad[2]:
            db = _mm(a.t(), dc) if ctx.alpha == 1 else (_mm(a.t(), dc).float() * ctx.alpha).to(dc.dtype)
        return di, da, db, None, None, None, None

    op.register_autograd(backward, setup_context=setup_context)


def _split_k(op: str, split_k, *tensors) -> Optional[int]:
    """``split_k`` where it applies (None: the autotuner's choice): a count above 1 in eager calls
    without autograd (torch.compile and autograd trace the op, whose choice is automatic)."""
    if split_k is None or split_k == 1:
        return split_k
    if any(c.is_torch(t) for t in tensors) and (c.compiling() or any(c.wants_grad(t) for t in tensors)):
        raise NotImplementedError(f"tirx.ops.{op}: split_k={split_k} is for eager calls without autograd (not under torch.compile or with gradients)")
    return int(split_k)


def addmm(
    input, mat1, mat2, *, beta: float = 1, alpha: float = 1, out_dtype: Optional[object] = None, activation: Optional[str] = None, split_k: Optional[int] = None
):
    """PyTorch's `torch.addmm(input, mat1, mat2, beta=1, alpha=1)`: ``beta * input + alpha *
    (mat1 @ mat2)``, ``input`` broadcast to the (m, n) product as PyTorch's: a row (n,) or (1, n)
    added to every row, a column (m, 1) to every column, a number ((), (1,) or (1, 1)) or an (m,
    n) matrix,
    fused into the matmul's epilogue (float32 arithmetic, one rounding); with ``activation``
    ("relu", "gelu", "gelu_tanh", "silu": PyTorch's F.relu, F.gelu, F.gelu(approximate="tanh"),
    F.silu) that of the sum, fused too (as `torch._addmm_activation` does relu and gelu); a new
    array or tensor of the matrices' dtype, or with ``out_dtype=torch.float32`` (16-bit
    matrices; ``input`` of their dtype or float32) of float32, unrounded. ``split_k``: as
    `matmul`'s."""
    od = _out_dtype("addmm", out_dtype, mat1)
    act = _activation("addmm", activation)
    splits = _split_k("addmm", split_k, input, mat1, mat2)
    if splits is not None and splits > 1:
        arrays = (input, mat1, mat2) if c.is_torch(mat1) else tuple(np.asarray(x) for x in (input, mat1, mat2))
        return _addmm(*arrays, float(beta), float(alpha), act, splits, od)
    if c.is_torch(mat1):
        if c.compiling() or any(c.wants_grad(t) for t in (input, mat1, mat2)):  # (with its backward)
            return c.differentiable("addmm", _addmm_parts, _addmm_autograd)(input, mat1, mat2, float(beta), float(alpha), act, od)
        return _addmm(input, mat1, mat2, float(beta), float(alpha), act, splits, od)
    return _addmm(np.asarray(input), np.asarray(mat1), np.asarray(mat2), float(beta), float(alpha), act, splits, od)


def register_torch_op():
    """`torch.ops.tirx.matmul` (registered on the first call), differentiable (without an
    activation)."""
    return c.torch_op("matmul", _torch_op_parts, _matmul_autograd)


def _torch_op_parts():
    """The op's function and fake implementation."""
    import torch

    def schema(a: torch.Tensor, b: torch.Tensor, activation: str, out_dtype: str) -> torch.Tensor:
        return _run(a, b, activation, None, out_dtype)

    def fake(a, b, activation, out_dtype):
        _check(a, b)
        return a.new_empty((a.shape[0], b.shape[1]), dtype=getattr(torch, out_dtype) if out_dtype else None)

    return schema, fake


def matmul(a, b, *, out_dtype: Optional[object] = None, activation: Optional[str] = None, split_k: Optional[int] = None):
    """``a @ b`` (PyTorch's `torch.matmul`): a new array or tensor of their dtype, or with
    ``out_dtype=torch.float32`` (bfloat16 and float16 operands, as ``torch.mm(a, b,
    out_dtype=torch.float32)``) of float32, the float32 sums stored as they are (gradients
    through it round the incoming one to the operands' dtype once); with ``activation`` (as
    `addmm`'s) that of the product, fused into the epilogue.
    ``split_k``: K in that many equal parts (a divisor of its steps of 64, 128 for FP8), each
    a work unit whose float32 sums fill its slice of a workspace, a second kernel adding the
    parts in order (the same result every run) and applying the epilogue: more CTAs for shapes
    whose tiles leave SMs idle (decode's skinny M). None (the default): the autotuner's choice,
    among the one-CTA tiles and K split over a cluster's 2 or 4 CTAs in one launch
    (always under autograd and torch.compile); 1: none; more: eager calls without autograd.

    Other ranks as `torch.matmul` takes them (`_matmul_nd`): ``a`` of any rank times a matrix
    (a linear layer's ``x @ w.t()``: the leading dims folded into M, in place where they
    merge), a vector on either side, and batches of matrices (batch dims broadcast) through
    `grouped_mm`, one launch."""
    if out_dtype is None and activation is None and split_k is None and c.is_torch(a) and not c.compiling():
        # An eager call of a signature met before: straight to its plan (the host time of a
        # small product is most of its time; the checks below were made with the plan).
        plan = c.PLANS.get(_PLAIN_MM + c.signature((a, b)))
        if plan is not None and not (c.wants_grad(a) or c.wants_grad(b)):
            return plan(a, b)
    if len(a.shape) != 2 or len(b.shape) != 2:
        return _matmul_nd(a, b, out_dtype, activation, split_k)
    od = _out_dtype("matmul", out_dtype, a)
    act = _activation("matmul", activation)
    splits = _split_k("matmul", split_k, a, b)
    if splits is not None and splits > 1:
        return _run(a, b, act, splits, od) if c.is_torch(a) else _run(np.asarray(a), np.asarray(b), act, splits, od)
    if c.is_torch(a):
        if c.compiling() or c.wants_grad(a) or c.wants_grad(b):
            return c.differentiable("matmul", _torch_op_parts, _matmul_autograd)(a, b, act, od)
        c.torch_op("matmul", _torch_op_parts, _matmul_autograd)  # (registered by the first eager call, for a later compiled one)
        return _run(a, b, act, splits, od)
    return _run(np.asarray(a), np.asarray(b), act, splits, od)


def linear(input, weight, bias=None, *, activation: Optional[str] = None):
    """``input @ weight.T + bias`` (PyTorch's `torch.nn.functional.linear`): ``input`` of any rank
    (its leading dims folded into M, in place where they merge; a vector: one row), ``weight``
    (out_features, in_features) read transposed in place (an `nn.Linear`'s weight as it is
    stored), ``bias`` (out_features,) or None added in the epilogue (`addmm`'s bias row), with
    ``activation`` (as `addmm`'s) fused there too; bfloat16 or float16, float32 sums rounded
    once; differentiable in all three. A new array or tensor of ``input``'s dims with the last
    out_features."""
    if len(weight.shape) != 2:
        raise ValueError(f"tirx.ops.linear: weight of shape {list(weight.shape)}; expected (out_features, in_features)")
    n, k = weight.shape
    if len(input.shape) == 0 or input.shape[-1] != k:
        raise ValueError(f"tirx.ops.linear: input of shape {list(input.shape)} and weight {list(weight.shape)}: the input's last dim must be in_features ({k})")
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"tirx.ops.linear: bias of shape {list(bias.shape)}; expected ({n},)")
    rows = math.prod(input.shape[:-1])  # (Python's: torch.compile traces it)
    x = input.reshape(rows, k)
    out = matmul(x, weight.T, activation=activation) if bias is None else addmm(bias, x, weight.T, activation=activation)
    return out.reshape(tuple(input.shape[:-1]) + (n,))


def _matmul_nd(a, b, out_dtype, activation, split_k):
    """`matmul` of operands not both matrices, as `torch.matmul`: a vector ``a`` is a row (a
    product of one row), a vector ``b`` a column (padded with 7 of zeros: N = 1 would break TMA's
    16-byte strides; reading ``a`` once, the product costs what one column would), the dims added
    dropped from the result; then ``a``'s leading dims folded into M where ``b`` is a matrix, else
    both broadcast to one batch (copies where a dim is broadcast) and multiplied group by group
    by `grouped_mm`."""
    if c.is_torch(a):
        import torch as xp
    else:
        xp, a, b = np, np.asarray(a), np.asarray(b)
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise ValueError(f"tirx.ops.matmul: operands of shapes {list(a.shape)} and {list(b.shape)}; both need at least one dim (scalars: a * b)")
    if len(a.shape) == 1 and len(b.shape) == 1:
        raise ValueError(f"tirx.ops.matmul: two vectors ({a.shape[0]} and {b.shape[0]}): a dot product is not a tensor-core GEMM ((a * b).sum())")
    if len(b.shape) == 1:  # (..., M, K) @ (K,): the column b and 7 of zeros, its first column kept
        cols = xp.nn.functional.pad(b[:, None], (0, 7)) if xp is not np else np.pad(b[:, None], ((0, 0), (0, 7)))
        rows = math.prod(a.shape[:-1])  # (not -1: K may be 0)
        out = matmul(a.reshape(rows, a.shape[-1]), cols, out_dtype=out_dtype, activation=activation, split_k=split_k)[:, 0]
        return c.contiguous(out).reshape(tuple(a.shape[:-1]))
    if len(a.shape) == 1:  # (K,) @ (..., K, N): one row, dropped from the result
        return matmul(a[None, :], b, out_dtype=out_dtype, activation=activation, split_k=split_k)[..., 0, :]
    (m, k), n = a.shape[-2:], b.shape[-1]
    if len(b.shape) == 2:  # (..., M, K) @ (K, N): the leading dims are M's
        rows = math.prod(a.shape[:-1])
        out = matmul(a.reshape(rows, k), b, out_dtype=out_dtype, activation=activation, split_k=split_k)
        return out.reshape(tuple(a.shape[:-1]) + (n,))
    if activation or (split_k is not None and split_k != 1) or _out_dtype("matmul", out_dtype, a):
        raise ValueError(
            f"tirx.ops.matmul: batched operands {list(a.shape)} and {list(b.shape)} run as grouped_mm, without activation=, split_k= "
            "or a float32 out_dtype= (apply the activation after, or call matmul per matrix)"
        )
    if b.shape[-2] != k:
        raise ValueError(f"tirx.ops.matmul: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {b.shape[-2]}x{n})")
    batch = tuple(xp.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    groups = math.prod(batch)
    a3 = xp.broadcast_to(a, batch + (m, k)).reshape(groups * m, k)
    b3 = xp.broadcast_to(b, batch + (k, n)).reshape(groups, k, n)
    # (on the operands' device, by a kernel there: no host copy, so a CUDA graph can capture it)
    offs = xp.arange(1, groups + 1, dtype=xp.int32, device=a.device) * m if xp is not np else np.arange(1, groups + 1, dtype=np.int32) * m
    from .grouped_mm import grouped_mm

    return grouped_mm(a3, b3, offs, out_dtype=out_dtype).reshape(batch + (m, n))


def _out_dtype(op: str, out_dtype, a) -> str:
    """``out_dtype`` as the kernel's key: "" for the operands' own dtype (or None), "float32"
    (PyTorch's ``torch.mm(a, b, out_dtype=torch.float32)``: the float32 sums stored as they are)."""
    if out_dtype is None:
        return ""
    name = str(out_dtype).replace("torch.", "")
    if name == c.dtype_name(a):
        return ""
    if name == "float32" and c.dtype_name(a) in ("bfloat16", "float16"):
        return "float32"
    raise TypeError(f"tirx.ops.{op}: out_dtype {out_dtype} for {c.dtype_name(a)} operands; their own dtype or float32 (bfloat16 and float16 operands)")




def gated_mm(a, b_gate, b_up, *, activation: str = "silu"):
    """A gated linear unit in one GEMM: ``act(a @ b_gate) * (a @ b_up)`` (SwiGLU with the default
    ``activation="silu"``, GeGLU with "gelu" or "gelu_tanh"), 2-D bfloat16 or float16 matrices,
    ``b_gate`` and ``b_up`` of one shape (k x n; ``w.t()`` of an ``nn.Linear`` weight is read in
    place). Each tile's columns are half the gate's and half the up projection's at the same
    output columns, accumulated together in float32; the epilogue applies the activation to the
    gate's, multiplies by the up's in float32 and rounds once: the two products never reach
    memory (PyTorch's ``F.silu(a @ wg) * (a @ wu)`` stores and rereads both, rounded to the
    dtype). Differentiable (the backward recomputes both products); a new array or tensor."""
    act = _activation("gated_mm", activation)
    if not act or act == "relu":
        raise ValueError(f"tirx.ops.gated_mm: activation {activation!r}; 'silu' (SwiGLU), 'gelu' or 'gelu_tanh' (GeGLU)")
    if c.is_torch(a):
        if c.compiling() or any(c.wants_grad(t) for t in (a, b_gate, b_up)):
            return c.differentiable("gated_mm", _gated_parts, _gated_autograd)(a, b_gate, b_up, act)
        c.torch_op("gated_mm", _gated_parts, _gated_autograd)
        return _gated(a, b_gate, b_up, act)
    return _gated(np.asarray(a), np.asarray(b_gate), np.asarray(b_up), act)


def _gated_check(a, b_gate, b_up) -> str:
    dtype = _check(a, b_gate)
    if tuple(b_up.shape) != tuple(b_gate.shape) or c.dtype_name(b_up) != dtype:
        raise ValueError(
            f"tirx.ops.gated_mm: b_up {list(b_up.shape)} ({c.dtype_name(b_up)}) and b_gate {list(b_gate.shape)} ({dtype}): one shape and dtype"
        )
    return dtype


def _gated(a, b_gate, b_up, activation: str):
    if c.is_torch(a):
        a, b_gate, b_up = c.aligned((a, b_gate, b_up))
        new = lambda: _new_gated_plan(a, b_gate, b_up, activation)  # noqa: E731
        return c.signature_plan((a, b_gate, b_up), ("gated", activation), new)(a, b_gate, b_up)
    return _new_gated_plan(a, b_gate, b_up, activation)(a, b_gate, b_up)


def _new_gated_plan(a, b_gate, b_up, activation: str):
    """``run(a, b_gate, b_up)``: the kernel's operand views chosen once (the two B matrices read
    the same way: in place where both are column-major, else both row-major)."""
    dtype = _gated_check(a, b_gate, b_up)
    (m, k), n = a.shape, b_gate.shape[1]
    a_major, b_major = _majors(a, b_gate)
    if b_major == "k" and _majors(a, b_up)[1] != "k":  # (the up matrix not column-major: both copied)
        b_major = "n"
    if c.is_torch(a):
        view_a, view_gate, view_up = _view(a, a_major == "m"), _view(b_gate, b_major == "k"), _view(b_up, b_major == "k")
    else:
        view_a = lambda x: np.ascontiguousarray(x.T) if a_major == "m" else np.ascontiguousarray(x)  # noqa: E731
        view_gate = view_up = lambda y: np.ascontiguousarray(y.T) if b_major == "k" else np.ascontiguousarray(y)  # noqa: E731

    empty = m == 0 or n == 0 or k == 0
    if not empty:
        launch = matmul_kernel(m=m, n=n, k=k, dtype=dtype, ctas=_ctas(a), activation=activation, a_major=a_major, b_major=b_major, gated=True).launcher(fixed_signature=True)

    def run(a, b_gate, b_up):
        out = c.new_array(a, (m, n), dtype)
        if empty:  # (act(0) * 0 where K is empty)
            out[...] = 0
            return out
        launch(view_a(a), view_gate(b_gate), view_up(b_up), out)
        return out

    return run


def register_gated_torch_op():
    """`torch.ops.tirx.gated_mm` (registered on the first call), differentiable."""
    return c.torch_op("gated_mm", _gated_parts, _gated_autograd)


def _gated_parts():
    import torch

    def schema(a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, activation: str) -> torch.Tensor:
        return _gated(a, b_gate, b_up, activation)

    def fake(a, b_gate, b_up, activation):
        _gated_check(a, b_gate, b_up)
        return a.new_empty((a.shape[0], b_gate.shape[1]))

    return schema, fake


def _gated_autograd(op):
    """With ``g = a b_gate``, ``u = a b_up`` recomputed (rounded to the dtype, as the unfused
    sequence stores them): dU = dY act(g), dG = dY u act'(g) (in float32, rounded once), dA =
    dG b_gateᵀ + dU b_upᵀ (the second product added in float32 by addmm's epilogue), dB_gate = aᵀ
    dG, dB_up = aᵀ dU."""

    def setup_context(ctx, inputs, output):
        a, b_gate, b_up, activation = inputs
        ctx.save_for_backward(a, b_gate, b_up)
        ctx.activation = activation

    def backward(ctx, dy):
        a, wg, wu = ctx.saved_tensors
        g, u = _mm(a, wg), _mm(a, wu)
        dy32 = dy.float()
        du = (dy32 * _host_activation(g.float(), ctx.activation)).to(a.dtype)
        dg = _activation_grad(g, None, (dy32 * u.float()).to(a.dtype), ctx.activation)
        da = db_g = db_u = None
        if ctx.needs_input_grad[0]:
            da = c.inner_op("addmm", _addmm_parts, _addmm_autograd)(_mm(dg, wg.t()), du, wu.t(), 1.0, 1.0, "", "")
        if ctx.needs_input_grad[1]:
            db_g = _mm(a.t(), dg)
        if ctx.needs_input_grad[2]:
            db_u = _mm(a.t(), du)
        return da, db_g, db_u, None

    op.register_autograd(backward, setup_context=setup_context)


def _scaled_mm(a, b, scale_a, scale_b, out_dtype: str, use_fast_accum: bool = False, bias=None, splits: Optional[int] = None):
    """``(a @ b) scale_a scale_b`` of FP8 matrices (``b`` column-major), rounded once to
    ``out_dtype`` (on torch tensors through a plan per call signature, as `matmul`'s)."""
    if c.is_torch(a):
        a, b, scale_a, scale_b, bias = c.aligned((a, b, scale_a, scale_b, bias))
        tensors = (a, b, scale_a, scale_b) if bias is None else (a, b, scale_a, scale_b, bias)
        extra = ("scaled_mm", out_dtype, use_fast_accum, splits)
        plan = c.PLANS.get(extra + c.signature(tensors))
        if plan is None:
            new = lambda: _new_scaled_mm_plan(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias, splits)  # noqa: E731
            plan = c.signature_plan(tensors, extra, new)
        return plan(a, b, scale_a, scale_b, bias)
    return _scaled_mm_general(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias, splits)


def _scaled_mm_check(a, b, scale_a, scale_b, out_dtype: str, use_fast_accum: bool, bias) -> str:
    """`scaled_mm`'s operands checked (an error names what is wrong); the scales' form, as
    `matmul_kernel`'s ``scales``: "tensor" (one element each), "row" (torch._scaled_mm's row-wise
    (m, 1) and (1, n)) or "block" (DeepGEMM's)."""
    da, db = c.dtype_name(a), c.dtype_name(b)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"tirx.ops.scaled_mm: a {list(a.shape)} and b {list(b.shape)}: 2-D matrices, a's columns b's rows")
    if da not in c.FP8 or db not in c.FP8:
        raise TypeError(f"tirx.ops.scaled_mm: a is {da}, b {db}; each float8_e4m3fn or float8_e5m2")
    if out_dtype not in ("bfloat16", "float16"):
        raise TypeError(f"tirx.ops.scaled_mm: out_dtype {out_dtype}; bfloat16 or float16 (pass out_dtype=torch.bfloat16)")
    (m, k), n = a.shape, b.shape[1]
    kb, nb = -(-k // 128), -(-n // 128)
    per_tensor = int(np.prod(scale_a.shape)) == 1 and int(np.prod(scale_b.shape)) == 1
    block = tuple(scale_a.shape) == (m, kb) and tuple(scale_b.shape) == (nb, kb)
    rowwise = tuple(scale_a.shape) == (m, 1) and tuple(scale_b.shape) == (1, n)
    if not (per_tensor or block or rowwise) or c.dtype_name(scale_a) != "float32" or c.dtype_name(scale_b) != "float32":
        raise ValueError(
            f"tirx.ops.scaled_mm: scale_a of shape {list(scale_a.shape)} ({c.dtype_name(scale_a)}), scale_b {list(scale_b.shape)} "
            f"({c.dtype_name(scale_b)}); float32, per tensor (one element each), row-wise (scale_a ({m}, 1) a row of a, scale_b (1, {n}) "
            f"a column of b) or DeepGEMM's blocks: scale_a ({m}, {kb}) a row and 128 of K, scale_b ({nb}, {kb}) a 128 x 128 block of b"
        )
    if block and not per_tensor and use_fast_accum:
        raise ValueError("tirx.ops.scaled_mm: block scales apply as each 128 of K is promoted: use_fast_accum=False")
    if bias is not None and (tuple(bias.shape) not in ((n,), (1, n)) or c.dtype_name(bias) != out_dtype):
        raise ValueError(f"tirx.ops.scaled_mm: bias of shape {list(bias.shape)} ({c.dtype_name(bias)}); a row ({n},) of out_dtype {out_dtype}")
    if c.is_torch(b) and n > 1 and k > 1 and not b.t().is_contiguous():
        raise ValueError("tirx.ops.scaled_mm: b must be column-major (as torch._scaled_mm takes it): pass b.t().contiguous().t()")
    if m and n and k and (k % 16 or n % 8):
        raise ValueError(f"tirx.ops.scaled_mm: {m}x{n}x{k} (M x N x K); TMA needs 16-byte row strides: K a multiple of 16, N of 8")
    return "tensor" if per_tensor else "row" if rowwise else "block"


def _scaled_mm_kw(a, b, k: int, scales: str, out_dtype: str, use_fast_accum: bool, bias) -> dict:
    """`matmul_kernel`'s key for an FP8 product (``scales``: `_scaled_mm_check`'s form; B's type
    where it is not A's)."""
    da, db = c.dtype_name(a), c.dtype_name(b)
    kw = dict(k=k, dtype=da, ctas=_ctas(a), out_dtype=out_dtype, fast_accum=bool(use_fast_accum), scales=scales, bias="" if bias is None else "row")
    return dict(kw, b_dtype=db) if db != da else kw


def _new_scaled_mm_plan(a, b, scale_a, scale_b, out_dtype: str, use_fast_accum: bool, bias, splits: Optional[int]):
    import torch

    scales = _scaled_mm_check(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias)
    per_tensor = scales == "tensor"
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return lambda a, b, scale_a, scale_b, bias: _scaled_mm_general(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias, splits)
    launch = _gemm_launch(m, n, out_dtype, splits=splits, op="scaled_mm", scaled=True, **_scaled_mm_kw(a, b, k, scales, out_dtype, use_fast_accum, bias))
    tout = getattr(torch, out_dtype)
    # The views the kernel takes, chosen for this signature (its strides are part of the key):
    # the operands as they are where they already are (b column-major: b.t() is the kernel's
    # K-major Bt), per-tensor scales as one-element vectors.
    same = lambda x: x  # noqa: E731
    view_a = same if a.is_contiguous() else (lambda x: x.contiguous())
    view_s = (lambda s: s.reshape(1)) if per_tensor else (lambda s: s.contiguous())
    view_sa = same if per_tensor and tuple(scale_a.shape) == (1,) else view_s
    view_sb = same if per_tensor and tuple(scale_b.shape) == (1,) else view_s

    def run(a, b, scale_a, scale_b, bias):
        out = a.new_empty((m, n), dtype=tout)
        extra = () if bias is None else (bias.contiguous().reshape(1, n),)
        launch(view_a(a), b.t(), (view_sa(scale_a), view_sb(scale_b)), extra, out)
        return out

    return run


def _scaled_mm_general(a, b, scale_a, scale_b, out_dtype: str, use_fast_accum: bool = False, bias=None, splits: Optional[int] = None):
    scales = _scaled_mm_check(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias)
    per_tensor = scales == "tensor"
    (m, k), n = a.shape, b.shape[1]
    out = c.new_array(a, (m, n), out_dtype)
    if m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    bt = b.t() if c.is_torch(b) else np.ascontiguousarray(b.T)  # (n, k): K-major, as wgmma takes 8-bit operands
    sa, sb = (s.reshape(1) for s in (scale_a, scale_b)) if per_tensor else (scale_a, scale_b)
    row = None if bias is None else c.contiguous(bias).reshape(1, n)
    sab = (c.contiguous(sa), c.contiguous(sb))
    kw = _scaled_mm_kw(a, b, k, scales, out_dtype, use_fast_accum, bias)
    _gemm(c.contiguous(a), c.contiguous(bt), out, sab=sab, input=row, splits=splits, op="scaled_mm", **kw)
    return out


def register_scaled_mm_torch_op():
    """`torch.ops.tirx.scaled_mm` (registered on the first call)."""

    def parts():
        import torch

        def schema(
            a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, bias: Optional[torch.Tensor], out_dtype: str, use_fast_accum: bool
        ) -> torch.Tensor:
            return _scaled_mm(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias)

        def fake(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
            return a.new_empty((a.shape[0], b.shape[1]), dtype=getattr(torch, out_dtype))

        return schema, fake

    return c.torch_op("scaled_mm", parts)


def scaled_mm(a, b, scale_a, scale_b, bias=None, *, out_dtype=None, use_fast_accum: bool = False, split_k: Optional[int] = None):
    """PyTorch's `torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=..., use_fast_accum=False)`
    with per-tensor scales: ``(a @ b) * scale_a * scale_b`` for FP8 ``a`` (m x k, row-major) and
    ``b`` (k x n, column-major), each float8_e4m3fn or float8_e5m2 (e4m3 times e5m2 as a backward
    pass's gradients meet the weights; both e5m2 too, which torch._scaled_mm refuses): each 128 of K multiplied
    by wgmma and added to a float32 accumulator in registers (``use_fast_accum=True``: wgmma
    accumulates all of K, with its fewer bits), scaled in float32 and rounded once to
    ``out_dtype`` (bfloat16 or float16; required: FP8 outputs are not supported yet); ``scale_a``
    and ``scale_b`` float32 of one element; or row-wise, as torch._scaled_mm takes them:
    ``scale_a`` (m, 1) a scale per row of ``a``, ``scale_b`` (1, n) per column of ``b``, applied in
    the epilogue (``(a @ b) * scale_a * scale_b`` in float32); or DeepGEMM's block scales:
    ``scale_a`` (m, ceil(k / 128)), a scale per row and 128 of K, ``scale_b`` (ceil(n / 128),
    ceil(k / 128)), per 128 x 128 block of ``b``, applied to each K step's partial as it is
    promoted; ``bias`` (n,) of ``out_dtype``, added after the scales in float32. ``split_k``: as
    `matmul`'s (steps of 128 of K)."""
    if out_dtype is None:
        raise TypeError("tirx.ops.scaled_mm: give out_dtype (torch.bfloat16 or torch.float16); FP8 outputs are not supported yet")
    od = c.dtype_arg(out_dtype)
    if c.is_torch(a):
        if a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad):
            c.refuse_grad("scaled_mm", a, b, bias)
        splits = _split_k("scaled_mm", split_k, a, b)
        if c.compiling():
            return register_scaled_mm_torch_op()(a, b, scale_a, scale_b, bias, od, bool(use_fast_accum))
        return _scaled_mm(a, b, scale_a, scale_b, od, use_fast_accum, bias, splits)
    arrays = (np.asarray(a), np.asarray(b), np.asarray(scale_a, np.float32), np.asarray(scale_b, np.float32))
    return _scaled_mm(*arrays, od, use_fast_accum, None if bias is None else np.asarray(bias), _split_k("scaled_mm", split_k))
