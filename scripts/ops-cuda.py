"""Writes the CUDA of `tirx.ops` kernels that the bundled examples do not cover into DIR (for
scripts/ci-cuda.sh: compiled for sm_90a, SASS checked against scripts/sass-expect.txt):
attention's designs (ping-pong and overlapped schedules, head dim 256, varlen, KV caches, paged
caches, split-KV and its combine kernel, FP8, the backward's kernels), the matmul's fused
epilogues (a bias row and an activation), its FP8 form (scaled_mm) and the grouped GEMM.

    python scripts/ops-cuda.py DIR
"""

import importlib
import os
import sys

import tirx
from tirx.ops import attention as at
from tirx.ops import attention_backward as ab

# (the modules: `tirx.ops.matmul` and `tirx.ops.grouped_mm` the names are the functions)
mm = importlib.import_module("tirx.ops.matmul")
gmm = importlib.import_module("tirx.ops.grouped_mm")


def attention_cases():
    base = dict(heads=16, kv_heads=16, batch=2, dtype="bfloat16", scale=0.125, lse=True, seq_major=False)
    yield "ops_attention_pingpong", at.attention_kernel.factory(
        seq_q=8192, seq_k=8192, d=128, causal=True, consumers=2, bn=128, overlap=True, pingpong=True, **base
    )
    # the ping-pong loop rotated (`rotate`): bf16 d = 64 and FP8 d = 128 over 128 keys, no spills
    yield "ops_attention_rotated", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=64, causal=False, consumers=2, bn=128, overlap=True, pingpong=True, rotate=True, **base
    )
    yield "ops_attention_rotated_fp8", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=128, overlap=True, pingpong=True, rotate=True,
    )
    yield "ops_attention_overlap_d64", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=64, causal=False, consumers=2, bn=128, overlap=True, **base
    )
    yield "ops_attention_d256", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=256, causal=True, consumers=2, bn=64, overlap=True, pingpong=True, **base
    )
    yield "ops_attention_three", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=64, causal=False, consumers=3, bn=128, overlap=True, pingpong=True, **base
    )
    yield "ops_attention_wide", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=128, causal=False, consumers=2, bn=176, overlap=True, pingpong=True, **base
    )
    yield "ops_attention_persistent", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=128, causal=True, consumers=2, bn=128, overlap=True, pingpong=True, persistent=True, sms=132, **base
    )
    yield "ops_attention_d96", at.attention_kernel.factory(
        seq_q=4096, seq_k=4096, d=96, causal=False, consumers=2, bn=128, overlap=True, **base
    )
    yield "ops_attention_in_turn", at.attention_kernel.factory(seq_q=1000, seq_k=3000, d=128, causal=False, consumers=1, bn=128, **base)
    yield "ops_attention_split", at.attention_kernel.factory(
        seq_q=4, seq_k=32768, d=128, causal=False, consumers=1, bn=128, overlap=True, splits=8, **base
    )
    yield "ops_attention_varlen", at.attention_kernel.factory(
        heads=16, kv_heads=4, batch=0, seq_q=0, seq_k=0, d=128, dtype="bfloat16", causal=True, scale=0.125, lse=True,
        seq_major=False, consumers=2, bn=128, overlap=True, pingpong=True, varlen=True,
    )
    # (the op's decoding design: a K/V head's 4 query heads packed, here 2 positions of them, causal)
    yield "ops_attention_kvcache", at.attention_kernel.factory(
        heads=8, kv_heads=8, batch=8, seq_q=8, seq_k=8192, d=128, dtype="bfloat16", causal=True, scale=0.125, lse=False,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=8, kv_lens=True, q_group=4,
    )
    # ... with the combine in the same launch (the last split's ticket between two fences)
    yield "ops_attention_kvcache_combined", at.attention_kernel.factory(
        heads=8, kv_heads=8, batch=8, seq_q=8, seq_k=8192, d=128, dtype="bfloat16", causal=True, scale=0.125, lse=False,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=8, kv_lens=True, q_group=4, combine=True,
    )
    # ... the widest case: head dim 256 (8 columns a lane) over 32 splits, the combine's loops unrolled
    yield "ops_attention_kvcache_combined_d256", at.attention_kernel.factory(
        heads=8, kv_heads=8, batch=1, seq_q=4, seq_k=32768, d=256, dtype="bfloat16", causal=False, scale=0.0625, lse=True,
        seq_major=True, consumers=1, bn=64, overlap=True, splits=32, kv_lens=True, q_group=4, combine=True,
    )
    yield "ops_attention_paged", at.attention_kernel.factory(
        heads=8, kv_heads=8, batch=8, seq_q=4, seq_k=8192, d=128, dtype="bfloat16", causal=False, scale=0.125, lse=False,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=4, kv_lens=True, page=16, q_group=4,
    )
    yield "ops_attention_fp8", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=2, seq_q=4096, seq_k=4096, d=128, dtype="float8_e4m3fn", causal=True, scale=0.0884, lse=True,
        seq_major=False, consumers=2, bn=128, overlap=True, pingpong=True,
    )
    yield "ops_attention_fp8_wide", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=192, overlap=True,
    )
    yield "ops_attention_fp8_224", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=224, overlap=True, pingpong=True,
    )
    # V transposed by the producer warpgroup (ldmatrix.trans of byte pairs, PRMT, stmatrix), read as it is
    yield "ops_attention_fp8_transpose_v", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=224, overlap=True, pingpong=True, transpose_v=True,
    )
    yield "ops_attention_fp8_transpose_v_dynamic", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=8, seq_q=4096, seq_k=4096, d=128, dtype="float8_e4m3fn", causal=True, scale=0.0884, lse=False,
        seq_major=True, consumers=2, bn=192, overlap=True, pingpong=False, persistent=True, sms=132, dynamic=True, transpose_v=True,
    )
    # the last 16 keys' exponentials on the FMA pipe (`fma_columns`: exp2(..., pipe="fma"))
    yield "ops_attention_fp8_fma", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=224, overlap=True, pingpong=True, fma_columns=16,
    )
    # FlashAttention-4's lazy rescale: O's products skipped by a warp none of whose rows' max moved
    yield "ops_attention_fp8_lazy", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=False, scale=0.0884, lse=False,
        seq_major=False, consumers=2, bn=224, overlap=True, pingpong=True, rescale_threshold=2.0,
    )
    # head dim 256 over 128-key tiles, overlapped (FlashAttention-3's): fits only in 240 registers
    yield "ops_attention_fp8_d256", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=1, seq_q=16384, seq_k=16384, d=256, dtype="float8_e4m3fn", causal=False, scale=0.0625, lse=False,
        seq_major=False, consumers=2, bn=128, overlap=True, pingpong=True,
    )
    yield "ops_attention_fp8_values", at.fp8_values_kernel.factory(bhk=16, seq_k=16384, d=128)
    # seq-major FP8 (Q and K read in place; V's transposition reading seq-major V), causal over a
    # wide K/V tile (the tuner's choice at d = 128, 4k and 16k, on an H200)
    yield "ops_attention_fp8_causal_wide", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=2, seq_q=16384, seq_k=16384, d=128, dtype="float8_e4m3fn", causal=True, scale=0.0884, lse=False,
        seq_major=True, consumers=2, bn=192, overlap=True,
    )
    yield "ops_attention_fp8_values_major", at.fp8_values_kernel.factory(bhk=32, seq_k=16384, d=128, heads=16)
    # FP8 over persistent CTAs (the tuner's candidate: seq-major Q and K, causal, no ping-pong): Q_s
    # freed by the consumers once their last S is done, the next Q loaded during the last P V
    yield "ops_attention_fp8_persistent", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=2, seq_q=4096, seq_k=4096, d=128, dtype="float8_e4m3fn", causal=True, scale=0.0884, lse=False,
        seq_major=True, consumers=2, bn=192, overlap=True, pingpong=False, persistent=True, sms=132,
    )
    # ... taking its tiles from an atomic counter (`dynamic`, FlashAttention-3's scheduler), its O
    # through O_s by TMA stores (`tma_epilogue`)
    yield "ops_attention_fp8_dynamic", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=2, seq_q=4096, seq_k=4096, d=128, dtype="float8_e4m3fn", causal=True, scale=0.0884, lse=False,
        seq_major=True, consumers=2, bn=192, overlap=True, pingpong=False, persistent=True, sms=132, dynamic=True, tma_epilogue=True,
    )
    # head dim 256 with O through O_s (two K/V stages beside its 64 KB, not three)
    yield "ops_attention_fp8_d256_tma", at.attention_kernel.factory(
        heads=16, kv_heads=16, batch=2, seq_q=4096, seq_k=4096, d=256, dtype="float8_e4m3fn", causal=False, scale=0.0625, lse=False,
        seq_major=True, consumers=2, bn=128, overlap=True, pingpong=False, tma_epilogue=True,
    )
    bwd = dict(heads=16, kv_heads=4, batch=2, seq_q=4096, seq_k=4096, d=128, dtype="bfloat16", causal=True, scale=0.0884)
    yield "ops_attention_bwd_dq", ab.attention_dq_kernel.factory(**bwd)
    yield "ops_attention_bwd_dkv", ab.attention_dkv_kernel.factory(**bwd)
    yield "ops_attention_bwd_dq_d256", ab.attention_dq_kernel.factory(**{**bwd, "d": 256})
    yield "ops_attention_bwd_dq_varlen", ab.attention_dq_kernel.factory(**{**bwd, "batch": 0, "seq_q": 0, "seq_k": 0, "varlen": True})
    yield "ops_attention_bwd_dkv_varlen", ab.attention_dkv_kernel.factory(**{**bwd, "batch": 0, "seq_q": 0, "seq_k": 0, "varlen": True})
    yield "ops_attention_bwd_dkv_d256", ab.attention_dkv_kernel.factory(**{**bwd, "d": 256})
    # dQ, and dK and dV, through shared memory by TMA (the tuner's other epilogue)
    yield "ops_attention_bwd_dq_tma_epilogue", ab.attention_dq_kernel.factory(**bwd, tma_epilogue=True)
    yield "ops_attention_bwd_dq_tma_epilogue_d256", ab.attention_dq_kernel.factory(**{**bwd, "d": 256}, tma_epilogue=True)
    yield "ops_attention_bwd_dkv_tma_epilogue", ab.attention_dkv_kernel.factory(**bwd, tma_epilogue=True)
    yield "ops_attention_bwd_dkv_tma_epilogue_d256", ab.attention_dkv_kernel.factory(**{**bwd, "d": 256}, tma_epilogue=True)
    varlen_wide = {**bwd, "batch": 0, "seq_q": 0, "seq_k": 0, "varlen": True, "d": 256}
    yield "ops_attention_bwd_dq_varlen_d256", ab.attention_dq_kernel.factory(**varlen_wide)
    yield "ops_attention_bwd_dkv_varlen_d256", ab.attention_dkv_kernel.factory(**varlen_wide)
    yield "ops_attention_bwd_dkv_dq", ab.attention_dkv_kernel.factory(**bwd, reduce_dq=True)
    yield "ops_attention_bwd_dkv_dq_d64", ab.attention_dkv_kernel.factory(**{**bwd, "d": 64}, reduce_dq=True)
    yield "ops_attention_bwd_dkv_ws", ab.attention_dkv_kernel.factory(**bwd, reduce_dq=True, ws=True)
    yield "ops_attention_bwd_dkv_ws_d64", ab.attention_dkv_kernel.factory(**{**bwd, "d": 64}, reduce_dq=True, ws=True, dq_overlap=True)
    yield "ops_attention_bwd_dkv_ws_own_dq", ab.attention_dkv_kernel.factory(**bwd, reduce_dq=True, ws=True, dq_overlap=True, own_dq=True)
    yield "ops_attention_bwd_dkv_ws_d64_q128", ab.attention_dkv_kernel.factory(**{**bwd, "d": 64}, reduce_dq=True, ws=True, dq_overlap=True, q_rows=128)
    # dQ's parts in register order (FlashAttention-3's dQaccum), and their convert kernel
    yield "ops_attention_bwd_dkv_ws_flat_dq", ab.attention_dkv_kernel.factory(**bwd, reduce_dq=True, ws=True, dq_overlap=True, flat_dq=True)
    yield "ops_attention_bwd_dkv_ws_d64_q128_flat_dq", ab.attention_dkv_kernel.factory(
        **{**bwd, "d": 64}, reduce_dq=True, ws=True, dq_overlap=True, q_rows=128, flat_dq=True
    )
    yield "ops_attention_bwd_dq_convert_parts", ab.attention_dq_convert_kernel.factory(rows=32, seq_q=4096, d=128, dtype="bfloat16", scale=0.0884, part_cols=64)
    masked = {**bwd, "causal": False, "mask": "all"}
    yield "ops_attention_bwd_dq_masked", ab.attention_dq_kernel.factory(**masked)
    yield "ops_attention_bwd_dkv_dq_masked", ab.attention_dkv_kernel.factory(**masked, reduce_dq=True)
    # seq-major operands ([batch, seq, heads, d]: 4-D TMA boxes and register rows of one head)
    yield "ops_attention_bwd_dkv_ws_seq_major", ab.attention_dkv_kernel.factory(**bwd, reduce_dq=True, ws=True, seq_major=True)
    yield "ops_attention_bwd_dq_seq_major", ab.attention_dq_kernel.factory(**bwd, seq_major=True)
    yield "ops_attention_bwd_dkv_seq_major", ab.attention_dkv_kernel.factory(**bwd, seq_major=True)
    yield "ops_attention_bwd_dd_seq_major", ab.attention_dd_kernel.factory(rows=32, seq_q=4096, d=128, dtype="bfloat16", heads=16)
    yield "ops_attention_bwd_dq_convert_seq_major", ab.attention_dq_convert_kernel.factory(rows=32, seq_q=4096, d=128, dtype="bfloat16", scale=0.0884, heads=16)
    yield "ops_attention_bwd_dd", ab.attention_dd_kernel.factory(rows=32, seq_q=4096, d=128, dtype="bfloat16")
    yield "ops_attention_bwd_dq_convert", ab.attention_dq_convert_kernel.factory(rows=32, seq_q=4096, d=128, dtype="bfloat16", scale=0.0884)
    yield "ops_attention_combine", at.attention_combine_kernel.factory(splits=8, bhs=32, seq_q=4, d=128, dtype="bfloat16", lse=True)
    yield "ops_attention_combine_packed", at.attention_combine_kernel.factory(splits=8, bhs=64, seq_q=8, d=128, dtype="bfloat16", lse=True, heads=8, group=4)
    # ... as the split-KV kernel's programmatic dependent, that kernel letting it in as it starts
    yield "ops_attention_combine_dependent", at.attention_combine_kernel.factory(
        splits=8, bhs=64, seq_q=8, d=128, dtype="bfloat16", lse=False, heads=8, group=4, dependent=True
    )
    yield "ops_attention_kvcache_dependent", at.attention_kernel.factory(
        heads=8, kv_heads=8, batch=8, seq_q=8, seq_k=8192, d=128, dtype="bfloat16", causal=False, scale=0.125, lse=False,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=8, kv_lens=True, q_group=4, launch_dependents=True,
    )


def matmul_cases():
    yield "ops_matmul_fp8", mm.matmul_kernel.factory(
        m=4096, n=4096, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=256, out_dtype="bfloat16", fast_accum=True
    )
    yield "ops_matmul_fp8_promoted", mm.matmul_kernel.factory(
        m=4096, n=4096, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False
    )
    # promoted in 128 x 192 tiles (two consumers' accumulators and partials in 232 of their 240 registers)
    yield "ops_matmul_fp8_promoted_wide", mm.matmul_kernel.factory(
        m=8192, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=192, out_dtype="bfloat16", fast_accum=False, whole_epilogue=True
    )
    # ... and 128 x 208 (all 240 registers), row-wise scales, 13 stores of 16 columns each from its own buffer
    yield "ops_matmul_fp8_promoted_wide208", mm.matmul_kernel.factory(
        m=8192, n=4096, k=14336, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=208, out_dtype="bfloat16", fast_accum=False, scales="row", whole_epilogue=True
    )
    yield "ops_matmul_fp8_promoted3", mm.matmul_kernel.factory(
        m=4096, n=4096, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=3, bn=128, out_dtype="bfloat16", fast_accum=False
    )
    # block scales in 128 x 192 tiles: three runs of 64 columns, each its block's scale (the scales loaded before the wait)
    yield "ops_matmul_fp8_block192", mm.matmul_kernel.factory(
        m=8192, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=192, out_dtype="bfloat16", fast_accum=False, scales="block", whole_epilogue=True
    )
    yield "ops_matmul_fp8_block", mm.matmul_kernel.factory(
        m=4096, n=4096, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False, scales="block", bias="row"
    )
    # FP8 promoted with the next K step in flight during each add (one consumer: nothing else hides it)
    yield "ops_matmul_fp8_ahead", mm.matmul_kernel.factory(
        m=128, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=1, bn=128, out_dtype="bfloat16", fast_accum=False, promote_ahead=True
    )
    yield "ops_matmul_fp8_ahead_two", mm.matmul_kernel.factory(
        m=8192, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False, promote_ahead=True
    )
    yield "ops_matmul_fp8_ahead_block", mm.matmul_kernel.factory(
        m=128, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=1, bn=128, out_dtype="bfloat16", fast_accum=False, scales="block", promote_ahead=True
    )
    # split-K (skinny M): each part's float32 sums stored in its slice, then the finish kernel
    yield "ops_matmul_split", mm.matmul_kernel.factory(m=16, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=128, splits=4)
    yield "ops_matmul_split_fp8", mm.matmul_kernel.factory(
        m=128, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False, splits=2
    )
    # (With 4 parts and GELU's erf ptxas keeps one value on the stack: 4 bytes, explicit split_k only.)
    yield "ops_matmul_finish", mm.matmul_finish_kernel.factory(m=16, n=4096, out_dtype="bfloat16", splits=2, bias="row", activation="gelu")
    yield "ops_matmul_finish_rowwise", mm.matmul_finish_kernel.factory(m=16, n=4096, out_dtype="bfloat16", splits=2, scales="row", bias="row")
    # split-K in one launch over a cluster's CTAs (decode's default), and decode's skinny tiles
    yield "ops_matmul_cluster", mm.matmul_kernel.factory(m=16, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=128, cluster_k=2)
    # the same over several rounds of clusters (a design, not a candidate: measured slower)
    yield "ops_matmul_cluster_rounds", mm.matmul_kernel.factory(m=1000, n=3000, k=2048, dtype="bfloat16", ctas=132, consumers=2, bn=128, cluster_k=2)
    # stream-K (a design, not a candidate: measured slower): a cooperative grid's grid group
    # barrier met by each role in its branch; two consumers (the spills of a barrier after the
    # branches joined) and one (the wgmmas ptxas serialized around a uint2 copy of the accumulator)
    yield "ops_matmul_stream_k", mm.matmul_kernel.factory(m=100, n=12344, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=128, stream_k=True)
    yield "ops_matmul_stream_k_one", mm.matmul_kernel.factory(m=777, n=1232, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=128, stream_k=True)
    yield "ops_matmul_skinny", mm.matmul_kernel.factory(m=1, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=32)
    yield "ops_matmul_bn96", mm.matmul_kernel.factory(m=16, n=12288, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=96)
    yield "ops_matmul_multicast", mm.matmul_kernel.factory(m=100, n=12344, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=128, multicast=2)
    # B multicast (a pair of one tile column): half of a K step's rows a CTA, a box per swizzle atom
    yield "ops_matmul_multicast_b", mm.matmul_kernel.factory(m=1000, n=3000, k=2048, dtype="bfloat16", ctas=132, consumers=2, bn=192, multicast=2, multicast_b=True)
    # FP8 with torch._scaled_mm's row-wise scales (a row's and a column's, in the epilogue)
    yield "ops_matmul_fp8_rowwise", mm.matmul_kernel.factory(
        m=8192, n=8192, k=8192, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=256, out_dtype="bfloat16", fast_accum=True, scales="row"
    )
    # FP8 of two types (a backward pass's e5m2 gradient times e4m3 weights), promoted ahead, row-wise scales
    yield "ops_matmul_fp8_mixed", mm.matmul_kernel.factory(
        m=8192, n=8192, k=8192, dtype="float8_e5m2", b_dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, out_dtype="bfloat16",
        fast_accum=False, promote_ahead=True, scales="row",
    )
    # ping-pong: each consumer on 64 x 256 tiles of its own, the two taking turns (named barriers)
    yield "ops_matmul_pingpong", mm.matmul_kernel.factory(m=4096, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, pingpong=True)
    yield "ops_matmul_bn192", mm.matmul_kernel.factory(m=16, n=22016, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=192)
    yield "ops_matmul_fp8_skinny", mm.matmul_kernel.factory(
        m=1, n=4096, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=1, bn=32, out_dtype="bfloat16", fast_accum=False
    )
    for act in ("gelu", "silu"):
        yield f"ops_matmul_bias_{act}", mm.matmul_kernel.factory(
            m=4096, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, bias="row", activation=act
        )
    # addmm's input as a column (m x 1: each row's value), fused and after split-K (with alpha, beta
    # and GELU's erf together ptxas keeps 4 bytes on the stack in these 128-column halves)
    yield "ops_matmul_bias_column", mm.matmul_kernel.factory(
        m=4096, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, bias="column", alpha=0.5, beta=2.0, activation="silu"
    )
    yield "ops_matmul_finish_column", mm.matmul_finish_kernel.factory(m=16, n=4096, out_dtype="bfloat16", splits=2, bias="column")
    # transposed views read in place (the backward's dA = dC Bᵀ and dB = Aᵀ dC)
    yield "ops_matmul_bt", mm.matmul_kernel.factory(m=4096, n=2048, k=2048, dtype="bfloat16", ctas=132, consumers=2, bn=256, b_major="k")
    yield "ops_matmul_at", mm.matmul_kernel.factory(m=2048, n=2048, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, a_major="m")
    # float32 output (torch.mm(a, b, out_dtype=torch.float32)): the sums stored unrounded
    yield "ops_matmul_f32out", mm.matmul_kernel.factory(m=4096, n=4096, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, out_dtype="float32")
    # SwiGLU in one GEMM (gated_mm): nn.Linear's K-major weights, 2 x 128 columns; at decode, 192
    # (halves of 96, stored 32 columns at a time); a row-major B in 256 (halves of whole atoms)
    yield "ops_matmul_gated", mm.matmul_kernel.factory(
        m=4096, n=11008, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256, b_major="k", activation="silu", gated=True
    )
    yield "ops_matmul_gated_bn192", mm.matmul_kernel.factory(
        m=16, n=11008, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=192, b_major="k", activation="silu", gated=True
    )
    yield "ops_matmul_gated_rowmajor", mm.matmul_kernel.factory(
        m=4096, n=11008, k=4096, dtype="bfloat16", ctas=132, consumers=1, bn=256, b_major="n", activation="gelu", gated=True
    )
    # a mixture-of-experts layer's grouped GEMM (run-time rows, N not a whole number of tiles)
    yield "ops_grouped_mm", gmm.grouped_mm_kernel.factory(groups=8, n=1400, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=256)
    yield "ops_grouped_mm_kmajor", gmm.grouped_mm_kernel.factory(groups=8, n=1400, k=4096, dtype="bfloat16", ctas=132, consumers=2, bn=128, b_kmajor=True)
    yield "ops_grouped_wgrad", gmm.grouped_wgrad_kernel.factory(groups=8, k=4096, n=1400, dtype="bfloat16")
    yield "ops_grouped_mm_fp8", gmm.grouped_mm_kernel.factory(
        groups=8, n=1408, k=4096, dtype="float8_e4m3fn", ctas=132, consumers=2, bn=128, b_kmajor=True, out_dtype="bfloat16", fast_accum=False
    )


def rows_cases():
    nm = importlib.import_module("tirx.ops.norm")
    # issue 33's design under measurement: a 262k row over a group of 32 CTAs of a cooperative
    # grid, its slices' statistics through global memory at a grid group barrier
    yield "ops_layer_norm_grid", nm.layer_norm_grid_kernel(262144, "bfloat16", 512, 32, 4)
    yield "ops_layer_norm_grid_prefetch", nm.layer_norm_grid_kernel(262144, "bfloat16", 512, 32, 4, prefetch=True)
    # 32 warps a CTA, the weight's and bias's slices in registers: fits 64 registers without spills
    # because `_common.cta_moments` merges the warps' statistics across a warp's lanes
    yield "ops_add_layer_norm_1024", nm.layer_norm_kernel.factory(
        h=262144, dtype="bfloat16", residual=True, threads=1024, cluster=8, shared=True, persist=True, affine_regs=2, affine_once=True
    )


def main():
    out = sys.argv[1]
    for name, prim in list(attention_cases()) + list(matmul_cases()) + list(rows_cases()):
        with open(os.path.join(out, f"{name}.cu"), "w") as f:
            f.write(tirx.compile(prim, "sm_90a").cuda_source)


if __name__ == "__main__":
    main()
