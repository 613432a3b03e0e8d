"""`tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=False, scale=None, enable_gqa=False,
return_lse=False)`: attention's forward on Hopper's tensor cores, written in TIRx, as PyTorch's
`torch.nn.functional.scaled_dot_product_attention` computes it (q, k, v of shape [batch, heads,
seq, d], bf16 or f16; float32 softmax; one rounding of the output).

Each CTA takes ``64 * consumers`` query rows of one head: a producer warpgroup whose one thread
loads the Q tile once and the K and V tiles of each step into two rings (K's, V's) of swizzled
shared-memory stages with TMA (each stage's bytes announced on its ``full`` mbarrier), and
``consumers`` (one to three) warpgroups of 64 query rows each. Per K/V tile a consumer computes S = Q Kᵀ with `wgmma` from
shared memory (`gemm_async`), masks the keys past the sequence (and, causal, past the query),
keeps the row maximum and sum online (`wgmma_row_layout` statistics: FlashAttention's rescale,
``exp2`` with the scale folded into one fma), rescales its output accumulator, and adds P V with
P from registers (the accumulator's layout is the A fragment's: a cast, no shuffle), freeing K's
stage once S is done and V's once P V is (``empty``). The epilogue divides by the row sums, rounds, stores the tile to shared
memory (over its own Q rows, no longer read) and writes it with TMA (rows past the sequence
clipped); with ``return_lse`` the rows' natural-log sum of exponentials (float32), which the
backward reads. The schedules, tuned: each tile in turn; FlashAttention-3's intra-warpgroup
overlap (a tile's softmax while the previous tile's P V runs); and its ping-pong of two or three
consumers (a ring of named barriers); K/V tiles of 64 to 192 keys. Persistent CTAs (one per SM,
each looping over tiles, the rings running on across them) are an option, not tuned.

Causal is PyTorch's ``is_causal``: query i sees keys j <= i (the mask's top-left diagonal,
`torch.ones(L, S).tril()`), or with ``attn_mask=causal_lower_right(L, S)`` FlashAttention's
lower-right one; the K/V tiles wholly above it are not loaded. ``attn_mask`` (bool or additive,
broadcast over batch and heads) is added tile by tile. Grouped-query heads over contiguous
tensors run as one block of rows per K/V head; short queries over long keys split the keys over
CTAs (split-KV, then `attention_combine_kernel`); [batch, seq, heads, d] tensors are read and
written in place. Sizes are compile-time (a kernel per shape, compiled once and cached), except
`varlen_attention`'s packed sequences (run-time lengths). Any sequence lengths (TMA fills what a
tile reads past the tensor with zeros; the mask removes the keys past the sequence); head dims
64, 96, 128, 192 and 256. FP8 inputs (FlashAttention-3's recipe, `fp8_p_layouts`): S by an FP8
wgmma, P rounded to FP8 in S's registers and read as the A fragment against V transposed with its
keys permuted (`fp8_values_kernel`, a pass over V on the device), bfloat16 out."""

import math
from typing import Optional

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from ..layout import S, TileLayout, laneid, mma_shared_layout, wgmma_acc_layout, wgmma_row_layout, wid_in_wg
from . import _common as c

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LOWEST = -3.4028234663852886e38  # float32's lowest finite value
TINY = 1.1754943508222875e-38  # float32's smallest normal
# FP8's weights P = exp2(s - m + P_OFFSET), in (0, 256]: a row's largest is 256, inside e4m3's
# range (448), and e4m3's smallest normal (2^-6) 2^-14 of it, not 2^-6 (FlashAttention-3's offset):
# the many small weights of a long row keep their bits instead of flushing through e4m3's
# subnormals. l is summed from the same weights, so O = P V / l is unchanged; the log-sum-exp
# takes the offset off.
P_OFFSET = 8.0
HEAD_DIMS = (64, 96, 128, 192, 256)
# Named barriers of the consumers' epilogues (and a persistent CTA's count of its ring stages), one
# per consumer warpgroup (as `matmul`'s, 13-15), and of the ping-pong schedule's turns
# (`pingpong`: consumer c waits at TURN_BARRIER + c, 9-11).
EPILOGUE_BARRIER = 13
TURN_BARRIER = 9
# The producer warpgroup's barrier where it transposes V itself (`attention_kernel`'s ``transpose_v``).
PRODUCER_BARRIER = 12

# Persistent CTAs (one per SM, tiles round-robin): FP8's over 192 and 224 keys are tuned
# (`FP8_PERSISTENT_CONFIGS`): their next tile's Q loaded while a tile's last P V and epilogue run
# (Q_s freed after the last S = Q Kᵀ), on an H200 against one CTA a tile, d = 128, kernel alone: 4k
# (8 x 16 heads) 896 against 866 TFLOP/s, causal 754 against 734, 16k 951 against 933 (README).
# Timed by the tuner and dropped (H200, 4k, 8 x 16 heads): over 128 keys (d = 256 2.05 against
# 1.86 ms one CTA a tile, causal 1.25 against 1.11; d = 128 causal 0.740 against 0.726 over 192) and
# with ping-pong (d = 128 causal 0.830 over 192 keys, d = 256 2.06). Each is tuned also taking its
# tiles from a counter (``dynamic``, FlashAttention-3's scheduler; kernels alone, H200, 4k, 8 x 16
# heads, burst / sustained TFLOP/s, `fp8_attention_designs.py`): causal 769 / 694 over 192 keys
# against 746 / 668 for the static order over 224, FlashAttention-3 859 / 745; non-causal 862 / 778
# against 875 / 780 (224, static), FlashAttention-3 940 / 832. The 16-bit ones stay a kernel option (`persistent=True`), not tuned: timed
# by the tuner on an H200 (d 64 / 128, 1k-8k, causal or not) they never beat one CTA a tile (their
# O leaves through Q_s, so the next Q waits for the epilogue's stores).
# The rotated loop (`rotate=True`: the softmax in a block of its own, overlapping P V in the SASS)
# is a kernel option too, not tuned: as the tuner's candidate (ping-pong at 128, 224 and 256 keys)
# on an H200 (d 64 / 128 / 256, 4k and 16k keys, causal or not, bf16 and FP8: 20 keys) it was
# never chosen, 1-41% slower than the choice, and slower than the unrotated loop of its own tile
# at 18 of 20 keys, by 2-13% (S live across the back edge: descriptors reloaded, spills).
# The FMA pipe's exponentials (`fma_columns`, FlashAttention-4's) are a kernel option, not tuned,
# too: timed on an H200 (FP8, 16k; README) they were at best within noise (d 128 over 224 keys, 16
# or 32 columns: -1 to +2% in bursts, -1 to +1% sustained), else slower (48 or 64 columns, 192
# keys, d 256: -1 to -15%): each moves an MUFU.EX2's cycles onto nine more issue slots, and issue
# is the softmax's other limit.
# FP8's kernels rescale lazily (`rescale_threshold`, FlashAttention-4's): a row's running max moves
# only where a tile's exceeds it by more than 2 (log2 units; P's offset 6, the largest weight still
# 256). On an H100 (2026-12-05, `fp8_attention_designs.py`, burst / sustained TFLOP/s against the
# same design without it, one process): d 128 4k x 8 x 16 heads over 224 keys 901 / 804 against
# 860 / 781, causal dynamic over 192 keys 782 / 712 against 753 / 695, 16k x 2 x 16 974 / 884
# against 947 / 852; d 256 4k causal 1,016 / 889 against 992 / 870, not causal 1,179 / 1,024
# against 1,184 / 1,030 (its tile's GEMMs, not its softmax, the limit). Not the 16-bit kernels':
# bfloat16 4k x 4 x 16 on the same H100 with threshold 8, d 64 over 128 / 176 keys 408 / 415
# against 424 / 434 TFLOP/s (burst; causal 362 / 366 against 375 / 385), d 128 695 / 689 against
# 680 / 709: the branch costs about what the fewer products save where O is narrow.
FP8_RESCALE_THRESHOLD = 2.0
CONFIGS = (
    [{"consumers": c_, "bn": bn, "overlap": o} for c_, bn in ((2, 128), (2, 64), (1, 128)) for o in (True, False)]
    + [{"consumers": 2, "bn": bn, "overlap": True, "pingpong": True} for bn in (128, 64)]
    # FlashAttention-3's wider tiles: 176, 192, 224 or 256 keys (per head dim and type, `_tile_fits`),
    # or three consumers of 64 rows (head dim 64: their registers are 160 a thread).
    + [{"consumers": 2, "bn": bn, "overlap": True, "pingpong": pp} for bn in (176, 192, 224, 256) for pp in (True, False)]
    + [{"consumers": 3, "bn": 128, "overlap": True, "pingpong": pp} for pp in (True, False)]
    # and FlashAttention-3's narrower one at head dim 256 (80 keys: two stages fit beside Q).
    + [{"consumers": 2, "bn": 80, "overlap": True, "pingpong": pp} for pp in (True, False)]
)
FP8_PERSISTENT_CONFIGS = [
    {"consumers": 2, "bn": bn, "overlap": True, "pingpong": False, "persistent": True, **dyn} for bn in (192, 224) for dyn in ({}, {"dynamic": True})
]
CONFIGS += FP8_PERSISTENT_CONFIGS
# The widest head dim of each wide K/V tile (registers: S and P grow with the keys, O with the head
# dim), 16-bit and FP8 (whose P takes half the registers); a width in neither table and not 64
# or 128 is not tuned for that type.
WIDE_TILES = {176: 128, 192: 128}  # (192 at 128: 240 registers a consumer, no spills; 232 spilled)
FP8_WIDE_TILES = {192: 128, 224: 128, 256: 64}
# The narrowest head dim of each narrow K/V tile (16-bit: at head dim 256 two stages of 80 keys
# fit, of 128 one).
NARROW_TILES = {80: 192}
# FP8's K/V tiles: V's transposed tile (d x keys) is a row of whole 32-, 64- or 128-byte swizzle
# atoms a head-dim row (224, FlashAttention-3's at head dim 128: seven 32-byte atoms).
FP8_TILES = (64, 128, 192, 224, 256)
THREE_CONSUMERS_D = 64


def stages_for(consumers: int, bn: int, d: int, eb: int = 2, other: int = 0) -> int:
    """The K/V stages that fit beside the Q tile (which the epilogue reuses for O) and ``other``
    bytes, at most 4; 2 KB kept for the rest: the swizzled buffers' 1 KB alignment, the mbarriers
    (8 bytes each, 4 a stage), the log-sum-exps' way out (256 bytes a consumer) and the ring counts
    (``eb``: bytes an element)."""
    q_bytes = 64 * consumers * d * eb
    stage = 2 * bn * d * eb
    return max(1, min(4, (c.SMEM_BYTES - q_bytes - other - 2048) // stage))


def _splits_hold_keys(seq_k: int, bn: int, splits: int) -> bool:
    """Whether ``splits`` parts of whole K/V tiles of ``bn`` keys each hold one at least (the
    count `split_count` gives for 128-key tiles may not be one for other widths)."""
    kv_tiles = -(-seq_k // bn)
    return splits == 1 or (kv_tiles > 0 and -(-kv_tiles // -(-kv_tiles // splits)) == splits)


def _pages_fit(page: int, bn: int, seq_k: int) -> bool:
    """Whether K/V tiles of ``bn`` keys read ``page``-row pages in whole TMA boxes: a tile within a
    page or over whole pages, boxes of whole 8-row swizzle atoms, ``seq_k`` whole pages."""
    return page % 8 == 0 and (page % bn == 0 or bn % page == 0) and seq_k % page == 0 and seq_k > 0


def _prune(configs, seq_q, seq_k, d, mask, varlen, causal, splits, page=0, kv_lens=False, sms=0, dtype="", **_):
    """A tile of 128 or 192 rows only where the queries fill more than the next smaller one (any:
    packed sequences of run-time lengths); the overlapped schedule where two stages fit (it waits
    for tile j while tile j - 1's stage is held), and not with a mask (whose tile takes P's
    registers while the softmax runs); wide K/V tiles where `_tile_fits`, three consumers at head
    dim 64 only (more registers spill); with split-KV, the widths whose tiles make that many parts;
    with a paged cache, the widths that fit its pages (`_pages_fit`); persistent CTAs on a GPU (its
    ``sms``) for one split of dense FP8 attention without a mask; FP8, K/V tiles of `FP8_TILES`
    (V's transposed tile whole swizzle atoms a row)."""
    return [
        cfg
        for cfg in configs
        if (cfg["consumers"] == 1 or seq_q > 64 * (cfg["consumers"] - 1) or varlen)
        and (not cfg.get("overlap") or (stages_for(cfg["consumers"], cfg["bn"], d, c.elem_bytes(dtype)) >= 2 and not mask))
        and (not dtype.startswith("float8") or cfg["bn"] in FP8_TILES)
        and _tile_fits(cfg["bn"], d, causal, dtype.startswith("float8"))
        and (cfg["consumers"] < 3 or d == THREE_CONSUMERS_D)
        and _splits_hold_keys(seq_k, cfg["bn"], splits)
        and (not page or _pages_fit(page, cfg["bn"], seq_k))
        and (not cfg.get("persistent") or (sms > 0 and splits == 1 and not (varlen or kv_lens or mask)))
        and (not cfg.get("persistent") or dtype.startswith("float8"))
    ]


# The K and V bytes a section of causal heads reads (`causal_section`): half an H100's or H200's
# 50 MB L2.
CAUSAL_L2_BYTES = 25 << 20


def causal_section(heads: int, group: int, seq_k: int, d: int, eb: int) -> int:
    """The heads of a causal grid's section (`attention_kernel`'s order): the most that divide
    ``heads`` (batch * query heads, ``group`` a K/V head's) and whose K and V (``eb`` bytes an
    element) fit `CAUSAL_L2_BYTES`; at least one."""
    per_head = max(1, 2 * seq_k * d * eb // group)
    fit = max(1, CAUSAL_L2_BYTES // per_head)
    return max([g for g in range(1, min(heads, fit) + 1) if heads % g == 0], default=1)


def _tile_fits(bn: int, d: int, causal: bool, fp8: bool) -> bool:
    """Whether K/V tiles of ``bn`` keys are tuned at head dim ``d``: 64 and 128 always, the wide
    ones (`WIDE_TILES`, `FP8_WIDE_TILES`) up to their head dim, 16-bit ones not causal (they
    would widen the diagonal's tiles; FlashAttention-3 takes 128 keys there too), FP8's causal
    too (FlashAttention-3 takes 224 keys there at d = 128; on an H200 the tuner chose 192 at 4k
    and 16k, README), the narrow ones (`NARROW_TILES`) from theirs."""
    wide = FP8_WIDE_TILES if fp8 else WIDE_TILES
    narrow = {} if fp8 else NARROW_TILES
    return bn in (64, 128) or (bn in wide and (fp8 or not causal) and d <= wide[bn]) or (bn in narrow and d >= narrow[bn])


def fp8_p_layouts(bn: int):
    """FP8's P registers: ``(layout, operand)``. ``layout`` holds P (64 x bn, keys in order) in
    the threads that hold S (`wgmma_acc_layout`: the cast from S moves no data between threads),
    each thread's values in the order of the FP8 wgmma's A fragment (per 32 keys: rows g and g + 8
    of columns 4t..4t + 3, then of 16 + 4t..); ``operand`` is that fragment, the view the P V
    wgmma reads. Its column 32kb + 16a + 4t + 2b + e holds key 32kb + 16a + 8b + 2t + e: V's
    keys are permuted so within each 16 (`fp8_values`)."""
    rows, row_strides = (4, 2, 8), (1 @ wid_in_wg, 4, 4 @ laneid)
    layout = TileLayout(S[rows + (bn // 32, 2, 2, 4, 2) : row_strides + (16, 8, 2, 1 @ laneid, 1)])
    operand = TileLayout(S[rows + (bn // 32, 2, 4, 4) : row_strides + (16, 8, 1 @ laneid, 1)])
    return layout, operand


def mask_index(mask: str, bh, heads: int):
    """The additive mask's matrix (`mask_matrices`) of query head ``bh`` (of ``heads`` a batch entry)."""
    return {"batch": bh // heads, "heads": bh % heads, "all": bh}.get(mask, 0)


# The tile counters of persistent CTAs taking tiles dynamically (`_with_counter`; `_common.scratch`,
# per stream).
_COUNTERS: dict = {}


def _with_counter(kernel, args) -> tuple:
    """A candidate's arguments (`autotune`'s ``launch_args``): the call's, and for persistent CTAs
    taking their tiles from a counter (``dynamic``) its int32 word, made 0 once per stream: each
    launch that completes leaves it 0 (the last taker's subtraction), so the next one on the
    stream finds it so (a CUDA graph's replays too)."""
    if len(kernel.params) == len(args):
        return tuple(args)
    return (*args, c.scratch(args[0], (1,), "int32", _COUNTERS, fill=0))


def mask_matrices(mask: str, batch: int, heads: int) -> int:
    """The additive mask's matrices: one for every head (``one``), one per batch entry
    (``batch``), per head (``heads``) or per batch entry and head (``all``)."""
    return {"one": 1, "batch": batch, "heads": heads, "all": batch * heads}[mask]


# Not keyed by ``lse``: the kernels with and without the log-sum-exp's store share one choice, so a
# call that writes it (the registered op under torch.compile, autograd's forward) runs the tile
# shape the eager call runs and gives its values bit for bit.
@autotune(
    configs=CONFIGS,
    key=["heads", "kv_heads", "batch", "seq_q", "seq_k", "d", "dtype", "causal", "scale", "seq_major", "splits", "mask", "offset", "varlen", "kv_lens", "page", "sms", "q_group", "combine", "launch_dependents", "transpose_v", "rescale_threshold"],
    prune=_prune,
    launch_args=lambda kernel, args: _with_counter(kernel, args),  # (defined below)
    adapts=lambda cfg: cfg.get("dynamic", False),  # (the others take no counter)
)
def attention_kernel(
    heads: int,
    kv_heads: int,
    batch: int,
    seq_q: int,
    seq_k: int,
    d: int,
    dtype: str,
    causal: bool,
    scale: float,
    lse: bool,
    seq_major: bool,
    consumers: int,
    bn: int,
    overlap: bool = False,
    pingpong: bool = False,
    splits: int = 1,
    mask: str = "",
    offset: int = 0,
    varlen: bool = False,
    kv_lens: bool = False,
    page: int = 0,
    persistent: bool = False,
    sms: int = 0,
    q_group: int = 1,
    rotate: bool = False,
    fma_columns: int = 0,
    dynamic: bool = False,
    combine: bool = False,
    launch_dependents: bool = False,
    transpose_v: bool = False,
    rescale_threshold: float = 0.0,
    tma_epilogue: bool = False,
):
    """``O[bh] = softmax(Q[bh] K[kv]ᵀ · scale) V[kv]`` for the ``batch * heads`` query heads
    (``kv``: query head h's group's, ``heads / kv_heads`` query heads a group), Q and O
    ``(batch * heads, seq_q, d)``, K and V ``(batch * kv_heads, seq_k, d)`` (``seq_major``:
    ``(batch, seq, heads, d)``); with ``lse``, also
    ``LSE[bh, i]`` = the row's log-sum-exp (float32; `lse_rows` per head, the rows past ``seq_q``
    written with the zero rows' values). ``consumers`` warpgroups of 64 query rows
    per CTA, K/V tiles of ``bn`` keys; ``overlap``: a tile's softmax runs while the tensor cores
    compute the previous tile's P V (FlashAttention-3's intra-warpgroup pipelining); ``pingpong``
    (two or three consumers, with ``overlap``): the consumers take turns issuing their GEMMs in a
    ring (named barriers), so one's softmax runs while the others' GEMMs do (FlashAttention-3's
    schedule); ``rotate`` (with ``overlap``): each step's loop body begins with the wait for the
    previous step's P V and O's rescale, and ends with its softmax, so that the softmax lies in a
    block of its own (ptxas, free to move a wait within a block, otherwise puts P V's wait before
    most of the softmax it was to overlap); ``fma_columns``: the last that many keys of each K/V
    tile take their exponentials on the FMA pipe (`Tx.warpgroup.exp2(..., pipe="fma")`, a cubic
    within 7.5e-5, FlashAttention-4's emulation), the others on the MUFU, whose 16 a cycle per SM
    take as long as a tile's GEMMs at FP8 (a multiple of 8 below ``bn``; not tuned: see above);
    ``splits``: the keys split into that many parts, a CTA each, each writing its O / l in
    float32 and its log-sum-exp (``OP[split, bh]``, ``LP[split, bh]``) for
    `attention_combine_kernel` (split-KV: decoding's few query rows over long caches);
    ``combine`` (with ``splits``): in the same launch, the split that finishes a block of 64 rows
    last combines its parts (each warpgroup's threads write theirs, meet at a named barrier, and
    one thread takes a ticket of ``TC[bh * ticket_blocks(seq_q) + q0 / 64]`` between two
    `T.cuda.thread_fence`s: the last ticket reads every split's parts, as
    `attention_combine_kernel` does, and leaves the counter 0), into ``O`` (``seq_major``: ``(batch,
    seq_q / q_group, heads * q_group, d)``) and with ``lse`` ``LSE``, after ``OP`` and ``LP``
    (16-bit; ``TC`` int32, the kernel's last parameter before the scalars, 0 before a launch);
    ``launch_dependents``: each CTA lets the kernel after it on the stream start as it begins
    (`T.ptx.griddepcontrol.launch_dependents()`: split-KV's combine made with ``dependent``,
    whose wait still waits for this grid's end); ``transpose_v`` (FP8, one split, ``d`` <= 128): V read as K is (not `fp8_values`' transposed copy), each K/V tile's V rows landed by
    TMA in a raw stage of their own and transposed into V's stage by the producer warpgroup's
    four warps (`transpose_stage`: ldmatrix.trans of byte pairs, a byte permutation, stmatrix,
    then a proxy fence, a barrier and one arrival), a tile behind the loads;
    ``rescale_threshold`` (in (0, 8], log2 units of the scaled scores; 0: off): a row's running
    max moves only where a tile's max exceeds it by more than that (FlashAttention-4's lazy
    rescale), else its weights exp2(s - m) are up to 2^threshold (FP8: ``P_OFFSET`` lowered by
    the threshold, the largest still 256) and O's rescale (d products a thread) is skipped by
    each warp none of whose rows moved; ``tma_epilogue`` (FP8, one split): O leaves through a
    shared buffer of its own (``O_s``, bm x d bfloat16 beside the rings: Q_s's FP8 rows hold half
    of it) by TMA stores, each consumer's 64 rows by its first thread, whose wait for the stores'
    reads is deferred to its next tile's epilogue (and the kernel's end), rather than from
    registers; ``offset``: causal, query i sees keys j <= i + offset (0: PyTorch's ``is_causal``, the
    top-left diagonal; ``seq_k - seq_q``: the lower-right one, FlashAttention's); ``varlen``:
    packed sequences (FlashAttention's varlen: Q and O ``(total_q, heads, d)``, K and V
    ``(total_k, kv_heads, d)``, sequence b's rows from ``CUQ[b]`` / ``CUK[b]`` to the next entry;
    ``nb`` sequences, the longest of ``max_q`` queries, run-time scalars; causal on each
    sequence's lower-right diagonal; ``LSE (total_q, heads)``); ``kv_lens``: K and V are caches of
    ``seq_k`` rows of which ``KL[b]`` (int32) are filled, the rest never read (FlashAttention's
    ``cache_seqlens``; causal: each cache's lower-right diagonal); ``page`` (with ``kv_lens``): the
    caches are paged, K and V ``(n_pages, page, kv_heads, d)`` (``n_pages`` a run-time scalar) and
    sequence b's rows ``[i page, (i + 1) page)`` in page ``BT[b, i]`` of its block table ``BT
    (batch, seq_k / page)`` (int32; vLLM's and FlashAttention's paged KV cache); ``persistent``:
    ``min(tiles, sms)`` CTAs, each taking tiles ``bx, bx + CTAs, ...`` of the same order (causal:
    the longest first), the rings' stages and phases running on across them, the next tile's Q
    loaded once the last one's O stores have read Q_s (FP8, whose O does not leave through Q_s:
    once its last S = Q Kᵀ is done, during its last P V and epilogue); ``dynamic`` (with
    ``persistent``): each CTA's tiles after its first taken from a counter in that order
    (FlashAttention-3's scheduler: a CTA done early takes more), ``TC (1,)`` int32, the kernel's
    last parameter, 0 before a launch and left 0 by it; ``q_group`` (with ``kv_lens``, ``heads ==
    kv_heads``): grouped-query heads packed, each K/V head's ``q_group`` query heads one block of
    rows (decoding's few queries fill the 64-row tiles and K/V is read once per group), Q and O
    ``(batch * heads, seq_q, d)`` whatever ``seq_major`` (which then names K's and V's layout),
    row r the query head r % q_group of the group at position r // q_group. FP8 (``dtype``
    float8_e4m3fn or float8_e5m2): the descales ``DS (batch * kv_heads, 2)`` float32 of each K/V
    head, Q's times K's (the scores' factor, with ``scale``) and V's (O's); O in bfloat16, ``(batch
    * heads, seq_q, d)`` whatever ``seq_major`` (which then names Q's and K's layout); V given
    transposed, ``VT (batch * kv_heads, d, fp8_keys(seq_k))``, its keys permuted within each 16
    (`fp8_values`): P = exp2(...) is rounded to FP8 in S's registers, which the wgmma's A
    fragment reads as those keys (FlashAttention-3's FP8 layout conformance, the shuffle moved to
    V's transposition)."""
    if consumers not in c.WARPGROUP_REGISTERS:
        raise ValueError(f"consumers: {consumers}; 1, 2 or 3 warpgroups of 64 query rows")
    if rotate and not overlap:
        raise ValueError("rotate: the overlapped schedule (overlap=True)")
    if fma_columns % 8 or not 0 <= fma_columns < bn:
        raise ValueError(f"fma_columns: {fma_columns}; a multiple of 8 below the K/V tile's {bn} keys (the accumulator's column blocks)")
    mufu_columns = bn - fma_columns
    if pingpong and not (overlap and consumers > 1):
        raise ValueError("pingpong: two or three consumer warpgroups with the overlapped schedule (consumers=2 or 3, overlap=True)")
    eb = c.elem_bytes(dtype)  # bytes an element of Q, K and V
    if tma_epilogue and not (dtype.startswith("float8") and splits == 1):
        raise ValueError("tma_epilogue: FP8 attention of one split (16-bit O leaves through Q_s by TMA already, or packed sequences' rows from registers; split-KV's parts are float32)")
    # (transpose_v: V's two raw stages of bn x d beside the rings; tma_epilogue: O's bfloat16 tile)
    stages = stages_for(consumers, bn, d, eb, (2 * bn * d * eb if transpose_v else 0) + (64 * consumers * d * 2 if tma_epilogue else 0))
    if mask not in ("", "one", "batch", "heads", "all"):
        raise ValueError(f"mask: {mask!r}; one of '' (none), 'one', 'batch', 'heads', 'all' (the matrices of `mask_matrices`)")
    if varlen and (splits > 1 or mask or seq_major):
        raise ValueError("varlen: one split, no mask, the packed (total, heads, d) layout")
    if mask and (overlap or splits > 1 or scale == 0):
        raise ValueError("mask: the schedule in turn (its P registers stage the mask's tile), one split, a scale other than 0")
    if overlap and stages < 2:
        raise ValueError(f"overlap: a ring of two stages at least (K/V tiles of {bn} keys of {d} columns leave room for {stages})")
    kv_tiles = -(-seq_k // bn)
    chunk = -(-kv_tiles // splits)  # K/V tiles per split
    if splits > 1 and not _splits_hold_keys(seq_k, bn, splits):
        raise ValueError(f"splits: {splits} splits of {kv_tiles} K/V tiles ({chunk} each) must each hold keys (`split_count` gives a valid count)")
    if kv_lens and (varlen or mask or not seq_major):
        raise ValueError("kv_lens: a KV cache in FlashAttention's [batch, seq, heads, d] layout (seq_major), no mask")
    if page and not (kv_lens and _pages_fit(page, bn, seq_k)):
        raise ValueError(f"page: {page}-row pages with kv_lens, a multiple of 8 rows, and K/V tiles of {bn} keys each within a page or whole pages, over {seq_k} rows of whole pages")
    box = min(bn, page) if page else bn  # the rows of one TMA box of a K/V tile
    fp8 = dtype.startswith("float8")
    if fp8 and (varlen or mask or kv_lens or bn not in FP8_TILES):
        raise ValueError(f"{dtype}: dense tensors (Q and K also seq-major), no mask, K/V tiles of {' or '.join(map(str, FP8_TILES))} keys")
    if q_group > 1 and not (kv_lens and heads == kv_heads and seq_q % q_group == 0):
        raise ValueError(f"q_group: a KV cache's (kv_lens) packed query heads, heads == kv_heads ({heads}, {kv_heads}), seq_q ({seq_q}) whole positions of {q_group} rows")
    q_major = seq_major and q_group == 1  # (Q's and O's layout; K's and V's is seq_major's)
    if persistent and (varlen or splits > 1 or kv_lens or sms < 1):
        raise ValueError("persistent: one split of dense (not varlen, not a KV cache) attention, over sms >= 1 SMs")
    if dynamic and not (persistent and not mask):
        raise ValueError("dynamic: persistent CTAs (persistent=True), no mask")
    if not 0 <= rescale_threshold <= P_OFFSET:
        raise ValueError(f"rescale_threshold: {rescale_threshold}; from 0 (off) to {P_OFFSET:g} (log2 units: the weights stay within 2^{P_OFFSET:g})")
    p_offset = P_OFFSET - rescale_threshold  # (FP8: the weights' offset, the largest 2^P_OFFSET)
    if transpose_v and not (fp8 and splits == 1 and d <= 128):
        raise ValueError("transpose_v: FP8 attention of one split, head dim 128 at most (V read as K is, [batch * kv_heads, seq, d] or seq-major)")
    if combine and (splits < 2 or fp8 or d % 32):
        raise ValueError("combine: split-KV (splits > 1) of 16-bit attention, a head dim of whole 32 columns")
    bm = 64 * consumers
    q_tiles = -(-seq_q // bm)
    o_heads = heads if seq_major else 0  # (combine: O's layout, `_combined_shape`)
    blocks = ticket_blocks(seq_q)  # (combine: the tickets a head, one per block of 64 rows)
    combine_part = _combine_part(splits, dtype, lse, o_heads, q_group, columns=d // 32) if combine else None
    n_tiles = batch * heads * q_tiles * splits  # (not varlen: its grid is run-time)
    ctas = min(n_tiles, sms) if persistent else max(n_tiles, 1)

    # Causal: sections of `section` heads (their K and V within half an L2), each section's query
    # tiles the longest first (FlashAttention-3's order): the CTAs running at once read a few heads'
    # K and V, which stay in L2; every head's longest tiles first had each CTA read its K and V
    # from DRAM (Nsight Compute, d = 256, 4k: DRAM 50 % busy, against 6 % without the mask).
    section = causal_section(batch * heads, heads // kv_heads, seq_k, d, eb) if causal and not varlen else 1

    def tiles_of(bx):
        """The tiles CTA ``bx`` takes: ``bx, bx + ctas, ...`` below ``n_tiles`` (persistent), else its own."""
        return (n_tiles - bx + ctas - 1) // ctas if persistent else 1

    # A tile's coordinates (expressions of its index; the producer's and consumers' loops bind them
    # under their own names). Varlen: sequence bh // heads of the packed rows, its start and length
    # from the cumulative ends (``nb`` sequences, ``nqt`` query tiles the longest).
    def tile_bh(tile, nb, nqt):
        """The query head (of batch * heads): causal, per section of heads, the longest query
        tiles (the most keys) first (a shorter tail); else a head's query tiles together (its K
        and V shared in L2). Varlen: every sequence's longest tiles first."""
        if varlen:
            return tile % (nb * heads) if causal else tile // nqt
        if causal:
            return bounded(tile // splits // (section * q_tiles), batch * heads // section) * section + tile // splits % section
        return bounded(tile // splits // q_tiles, batch * heads)

    def tile_qt(tile, nb, nqt):
        """The query tile of the head."""
        if varlen:
            return nqt - 1 - tile // (nb * heads) if causal else tile % nqt
        if causal:
            return q_tiles - 1 - tile // splits % (section * q_tiles) // section
        return tile // splits % q_tiles

    def live(bh, nb):
        # (varlen: always, over the grid's sequences; the loads' guard)
        return (bh // heads >= 0) & (bh // heads < nb)

    def q_start_of(bh, CUQ, nb):
        return T.if_then_else(live(bh, nb), CUQ[bh // heads], 0) if varlen else 0

    def k_start_of(bh, CUK, nb):
        return T.if_then_else(live(bh, nb), CUK[bh // heads], 0) if varlen else 0

    def n_rows_of(bh, CUQ, nb, q_start):
        return T.if_then_else(live(bh, nb), CUQ[bh // heads + 1], 0) - q_start if varlen else seq_q

    def n_keys_of(bh, CUK, KL, nb, k_start):
        """The keys: varlen's sequence's, a cache's filled length, or all."""
        if varlen:
            return T.if_then_else(live(bh, nb), CUK[bh // heads + 1], 0) - k_start
        return T.min(KL[bh // heads], seq_k) if kv_lens else seq_k

    def diag_of(n_keys, n_rows):
        """Causal: query i sees keys j <= i + diag (varlen and caches: the lower-right diagonal,
        FlashAttention's; else ``offset``)."""
        if varlen:
            return n_keys - n_rows
        return n_keys - seq_q // q_group if kv_lens else offset

    def kv_of(bh):
        return bh // heads * kv_heads + bh % heads // group

    def mi_of(bh):
        return mask_index(mask, bh, heads)

    def kt0_of(tile):
        """Split-KV: this CTA's share of the keys starts at K/V tile kt0."""
        return tile % splits * chunk if splits > 1 else 0

    def steps_of(qt, n_keys, diag, kt0, n_rows):
        """The K/V tiles the tile reads: its split's share, maybe none (a short cache); varlen:
        none past the sequence's query tiles."""
        if splits > 1:
            return T.max(0, T.min(chunk, kv_steps(qt, n_keys, diag) - kt0))
        if varlen:
            return T.if_then_else(qt * bm < n_rows, kv_steps(qt, n_keys, diag), 0)
        return kv_steps(qt, n_keys, diag)

    def unmasked_of(qt, n_keys, diag, kt0, steps):
        """The K/V tiles before the first that needs a mask."""
        if splits > 1:
            return T.max(0, T.min(steps, full_steps(qt, n_keys, diag) - kt0))
        return T.min(steps, full_steps(qt, n_keys, diag)) if varlen else full_steps(qt, n_keys, diag)

    def bounded(x, n):
        """``x``, a tile's coordinate below ``n`` (persistent: taken modulo ``n``, which changes
        nothing for the tiles `tiles_of` gives but lets the bounds prover see it)."""
        return x % n if persistent else x

    def ring_base(R_s, wg):
        """The first stage of the rings a tile's K/V tiles take: the stages earlier tiles took
        (persistent, counted in ``R_s[wg]``), else 0."""
        return T.cuda.shfl(R_s[wg], 0) if persistent else 0
    group = heads // kv_heads
    scale_log2 = scale * LOG2E
    tile_bytes = bn * d * eb  # a K or a V tile
    # The widest swizzle whose atom (128, 64 or 32 bytes: 64, 32 or 16 columns of 16-bit values)
    # the head dim is a multiple of: 128-byte for 64 / 128 / 192 / 256, 64-byte for 96 (FP8: for
    # 128 / 256; 64-byte for 64).
    swizzle, atom = next((m, (16 << m) // eb) for m in (3, 2, 1) if d % ((16 << m) // eb) == 0)
    # A paged K/V box's columns: the whole head dim where the box is the whole tile, else one
    # swizzle atom's (a box of fewer rows is dense only within an atom).
    box_cols = atom if box < bn else d
    q_smem = mma_shared_layout(dtype, swizzle, (bm, d))
    kv_smem = mma_shared_layout(dtype, swizzle, (stages, bn, d))
    # FP8: V's stages transposed (d x bn, keys contiguous: the K-major B operand FP8 wgmma needs),
    # and P's registers: `fp8_p_layouts`.
    v_shape = (stages, d, bn) if fp8 else (stages, bn, d)
    v_smem = mma_shared_layout(dtype, next(m for m in (3, 2, 1) if bn % (16 << m) == 0), v_shape) if fp8 else kv_smem
    p_layout, p_operand = fp8_p_layouts(bn) if fp8 else (wgmma_acc_layout(bn), None)
    out_dtype = "bfloat16" if fp8 else dtype
    # O_s's swizzle (tma_epilogue) and the columns of O's TMA boxes (a swizzle atom's: Q_s's for 16 bits)
    o_swizzle, o_atom = next((m, (16 << m) // 2) for m in (3, 2, 1) if d % ((16 << m) // 2) == 0)
    vt_shape = (batch * kv_heads, d, fp8_keys(seq_k))  # (FP8: VT, whole blocks of permuted keys)
    producer_regs, consumer_regs = c.WARPGROUP_REGISTERS[consumers]
    # transpose_v: V's blocks of 16 keys x 32 columns a warp transposes at once (two ldmatrix.x4
    # matrices of columns): they spill from the producer's 24 registers, so it takes 32 and the
    # consumers give up 8 each (d <= 128: d = 256's consumers spill at 232, and its producer at 24
    # once ptxas unrolls its loop, even over blocks of 16 columns).
    tv_cols = 32
    if transpose_v:
        producer_regs, consumer_regs = max(producer_regs, 32), consumer_regs - 8

    def qk_scale(DS, kv):
        """The scores' factor in log2 units (FP8: times the K/V head's descales)."""
        return DS[kv, 0] * scale_log2 if fp8 else scale_log2

    def position(row):
        """A query row's position (``q_group`` rows a position)."""
        return row // q_group if q_group > 1 else row

    def kv_steps(qt, n_keys, diag):
        """The K/V tiles query tile ``qt`` reads of ``n_keys`` keys: all, or (causal) those holding
        a key j <= its last query + ``diag`` (none where every row is above the diagonal)."""
        if not causal:
            return (n_keys + bn - 1) // bn
        return T.min((n_keys + bn - 1) // bn, T.max(0, (position((qt + 1) * bm - 1) + diag) // bn + 1))

    def shape(n_heads, seq):
        """A Q, K, V or O tensor: [batch, heads, seq, d] as (batch * heads, seq, d), or with
        ``seq_major`` [batch, seq, heads, d] (PyTorch's tensors transposed from a projection's
        (batch, seq, heads * d) output, read in place)."""
        return (batch, seq, n_heads, d) if seq_major else (batch * n_heads, seq, d)

    def q_shape():
        """Q's and O's (`shape`, or ``q_group``'s packed rows)."""
        return (batch, seq_q, heads, d) if q_major else (batch * heads, seq_q, d)

    @T.macro
    def load(dst, A, head, n_heads, r0, n, mbar, major):
        # Rows [r0, r0 + n) of head `head` (of batch * n_heads) into `dst` by TMA (zeros past the
        # sequence), completing on `mbar` (`major`: A is seq-major).
        if major:
            Tx.copy_async(dst, A[head // n_heads, r0 : r0 + n, head % n_heads, 0:d], dispatch="tma_auto", mbar=mbar)
        else:
            Tx.copy_async(dst, A[head, r0 : r0 + n, 0:d], dispatch="tma_auto", mbar=mbar)

    @T.macro
    def load_kv(S_s, slot, A, kv, r0, mbar, BT):
        # K/V tile rows [r0, r0 + bn) of head kv (of batch * kv_heads) into stage `slot` of S_s;
        # paged: a box per page the tile spans (or the part of one page it is), the page read from
        # the sequence's block table (an index past the table clamped: its rows lie past the
        # cache's length, weighed 0).
        if page:  # (boxes of fewer rows than the tile: one per swizzle atom's columns, each dense)
            for sub in list(range(bn // box)):
                for c0 in list(range(0, d, box_cols)):
                    Tx.copy_async(
                        S_s[slot, sub * box : sub * box + box, c0 : c0 + box_cols],
                        A[
                            BT[kv // kv_heads, T.min((r0 + sub * box) // page, seq_k // page - 1)],
                            (r0 + sub * box) % page : (r0 + sub * box) % page + box,
                            kv % kv_heads,
                            c0 : c0 + box_cols,
                        ],
                        dispatch="tma_auto",
                        mbar=mbar,
                    )
        else:
            load(S_s[slot, 0:bn, 0:d], A, kv, kv_heads, r0, bn, mbar, seq_major)

    def full_steps(qt, n_keys, diag):
        """The K/V tiles before the first that needs a mask: every key inside the sequence and
        (causal) at or before the tile's first query."""
        if not causal:
            return n_keys // bn
        return T.max(0, T.min(n_keys // bn, (position(qt * bm) + diag + 1) // bn))

    # K and V have rings of their own (barriers [0, stages) and [stages, 2 stages) of `full` and
    # `empty`): K's stage of tile j is free once S = Q Kᵀ is done, before the softmax, so the
    # producer loads ahead while V's stage is still held for P V (FlashAttention-3's two pipelines).
    @T.macro
    def landed(j, ring, full):
        # K (ring 0) or V (ring 1) tile j's stage is full (waited for outside a ping-pong turn: a
        # consumer holding the turn while it waits for a stage the other has yet to free would
        # deadlock).
        full.wait(ring * stages + j % stages, (j // stages) % 2)

    @T.macro
    def qk(j, s_acc, Q_s, K_s, cw):
        # S = Q Kᵀ of K/V tile j, issued.
        Tx.warpgroup.gemm_async(s_acc[0:64, 0:bn], Q_s[cw * 64 : cw * 64 + 64, 0:d], K_s[j % stages, 0:bn, 0:d])

    @T.macro
    def mask_scores(s_acc, k0, q0, n_keys, diag):
        # The scores of keys k0 + jj past the sequence or (causal) after row i's query set to
        # -inf, as one comparison of the key's column with a bound of the row: the mask's
        # lowering compares the column's register part (a constant) with the bound less the
        # column's thread part (computed once a row), a compare and a select a score
        # (FlashAttention-3's). (Two comparisons of the column, k0 + jj >= n_keys or k0 + jj >
        # the row's last key, had ptxas keep up to 112 predicates across the wgmma wait, packed
        # into registers: about twice the instructions a masked tile.)
        if causal:
            Tx.warpgroup.masked_fill(s_acc[0:64, 0:bn], s_acc[0:64, 0:bn], lambda i, jj: jj > T.min(n_keys - 1, position(q0 + i) + diag) - k0, float("-inf"))
        else:
            Tx.warpgroup.masked_fill(s_acc[0:64, 0:bn], s_acc[0:64, 0:bn], lambda i, jj: jj >= n_keys - k0, float("-inf"))

    @T.macro
    def softmax(j, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, masked, factor):
        # The online softmax of tile j's scores, in log2 units of the scaled scores
        # (FlashAttention's; `factor` the scale in those units, `qk_scale`): m_new the row max,
        # alpha the old terms' rescale, P = exp2(s factor - m_new) in place as one fma and an
        # exp2, l = l alpha + rowsum(P). The output is rescaled by `rescale`. (`ftz`: weights
        # below 2^-126 are 0, one MUFU.EX2 each.)
        if masked:  # keys past the sequence, or (causal) after the query
            mask_scores(s_acc, (kt0 + j) * bn, q0, n_keys, diag)
        Tx.warpgroup.max(m_new[0:64, 0:1], s_acc[0:64, 0:bn])
        Tx.warpgroup.mul(m_new[0:64, 0:1], m_new[0:64, 0:1], factor)
        # A row no key of which is visible yet keeps a finite max: its terms (and the old ones)
        # weigh exp2(-inf) = 0, not NaN, and a later tile's keys count (none at all: O = 0, as
        # PyTorch's).
        Tx.warpgroup.maximum(m_new[0:64, 0:1], m_new[0:64, 0:1], LOWEST)
        if rescale_threshold:  # the running max kept where the tile's is at most the threshold above it
            for hf in list(range(2)):  # (this thread's two rows)
                if m_new.local()[hf] <= m_run.local()[hf] + rescale_threshold:
                    m_new.local()[hf] = m_run.local()[hf]
        else:
            Tx.warpgroup.maximum(m_new[0:64, 0:1], m_new[0:64, 0:1], m_run[0:64, 0:1])
        Tx.warpgroup.sub(alpha[0:64, 0:1], m_run[0:64, 0:1], m_new[0:64, 0:1])
        Tx.warpgroup.exp2(alpha[0:64, 0:1], alpha[0:64, 0:1], ftz=True)
        if fp8:  # (-m + p_offset, rounded once)
            Tx.warpgroup.fma(m_run[0:64, 0:1], m_new[0:64, 0:1], -1.0, p_offset)
        else:
            Tx.warpgroup.mul(m_run[0:64, 0:1], m_new[0:64, 0:1], -1.0)
        Tx.warpgroup.fma(s_acc[0:64, 0:bn], s_acc[0:64, 0:bn], factor, m_run[0:64, 0:1])
        if fma_columns:  # (the last keys' exponentials on the FMA pipe, the rest the MUFU's)
            Tx.warpgroup.exp2(s_acc[0:64, 0:mufu_columns], s_acc[0:64, 0:mufu_columns], ftz=True)
            Tx.warpgroup.exp2(s_acc[0:64, mufu_columns:bn], s_acc[0:64, mufu_columns:bn], ftz=True, pipe="fma")
        else:
            Tx.warpgroup.exp2(s_acc[0:64, 0:bn], s_acc[0:64, 0:bn], ftz=True)
        Tx.warpgroup.cast(m_run[0:64, 0:1], m_new[0:64, 0:1])
        Tx.warpgroup.sum(m_new[0:64, 0:1], s_acc[0:64, 0:bn])
        Tx.warpgroup.fma(l_run[0:64, 0:1], l_run[0:64, 0:1], alpha[0:64, 0:1], m_new[0:64, 0:1])

    @T.macro
    def rescale(s_acc, p, o_acc, alpha):
        # O = O alpha (no P V in flight), then P: the scores' layout is the A fragment's (FP8:
        # each key in its score's thread, at the register the A fragment reads, `fp8_p_layouts`).
        if rescale_threshold:
            # Only where one of this thread's two rows moved (alpha 1 else): a warp none of whose
            # rows moved skips it. Each 8 columns of the accumulator give a thread 2 rows x 2
            # columns (`wgmma_acc_layout`): register 4 n + 2 r + c is row r's.
            if alpha.local()[0] != 1.0 or alpha.local()[1] != 1.0:
                for n in list(range(d // 8)):
                    for r in list(range(2)):
                        for cc in list(range(2)):
                            o_acc.local()[4 * n + 2 * r + cc] = o_acc.local()[4 * n + 2 * r + cc] * alpha.local()[r]
        else:
            Tx.warpgroup.mul(o_acc[0:64, 0:d], o_acc[0:64, 0:d], alpha[0:64, 0:1])
        Tx.warpgroup.cast(p[0:64, 0:bn], s_acc[0:64, 0:bn])

    @T.macro
    def pv(j, p, o_acc, V_s):
        # O += P V of K/V tile j, issued (FP8: P's registers read as the A fragment of V's
        # permuted keys, V's stage d x bn).
        if fp8:
            Tx.warpgroup.gemm_async(o_acc[0:64, 0:d], p.view(64, bn, layout=p_operand)[0:64, 0:bn], V_s[j % stages, 0:d, 0:bn], accum=True)
        else:
            Tx.warpgroup.gemm_async(o_acc[0:64, 0:d], p[0:64, 0:bn], V_s[j % stages, 0:bn, 0:d], transB=True, accum=True)

    @T.macro
    def release(j, ring, empty, tid):
        if tid % 128 == 0:  # this warpgroup is done with K (ring 0) or V (ring 1) tile j's stage
            empty.arrive(ring * stages + j % stages)

    @T.macro
    def free_q(q_free, tid):
        # (persistent) this warp is done with Q_s: its last S = Q Kᵀ (or, 16-bit, its O stores)
        # read it. Dynamic: each thread arrives, each having read the tile's index in T_s, which
        # the producer rewrites once all have (a warp's other lanes ordered through __syncwarp to
        # the one that arrives are a race to compute-sanitizer's racecheck).
        if dynamic:
            q_free.arrive(0)
        else:
            T.cuda.warp_sync()
            if tid % 32 == 0:
                q_free.arrive(0)

    @T.macro
    def store_o(O, S_o, out, bh, q0, cw, tid, wait):
        # This consumer's rows of O (``out``, rounded) leave through S_o (Q_s, or FP8's O_s) by
        # TMA: written, a proxy fence and the warpgroup's barrier, then its first thread's stores,
        # a box per swizzle atom's columns (each dense in S_o; TMA clips the rows past seq_q), one
        # bulk group; ``wait``: that thread waits for the stores' reads of S_o.
        Tx.warpgroup.copy(S_o[cw * 64 : cw * 64 + 64, 0:d], out[0:64, 0:d])
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
        if tid % 128 == 0:
            for c0 in list(range(0, d, o_atom)):
                if q_major and not fp8:  # (FP8's O is (batch * heads, seq_q, d) whatever Q's layout)
                    Tx.copy_async(O[bh // heads, q0 : q0 + 64, bh % heads, c0 : c0 + o_atom], S_o[cw * 64 : cw * 64 + 64, c0 : c0 + o_atom], dispatch="tma_auto")
                else:
                    Tx.copy_async(O[bh, q0 : q0 + 64, c0 : c0 + o_atom], S_o[cw * 64 : cw * 64 + 64, c0 : c0 + o_atom], dispatch="tma_auto")
            T.ptx.cp_async.bulk.commit_group()
            if wait:
                # Their writes complete by the grid's end: a CTA need not wait for them to leave
                # the SM to the next one (CUTLASS's epilogues end likewise).
                T.ptx.cp_async.bulk.wait_group_read(0)

    @T.macro
    def my_turn(cw):
        # Ping-pong: wait until the previous consumer of the ring has issued its GEMMs (its
        # warpgroup and this one counted).
        if pingpong:
            T.ptx.bar.sync(TURN_BARRIER + cw, 256)

    @T.macro
    def your_turn(cw, last):
        # ... then hand the tensor cores to the next (not the last consumer's last issue: the
        # first, which it would hand them to, has no turn left to wait for; every consumer takes
        # as many turns, so the arrivals match the waits).
        if pingpong:
            if last:
                if cw < consumers - 1:
                    T.ptx.bar.arrive(TURN_BARRIER + cw + 1, 256)
            else:
                T.ptx.bar.arrive(TURN_BARRIER + (cw + 1) % consumers, 256)

    @T.macro
    def step(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, M, mi, masked, factor):
        # Tile j in turn (in stage b + j of the rings): S = Q Kᵀ, the softmax, O = O alpha + P V,
        # each waited for.
        landed(b + j, 0, full)
        qk(b + j, s_acc, Q_s, K_s, cw)
        T.ptx.wgmma.wait_group(0)
        release(b + j, 0, empty, tid)
        if mask:  # S += M / scale (so that S scale is the scaled scores plus the mask), through P's registers
            Tx.warpgroup.copy(p[0:64, 0:bn], M[mi, q0 : q0 + 64, (kt0 + j) * bn : (kt0 + j) * bn + bn], clip=True, other=float("-inf"))
            Tx.warpgroup.fma(s_acc[0:64, 0:bn], p[0:64, 0:bn], 1.0 / scale, s_acc[0:64, 0:bn])
        softmax(j, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, masked, factor)
        rescale(s_acc, p, o_acc, alpha)
        landed(b + j, 1, full)
        pv(b + j, p, o_acc, V_s)
        T.ptx.wgmma.wait_group(0)
        release(b + j, 1, empty, tid)

    @T.macro
    def issue_pair(j, b, s_acc, p, o_acc, Q_s, K_s, V_s, full, empty, cw, tid):
        # Tile j's S = Q Kᵀ and tile j - 1's P V issued together (stages b + j, b + j - 1), S
        # waited for and K's stage released while P V runs on.
        landed(b + j, 0, full)
        landed(b + j - 1, 1, full)
        my_turn(cw)
        qk(b + j, s_acc, Q_s, K_s, cw)
        pv(b + j - 1, p, o_acc, V_s)
        your_turn(cw, False)
        T.ptx.wgmma.wait_group(1)  # S (the older group) done; P V may run on
        release(b + j, 0, empty, tid)

    @T.macro
    def pipelined(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, masked, factor):
        # `issue_pair`, then tile j's softmax while P V runs (FlashAttention-3's intra-warpgroup
        # overlap), then O's rescale once it is done.
        issue_pair(j, b, s_acc, p, o_acc, Q_s, K_s, V_s, full, empty, cw, tid)
        softmax(j, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, masked, factor)
        T.ptx.wgmma.wait_group(0)
        release(b + j - 1, 1, empty, tid)
        rescale(s_acc, p, o_acc, alpha)

    @T.macro
    def retire_pv(j, b, s_acc, p, o_acc, alpha, empty, tid):
        # The rotated loop's step j opens so (and after its last step, j = steps): tile j - 2's
        # P V (issued by the step before, if any) waited for and its V stage released, then O
        # rescaled and P rounded from tile j - 1's softmax.
        T.ptx.wgmma.wait_group(0)
        if j >= 2:
            release(b + j - 2, 1, empty, tid)
        rescale(s_acc, p, o_acc, alpha)

    @T.macro
    def rotated(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, masked, factor):
        # `pipelined`'s step with the loop turned: `retire_pv`, then `issue_pair`, and tile j's
        # softmax last, while P V runs (its wait opens the next step: another block, which ptxas
        # does not move it out of).
        retire_pv(j, b, s_acc, p, o_acc, alpha, empty, tid)
        issue_pair(j, b, s_acc, p, o_acc, Q_s, K_s, V_s, full, empty, cw, tid)
        softmax(j, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, masked, factor)

    @T.macro(hygienic=False)
    def q_part(p_tile, it, p_bh, p_qt, p_q_start):
        # The producer's Q load of tile ``p_tile`` (the CTA's ``it``-th; one thread).
        if persistent:  # Q_s holds the previous tile's O until its TMA stores have read it
            for w in T.serial(T.min(it, 1)):
                q_free.wait(0, (it - 1) % 2)
        if dynamic:  # the tile, for the consumers (who read it before they free Q_s: the wait above orders this after)
            T_s[0] = p_tile
        T.ptx.mbarrier.arrive.expect_tx(q_full.ptr_to([0]), bm * d * eb)
        if varlen:  # (rows past the sequence are the next one's, or TMA's zeros: never stored)
            Tx.copy_async(Q_s[0:bm, 0:d], Q[p_q_start + p_qt * bm : p_q_start + p_qt * bm + bm, p_bh % heads, 0:d], dispatch="tma_auto", mbar=q_full.ptr_to([0]))
        else:
            load(Q_s[0:bm, 0:d], Q, p_bh, heads, p_qt * bm, bm, q_full.ptr_to([0]), q_major)

    @T.macro(hygienic=False)
    def kv_loads(j, p_b, p_kv, p_kt0, p_k_start):
        # K/V tile j of the tile into stage (p_b + j) % stages of each ring (one thread; with
        # ``transpose_v``, V's rows into its raw stage, for `transpose_stage`).
        if p_b + j >= stages:
            empty.wait((p_b + j) % stages, ((p_b + j) // stages + 1) % 2)
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([(p_b + j) % stages]), tile_bytes)
        if varlen:  # (keys past the sequence masked; their V rows weigh 0)
            Tx.copy_async(K_s[(p_b + j) % stages, 0:bn, 0:d], K[p_k_start + j * bn : p_k_start + j * bn + bn, p_kv % kv_heads, 0:d], dispatch="tma_auto", mbar=full.ptr_to([(p_b + j) % stages]))
        else:
            load_kv(K_s, (p_b + j) % stages, K, p_kv, (p_kt0 + j) * bn, full.ptr_to([(p_b + j) % stages]), BT)
        if transpose_v:  # (its raw stage free: `transpose_stage` of tile j - 2 ended at the producers' barrier)
            T.ptx.mbarrier.arrive.expect_tx(vraw.ptr_to([(p_b + j) % 2]), tile_bytes)
            load_kv(Vr_s, (p_b + j) % 2, V, p_kv, (p_kt0 + j) * bn, vraw.ptr_to([(p_b + j) % 2]), BT)
        else:
            if p_b + j >= stages:
                empty.wait(stages + (p_b + j) % stages, ((p_b + j) // stages + 1) % 2)
            T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([stages + (p_b + j) % stages]), tile_bytes)
            if varlen:
                Tx.copy_async(V_s[(p_b + j) % stages, 0:bn, 0:d], V[p_k_start + j * bn : p_k_start + j * bn + bn, p_kv % kv_heads, 0:d], dispatch="tma_auto", mbar=full.ptr_to([stages + (p_b + j) % stages]))
            elif fp8:  # (VT's keys past the sequence: its zero columns, or TMA's zeros)
                Tx.copy_async(V_s[(p_b + j) % stages, 0:d, 0:bn], V[p_kv, 0:d, (p_kt0 + j) * bn : (p_kt0 + j) * bn + bn], dispatch="tma_auto", mbar=full.ptr_to([stages + (p_b + j) % stages]))
            else:
                load_kv(V_s, (p_b + j) % stages, V, p_kv, (p_kt0 + j) * bn, full.ptr_to([stages + (p_b + j) % stages]), BT)

    @T.macro(hygienic=False)
    def transpose_stage(g):
        # (transpose_v) V tile g of the rings, landed by TMA as rows in raw stage g % 2, into V's
        # stage g % stages as FP8's wgmma reads it (d x bn, each 16 keys permuted as
        # `fp8_values`): each warp's blocks of 16 keys x 32 columns by ldmatrix.trans of byte
        # pairs, a byte permutation in registers and stmatrix (FlashAttention-3's transposition:
        # the permutation is the one its register moves leave, no shuffles); then the async
        # proxy's fence, the producers' barrier (the raw stage free for tile g + 2) and thread 0's
        # arrival on V's full barrier.
        vraw.wait(g % 2, (g // 2) % 2)
        if g >= stages:
            empty.wait(stages + g % stages, (g // stages + 1) % 2)
        nc = d // tv_cols  # blocks across the columns
        for i in T.serial(bn // 16 * nc // 4):  # (a loop: unrolled, the blocks' addresses outgrow the producer's registers)
            u = warp_in_wg + 4 * i  # this warp's i-th block: keys k0.., columns c0..
            Tx.warp.copy(VL[0:16, 0:tv_cols], Vr_s[g % 2, u // nc * 16 : u // nc * 16 + 16, u % nc * tv_cols : u % nc * tv_cols + tv_cols])
            for md in list(range(tv_cols // 16)):  # V's column 16 md + 2 b + nd, keys 8 c1 + 2 a + c0 (lane 4 b + a)
                for nd in list(range(2)):
                    for c1 in list(range(2)):
                        for c0 in list(range(2)):
                            VT_local[8 * md + 4 * nd + 2 * c1 + c0] = VL_local[8 * md + 4 * c1 + 2 * c0 + nd]
            Tx.warp.copy(V_s[g % stages, u % nc * tv_cols : u % nc * tv_cols + tv_cols, u // nc * 16 : u // nc * 16 + 16], VTr[0:tv_cols, 0:16])
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(PRODUCER_BARRIER, 128)
        if tid == 0:
            full.arrive(stages + g % stages)

    @T.macro(hygienic=False)
    def take_tile():
        # (dynamic) the CTA's next tile, taken from the counter ``TC`` (the caller's) as this tile's
        # loads start (the atomic's round trip overlaps them); a miss past the last. The last of a launch's
        # n_tiles takes leaves the counter at 0 for the next launch.
        taken = T.cuda.atomic_add(TC.ptr_to([0]), 1)
        if taken == n_tiles - 1:
            T.cuda.atomic_add(TC.ptr_to([0]), -n_tiles)
        return taken + ctas

    @T.macro(hygienic=False)
    def producer_tile(p_tile, it):
        # The producer's tile ``p_tile``, the CTA's ``it``-th: its Q, then its K/V tiles into the
        # rings (the caller's names: `body`'s buffers and barriers); dynamic: returns the next
        # tile, taken from the counter.
        p_b = ring_base(R_s, 0)
        p_bh = tile_bh(p_tile, nb, nqt)
        p_qt = tile_qt(p_tile, nb, nqt)
        p_q_start = q_start_of(p_bh, CUQ, nb)
        p_k_start = k_start_of(p_bh, CUK, nb)
        p_kv = kv_of(p_bh)
        p_kt0 = kt0_of(p_tile)
        p_n_rows = n_rows_of(p_bh, CUQ, nb, p_q_start)
        p_n_keys = n_keys_of(p_bh, CUK, KL, nb, p_k_start)
        p_steps = steps_of(p_qt, p_n_keys, diag_of(p_n_keys, p_n_rows), p_kt0, p_n_rows)
        if transpose_v:  # thread 0 loads, all 128 threads transpose V (`transpose_stage`) a tile behind
            if tid == 0:
                q_part(p_tile, it, p_bh, p_qt, p_q_start)
                if dynamic:  # the next tile, kept in N_s[1] (thread 0's alone) until the tile's end
                    N_s[1] = take_tile()
            for j in T.serial(p_steps):
                if tid == 0:
                    kv_loads(j, p_b, p_kv, p_kt0, p_k_start)
                if j > 0:
                    transpose_stage(p_b + j - 1)
            for t in T.serial(T.min(p_steps, 1)):
                transpose_stage(p_b + p_steps - 1)
        else:
            q_part(p_tile, it, p_bh, p_qt, p_q_start)
            if dynamic:
                p_next = take_tile()
            for j in T.serial(p_steps):
                kv_loads(j, p_b, p_kv, p_kt0, p_k_start)
        if transpose_v and persistent:  # (every producer thread read the count and tile: then one updates them for all)
            T.ptx.bar.sync(PRODUCER_BARRIER, 128)
            if tid == 0:
                R_s[0] = R_s[0] + p_steps
                if dynamic:
                    N_s[0] = N_s[1]
            T.ptx.bar.sync(PRODUCER_BARRIER, 128)
        elif persistent:
            R_s[0] = R_s[0] + p_steps
        return p_next if dynamic and not transpose_v else None  # (dynamic: the CTA's next tile; a miss past the last)

    @T.macro(hygienic=False)
    def consumer_tile(tile, it):
        # A consumer warpgroup's tile ``tile``, the CTA's ``it``-th (the caller's names: `body`'s
        # buffers, barriers and registers).
        b = ring_base(R_s, wg)  # its K/V tiles' first stage of the rings
        bh = tile_bh(tile, nb, nqt)
        qt = tile_qt(tile, nb, nqt)
        q_start = q_start_of(bh, CUQ, nb)
        n_rows = n_rows_of(bh, CUQ, nb, q_start)
        n_keys = n_keys_of(bh, CUK, KL, nb, k_start_of(bh, CUK, nb))
        diag = diag_of(n_keys, n_rows)
        kv = kv_of(bh)
        mi = mi_of(bh)
        kt0 = kt0_of(tile)
        steps = steps_of(qt, n_keys, diag, kt0, n_rows)
        unmasked = unmasked_of(qt, n_keys, diag, kt0, steps)
        q0 = qt * bm + cw * 64  # this warpgroup's first query row
        Tx.warpgroup.fill(o_acc[0:64, 0:d], 0.0)
        Tx.warpgroup.fill(m_run[0:64, 0:1], float("-inf"))
        Tx.warpgroup.fill(l_run[0:64, 0:1], 0.0)
        if not dynamic:  # (dynamic: waited for before the tile's index was read)
            q_full.wait(0, it % 2)
        # The tiles no key of which is masked, then those holding keys past the sequence or
        # (causal) after one of the tile's queries: the mask on those only (bounds the CTA
        # agrees on: every thread of a warpgroup runs its loops whole).
        if overlap:  # tile 0's S and softmax first (masked or not: loops of 0 or 1 trips)
            for t in T.serial(T.min(steps, 1)):  # (none where no K/V tile is read: rows above a lower-right diagonal)
                if pingpong:  # the first consumer's turn first
                    if cw == consumers - 1:
                        T.ptx.bar.arrive(TURN_BARRIER, 256)
                landed(b, 0, full)
                my_turn(cw)
                qk(b, s_acc, Q_s, K_s, cw)
                your_turn(cw, False)
                T.ptx.wgmma.wait_group(0)
                release(b, 0, empty, tid)
                for j in T.serial(T.min(unmasked, 1)):
                    softmax(0, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, False, qk_scale(DS, kv))
                for j in T.serial(T.min(unmasked, 1), 1):
                    softmax(0, s_acc, m_run, m_new, l_run, alpha, q0, kt0, n_keys, diag, True, qk_scale(DS, kv))
                if rotate:
                    for j in T.serial(1, T.max(unmasked, 1)):
                        rotated(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, False, qk_scale(DS, kv))
                    for j in T.serial(T.max(unmasked, 1), steps):
                        rotated(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, True, qk_scale(DS, kv))
                    retire_pv(steps, b, s_acc, p, o_acc, alpha, empty, tid)  # (then the last tile's P V, below)
                else:
                    rescale(s_acc, p, o_acc, alpha)
                    for j in T.serial(1, T.max(unmasked, 1)):
                        pipelined(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, False, qk_scale(DS, kv))
                    for j in T.serial(T.max(unmasked, 1), steps):
                        pipelined(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, True, qk_scale(DS, kv))
                if fp8 and persistent:  # the last S = Q Kᵀ waited for: Q_s free for the next tile's Q now, loaded during this tile's last P V and epilogue
                    free_q(q_free, tid)
                landed(b + steps - 1, 1, full)
                my_turn(cw)
                pv(b + steps - 1, p, o_acc, V_s)
                your_turn(cw, True)
                T.ptx.wgmma.wait_group(0)
                release(b + steps - 1, 1, empty, tid)
        else:
            for j in T.serial(unmasked):
                step(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, M, mi, False, qk_scale(DS, kv))
            for j in T.serial(unmasked, steps):
                step(j, b, s_acc, p, o_acc, m_run, m_new, l_run, alpha, Q_s, K_s, V_s, full, empty, cw, q0, kt0, n_keys, diag, tid, M, mi, True, qk_scale(DS, kv))
        # O / l, rounded, through shared memory; TMA clips the rows past the sequence. (A
        # split's O / l in float32 and its log-sum-exp, for `attention_combine_kernel`.)
        # (A row that saw no key has O = 0 and l = 0: 0, as PyTorch's; its log-sum-exp -inf.)
        Tx.warpgroup.maximum(alpha[0:64, 0:1], l_run[0:64, 0:1], TINY)
        Tx.warpgroup.reciprocal(alpha[0:64, 0:1], alpha[0:64, 0:1])  # (one division a row, then products)
        if fp8:  # V's descale
            Tx.warpgroup.mul(alpha[0:64, 0:1], alpha[0:64, 0:1], DS[kv, 1])
        Tx.warpgroup.mul(o_acc[0:64, 0:d], o_acc[0:64, 0:d], alpha[0:64, 0:1])
        if splits > 1:
            Tx.warpgroup.copy(OP[tile % splits, bh, q0 : q0 + 64, 0:d], o_acc[0:64, 0:d], clip=True)
        elif varlen:  # from registers, the sequence's rows only (the next sequence's follow)
            Tx.warpgroup.cast(out[0:64, 0:d], o_acc[0:64, 0:d])
            Tx.warpgroup.copy(O[q_start + q0 : q_start + q0 + 64, bh % heads, 0:d], out[0:64, 0:d], clip=True, mask=lambda i, hh, jj: q0 + i < n_rows)
        elif fp8:  # from registers or through O_s (Q_s's FP8 rows hold half of O's bfloat16 ones)
            if persistent:  # (where the K/V loop above did not: no S, or no overlap)
                if not overlap:
                    free_q(q_free, tid)
                elif steps == 0:
                    free_q(q_free, tid)
            Tx.warpgroup.cast(out[0:64, 0:d], o_acc[0:64, 0:d])
            if tma_epilogue:
                if persistent:  # the previous tile's stores have read this consumer's rows of O_s (none pending: no wait)
                    if tid % 128 == 0:
                        T.ptx.cp_async.bulk.wait_group_read(0)
                    T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
                store_o(O, O_s, out, bh, q0, cw, tid, False)  # (its reads waited for at the next epilogue or the end)
            else:
                Tx.warpgroup.copy(O[bh, q0 : q0 + 64, 0:d], out[0:64, 0:d], clip=True)
        else:
            Tx.warpgroup.cast(out[0:64, 0:d], o_acc[0:64, 0:d])
            # (through this consumer's Q rows, read by its last wgmma, waited for; the stores'
            # reads waited for: persistent, Q_s is the next Q's)
            store_o(O, Q_s, out, bh, q0, cw, tid, True)
            if persistent:  # Q_s free for the next tile's Q: each warp's O writes and its stores' reads done
                free_q(q_free, tid)
        if lse or splits > 1:  # the natural log of sum exp(s * scale): (m + log2 l) ln 2 (FP8: l's offset off)
            Tx.warpgroup.log2(l_run[0:64, 0:1], l_run[0:64, 0:1])
            if fp8:
                Tx.warpgroup.add(l_run[0:64, 0:1], l_run[0:64, 0:1], -p_offset)
            Tx.warpgroup.add(l_run[0:64, 0:1], l_run[0:64, 0:1], m_run[0:64, 0:1])
            Tx.warpgroup.mul(l_run[0:64, 0:1], l_run[0:64, 0:1], LN2)
        if lse and varlen:  # through shared memory (a quad's first lane per row), then the sequence's rows
            if tid % 4 == 0:
                for hf in T.serial(2):
                    L_s[cw, tid % 128 // 32 * 16 + tid % 32 // 4 + 8 * hf] = l_run.local()[hf]
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
            Tx.warpgroup.copy(LSE[q_start + q0 : q_start + q0 + 64, bh % heads], L_s[cw, 0:64], clip=True, mask=lambda i, hh: q0 + i < n_rows)
        elif lse or splits > 1:
            # Each quad's lanes hold its two rows (16 w + g and + 8, `wgmma_row_layout`):
            # the quad's first lane writes them.
            if tid % 4 == 0:
                for hf in T.serial(2):
                    if splits > 1:
                        LP[tile % splits, bh, q0 + tid % 128 // 32 * 16 + tid % 32 // 4 + 8 * hf] = l_run.local()[hf]
                    else:
                        LSE[bh, q0 + tid % 128 // 32 * 16 + tid % 32 // 4 + 8 * hf] = l_run.local()[hf]
        if combine:  # the split that finishes these rows last combines every split's parts
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)  # (the warpgroup's parts written)
            if tid % 128 == 0:
                T.cuda.thread_fence()  # (release: the parts before the ticket)
                ticket = T.cuda.atomic_add(TC.ptr_to([bh * blocks + qt * consumers + cw]), 1)
                T.cuda.thread_fence()  # (acquire: the other splits' parts after it)
                N_s[cw] = ticket
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)
            if N_s[cw] == splits - 1:  # (a warp a row, lane l its columns l, l + 32, ...: loads of 128 bytes)
                for r in T.serial(16):
                    if q0 + r * 4 + tid % 128 // 32 < seq_q:
                        row = T.min(q0 + r * 4 + tid % 128 // 32, seq_q - 1)  # (the same row, clamped: a range the bounds prover sees)
                        combine_part(OP, LP, O, LSE, c_top, c_acc, bh, row, tid % 32)
                if tid % 128 == 0:
                    T.cuda.atomic_add(TC.ptr_to([bh * blocks + qt * consumers + cw]), -splits)
        if persistent:  # the stages this tile took, counted by the warpgroup's first thread
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)  # (its threads read the count)
            if tid % 128 == 0:
                R_s[wg] = R_s[wg] + steps
            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)

    @T.macro
    def body(Q, K, V, O, LSE, OP, LP, M, CUQ, CUK, nb, nqt, KL, BT, DS, TC=None):
        T.device_entry()
        if launch_dependents:
            T.ptx.griddepcontrol.launch_dependents()
        if varlen:
            bx = T.cta_id([nb * heads * nqt])
        else:
            bx = T.cta_id([ctas])
        wg = T.warpgroup_id([consumers + 1])
        warp_in_wg = T.warp_id_in_wg([4])
        T.lane_id([32])
        tid = T.thread_id([128 * (consumers + 1)])
        pool = T.SMEMPool()
        Q_s = pool.alloc((bm, d), dtype, layout=q_smem)
        K_s = pool.alloc((stages, bn, d), dtype, layout=kv_smem)
        V_s = pool.alloc(v_shape, dtype, layout=v_smem)
        if tma_epilogue:
            O_s = pool.alloc((bm, d), out_dtype, layout=mma_shared_layout(out_dtype, o_swizzle, (bm, d)))
        q_full = MBarrier(pool, 1)
        full = MBarrier(pool, 2 * stages)  # K's ring, then V's
        empty = MBarrier(pool, 2 * stages)
        if persistent:  # Q_s's, freed by the consumers' last S (16-bit: their epilogues)
            q_free = MBarrier(pool, 1)
        if transpose_v:  # V's rows as TMA lands them, for `transpose_stage`
            Vr_s = pool.alloc((2, bn, d), dtype, layout=mma_shared_layout(dtype, swizzle, (2, bn, d)))
            vraw = MBarrier(pool, 2)
        pool.commit()
        # (persistent) the K/V stages each warpgroup's tiles took so far: warpgroup-uniform
        # values (shared memory, at the warpgroup's own index) for the wgmma descriptors
        R_s = T.alloc_buffer((consumers + 1,), "int32", scope="shared")
        if dynamic:  # the consumers' next tile, from the producer
            T_s = T.alloc_buffer((1,), "int32", scope="shared")
        if persistent:
            if tid % 128 == 0:
                R_s[wg] = 0
        q_full.init(1)
        full.init(1)  # the producer's expect_tx arrival (+ the stage's transaction bytes)
        empty.init(consumers)  # one arrival per consumer warpgroup
        if persistent:  # one arrival per consumer warp (dynamic: thread)
            q_free.init(128 * consumers if dynamic else 4 * consumers)
        if transpose_v:
            vraw.init(1)  # the producer's expect_tx arrival (+ the tile's bytes)
        T.ptx.fence.mbarrier_init()
        T.cuda.cta_sync()
        if wg == 0:
            T.ptx.setmaxnreg.dec(producer_regs)
            if transpose_v:  # all 128 threads: thread 0 loads, every warp transposes V
                # a warp's block of V: 16 keys x tv_cols columns as ldmatrix.trans leaves them (lane 4 b + a:
                # keys 8 mk + 2 a + jk, columns 16 md + 2 b + jd in register 4 mk + 2 jk + 8 md + jd) and
                # as stmatrix takes them into V's stage (columns 16 md + 2 b + nd, keys 4 a + i
                # in its order, register 8 md + 4 nd + i)
                VL = T.alloc_buffer((16, tv_cols), dtype, scope="local", layout=TileLayout(S[(2, 4, 2, tv_cols // 16, 8, 2) : (4, 1 @ laneid, 2, 8, 4 @ laneid, 1)]))
                VTr = T.alloc_buffer((tv_cols, 16), dtype, scope="local", layout=TileLayout(S[(tv_cols // 16, 8, 2, 4, 4) : (8, 4 @ laneid, 4, 1 @ laneid, 1)]))
                VL_local = VL.local()
                VT_local = VTr.local()
                if dynamic:  # (`dynamic`'s loop below, on every producer thread: thread 0 takes the tiles, N_s[0] the current)
                    N_s = T.alloc_buffer((2,), "int32", scope="shared")
                    if tid == 0:
                        N_s[0] = bx
                    T.ptx.bar.sync(PRODUCER_BARRIER, 128)
                    p_it = 0
                    while N_s[0] < n_tiles:
                        p_tile = N_s[0]
                        producer_tile(p_tile, p_it)
                        p_it = p_it + 1
                    if tid == 0:
                        q_free.wait(0, (p_it - 1) % 2)
                        T_s[0] = N_s[0]
                        q_full.arrive(0)
                else:
                    for it in T.serial(tiles_of(bx)):  # (one but with `persistent`)
                        producer_tile(bx + it * ctas, it)
            elif tid == 0:  # (its own names: a name bound twice in a kernel is a mutable scalar)
                if dynamic:  # FlashAttention-3's scheduler: the CTA's first tile its own, the next taken from the counter
                    p_next = bx
                    p_it = 0
                    while p_next < n_tiles:
                        p_tile = p_next
                        p_next = producer_tile(p_tile, p_it)
                        p_it = p_it + 1
                    # The consumers' way out: the counter's miss as their next tile, on Q's barrier with
                    # no load, once they freed Q_s (and so read the last tile's index).
                    q_free.wait(0, (p_it - 1) % 2)
                    T_s[0] = p_next
                    q_full.arrive(0)
                else:
                    for it in T.serial(tiles_of(bx)):  # (one but with `persistent`)
                        p_tile = bx + it * ctas
                        producer_tile(p_tile, it)
        else:
            T.ptx.setmaxnreg.inc(consumer_regs)
            cw = wg - 1
            s_acc = T.alloc_buffer((64, bn), "float32", scope="local", layout=wgmma_acc_layout(bn))
            p = T.alloc_buffer((64, bn), dtype, scope="local", layout=p_layout)
            o_acc = T.alloc_buffer((64, d), "float32", scope="local", layout=wgmma_acc_layout(d))
            out = T.alloc_buffer((64, d), out_dtype, scope="local", layout=wgmma_acc_layout(d))
            m_run = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            m_new = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            l_run = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            alpha = T.alloc_buffer((64, 1), "float32", scope="local", layout=wgmma_row_layout())
            if lse and varlen:
                L_s = T.alloc_buffer((consumers, 64), "float32", scope="shared")  # the log-sum-exps' way out
            if combine:  # each warpgroup's ticket, and the combine's running values
                N_s = T.alloc_buffer((consumers,), "int32", scope="shared")
                c_top = T.alloc_buffer((1,), "float32", scope="local")
                c_acc = T.alloc_buffer((1 + d // 32,), "float32", scope="local")  # (the weights' sum, a lane's columns' sums)
            if dynamic:  # each tile's index in T_s, landed with its Q (past the last: the way out)
                c_it = 0
                q_full.wait(0, 0)
                while T_s[0] < n_tiles:
                    c_tile = T.cuda.shfl(T_s[0], 0)
                    consumer_tile(c_tile, c_it)
                    c_it = c_it + 1
                    q_full.wait(0, c_it % 2)
            else:
                for it in T.serial(tiles_of(bx)):  # (one but with `persistent`)
                    tile = bx + it * ctas  # the CTA's it-th tile
                    consumer_tile(tile, it)
            if tma_epilogue:  # the last tile's O stores have read O_s before the CTA's shared memory goes
                if tid % 128 == 0:
                    T.ptx.cp_async.bulk.wait_group_read(0)

    if varlen:

        @T.prim_func
        def attention_varlen(
            Q_ptr: T.handle,
            K_ptr: T.handle,
            V_ptr: T.handle,
            CUQ_ptr: T.handle,
            CUK_ptr: T.handle,
            O_ptr: T.handle,
            L_ptr: T.handle,
            nb: T.int32,
            max_q: T.int32,
            total_q: T.int32,
            total_k: T.int32,
        ):
            Q = T.match_buffer(Q_ptr, (total_q, heads, d), dtype)
            K = T.match_buffer(K_ptr, (total_k, kv_heads, d), dtype)
            V = T.match_buffer(V_ptr, (total_k, kv_heads, d), dtype)
            CUQ = T.match_buffer(CUQ_ptr, (nb + 1,), "int32")
            CUK = T.match_buffer(CUK_ptr, (nb + 1,), "int32")
            O = T.match_buffer(O_ptr, (total_q, heads, d), dtype)
            LSE = T.match_buffer(L_ptr, (total_q, heads), "float32")
            body(Q, K, V, O, LSE, None, None, None, CUQ, CUK, nb, (max_q + bm - 1) // bm, None, None, None)

        return attention_varlen

    if combine and page:

        @T.prim_func
        def attention_paged_combined(
            Q_ptr: T.handle,
            K_ptr: T.handle,
            V_ptr: T.handle,
            KL_ptr: T.handle,
            BT_ptr: T.handle,
            OP_ptr: T.handle,
            LP_ptr: T.handle,
            O_ptr: T.handle,
            L_ptr: T.handle,
            TC_ptr: T.handle,
            n_pages: T.int32,
        ):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, (n_pages, page, kv_heads, d), dtype)
            V = T.match_buffer(V_ptr, (n_pages, page, kv_heads, d), dtype)
            KL = T.match_buffer(KL_ptr, (batch,), "int32")
            BT = T.match_buffer(BT_ptr, (batch, seq_k // page), "int32")
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            O = T.match_buffer(O_ptr, _combined_shape(batch * heads, seq_q, d, o_heads, q_group), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            TC = T.match_buffer(TC_ptr, (batch * heads * blocks,), "int32")  # (0, and 0 again after each launch)
            body(Q, K, V, O, LSE, OP, LP, None, None, None, 0, 0, KL, BT, None, TC)

        return attention_paged_combined

    if combine and kv_lens:

        @T.prim_func
        def attention_cache_combined(
            Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, KL_ptr: T.handle, OP_ptr: T.handle, LP_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle, TC_ptr: T.handle
        ):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            KL = T.match_buffer(KL_ptr, (batch,), "int32")
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            O = T.match_buffer(O_ptr, _combined_shape(batch * heads, seq_q, d, o_heads, q_group), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            TC = T.match_buffer(TC_ptr, (batch * heads * blocks,), "int32")  # (0, and 0 again after each launch)
            body(Q, K, V, O, LSE, OP, LP, None, None, None, 0, 0, KL, None, None, TC)

        return attention_cache_combined

    if combine:

        @T.prim_func
        def attention_split_combined(
            Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, OP_ptr: T.handle, LP_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle, TC_ptr: T.handle
        ):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            O = T.match_buffer(O_ptr, _combined_shape(batch * heads, seq_q, d, o_heads, q_group), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            TC = T.match_buffer(TC_ptr, (batch * heads * blocks,), "int32")  # (0, and 0 again after each launch)
            body(Q, K, V, O, LSE, OP, LP, None, None, None, 0, 0, None, None, None, TC)

        return attention_split_combined

    if page:  # a paged cache (kv_lens)

        @T.prim_func
        def attention_paged(
            Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, KL_ptr: T.handle, BT_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle, n_pages: T.int32
        ):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, (n_pages, page, kv_heads, d), dtype)
            V = T.match_buffer(V_ptr, (n_pages, page, kv_heads, d), dtype)
            KL = T.match_buffer(KL_ptr, (batch,), "int32")
            BT = T.match_buffer(BT_ptr, (batch, seq_k // page), "int32")
            if splits > 1:
                OP = T.match_buffer(O_ptr, (splits, batch * heads, seq_q, d), "float32")
                LP = T.match_buffer(L_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
                body(Q, K, V, None, None, OP, LP, None, None, None, 0, 0, KL, BT, None)
            else:
                O = T.match_buffer(O_ptr, q_shape(), dtype)
                LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
                body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, KL, BT, None)

        return attention_paged

    if fp8 and splits > 1:

        @T.prim_func
        def attention_fp8_split(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DS_ptr: T.handle, OP_ptr: T.handle, LP_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, vt_shape, dtype)
            DS = T.match_buffer(DS_ptr, (batch * kv_heads, 2), "float32")
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, None, None, OP, LP, None, None, None, 0, 0, None, None, DS)

        return attention_fp8_split

    if fp8 and dynamic:

        @T.prim_func
        def attention_fp8_dynamic(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DS_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle, TC_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k) if transpose_v else vt_shape, dtype)
            DS = T.match_buffer(DS_ptr, (batch * kv_heads, 2), "float32")
            O = T.match_buffer(O_ptr, (batch * heads, seq_q, d), out_dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            TC = T.match_buffer(TC_ptr, (1,), "int32")  # (the tile counter: 0, and 0 again after each launch)
            body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, None, None, DS, TC)

        return attention_fp8_dynamic

    if dynamic:

        @T.prim_func
        def attention_dynamic(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle, TC_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            O = T.match_buffer(O_ptr, q_shape(), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            TC = T.match_buffer(TC_ptr, (1,), "int32")  # (the tile counter: 0, and 0 again after each launch)
            body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, None, None, None, TC)

        return attention_dynamic

    if fp8:

        @T.prim_func
        def attention_fp8(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, DS_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k) if transpose_v else vt_shape, dtype)
            DS = T.match_buffer(DS_ptr, (batch * kv_heads, 2), "float32")
            O = T.match_buffer(O_ptr, (batch * heads, seq_q, d), out_dtype)  # ((batch * heads, seq, d) whatever Q's layout)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, None, None, DS)

        return attention_fp8

    if splits > 1 and kv_lens:

        @T.prim_func
        def attention_cache_split(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, KL_ptr: T.handle, OP_ptr: T.handle, LP_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            KL = T.match_buffer(KL_ptr, (batch,), "int32")
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, None, None, OP, LP, None, None, None, 0, 0, KL, None, None)

        return attention_cache_split

    if splits > 1:

        @T.prim_func
        def attention_split(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, OP_ptr: T.handle, LP_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            OP = T.match_buffer(OP_ptr, (splits, batch * heads, seq_q, d), "float32")
            LP = T.match_buffer(LP_ptr, (splits, batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, None, None, OP, LP, None, None, None, 0, 0, None, None, None)

        return attention_split

    if kv_lens:

        @T.prim_func
        def attention_cache(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, KL_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            KL = T.match_buffer(KL_ptr, (batch,), "int32")
            O = T.match_buffer(O_ptr, q_shape(), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, KL, None, None)

        return attention_cache

    if mask:

        @T.prim_func
        def attention_masked(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, M_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle):
            Q = T.match_buffer(Q_ptr, q_shape(), dtype)
            K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
            V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
            M = T.match_buffer(M_ptr, (mask_matrices(mask, batch, heads), seq_q, seq_k), dtype)
            O = T.match_buffer(O_ptr, q_shape(), dtype)
            LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
            body(Q, K, V, O, LSE, None, None, M, None, None, 0, 0, None, None, None)

        return attention_masked

    @T.prim_func
    def attention(Q_ptr: T.handle, K_ptr: T.handle, V_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle):
        Q = T.match_buffer(Q_ptr, q_shape(), dtype)
        K = T.match_buffer(K_ptr, shape(kv_heads, seq_k), dtype)
        V = T.match_buffer(V_ptr, shape(kv_heads, seq_k), dtype)
        O = T.match_buffer(O_ptr, q_shape(), dtype)
        LSE = T.match_buffer(L_ptr, (batch * heads, lse_rows(seq_q)), "float32")
        body(Q, K, V, O, LSE, None, None, None, None, None, 0, 0, None, None, None)

    return attention


@autotune(configs=[{}], key=["splits", "bhs", "seq_q", "d", "dtype", "lse", "heads", "group", "dependent"])
def attention_combine_kernel(splits: int, bhs: int, seq_q: int, d: int, dtype: str, lse: bool, heads: int = 0, group: int = 1, dependent: bool = False):
    """Split-KV's second step: ``O[bh, i] = sum_s exp(LP[s, bh, i] - L) OP[s, bh, i]``, ``L = log
    sum_s exp(LP[s, bh, i])`` (the splits' log-sum-exps combined about their largest, so each
    weight is at most 1; splits with no key weigh 0, a row with none at all is 0), rounded once;
    with ``lse``, ``LSE[bh, i] = L``. ``heads``: O is [batch, seq, heads, d] (the seq-major
    layout), not (batch * heads, seq, d); ``group`` (with ``heads``): the parts' rows are
    `attention_kernel`'s ``q_group`` packed query heads, row i of K/V head bh the query head bh %
    heads * group + i % group at position i // group of O [batch, seq_q / group, heads * group,
    d]. A CTA per query row, a thread per column. ``dependent``: launched as a programmatic
    dependent of the kernel before it (`T.ptx.griddepcontrol.wait()` first: its CTAs may be
    scheduled while the split-KV kernel runs, one made with ``launch_dependents``)."""
    combine_part = _combine_part(splits, dtype, lse, heads, group)

    @T.prim_func
    def attention_combine(OP_ptr: T.handle, LP_ptr: T.handle, O_ptr: T.handle, L_ptr: T.handle):
        OP = T.match_buffer(OP_ptr, (splits, bhs, seq_q, d), "float32")
        LP = T.match_buffer(LP_ptr, (splits, bhs, lse_rows(seq_q)), "float32")
        O = T.match_buffer(O_ptr, _combined_shape(bhs, seq_q, d, heads, group), dtype)
        LSE = T.match_buffer(L_ptr, (bhs, lse_rows(seq_q)), "float32")
        T.device_entry()
        r = T.cta_id([bhs * seq_q])
        t = T.thread_id([d])
        if dependent:  # (the parts are the kernel before's: nothing global before the wait)
            T.ptx.griddepcontrol.wait()
        top = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((2,), "float32", scope="local")  # the weights' sum, the weighted sum
        bh = r // seq_q
        i = r % seq_q
        combine_part(OP, LP, O, LSE, top, acc, bh, i, t)

    return attention_combine


def ticket_blocks(seq_q: int) -> int:
    """The blocks of 64 rows a head that one-launch split-KV takes tickets for (`attention_kernel`'s
    ``combine``): `lse_rows`' (a multiple of every CTA's rows), so any design's count."""
    return lse_rows(seq_q) // 64


def _combined_shape(bhs: int, seq_q: int, d: int, heads: int, group: int) -> tuple:
    """The combined O's shape: ``(bhs, seq_q, d)``, or with ``heads`` the seq-major ``(bhs /
    heads, seq_q / group, heads * group, d)`` (``group`` packed query heads a row block)."""
    return (bhs // heads, seq_q // group, heads * group, d) if heads else (bhs, seq_q, d)


def _combine_part(splits: int, dtype: str, lse: bool, heads: int, group: int, columns: int = 1):
    """The macro combining split-KV's parts (`attention_combine_kernel`'s formula) of row ``i`` of
    head ``bh`` at ``columns`` columns ``t, t + 32, ...`` into ``O`` (`_combined_shape`) and, with
    ``lse``, column 0's thread its ``LSE`` (``top`` and ``acc``: local float32 buffers of 1 and
    ``columns + 1``). A row's weights are computed once for all its columns; with more than one
    (`attention_kernel`'s ``combine``: the last split combines after its own part, so its latency
    is the launch's) the splits' loops are unrolled, each loop's loads in flight together. Each
    column's sums are the one-column form's, operation for operation."""
    loop = T.unroll if columns > 1 else T.serial

    @T.macro
    def combine_part(OP, LP, O, LSE, top, acc, bh, i, t):
        top[0] = LOWEST  # (finite: splits of no key, -inf, weigh exp(-inf) = 0)
        for sp in loop(splits):
            top[0] = T.max(top[0], LP[sp, bh, i])
        for c in list(range(columns + 1)):
            acc[c] = 0.0
        for sp in loop(splits):
            w = T.exp(LP[sp, bh, i] - top[0])
            acc[0] = acc[0] + w
            for c in list(range(columns)):
                acc[1 + c] = acc[1 + c] + w * OP[sp, bh, i, t + 32 * c]
        for c in list(range(columns)):
            if heads and group > 1:
                O[bh // heads, i // group, bh % heads * group + i % group, t + 32 * c] = T.cast(acc[1 + c] / T.max(acc[0], TINY), dtype)
            elif heads:
                O[bh // heads, i, bh % heads, t + 32 * c] = T.cast(acc[1 + c] / T.max(acc[0], TINY), dtype)
            else:
                O[bh, i, t + 32 * c] = T.cast(acc[1 + c] / T.max(acc[0], TINY), dtype)
        if lse:
            if t == 0:
                LSE[bh, i] = top[0] + T.log(acc[0])

    return combine_part


def split_count(ctas: int, kv_tiles: int, sms: int) -> int:
    """Split-KV's parts for ``ctas`` CTAs over ``kv_tiles`` K/V tiles each on ``sms`` SMs: none
    where the CTAs fill half the GPU, else as many as one wave holds (a CTA an SM: a part more
    would start a second wave that leaves most SMs idle; at most 32, each part holding a tile at
    least: the count is made exact for whole parts)."""
    if sms == 0 or 2 * ctas >= sms or kv_tiles < 2:
        return 1
    want = min(kv_tiles, 32, sms // ctas)
    chunk = -(-kv_tiles // want)
    return -(-kv_tiles // chunk)


def lse_rows(seq_q: int) -> int:
    """The kernel's log-sum-exp rows per head: ``seq_q`` rounded up to whole query tiles of 128 or
    192 rows, whichever is more (every tile writes its rows; the op returns the first ``seq_q``)."""
    return max(-(-seq_q // bm) * bm for bm in (128, 192))


def _check(q, k, v, enable_gqa: bool, fp8: bool = False):
    """The operands' shapes and dtype: ``(batch, heads, seq_q, seq_k, kv_heads, d, dtype)``
    (``fp8``: float8_e4m3fn or float8_e5m2 operands)."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        if len(t.shape) != 4:
            raise ValueError(
                f"tirx.ops.scaled_dot_product_attention: {name} of shape {list(t.shape)}; expected [batch, heads, seq, head_dim]"
            )
    dtype = c.dtype_name(q)
    if dtype not in (c.FP8 if fp8 else ("bfloat16", "float16")):
        raise TypeError(
            f"tirx.ops.scaled_dot_product_attention: {dtype} query; the kernel takes bfloat16 or float16 (wgmma), "
            "or float8_e4m3fn / float8_e5m2 with q_descale, k_descale, v_descale"
        )
    for name, t in (("key", k), ("value", v)):
        if c.dtype_name(t) != dtype:
            raise TypeError(f"tirx.ops.scaled_dot_product_attention: {name} is {c.dtype_name(t)}, the query {dtype}: give all one dtype")
    (b, h, sq, d), (bk, hk, sk, dk) = q.shape, k.shape
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"tirx.ops.scaled_dot_product_attention: key {list(k.shape)} and value {list(v.shape)} differ")
    if bk != b or dk != d:
        raise ValueError(f"tirx.ops.scaled_dot_product_attention: query {list(q.shape)} and key {list(k.shape)}: batch and head_dim must agree")
    if hk != h and not (enable_gqa and hk and h % hk == 0):
        raise ValueError(
            f"tirx.ops.scaled_dot_product_attention: {h} query heads and {hk} key/value heads"
            + ("" if enable_gqa else " (grouped-query attention: pass enable_gqa=True)")
            + ("; the query heads must be a multiple of the key/value heads" if enable_gqa else "")
        )
    if d not in HEAD_DIMS:
        dims = ", ".join(map(str, HEAD_DIMS[:-1])) + f" or {HEAD_DIMS[-1]}"
        raise ValueError(
            f"tirx.ops.scaled_dot_product_attention: head_dim {d}; the kernel takes {dims} (pad the head dim with zeros: "
            "the scores and the output's padded columns are unchanged and zero)"
        )
    return b, h, sq, sk, hk, d, dtype


def _dense(t, order) -> bool:
    """Whether [batch, heads, seq, d] ``t`` is dense in the memory order ``order`` (dims, outermost
    first): (0, 1, 2, 3) contiguous, (0, 2, 1, 3) a transposed [batch, seq, heads, d] tensor.
    Strides of dims of one element do not matter."""
    want, step = [0] * 4, 1
    for dim in reversed(order):
        want[dim] = step
        step *= t.shape[dim]
    return all(n == 1 or st == w for st, w, n in zip(c.strides(t), want, t.shape))


def _swap(t):
    """Dims 1 and 2 swapped (a view)."""
    return t.transpose(1, 2) if c.is_torch(t) else np.swapaxes(t, 1, 2)


def _mask(attn_mask, b: int, h: int, sq: int, sk: int, dtype: str):
    """PyTorch's ``attn_mask`` (bool: True where a key is seen; or added to the scaled scores, of
    the query's dtype), broadcastable to [batch, heads, seq_q, seq_k], as the kernel takes it: its
    matrices (``mask_matrices``: one, per batch entry, per head, or both) contiguous, additive
    (a bool mask as 0 / -inf), and which of them each head reads."""
    shape = tuple(attn_mask.shape)
    full = (b, h, sq, sk)
    padded = (1,) * (4 - len(shape)) + shape
    if len(shape) > 4 or any(n not in (1, f) for n, f in zip(padded, full)):
        raise ValueError(
            f"tirx.ops.scaled_dot_product_attention: attn_mask of shape {list(shape)} does not broadcast to "
            f"[batch, heads, seq_q, seq_k] = {list(full)}"
        )
    kind = c.dtype_name(attn_mask)
    if kind not in ("bool", dtype):
        raise TypeError(f"tirx.ops.scaled_dot_product_attention: attn_mask is {kind}; give it the query's dtype ({dtype}) or bool")
    lead = padded[:2]
    kind_of = {(1, 1): "one", (b, 1): "batch", (1, h): "heads", (b, h): "all"}
    mode = kind_of.get(lead, "all")  # (b or h of one: the first match)
    # (a mask broadcast over the queries or the keys, e.g. a key-padding mask [b, 1, 1, seq_k]:
    # its matrices made whole, as the kernel reads them)
    m = attn_mask.reshape(padded)
    m = m.expand(padded[:2] + (sq, sk)) if c.is_torch(m) else np.broadcast_to(m, padded[:2] + (sq, sk))
    if kind == "bool":
        if c.is_torch(m):
            import torch

            m = torch.zeros(m.shape, dtype=getattr(torch, dtype), device=m.device).masked_fill(~m, float("-inf"))
        else:
            from ..runtime import numpy_dtype

            m = np.where(m, 0.0, -np.inf).astype(numpy_dtype(dtype))
    return c.contiguous(m).reshape(-1, sq, sk), mode


def _gpu_splits(q, bhs: int, rows: int, sk: int) -> int:
    """`split_count` for ``bhs`` heads of ``rows`` query rows over ``sk`` keys, on the GPU holding
    ``q`` (1 in the simulator), counting the tiles of the widest configurations (128)."""
    return split_count(bhs * -(-rows // 128), -(-sk // 128), c.gpu_sms(q))


# Split-KV's work buffers (`_common.scratch`, per stream): the parts' outputs and their LSE, and
# the combine's tickets in one launch (made 0 once; every launch leaves them 0).
_SPLIT_PARTS: dict = {}
_SPLIT_LSE: dict = {}
_SPLIT_TICKETS: dict = {}


def _launcher(
    kernel, splits: int, bhs: int, rows: int, d: int, dtype: str, return_lse: bool, heads: int, group: int = 1, combined: bool = False, dependent: bool = False
):
    """``launch(inputs, out, lse, scalars=())``: ``kernel(*inputs, out, lse, *scalars)``; with
    ``splits``, each split's O / l and log-sum-exp into float32 parts first, combined into
    ``out`` and ``lse`` by the kernel itself where it was made with ``combine`` (``combined``; its
    last buffer the tickets), else by `attention_combine_kernel` launched after it (``heads``: ``out``
    is seq-major; ``group``: of packed query heads, `attention_kernel`'s ``q_group``). The
    kernels' launchers are looked up here, once: a plan's calls only allocate the parts and
    launch (their tensors fixed by the plan's signature: `Kernel.launcher`'s ``fixed_signature``).
    ``dependent``: the combine kernel is the split-KV kernel's programmatic dependent
    (`attention_combine_kernel`'s ``dependent``; the split-KV kernel made with
    ``launch_dependents``)."""
    main = kernel.launcher(fixed_signature=True)
    if splits == 1:
        return lambda inputs, out, lse, scalars=(): main(*inputs, out, lse, *scalars)
    parts_shape, part_lse_shape = (splits, bhs, rows, d), (splits, bhs, lse_rows(rows))
    if combined:
        tickets = (bhs * ticket_blocks(rows),)

        def launch_combined(inputs, out, lse, scalars=()):
            parts = c.scratch(out, parts_shape, "float32", _SPLIT_PARTS)
            part_lse = c.scratch(out, part_lse_shape, "float32", _SPLIT_LSE)
            main(*inputs, parts, part_lse, out, lse, c.scratch(out, tickets, "int32", _SPLIT_TICKETS, fill=0), *scalars)

        return launch_combined
    combine = attention_combine_kernel(
        splits=splits, bhs=bhs, seq_q=rows, d=d, dtype=dtype, lse=bool(return_lse), heads=heads, group=group, dependent=dependent
    ).launcher(fixed_signature=True)

    def launch(inputs, out, lse, scalars=()):
        parts = c.scratch(out, parts_shape, "float32", _SPLIT_PARTS)
        part_lse = c.scratch(out, part_lse_shape, "float32", _SPLIT_LSE)
        main(*inputs, parts, part_lse, *scalars)
        combine(parts, part_lse, out, lse)

    return launch


def _launch(kernel, inputs, out, lse, splits: int, bhs: int, rows: int, d: int, dtype: str, return_lse: bool, heads: int, scalars=(), group: int = 1):
    """One call's `_launcher`."""
    _launcher(kernel, splits, bhs, rows, d, dtype, return_lse, heads, group)(inputs, out, lse, scalars)


def _run(
    q, k, v, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, splits: Optional[int] = None, attn_mask=None, offset: int = 0
):
    if c.is_torch(q) and attn_mask is None:  # (through a plan per call signature, as matmul's)
        key = ("sdpa", bool(is_causal), scale, bool(enable_gqa), bool(return_lse), splits, offset)
        q, k, v = c.aligned((q, k, v))
        new = lambda: _new_plan(q, k, v, is_causal, scale, enable_gqa, return_lse, splits, offset)  # noqa: E731
        return c.signature_plan((q, k, v), key, new)(q, k, v)
    return _run_general(q, k, v, is_causal, scale, enable_gqa, return_lse, splits, attn_mask, offset)


def seq_major(*tensors) -> bool:
    """Whether [batch, heads, seq, d] ``tensors`` are all [batch, seq, heads, d] in memory (a
    projection's output transposed; in the backward also the forward's output and the gradient
    that reaches it), not all contiguous: the kernels read and write them in place, no copies."""
    return all(_dense(t, (0, 2, 1, 3)) for t in tensors) and not all(_dense(t, (0, 1, 2, 3)) for t in tensors)


def _layout_of(q, k, v, b: int, h: int, sq: int, hk: int, is_causal: bool, masked: bool):
    """``(seq_major, packed, rows, heads)``: [batch, seq, heads, d] tensors read and written in
    place (the output then has their memory order too, as PyTorch's flash backend returns it);
    grouped-query heads over contiguous tensors, not causal, as one block of ``group * seq_q``
    rows against their K/V head (K and V tiles loaded once per group, and short queries,
    decoding's, fill the 64-row tiles)."""
    major = seq_major(q, k, v)
    packed = hk != h and not is_causal and not major and not masked
    rows, heads = (sq * (h // hk), hk) if packed else (sq, h)
    return major, packed, rows, heads


def _kernel_args_of(q, k, v, seq_major: bool, packed: bool, b: int, h: int, hk: int, sq: int, rows: int, d: int):
    """``args(q, k, v, out)``: Q, K, V and O as the kernel takes them, for operands of these
    shapes and strides (a plan's, decided once): views where they are dense already, else
    copies."""
    if seq_major:
        return lambda q, k, v, out: (_swap(q), _swap(k), _swap(v), _swap(out))
    vq, vk, vv = (_heads_rows(t, d) for t in (q, k, v))
    if packed:  # (a K/V head's query heads as one block of rows)
        return lambda q, k, v, out: (vq(q).reshape(b * hk, rows, d), vk(k), vv(v), out.reshape(b * hk, rows, d))
    return lambda q, k, v, out: (vq(q), vk(k), vv(v), out.reshape(b * h, sq, d))


def _heads_rows(t, d: int):
    """How tensors like [batch, heads, seq, d] ``t`` are read as [batch * heads, seq, d]: a view
    where ``t`` is contiguous, else a copy."""
    seq = t.shape[2]
    if not c.is_torch(t):
        return lambda x: np.ascontiguousarray(x).reshape(-1, seq, d)
    if t.is_contiguous():
        return lambda x: x.reshape(-1, seq, d)
    return lambda x: x.contiguous().reshape(-1, seq, d)


def _new_plan(q, k, v, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, splits: Optional[int], offset: int):
    """`_run`'s checks and choices for tensors like ``q``, ``k``, ``v``, made once: ``run(q, k,
    v)`` allocates the outputs and launches."""
    import torch

    b, h, sq, sk, hk, d, dtype = _check(q, k, v, enable_gqa)
    if b * h * sq == 0 or sk == 0:
        return lambda q, k, v: _run_general(q, k, v, is_causal, scale, enable_gqa, return_lse, splits, None, offset)
    scale_ = 1.0 / math.sqrt(d) if scale is None else float(scale)
    seq_major, packed, rows, heads = _layout_of(q, k, v, b, h, sq, hk, is_causal, False)
    n_splits = _gpu_splits(q, b * heads, rows, sk) if splits is None else splits
    kernel = _kernel_for(q, b, hk, heads, rows, sk, d, dtype, is_causal, scale_, return_lse, seq_major, n_splits, "", offset)
    launch = _launcher(kernel, n_splits, b * heads, rows, d, dtype, return_lse, heads if seq_major else 0)
    lse_shape = (b * heads, lse_rows(rows))
    # (Not returned: no kernel writes the log-sum-exps — a split's go to its parts — so one
    # buffer serves every call; allocating it per call took as long as the rest of a small
    # call's host time.)
    unused_lse = None if return_lse else q.new_empty(lse_shape, dtype=torch.float32)
    args_of = _kernel_args_of(q, k, v, seq_major, packed, b, h, hk, sq, rows, d)

    def run(q, k, v):
        out = _swap(q.new_empty((b, sq, h, d))) if seq_major else q.new_empty((b, h, sq, d))
        lse = q.new_empty(lse_shape, dtype=torch.float32) if unused_lse is None else unused_lse
        args = args_of(q, k, v, out)
        launch(args[:3], args[3], lse)
        return (out, lse[:, :rows].contiguous().reshape(b, h, sq)) if return_lse else out

    return run


def _kernel_for(q, b, hk, heads, rows, sk, d, dtype, is_causal, scale, return_lse, seq_major, splits, mode, offset):
    """The tuned `attention_kernel` of a call (``heads`` of ``rows`` query rows each, as
    `_layout_of` packs them)."""
    return attention_kernel(
        heads=heads,
        kv_heads=hk,
        batch=b,
        seq_q=rows,
        seq_k=sk,
        d=d,
        dtype=dtype,
        causal=bool(is_causal),
        scale=scale,
        lse=bool(return_lse),
        seq_major=seq_major,
        splits=splits,
        mask=mode,
        offset=offset if is_causal else 0,
        sms=c.gpu_sms(q),
    )


def _run_general(
    q, k, v, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, splits: Optional[int] = None, attn_mask=None, offset: int = 0
):
    b, h, sq, sk, hk, d, dtype = _check(q, k, v, enable_gqa)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    mask, mode = _mask(attn_mask, b, h, sq, sk, dtype) if attn_mask is not None else (None, "")
    if mask is not None and scale == 0:  # (the kernel adds the mask as M / scale to the unscaled scores)
        raise ValueError("tirx.ops.scaled_dot_product_attention: attn_mask with scale=0 is not supported: every key weighs alike there")
    seq_major, packed, rows, heads = _layout_of(q, k, v, b, h, sq, hk, is_causal, mask is not None)
    out = _swap(c.new_array(q, (b, sq, h, d))) if seq_major else c.new_array(q, (b, h, sq, d))
    if b * h * sq == 0 or sk == 0:  # (no key: PyTorch's output is 0)
        if b * h * sq:
            out[...] = 0
        lse = c.new_array(q, (b, h, sq), "float32", float("-inf"))
        return (out, lse) if return_lse else out
    lse = c.new_array(q, (b * heads, lse_rows(rows)), "float32")
    args = _kernel_args_of(q, k, v, seq_major, packed, b, h, hk, sq, rows, d)(q, k, v, out)
    if splits is None:  # split-KV where the query tiles leave most SMs idle (decoding), on a GPU
        splits = 1 if mask is not None else _gpu_splits(q, b * heads, rows, sk)
    kernel = _kernel_for(q, b, hk, heads, rows, sk, d, dtype, is_causal, scale, return_lse, seq_major, splits, mode, offset)
    inputs = args[:3] if mask is None else args[:3] + (mask,)
    _launch(kernel, inputs, args[3], lse, splits, b * heads, rows, d, dtype, return_lse, heads if seq_major else 0)
    if not return_lse:
        return out
    return out, c.contiguous(lse[:, :rows]).reshape(b, h, sq)


# V's transposition for FP8 (`fp8_values_kernel`): a CTA per block of this many keys of one K/V
# head, over this many threads; VT holds whole blocks (so TMA's boxes of a 128-byte swizzle atom
# of keys tile it).
VT_KEYS = 128
VT_THREADS = 256


def fp8_keys(seq_k: int) -> int:
    """VT's columns for ``seq_k`` keys: whole blocks of `VT_KEYS` (zeros past ``seq_k``)."""
    return -(-seq_k // VT_KEYS) * VT_KEYS


def fp8_values(v):
    """V ``[batch, kv_heads, seq_k, d]`` (FP8) as the FP8 kernel reads it: ``VT (batch * kv_heads,
    d, fp8_keys(seq_k))``, zero columns past seq_k, column c of each 16 holding key 8 (c // 2 % 2)
    + 2 (c // 4) + c % 2 of them (`fp8_p_layouts`: the keys as (2, 4, 2) with the first two axes
    swapped; a new array). NumPy's reference for `fp8_values_kernel`, which the op runs."""
    b, hk, sk, d = v.shape
    seq_kt = fp8_keys(sk)
    vp = c.new_array(v, (b * hk, seq_kt, d), fill=0)
    vp[:, :sk] = c.contiguous(v).reshape(b * hk, sk, d)
    vp = vp.reshape(b * hk, seq_kt // 16, 2, 4, 2, d)
    vp = vp.transpose(2, 3) if c.is_torch(vp) else np.swapaxes(vp, 2, 3)
    return c.contiguous(_swap(c.contiguous(vp).reshape(b * hk, seq_kt, d)))


@autotune(configs=[{}], key=["bhk", "seq_k", "d", "heads"])
def fp8_values_kernel(bhk: int, seq_k: int, d: int, heads: int = 0):
    """`fp8_values` on the device: ``VT[bh, dd, c]`` = ``V[bh, key(c), dd]`` for V ``(bhk, seq_k,
    d)`` (``heads``: V seq-major, ``(bhk / heads, seq_k, heads, d)``, read in place) and VT ``(bhk,
    d, fp8_keys(seq_k))`` of either FP8 type given as int32 words of 4 bytes (zero past
    ``seq_k``), ``key(c)`` the permutation of each 16 columns `fp8_p_layouts` asks for.
    A CTA per block of `VT_KEYS` keys of one head: its rows copied into shared memory by 16-byte
    vectors (rows past ``seq_k`` zero) in rows of an odd count of words, so that a warp reading
    one word column of rows 16 apart hits distinct banks; then each lane reads its word column
    (V's 4 columns) in the 16 rows of a chunk of keys and builds the chunk's 16 permuted bytes of
    each of those columns from them (byte selections of 32-bit words: PRMT), storing them as
    16-byte vectors. A warp's lanes take 16 (8 where the head dim is not a multiple of 64) word
    columns in 2 (4) neighbouring chunks, so a store writes 32 (64) whole bytes, whole sectors,
    of each of its VT rows. (The design before it gathered byte by byte, a warp's store 16 bytes
    into each of 32 rows: 1.8 times as long on an H200 over 64 heads of 4k keys and 16 of 16k,
    d = 64 17.4-18.0 us against 9.6-9.8, d = 128 37.8-38.7 against 20.6-20.7, d = 256 76.7-79.7
    against 43.0-43.1.) ``d`` a multiple of 32."""
    w_row = d // 4  # V's words a key
    blocks = fp8_keys(seq_k) // VT_KEYS
    fill_rounds = VT_KEYS * w_row // 4 // VT_THREADS  # a thread's 16-byte vectors of the block
    cols = 16 if w_row % 16 == 0 else 8  # a warp task's word columns
    chunks = 32 // cols  # its chunks of 16 keys
    groups = VT_KEYS // (16 * chunks)  # its blocks' tasks a column group
    warps = VT_THREADS // 32
    units = groups * (w_row // cols)  # the block's warp tasks
    rounds = -(-units // warps)

    @T.macro
    def task(u, lane, bh, k0, tile, x, o, VT):
        # warp task u: word columns w (V's columns 4 w .. 4 w + 3) of its group, the lane's
        # chunk of 16 keys from c0
        w = u // groups * cols + lane % cols
        c0 = (u % groups * chunks + lane // cols) * 16
        for i in T.unroll(16):
            x[i] = T.cast(tile[c0 + i, w], "uint32")
        for j in T.unroll(4):
            # column 4 m .. 4 m + 3 of the chunk: keys 2 m, 2 m + 1, 2 m + 8, 2 m + 9
            for m in T.unroll(4):
                o[m] = T.cast(
                    (x[2 * m] >> T.uint32(8 * j) & T.uint32(255))
                    | (x[2 * m + 1] >> T.uint32(8 * j) & T.uint32(255)) << T.uint32(8)
                    | (x[2 * m + 8] >> T.uint32(8 * j) & T.uint32(255)) << T.uint32(16)
                    | (x[2 * m + 9] >> T.uint32(8 * j) & T.uint32(255)) << T.uint32(24),
                    "int32",
                )
            Tx.thread.copy(VT[bh, 4 * w + j, (k0 + c0) // 4 : (k0 + c0) // 4 + 4], o[0:4])

    @T.prim_func
    def fp8_values_t(V_ptr: T.handle, VT_ptr: T.handle):
        V = T.match_buffer(V_ptr, (bhk // heads, seq_k, heads, w_row) if heads else (bhk, seq_k, w_row), "int32")
        VT = T.match_buffer(VT_ptr, (bhk, d, blocks * VT_KEYS // 4), "int32")
        T.device_entry()
        bx = T.cta_id([bhk * blocks])
        warp = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([VT_THREADS])
        bh = bx // blocks
        k0 = bx % blocks * VT_KEYS
        tile = T.alloc_buffer((VT_KEYS, w_row + 1), "int32", scope="shared")
        vec = T.alloc_buffer((4,), "int32", scope="local")
        x = T.alloc_buffer((16,), "uint32", scope="local")
        o = T.alloc_buffer((4,), "int32", scope="local")
        for r in T.unroll(fill_rounds):  # (16-byte loads; rows of an odd count of words take 4-byte stores)
            row = (r * VT_THREADS + tid) // (w_row // 4)
            c4 = (r * VT_THREADS + tid) % (w_row // 4) * 4
            if heads:
                Tx.thread.copy(vec[0:4], V[bh // heads, k0 + row, bh % heads, c4 : c4 + 4], clip=True, other=0)
            else:
                Tx.thread.copy(vec[0:4], V[bh, k0 + row, c4 : c4 + 4], clip=True, other=0)
            Tx.thread.copy(tile[row, c4 : c4 + 4], vec[0:4])
        T.cuda.cta_sync()
        for r in list(range(rounds)):  # (unrolled; a last round of fewer tasks than warps: the first ones)
            if (r + 1) * warps <= units:
                task(r * warps + warp, lane, bh, k0, tile, x, o, VT)
            elif warp < units - r * warps:
                task(r * warps + warp, lane, bh, k0, tile, x, o, VT)

    return fp8_values_t


def _fp8_values_on_device(v):
    """`fp8_values` by `fp8_values_kernel` (a new array beside ``v``; the simulator's for NumPy
    arrays), V read in place where it is dense, seq-major too."""
    b, hk, sk, d = v.shape
    vt = c.new_array(v, (b * hk, d, fp8_keys(sk)))
    major = seq_major(v)
    values = fp8_values_kernel(bhk=b * hk, seq_k=sk, d=d, heads=hk if major else 0)
    values(_v_words(v, major), vt.view(_word(v)))
    return vt


def _word(x):
    """The 32-bit word type of ``x``'s kind (torch or NumPy)."""
    if c.is_torch(x):
        import torch

        return torch.int32
    return np.int32


def _v_words(v, major: bool):
    """FP8 ``v`` [batch, kv_heads, seq, d] as `fp8_values_kernel` reads it: int32 words of
    ``(batch, seq, kv_heads, d / 4)`` (``major``: seq-major, read in place) or ``(batch *
    kv_heads, seq, d / 4)``. (A CPU tensor's bytes from an offset that is not a word's are copied
    first, as `c.contiguous` copies a CUDA tensor's not on 16 bytes.)"""
    b, hk, sk, d = v.shape
    x = c.contiguous(_swap(v) if major else v)
    if c.is_torch(x) and x.storage_offset() % 4:
        x = x.clone()
    return x.reshape(b, sk, hk, d).view(_word(v)) if major else x.reshape(b * hk, sk, d).view(_word(v))


def _is_number(x) -> bool:
    return x is None or isinstance(x, (int, float, np.integer, np.floating))


def _descales(q, descales, b: int, hk: int):
    """``DS (batch * kv_heads, 2)`` float32 for the FP8 kernel: Q's descale times K's, and V's, of
    each K/V head, from numbers or arrays / tensors of shape (), (1,) or (batch, kv_heads)
    (FlashAttention-3's), broadcast; no device synchronisation."""
    parts = []
    for x, name in zip(descales, ("q_descale", "k_descale", "v_descale")):
        if _is_number(x):
            parts.append(1.0 if x is None else float(x))
            continue
        shape = tuple(x.shape)
        if shape not in ((), (1,), (b, hk)):
            raise ValueError(f"tirx.ops.scaled_dot_product_attention: {name} of shape {list(shape)}; a number, one value, or (batch, kv_heads) = ({b}, {hk})")
        if c.is_torch(q) and (not c.is_torch(x) or x.device != q.device):
            raise ValueError(f"tirx.ops.scaled_dot_product_attention: {name} must be a tensor on the query's device ({q.device})")
        parts.append(x.float().reshape(-1) if c.is_torch(x) else np.asarray(x, np.float32).reshape(-1))
    qk = parts[0] * parts[1]
    ds = c.new_array(q, (b * hk, 2), "float32")
    ds[:, 0], ds[:, 1] = qk, parts[2]
    return ds


# `_constant_descales`' buffers, a `scratch` role per pair of values (at most `DESCALE_PAIRS` pairs).
_DESCALE_PAIRS: dict = {}
DESCALE_PAIRS = 16


def _constant_descales(q, qk: float, vd: float, rows: int):
    """`_descales` of numbers in an FP8 plan's eager calls: ``rows`` rows of ``(qk, vd)`` beside
    ``q``, kept per stream as a `scratch` buffer that kernels only read (its two fills launched
    when made, not each call; never while torch.compile traces, whose tensors are not kept)."""
    if len(_DESCALE_PAIRS) >= DESCALE_PAIRS and (qk, vd) not in _DESCALE_PAIRS:
        _DESCALE_PAIRS.clear()

    def pairs(flat):
        flat.reshape(-1, 2)[:, 0], flat.reshape(-1, 2)[:, 1] = qk, vd

    return c.scratch(q, (rows, 2), "float32", _DESCALE_PAIRS.setdefault((qk, vd), {}), init=pairs)


# V's transpositions of the FP8 plans' calls (`scratch`: written by one launch, read by the next)
_FP8_VT: dict = {}


def _run_fp8_planned(q, k, v, descales, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, offset: int):
    """`_run_fp8` of torch tensors through a plan per call signature (as `_run`'s): the checks,
    the kernels' look-ups and layouts decided once; each call allocates O, transposes V into a
    per-stream work buffer and launches. Descale tensors are part of the signature; numbers are
    not (their values may change every call)."""
    numbers = tuple(map(_is_number, descales))
    tensors = tuple(x for x, n in zip(descales, numbers) if not n)
    if not all(map(c.is_torch, tensors)):  # (`_descales` says what is wrong)
        checked = _check(q, k, v, enable_gqa, fp8=True)
        return _run_fp8(q, k, v, is_causal, scale, enable_gqa, return_lse, offset, _descales(q, descales, checked[0], checked[4]), checked)
    q, k, v = c.aligned((q, k, v))
    key = ("sdpa_fp8", bool(is_causal), scale, bool(enable_gqa), bool(return_lse), offset, numbers)
    new = lambda: _new_fp8_plan(q, k, v, descales, is_causal, scale, enable_gqa, return_lse, offset)  # noqa: E731
    return c.signature_plan((q, k, v, *tensors), key, new)(q, k, v, descales)


def _new_fp8_plan(q, k, v, descales, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, offset: int):
    """`_run_fp8_planned`'s plan for tensors like these: ``run(q, k, v, descales)``."""
    import torch

    checked = _check(q, k, v, enable_gqa, fp8=True)
    b, h, sq, sk, hk, d, dtype = checked
    _descales(q, descales, b, hk)  # (its checks, once: the signature fixes the tensors' shapes and devices)
    if b * h * sq == 0 or sk == 0:
        return lambda q, k, v, descales: _run_fp8(q, k, v, is_causal, scale, enable_gqa, return_lse, offset, _descales(q, descales, b, hk), checked)
    major, v_major = seq_major(q, k), seq_major(v)
    kernel, splits = _fp8_kernel(q, checked, major, is_causal, scale, return_lse, offset)
    launch = _launcher(kernel, splits, b * h, sq, d, "bfloat16", return_lse, 0)
    values = fp8_values_kernel(bhk=b * hk, seq_k=sk, d=d, heads=hk if v_major else 0).launcher(fixed_signature=True)
    q_rows, k_rows = (_swap if major else _heads_rows(t, d) for t in (q, k))
    lse_shape, vt_shape = (b * h, lse_rows(sq)), (b * hk, d, fp8_keys(sk))
    unused_lse = None if return_lse else q.new_empty(lse_shape, dtype=torch.float32)  # (written by no kernel: as `_new_plan`'s)

    numbers = all(map(_is_number, descales))

    def run(q, k, v, descales):
        if numbers:  # (the one constant buffer of these values)
            qd, kd, vd = (1.0 if x is None else float(x) for x in descales)
            ds = _constant_descales(q, qd * kd, vd, b * hk)
        else:
            ds = _descales(q, descales, b, hk)
        out = q.new_empty((b, h, sq, d), dtype=torch.bfloat16)
        lse = q.new_empty(lse_shape, dtype=torch.float32) if unused_lse is None else unused_lse
        vt = c.scratch(v, vt_shape, dtype, _FP8_VT)
        values(_v_words(v, v_major), vt.view(torch.int32))
        launch((q_rows(q), k_rows(k), vt, ds), out.reshape(b * h, sq, d), lse)
        return (out, c.contiguous(lse[:, :sq]).reshape(b, h, sq)) if return_lse else out

    return run


def _fp8_kernel(q, checked, major: bool, is_causal: bool, scale: Optional[float], return_lse: bool, offset: int):
    """``(kernel, splits)``: the tuned FP8 `attention_kernel` of a call (``checked``: `_check`'s
    result; ``major``: Q and K seq-major) and its split-KV count on ``q``'s GPU."""
    b, h, sq, sk, hk, d, dtype = checked
    splits = _gpu_splits(q, b * h, sq, sk)
    kernel = attention_kernel(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=bool(is_causal),
        scale=1.0 / math.sqrt(d) if scale is None else float(scale), lse=bool(return_lse), seq_major=major, splits=splits,
        offset=offset if is_causal else 0, sms=c.gpu_sms(q), rescale_threshold=FP8_RESCALE_THRESHOLD,
    )
    return kernel, splits


def _run_fp8(q, k, v, is_causal: bool, scale: Optional[float], enable_gqa: bool, return_lse: bool, offset: int, ds, checked=None):
    """FP8 attention (`attention_kernel`'s FP8 design): the scores times ``scale`` and Q's and K's
    descales, P rounded to FP8 for P V, O times V's descale, bfloat16 out (``ds``: `_descales`;
    ``checked``: `_check`'s result where the caller has it)."""
    b, h, sq, sk, hk, d, dtype = checked or _check(q, k, v, enable_gqa, fp8=True)
    out = c.new_array(q, (b, h, sq, d), "bfloat16")
    if b * h * sq == 0 or sk == 0:
        if b * h * sq:
            out[...] = 0
        lse = c.new_array(q, (b, h, sq), "float32", float("-inf"))
        return (out, lse) if return_lse else out
    lse = c.new_array(q, (b * h, lse_rows(sq)), "float32")
    major = seq_major(q, k)  # (read in place, as FlashAttention-3 reads them; O is written (batch * heads, seq, d))
    qs, ks = (_swap(t) if major else c.contiguous(t).reshape(-1, t.shape[2], d) for t in (q, k))
    kernel, splits = _fp8_kernel(q, (b, h, sq, sk, hk, d, dtype), major, is_causal, scale, return_lse, offset)
    vt = _fp8_values_on_device(v)
    _launch(kernel, (qs, ks, vt, ds), out.reshape(b * h, sq, d), lse, splits, b * h, sq, d, "bfloat16", return_lse, 0)
    return (out, c.contiguous(lse[:, :sq]).reshape(b, h, sq)) if return_lse else out


def varlen_attention(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, is_causal: bool = False, scale=None, return_lse: bool = False, max_seqlen_k=None
):
    """Attention over packed sequences, FlashAttention's ``flash_attn_varlen_func``: ``q``
    ``(total_q, heads, d)``, ``k`` and ``v`` ``(total_k, kv_heads, d)`` (grouped-query heads where
    ``kv_heads`` divides ``heads``), sequence b's queries rows ``cu_seqlens_q[b]`` to
    ``cu_seqlens_q[b + 1]`` (int32, non-decreasing, from 0), its keys likewise; ``max_seqlen_q``
    the longest query count. Causal on each sequence's lower-right diagonal (query i of n sees
    keys j <= i + m - n of m), as FlashAttention's. Returns ``out (total_q, heads, d)``, with
    ``return_lse`` also ``lse (heads, total_q)`` float32. A sequence with no key gives 0.
    Differentiable on torch tensors (`varlen_attention_backward`'s kernels) and
    traced by torch.compile (the registered op `torch.ops.tirx.varlen_attention`);
    ``max_seqlen_k`` the longest key count (computed from ``cu_seqlens_k`` if not given: a device
    synchronisation, and an error under torch.compile)."""
    if c.is_torch(q) and (c.compiling() or any(c.wants_grad(t) for t in (q, k, v))):  # (the registered op: its backward)
        if max_seqlen_k is None:
            if c.compiling():
                raise ValueError("tirx.ops.varlen_attention: pass max_seqlen_k under torch.compile (computing it reads cu_seqlens_k)")
            max_seqlen_k = int((cu_seqlens_k[1:] - cu_seqlens_k[:-1]).max()) if len(cu_seqlens_k) > 1 else 0
        op = register_varlen_torch_op()
        out, lse = op(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), bool(is_causal), None if scale is None else float(scale))
        return (out, lse) if return_lse else out
    out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, is_causal, scale, return_lse)
    return (out, c.contiguous(lse.T)) if return_lse else out  # (lse: FlashAttention's varlen layout (heads, total_q))


def register_varlen_torch_op():
    """`torch.ops.tirx.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k, is_causal, scale) -> (out, lse)` (lse (heads, total_q); registered on the first
    call), differentiable: `varlen_attention_backward`'s kernels (lse is not)."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            q: torch.Tensor,
            k: torch.Tensor,
            v: torch.Tensor,
            cu_seqlens_q: torch.Tensor,
            cu_seqlens_k: torch.Tensor,
            max_seqlen_q: int,
            max_seqlen_k: int,
            is_causal: bool,
            scale: Optional[float],
        ) -> Tuple[torch.Tensor, torch.Tensor]:
            out, lse = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, is_causal, scale, True)
            return out, lse.T.contiguous()

        def fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, scale):
            return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)

        return schema, fake

    def autograd(op):
        from .attention_backward import register_varlen_backward_op

        backward_op = register_varlen_backward_op()

        def setup_context(ctx, inputs, output):
            q, k, v, cuq, cuk, max_q, max_k, is_causal, scale = inputs
            ctx.save_for_backward(q, k, v, output[0], output[1], cuq, cuk)
            ctx.mark_non_differentiable(output[1])
            ctx.flags = (max_q, max_k, is_causal, scale)

        def backward(ctx, dout, _dlse):
            q, k, v, out, lse, cuq, cuk = ctx.saved_tensors
            dq, dk, dv = backward_op(dout.contiguous(), q, k, v, out, lse, cuq, cuk, *ctx.flags)
            return dq, dk, dv, None, None, None, None, None, None

        op.register_autograd(backward, setup_context=setup_context)

    return c.torch_op("varlen_attention", parts, autograd)


def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, is_causal: bool, scale, return_lse: bool):
    """`varlen_attention`'s work: ``(out, lse)``, ``lse (total_q, heads)`` (filled with ``return_lse``)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) != 3:
            raise ValueError(f"tirx.ops.varlen_attention: {name} of shape {list(t.shape)}; expected (total, heads, head_dim)")
    dtype = c.dtype_name(q)
    (tq, h, d), (tk, hk, dk) = q.shape, k.shape
    if dtype not in ("bfloat16", "float16") or c.dtype_name(k) != dtype or c.dtype_name(v) != dtype:
        raise TypeError(f"tirx.ops.varlen_attention: q, k, v of {dtype}, {c.dtype_name(k)}, {c.dtype_name(v)}; give all bfloat16 or all float16")
    if tuple(v.shape) != tuple(k.shape) or dk != d or hk == 0 or h % hk:
        raise ValueError(
            f"tirx.ops.varlen_attention: q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: k and v alike, one head_dim, "
            "the query heads a multiple of the key/value heads"
        )
    if d not in HEAD_DIMS:
        raise ValueError(f"tirx.ops.varlen_attention: head_dim {d}; the kernel takes one of {list(HEAD_DIMS)}")
    nb = len(cu_seqlens_q) - 1
    if nb < 0 or len(cu_seqlens_k) != nb + 1 or any(c.dtype_name(x) != "int32" for x in (cu_seqlens_q, cu_seqlens_k)):
        raise ValueError("tirx.ops.varlen_attention: cu_seqlens_q and cu_seqlens_k: int32, one entry per sequence and one more, alike")
    out = c.new_array(q, (tq, h, d))
    lse = c.new_array(q, (tq, h), "float32", float("-inf"))
    if nb and tq and max_seqlen_q > 0:
        if tk == 0:
            out[...] = 0
        else:
            kernel = attention_kernel(
                heads=h, kv_heads=hk, batch=0, seq_q=0, seq_k=0, d=d, dtype=dtype, causal=bool(is_causal),
                scale=1.0 / math.sqrt(d) if scale is None else float(scale), lse=bool(return_lse), seq_major=False, varlen=True,
            )
            qs, ks, vs = (c.contiguous(t) for t in (q, k, v))
            kernel(qs, ks, vs, c.contiguous(cu_seqlens_q), c.contiguous(cu_seqlens_k), out, lse, nb, int(max_seqlen_q), tq, tk)
    elif tq:
        out[...] = 0
    return out, lse


def _kvcache(q, k_cache, v_cache, cache_seqlens, is_causal: bool, scale, return_lse: bool, block_table):
    """`kvcache_attention`'s work: ``(out, lse)`` (``lse`` only with ``return_lse``, else None), on
    tensors through a plan per call signature (as `_run`'s: a decoding step's host time is most
    of its time)."""
    tensors = (q, k_cache, v_cache, cache_seqlens) + (() if block_table is None else (block_table,))
    on_torch = all(c.is_torch(t) for t in tensors)
    if on_torch:
        tensors = c.aligned(tensors)
    new = lambda: _kvcache_plan(*tensors[:4], is_causal, scale, return_lse, tensors[4] if len(tensors) > 4 else None)  # noqa: E731
    if on_torch:
        return c.signature_plan(tensors, ("kvcache", is_causal, scale, return_lse), new)(*tensors)
    return new()(*tensors)


def _kvcache_plan(q, k_cache, v_cache, cache_seqlens, is_causal: bool, scale, return_lse: bool, block_table):
    """`_kvcache`'s checks and choices for arrays like these, made once: ``run(q, k_cache,
    v_cache, cache_seqlens[, block_table])`` allocates the outputs and launches."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if len(t.shape) != 4:
            raise ValueError(f"tirx.ops.kvcache_attention: {name} of shape {list(t.shape)}; expected (batch, seq, heads, head_dim)")
    dtype = c.dtype_name(q)
    (b, sq, h, d), (bk, sk, hk, dk) = q.shape, k_cache.shape
    if dtype not in ("bfloat16", "float16") or c.dtype_name(k_cache) != dtype or c.dtype_name(v_cache) != dtype:
        raise TypeError("tirx.ops.kvcache_attention: q and the caches: all bfloat16 or all float16")
    page, n_pages = 0, 0
    if block_table is not None:  # paged: (n_pages, page, kv_heads, d) caches
        page, n_pages = sk, bk
        if len(block_table.shape) != 2 or block_table.shape[0] != b or c.dtype_name(block_table) != "int32":
            raise ValueError(f"tirx.ops.kvcache_attention: block_table of shape {list(block_table.shape)} ({c.dtype_name(block_table)}); expected int32 (batch={b}, max_pages)")
        if not (page in (8, 16, 32) or page % 64 == 0):
            raise ValueError(f"tirx.ops.kvcache_attention: pages of {page} rows (k_cache's dim 1); the kernel takes 8, 16, 32 or a multiple of 64")
        bk, sk = b, page * block_table.shape[1]
    if tuple(v_cache.shape) != tuple(k_cache.shape) or bk != b or dk != d or hk == 0 or h % hk:
        raise ValueError(
            f"tirx.ops.kvcache_attention: q {list(q.shape)}, k_cache {list(k_cache.shape)}, v_cache {list(v_cache.shape)}: the caches "
            "alike, one batch and head_dim, the query heads a multiple of the key/value heads"
        )
    if d not in HEAD_DIMS:
        raise ValueError(f"tirx.ops.kvcache_attention: head_dim {d}; the kernel takes one of {list(HEAD_DIMS)}")
    if tuple(cache_seqlens.shape) != (b,) or c.dtype_name(cache_seqlens) != "int32":
        raise ValueError(f"tirx.ops.kvcache_attention: cache_seqlens: int32 of shape [{b}] (one length per sequence)")
    if b * sq * h == 0 or sk == 0 or (page and n_pages == 0):

        def nothing(q, *caches):
            out = c.new_array(q, (b, sq, h, d))
            if b * sq * h:
                out[...] = 0
            return out, c.new_array(q, (b, h, sq), "float32", float("-inf")) if return_lse else None

        return nothing
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    # A K/V head's group of query heads is one block of rows, position-major (row r: query head r
    # % g of the group at position r // g): K and V read once per group, and decoding's few
    # queries fill the 64-row tiles. Q's rows are gathered so (a view where seq_q is 1); the
    # combine (split-KV) writes O's [batch, seq, heads, d] directly, else O's rows are scattered
    # back.
    g = h // hk
    rows = sq * g
    splits = _gpu_splits(q, b * hk, rows, sk)
    kernel = attention_kernel(
        heads=hk, kv_heads=hk, batch=b, seq_q=rows, seq_k=sk, d=d, dtype=dtype, causal=bool(is_causal), scale=scale,
        lse=bool(return_lse), seq_major=True, splits=splits, kv_lens=True, page=page, q_group=g,
    )
    launch = _launcher(kernel, splits, b * hk, rows, d, dtype, return_lse, hk, group=g)
    scalars = (n_pages,) if page else ()
    out_shape, lse_shape = (b, sq, h, d), (b * hk, lse_rows(rows))
    unused_lse = None if return_lse else c.new_array(q, lse_shape, "float32")  # (as `_new_plan`'s: no kernel writes it)

    def q_rows(q):
        # (one query a sequence: [batch, 1, heads, d] is already position-major, a view)
        if g == 1:
            return c.contiguous(q)
        if sq == 1:
            return c.contiguous(q).reshape(b * hk, rows, d)
        return c.contiguous(_swap(q.reshape(b, sq, hk, g, d))).reshape(b * hk, rows, d)

    def run(q, k_cache, v_cache, cache_seqlens, block_table=None):
        out = c.new_array(q, out_shape)
        caches = (k_cache, v_cache, cache_seqlens) + ((block_table,) if page else ())
        inputs = (q_rows(q),) + tuple(c.contiguous(t) for t in caches)
        lse = c.new_array(q, lse_shape, "float32") if unused_lse is None else unused_lse
        o_rows = out if splits > 1 or g == 1 else out.reshape(b * hk, rows, d) if sq == 1 else c.new_array(q, (b * hk, rows, d))
        launch(inputs, o_rows, lse, scalars)
        if splits == 1 and g > 1 and sq > 1:
            out.reshape(b, sq, hk, g, d)[...] = _swap(o_rows.reshape(b, hk, sq, g, d))
        if not return_lse:  # (not filled: the registered op makes its placeholder)
            return out, None
        return out, c.contiguous(_swap(c.contiguous(lse[:, :rows]).reshape(b * hk, sq, g))).reshape(b, h, sq)

    return run


def kvcache_attention(q, k_cache, v_cache, cache_seqlens, is_causal: bool = False, scale=None, return_lse: bool = False, block_table=None):
    """Decoding over KV caches, FlashAttention's ``flash_attn_with_kvcache`` (the caches read,
    not updated): ``q`` ``(batch, seq_q, heads, d)``, ``k_cache`` and ``v_cache`` ``(batch,
    seq_k, kv_heads, d)`` of which the first ``cache_seqlens[b]`` (int32) rows of sequence b are
    filled; causal on each sequence's lower-right diagonal (query i of n sees keys j <= i + len -
    n). Split-KV where the queries leave most SMs idle (the parts past a cache's length read
    nothing). The rows past a cache's length up to its last 128-row tile are read and weighted
    by 0: they must hold finite values (a cache from `torch.empty` may hold NaN patterns: zero it
    once). Returns ``out (batch, seq_q, heads, d)``, with ``return_lse`` also ``lse (batch, heads,
    seq_q)`` float32; a sequence with an empty cache gives 0.

    With ``block_table`` (int32 ``(batch, max_pages)``) the caches are paged, as vLLM and
    FlashAttention store them: ``k_cache`` and ``v_cache`` ``(n_pages, page_size, kv_heads, d)``,
    sequence b's rows ``[i page_size, (i + 1) page_size)`` in page ``block_table[b, i]``;
    ``page_size`` 8, 16, 32 or a multiple of 64. Entries past a sequence's pages are never read
    for keys it holds (an index outside the caches reads zeros)."""
    c.refuse_grad("kvcache_attention", q, k_cache, v_cache)  # (decoding)
    if c.is_torch(q) and c.compiling():  # (the registered op: torch.compile traces it)
        out, lse = register_kvcache_torch_op()(
            q, k_cache, v_cache, cache_seqlens, block_table, bool(is_causal), None if scale is None else float(scale), bool(return_lse)
        )
    else:
        out, lse = _kvcache(q, k_cache, v_cache, cache_seqlens, bool(is_causal), scale, bool(return_lse), block_table)
    return (out, lse) if return_lse else out


def register_kvcache_torch_op():
    """`torch.ops.tirx.kvcache_attention(q, k_cache, v_cache, cache_seqlens, block_table, is_causal,
    scale, return_lse) -> (out, lse)` (registered on the first call)."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            q: torch.Tensor,
            k_cache: torch.Tensor,
            v_cache: torch.Tensor,
            cache_seqlens: torch.Tensor,
            block_table: Optional[torch.Tensor],
            is_causal: bool,
            scale: Optional[float],
            return_lse: bool,
        ) -> Tuple[torch.Tensor, torch.Tensor]:
            out, lse = _kvcache(q, k_cache, v_cache, cache_seqlens, is_causal, scale, return_lse, block_table)
            b, sq, h, _ = q.shape
            return out, q.new_empty((b, h, sq), dtype=torch.float32) if lse is None else lse

        def fake(q, k_cache, v_cache, cache_seqlens, block_table, is_causal, scale, return_lse):
            b, sq, h, _ = q.shape
            return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty((b, h, sq), dtype=torch.float32)

        return schema, fake

    return c.torch_op("kvcache_attention", parts)


def register_torch_op():
    """`torch.ops.tirx.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, enable_gqa,
    offset) -> (out, lse)` (registered on the first call; ``offset``: the causal diagonal's,
    `attention_kernel`'s); its backward is `attention_backward`'s kernels (``lse`` and
    ``attn_mask`` are not differentiable)."""
    return c.torch_op("scaled_dot_product_attention", _torch_op_parts, _autograd)


def _autograd(op):
    from .attention_backward import _backward_op_parts, register_backward_op

    register_backward_op()  # (now, outside any trace: under torch.compile this backward calls the op)

    def setup_context(ctx, inputs, output):
        q, k, v, attn_mask, is_causal, scale, enable_gqa, offset = inputs
        ctx.save_for_backward(q, k, v, output[0], output[1], attn_mask)
        ctx.mark_non_differentiable(output[1])
        ctx.flags = (is_causal, scale, enable_gqa, offset)

    def backward(ctx, dout, _dlse):
        q, k, v, out, lse, attn_mask = ctx.saved_tensors
        backward_op = c.inner_op("scaled_dot_product_attention_backward", _backward_op_parts)
        dq, dk, dv = backward_op(dout, q, k, v, out, lse, *ctx.flags, attn_mask)  # (as it is: seq-major read in place)
        return dq, dk, dv, None, None, None, None, None  # (attn_mask: refused where it needs a gradient)

    op.register_autograd(backward, setup_context=setup_context)


def _torch_op_parts():
    import torch
    from typing import Tuple

    def schema(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        attn_mask: Optional[torch.Tensor],
        is_causal: bool,
        scale: Optional[float],
        enable_gqa: bool,
        offset: int,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        return _run(q, k, v, is_causal, scale, enable_gqa, True, attn_mask=attn_mask, offset=offset)

    def fake(q, k, v, attn_mask, is_causal, scale, enable_gqa, offset):
        # (the output in the memory order `_run` gives it: seq-major for seq-major operands)
        b, h, sq, _, _, d, _ = _check(q, k, v, enable_gqa)
        out = _swap(q.new_empty((b, sq, h, d))) if seq_major(q, k, v) else q.new_empty((b, h, sq, d))
        return out, q.new_empty((b, h, sq), dtype=torch.float32)

    return schema, fake


def register_fp8_torch_op():
    """`torch.ops.tirx.scaled_dot_product_attention_fp8(q, k, v, ds, is_causal, scale, enable_gqa,
    offset) -> (out, lse)`: FP8 attention (``ds``: the descales as `_descales` gives them), no
    backward (registered on the first call)."""
    return c.torch_op("scaled_dot_product_attention_fp8", _fp8_torch_op_parts)


def _fp8_torch_op_parts():
    import torch
    from typing import Tuple

    def schema(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ds: torch.Tensor, is_causal: bool, scale: Optional[float], enable_gqa: bool, offset: int
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        return _run_fp8(q, k, v, is_causal, scale, enable_gqa, True, offset, ds)

    def fake(q, k, v, ds, is_causal, scale, enable_gqa, offset):
        b, h, sq, _, _, d, _ = _check(q, k, v, enable_gqa, fp8=True)
        return q.new_empty((b, h, sq, d), dtype=torch.bfloat16), q.new_empty((b, h, sq), dtype=torch.float32)

    return schema, fake


def scaled_dot_product_attention(
    q,
    k,
    v,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale=None,
    enable_gqa: bool = False,
    return_lse: bool = False,
    *,
    q_descale=None,
    k_descale=None,
    v_descale=None,
):
    """PyTorch's `torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
    is_causal, scale, enable_gqa)` for [batch, heads, seq, head_dim] bf16/f16 tensors (or NumPy
    arrays: the simulator); a new array; with ``return_lse``, ``(out, lse)``, the rows' float32
    log-sum-exp of the scaled scores [batch, heads, seq_q]. ``is_causal``: PyTorch's top-left
    diagonal; ``attn_mask=torch.nn.attention.bias.causal_lower_right(seq_q, seq_k)`` (or
    ``causal_upper_left``): the causal kernel with that diagonal. ``attn_mask``: bool (True where a
    key is seen) or added to the scaled scores (the query's dtype), broadcastable to [batch,
    heads, seq_q, seq_k]; a row that sees no key is 0, as PyTorch's. Dropout is not supported
    (an error, not a silent fallback). Differentiable (`loss.backward()`, also under torch.compile):
    `scaled_dot_product_attention_backward`'s kernels, with the mask added as here (a mask that
    needs its own gradient is refused).

    FP8 (FlashAttention-3's): q, k, v float8_e4m3fn (or all float8_e5m2) with ``q_descale``,
    ``k_descale``, ``v_descale``: numbers, one-element tensors, or float32 (batch, kv_heads)
    tensors, one per K/V head (FlashAttention-3's; a query head takes its K/V head's): the
    attention of the dequantised inputs, ``softmax(q k^T q_descale k_descale scale) v v_descale``,
    with P rounded to the inputs' FP8 type for P V, 2^8 times larger (`P_OFFSET`; its error, a
    few parts in 100 of a row's weights, is FlashAttention-3's); bfloat16 out, contiguous; no
    attn_mask. [batch, seq, heads, d] tensors (transposed) are read in place, as contiguous ones;
    V is transposed (and its keys permuted) first (`fp8_values_kernel`, one pass over V on the
    device; of torch tensors into a work buffer kept per stream, `_run_fp8_planned`)."""
    offset = 0
    if type(attn_mask).__name__ == "CausalBias":  # torch.nn.attention.bias.causal_upper_left / causal_lower_right
        lower_right = attn_mask.variant.name == "LOWER_RIGHT"
        if (attn_mask.seq_len_q, attn_mask.seq_len_kv) != (q.shape[-2], k.shape[-2]):
            raise ValueError(
                f"tirx.ops.scaled_dot_product_attention: a causal bias of {attn_mask.seq_len_q} x {attn_mask.seq_len_kv} "
                f"for {q.shape[-2]} queries and {k.shape[-2]} keys"
            )
        offset = k.shape[-2] - q.shape[-2] if lower_right else 0
        attn_mask, is_causal = None, True
    elif attn_mask is not None and is_causal:
        raise ValueError("tirx.ops.scaled_dot_product_attention: attn_mask and is_causal together (PyTorch refuses them too): fold the causal mask into attn_mask")
    if dropout_p:
        raise NotImplementedError("tirx.ops.scaled_dot_product_attention: dropout_p must be 0 (dropout is not supported)")
    descales = (q_descale, k_descale, v_descale)
    if c.dtype_name(q) in c.FP8:
        if attn_mask is not None:
            raise ValueError("tirx.ops.scaled_dot_product_attention: FP8 inputs take no attn_mask (is_causal and causal biases only)")
        c.refuse_grad("scaled_dot_product_attention (FP8 inputs)", q, k, v)
        if c.is_torch(q) and not c.compiling():
            return _run_fp8_planned(q, k, v, descales, is_causal, scale, enable_gqa, return_lse, offset)
        args = (q, k, v) if c.is_torch(q) else tuple(np.asarray(t) for t in (q, k, v))
        checked = _check(*args, enable_gqa, fp8=True)
        ds = _descales(args[0], descales, checked[0], checked[4])
        if c.is_torch(q) and c.compiling():
            out, lse = register_fp8_torch_op()(q, k, v, ds, bool(is_causal), None if scale is None else float(scale), bool(enable_gqa), offset)
            return (out, lse) if return_lse else out
        return _run_fp8(*args, is_causal, scale, enable_gqa, return_lse, offset, ds, checked)
    if any(x is not None for x in descales):
        raise ValueError(f"tirx.ops.scaled_dot_product_attention: q_descale, k_descale, v_descale are for FP8 inputs, not {c.dtype_name(q)}")
    if attn_mask is not None and c.is_torch(attn_mask) and c.wants_grad(attn_mask):
        raise NotImplementedError("tirx.ops.scaled_dot_product_attention: the gradient of attn_mask is not computed; pass attn_mask.detach()")
    if c.is_torch(q):
        if c.compiling():
            op = register_torch_op()
            out, lse = op(q, k, v, attn_mask, bool(is_causal), None if scale is None else float(scale), bool(enable_gqa), offset)
            return (out, lse) if return_lse else out
        if any(c.wants_grad(t) for t in (q, k, v)):  # with its backward
            fn = c.differentiable("scaled_dot_product_attention", _torch_op_parts, _autograd)
            out, lse = fn(q, k, v, attn_mask, bool(is_causal), None if scale is None else float(scale), bool(enable_gqa), offset)
            return (out, lse) if return_lse else out
        return _run(q, k, v, is_causal, scale, enable_gqa, return_lse, attn_mask=attn_mask, offset=offset)
    m = None if attn_mask is None else np.asarray(attn_mask)
    return _run(np.asarray(q), np.asarray(k), np.asarray(v), is_causal, scale, enable_gqa, return_lse, attn_mask=m, offset=offset)
