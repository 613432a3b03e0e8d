"""`tirx.ops.scaled_dot_product_attention` (issue 30): every tile configuration against NumPy in
float64 in the simulator (ragged sequences, causal, grouped-query heads, the head dims, both
16-bit dtypes, the log-sum-exp; persistent CTAs; varlen, KV caches contiguous and paged), its
errors, mistakes planted in its source, and against PyTorch's SDPA on the GPU."""

import re

import numpy as np
import pytest

import planting
import tirx
import tirx.ops
from tirx.device import _host_array  # (a CPU tensor as NumPy, bf16 included)
from tirx.ops import _common as c
from tirx.ops import attention as at
from tirx.runtime import numpy_dtype

F64 = np.float64


def reference(q, k, v, causal, scale):
    """Attention in float64, PyTorch's semantics (causal: key j <= query i), with the rows'
    log-sum-exp of the scaled scores."""
    q, k, v = (t.astype(F64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    total = e.sum(-1, keepdims=True)
    return e @ v / total, (mx + np.log(total))[..., 0]


def inputs(dtype, b, h, hk, sq, sk, d, seed=0):
    rng = np.random.default_rng(seed)
    nd = numpy_dtype(dtype)
    return (
        rng.standard_normal((b, h, sq, d)).astype(nd),
        rng.standard_normal((b, hk, sk, d)).astype(nd),
        rng.standard_normal((b, hk, sk, d)).astype(nd),
    )


def tol(dtype):
    # P is rounded to the inputs' dtype for the tensor cores' P V (as FlashAttention's), and O
    # once at the end: a few units of the 16-bit format's last place.
    return 2.0**-7 if dtype == "bfloat16" else 2.0**-10


CASES = [
    # (consumers, bn, d, causal, b, h, hk, sq, sk)
    (1, 64, 64, False, 1, 1, 1, 64, 128),  # whole tiles
    (1, 64, 64, False, 1, 2, 1, 100, 70),  # ragged, grouped-query heads
    (2, 64, 64, True, 1, 1, 1, 130, 130),  # causal over three query tiles of two consumers
    (2, 128, 128, False, 2, 2, 2, 96, 200),
    (1, 128, 128, True, 1, 1, 1, 70, 300),  # causal with more keys than queries (top-left)
    (2, 128, 64, True, 1, 4, 2, 200, 90),  # causal with fewer keys than queries
    (1, 64, 64, False, 1, 1, 1, 64, 64),  # one K/V tile
    (2, 64, 64, False, 1, 1, 1, 128, 700),  # more tiles than stages: the ring wraps (4 stages)
    (2, 128, 128, False, 1, 2, 2, 128, 700),  # (3 stages)
    (2, 64, 256, True, 1, 1, 1, 200, 300),  # head dim 256 (2 stages of 64 keys)
    (2, 64, 192, False, 1, 1, 1, 70, 500),
    (2, 128, 96, True, 1, 1, 1, 130, 300),  # head dim 96: 64-byte swizzle atoms of 32 columns
    (3, 128, 64, True, 1, 2, 1, 400, 400),  # three consumers (a ring of turns), causal over 192-row tiles
    (3, 128, 64, False, 1, 1, 1, 150, 330),
    (2, 176, 128, False, 1, 2, 2, 200, 400),  # FlashAttention-3's wide K/V tiles (ragged)
    (2, 192, 64, False, 1, 1, 1, 130, 500),
    (2, 192, 128, False, 1, 1, 1, 130, 400),
    (2, 80, 256, False, 1, 1, 1, 130, 500),  # FlashAttention-3's narrow tiles at head dim 256 (2 stages)
]


@pytest.mark.parametrize("schedule", ["in_turn", "overlapped", "pingpong", "rotated"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("consumers,bn,d,causal,b,h,hk,sq,sk", CASES, ids=lambda v: str(v))
def test_every_tile_configuration_matches_float64(schedule, dtype, consumers, bn, d, causal, b, h, hk, sq, sk):
    """Each schedule (in turn; overlapped; ping-pong; the overlapped loop rotated, `rotate`, with
    ping-pong where two consumers or more take turns) at each tile configuration."""
    if schedule == "pingpong" and consumers == 1:
        pytest.skip("ping-pong takes two consumer warpgroups")
    if schedule == "rotated" and dtype == "float16":
        pytest.skip("the rotated loop's steps are those of bfloat16's (float16 differs in the rounding only)")
    overlap, rotate = schedule != "in_turn", schedule == "rotated"
    pingpong = schedule == "pingpong" or (rotate and consumers > 1)
    q, k, v = inputs(dtype, b, h, hk, sq, sk, d)
    scale = 1 / np.sqrt(d)
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=scale, lse=True, seq_major=False,
        consumers=consumers, bn=bn, overlap=overlap, pingpong=pingpong, rotate=rotate,
    )
    kernel = tirx.compile(prim, "sm_90a")
    o = np.full((b * h, sq + 1, d), 7, q.dtype)  # a row past the sequence: never written
    lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
    kernel(q.reshape(-1, sq, d), k.reshape(-1, sk, d), v.reshape(-1, sk, d), o[:, :sq], lse)
    assert (o[:, sq] == 7).all()
    want, want_lse = reference(q, k, v, causal, scale)
    t = tol(dtype)
    np.testing.assert_allclose(o[:, :sq].reshape(want.shape).astype(F64), want, rtol=t, atol=t)
    np.testing.assert_allclose(lse[:, :sq].reshape(want_lse.shape), want_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,bn,d", [("bfloat16", 128, 64), ("float8_e4m3fn", 224, 128)])
def test_the_rotated_loop_computes_the_overlapped_ones_result(dtype, bn, d):
    """`rotate` moves where each step's waits and rescale stand in the loop, not what is computed:
    O and the log-sum-exp bit for bit the overlapped ping-pong's (causal, ragged, grouped heads)."""
    sq, sk = 200, 500
    q, k, v = fp8_inputs(dtype, 1, 2, 1, sq, sk, d) if dtype.startswith("float8") else inputs(dtype, 1, 2, 1, sq, sk, d)
    results = []
    for rotate in (False, True):
        prim = at.attention_kernel.factory(
            heads=2, kv_heads=1, batch=1, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=True, scale=1 / np.sqrt(d), lse=True,
            seq_major=False, consumers=2, bn=bn, overlap=True, pingpong=True, rotate=rotate,
        )
        o = np.zeros((2, sq, d), numpy_dtype("bfloat16"))
        lse = np.zeros((2, at.lse_rows(sq)), np.float32)
        vv = (at.fp8_values(v), np.ones((1, 2), np.float32)) if dtype.startswith("float8") else (v.reshape(-1, sk, d),)
        tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), *vv, o, lse)
        results.append((o.view(np.uint16), lse))
    assert np.array_equal(results[0][0], results[1][0]) and np.array_equal(results[0][1], results[1][1])


def _moving_maxima(q, k):
    """``q`` and ``k`` scaled so that rows' maxima move after their first tile by more than a
    threshold in some rows and by less in others: key j's scores grow over the first 200 keys
    (times 1 + 4 min(j, 200) / 200), query row i's are spread from 0.1 to 2 times."""
    sq, sk = q.shape[2], k.shape[2]
    keys = 1 + 4 * np.minimum(np.arange(sk), 200) / 200
    rows = np.linspace(0.1, 2.0, sq)
    return (q.astype(np.float32) * rows[:, None]).astype(q.dtype), (k.astype(np.float32) * keys[:, None]).astype(k.dtype)


@pytest.mark.parametrize(
    "dtype,threshold,consumers,bn,d,causal,schedule",
    [
        ("bfloat16", 8.0, 2, 128, 64, True, "pingpong"),
        ("bfloat16", 2.0, 1, 64, 128, False, "in_turn"),
        ("float16", 8.0, 2, 64, 64, False, "overlapped"),
        ("bfloat16", 4.0, 2, 128, 64, True, "rotated"),
        ("float8_e4m3fn", 2.0, 2, 224, 128, False, "pingpong"),  # FlashAttention-3's FP8 tile
        ("float8_e4m3fn", 4.0, 2, 192, 128, True, "overlapped"),
        ("float8_e5m2", 8.0, 2, 128, 64, True, "rotated"),
    ],
)
def test_lazy_rescale_matches_float64(dtype, threshold, consumers, bn, d, causal, schedule):
    """``rescale_threshold`` (FlashAttention-4's lazy rescale): a row's running max moves only where
    a tile's exceeds it by more than the threshold, O's rescale skipped where none of a thread's
    rows moved. Over keys whose scores rise (rows whose max moves after the first tile and rows
    whose max does not, `_moving_maxima`), O within the float64 bound of the schedule without it (FP8: the weights'
    offset lowered by the threshold, `fp8_bound`), the log-sum-exp exact to float32."""
    b, h, hk, sq, sk = 1, 2, 1, 200, 700
    fp8 = dtype.startswith("float8")
    q, k, v = fp8_inputs(dtype, b, h, hk, sq, sk, d) if fp8 else inputs(dtype, b, h, hk, sq, sk, d)
    q, k = _moving_maxima(q, k)
    scale = 1 / np.sqrt(d)
    # (the test's premise: some rows' max moves by more than the threshold after their first tile)
    s = np.einsum("bhid,bhjd->bhij", q.astype(F64), np.repeat(k.astype(F64), h // hk, 1)) * scale * at.LOG2E
    if causal:
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    moved = np.nanmax(s, -1) - s[..., :bn].max(-1) > threshold
    assert moved.any() and (~moved).any()
    overlap, rotate = schedule != "in_turn", schedule == "rotated"
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=scale, lse=True, seq_major=False,
        consumers=consumers, bn=bn, overlap=overlap, pingpong=schedule == "pingpong" or rotate, rotate=rotate, rescale_threshold=threshold,
    )
    o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16") if fp8 else q.dtype)
    lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
    vv = (at.fp8_values(v), np.ones((b * hk, 2), np.float32)) if fp8 else (v.reshape(-1, sk, d),)
    tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), *vv, o, lse)
    got = o.reshape(b, h, sq, d).astype(F64)
    if fp8:
        want, want_lse, bound = fp8_bound(q.astype(F64), k.astype(F64), v.astype(F64), causal, scale, dtype, threshold)
        err = np.abs(got - want)
        assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"
    else:
        want, want_lse = reference(q, k, v, causal, scale)
        np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(lse[:, :sq].reshape(want_lse.shape), want_lse, rtol=1e-5, atol=1e-5)


def test_lazy_rescale_threshold_errors():
    with pytest.raises(ValueError, match="rescale_threshold: 9.0; from 0 \\(off\\) to 8"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=64, d=64, dtype="bfloat16", causal=False, scale=0.125, lse=False,
            seq_major=False, consumers=1, bn=64, rescale_threshold=9.0,
        )


@pytest.mark.parametrize(
    "consumers,bn,d,causal,pingpong,sms,h,hk,sq,sk",
    [
        (2, 64, 64, False, True, 2, 2, 1, 300, 700),  # 10 tiles over 2 CTAs, the rings wrap within and across them
        (2, 64, 64, True, True, 3, 2, 2, 400, 400),  # causal: the longest tiles first, uneven per CTA
        (3, 128, 64, True, True, 2, 2, 1, 500, 500),
        (2, 128, 128, False, False, 3, 1, 1, 330, 200),
        (1, 64, 96, True, False, 4, 3, 3, 150, 260),  # in turn (no overlap), more CTAs than some heads' tiles
        (2, 128, 64, True, "rotate", 2, 2, 1, 300, 700),  # ping-pong, the loop rotated (`rotate`)
    ],
)
def test_persistent_schedule_matches_float64(consumers, bn, d, causal, pingpong, sms, h, hk, sq, sk):
    """Persistent CTAs (``sms`` of them here): each takes tiles bx, bx + sms, ... of the same
    order, its rings' stages and phases running on across tiles (each warpgroup's count in shared
    memory), the next Q loaded once the last tile's O stores have read Q_s; O and the log-sum-exp
    against float64, with races, waits and phases checked."""
    q, k, v = inputs("bfloat16", 1, h, hk, sq, sk, d, seed=sms)
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=1, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=causal, scale=1 / np.sqrt(d), lse=True,
        seq_major=False, consumers=consumers, bn=bn, overlap=consumers > 1 or bool(pingpong), pingpong=bool(pingpong), rotate=pingpong == "rotate",
        persistent=True, sms=sms,
    )
    o = np.zeros((h, sq, d), q.dtype)
    lse = np.zeros((h, at.lse_rows(sq)), np.float32)
    tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), v.reshape(-1, sk, d), o, lse)
    want, want_lse = reference(q, k, v, causal, 1 / np.sqrt(d))
    np.testing.assert_allclose(o.reshape(want.shape).astype(F64), want, rtol=tol("bfloat16"), atol=tol("bfloat16"))
    np.testing.assert_allclose(lse[:, :sq].reshape(want_lse.shape), want_lse, rtol=1e-5, atol=1e-5)


def test_causal_sections_of_heads(monkeypatch):
    """Causal grids in sections of heads whose K and V fit half an L2 (each section's longest
    query tiles first): the section is the most heads that divide batch * heads and fit, one at
    least; and every tile computed once, here in sections of 2 and of 1 head (of 6: grouped-query
    heads, two batch entries), one CTA a tile and persistent."""
    assert at.causal_section(64, 1, 4096, 256, 2) == 4  # (4 MB a head: 6 fit, 4 divide 64)
    assert at.causal_section(16, 1, 16384, 256, 2) == 1
    assert at.causal_section(13, 1, 4096, 64, 2) == 13
    assert at.causal_section(32, 4, 8192, 128, 2) == 16  # (a K/V head's 4 query heads share its bytes)
    b, h, hk, sq, sk, d = 2, 3, 1, 200, 200, 64
    q, k, v = inputs("bfloat16", b, h, hk, sq, sk, d, seed=11)
    want, want_lse = reference(q, k, v, True, 1 / np.sqrt(d))
    per_head = 2 * sk * d * 2 // h
    for heads_fit, persistent in [(2, False), (1, False), (2, True)]:
        monkeypatch.setattr(at, "CAUSAL_L2_BYTES", heads_fit * per_head)
        assert at.causal_section(b * h, h // hk, sk, d, 2) == heads_fit
        prim = at.attention_kernel.factory(
            heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=True, scale=1 / np.sqrt(d), lse=True,
            seq_major=False, consumers=1, bn=64, overlap=True, persistent=persistent, sms=3 if persistent else 0,
        )
        o = np.full((b * h, sq, d), np.nan, q.dtype)
        lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
        tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), v.reshape(-1, sk, d), o, lse)
        np.testing.assert_allclose(o.reshape(want.shape).astype(F64), want, rtol=tol("bfloat16"), atol=tol("bfloat16"))
        np.testing.assert_allclose(lse[:, :sq].reshape(want_lse.shape), want_lse, rtol=1e-5, atol=1e-5)


def test_persistent_is_an_option_on_gpus_only():
    """Persistent CTAs are tuned for FP8 only (16-bit ones never won on an H200); as
    configurations they apply on a GPU (its SMs) only, without split-KV, varlen or a mask."""
    assert [cfg for cfg in at.CONFIGS if cfg.get("persistent")] == at.FP8_PERSISTENT_CONFIGS
    kw = dict(seq_q=4096, seq_k=4096, d=128, mask="", varlen=False, causal=False, splits=1)
    tuned = lambda **more: [c for c in at._prune([dict(c) for c in at.CONFIGS], **{**kw, **more}) if c.get("persistent")]  # noqa: E731
    assert tuned(sms=132, dtype="float8_e4m3fn") == at.FP8_PERSISTENT_CONFIGS
    assert tuned(sms=132, dtype="float8_e4m3fn", causal=True) == at.FP8_PERSISTENT_CONFIGS
    assert not tuned(sms=132, dtype="float8_e4m3fn", d=256)  # (wider tiles spill there; 128 keys lost)
    assert not tuned(sms=132, dtype="bfloat16")
    assert not tuned(sms=0, dtype="float8_e4m3fn")
    assert not tuned(sms=132, dtype="float8_e4m3fn", splits=2)
    with pytest.raises(ValueError, match="persistent: one split of dense"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=4096, d=64, dtype="bfloat16", causal=False, scale=0.1, lse=False,
            seq_major=False, consumers=1, bn=128, splits=2, persistent=True, sms=4,
        )


def test_the_op_on_arrays_and_cpu_tensors():
    """The op (the tuner's choice) on NumPy arrays, with a scale, and on CPU tensors: the
    simulator; the output without ``return_lse`` alone."""
    q, k, v = inputs("bfloat16", 1, 2, 2, 80, 100, 64, seed=3)
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2, return_lse=True)
    want, want_lse = reference(q, k, v, True, 0.2)
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    assert out.shape == q.shape and lse.shape == (1, 2, 80)
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_numpy(t.astype(np.float32)).bfloat16() for t in (q, k, v))
    got = tirx.ops.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=0.2)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want, rtol=2.0**-7, atol=2.0**-7)


def test_seq_major_tensors_are_read_and_written_in_place():
    """[batch, seq, heads, d] arrays seen as [batch, heads, seq, d] (a projection's output,
    transposed): the kernel reads them in place (TMA boxes over the four dims) and the output
    has their memory order; grouped-query heads and ragged sequences as before."""
    b, h, hk, sq, sk, d = 2, 4, 2, 70, 130, 64
    rng = np.random.default_rng(9)
    nd = numpy_dtype("bfloat16")
    q = np.swapaxes(rng.standard_normal((b, sq, h, d)).astype(nd), 1, 2)
    k = np.swapaxes(rng.standard_normal((b, sk, hk, d)).astype(nd), 1, 2)
    v = np.swapaxes(rng.standard_normal((b, sk, hk, d)).astype(nd), 1, 2)
    assert not q.flags.c_contiguous
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
    assert out.shape == (b, h, sq, d) and np.swapaxes(out, 1, 2).flags.c_contiguous
    want, want_lse = reference(q, k, v, True, 1 / np.sqrt(d))
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    # Mixed memory orders: the tensors are made contiguous first (the same values).
    out2 = tirx.ops.scaled_dot_product_attention(np.ascontiguousarray(q), k, v, is_causal=True, enable_gqa=True)
    assert out2.flags.c_contiguous
    np.testing.assert_array_equal(out2, out)


def test_no_key_gives_zero_as_pytorch():
    q, k, v = inputs("bfloat16", 1, 1, 1, 4, 0, 64)
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, return_lse=True)
    assert (out.astype(F64) == 0).all() and np.isneginf(lse).all()


@pytest.mark.parametrize(
    "kwargs,shapes,err,match",
    [
        ({}, ((1, 64, 64), (1, 64, 64), (1, 64, 64)), ValueError, r"query of shape \[1, 64, 64\]; expected \[batch, heads, seq, head_dim\]"),
        ({}, ((1, 4, 8, 64), (1, 2, 8, 64), (1, 2, 8, 64)), ValueError, "4 query heads and 2 key/value heads .grouped-query attention: pass enable_gqa=True"),
        ({"enable_gqa": True}, ((1, 3, 8, 64), (1, 2, 8, 64), (1, 2, 8, 64)), ValueError, "must be a multiple of the key/value heads"),
        ({}, ((1, 1, 8, 80), (1, 1, 8, 80), (1, 1, 8, 80)), ValueError, "head_dim 80; the kernel takes 64, 96, 128, 192 or 256 .pad the head dim"),
        ({}, ((1, 1, 8, 64), (1, 1, 9, 64), (1, 1, 8, 64)), ValueError, r"key \[1, 1, 9, 64\] and value \[1, 1, 8, 64\] differ"),
        ({"attn_mask": np.zeros((8, 9), bool)}, ((1, 1, 8, 64),) * 3, ValueError, r"attn_mask of shape \[8, 9\] does not broadcast to"),
        ({"attn_mask": np.zeros((2, 1, 8, 8), bool)}, ((1, 1, 8, 64),) * 3, ValueError, r"attn_mask of shape \[2, 1, 8, 8\]"),
        ({"attn_mask": np.zeros((8, 8), np.float32)}, ((1, 1, 8, 64),) * 3, TypeError, r"attn_mask is float32; give it the query's dtype .bfloat16. or bool"),
        ({"attn_mask": np.ones((8, 8), bool), "is_causal": True}, ((1, 1, 8, 64),) * 3, ValueError, "attn_mask and is_causal together"),
        ({"dropout_p": 0.1}, ((1, 1, 8, 64),) * 3, NotImplementedError, "dropout_p must be 0"),
    ],
)
def test_errors_name_the_operand_and_the_fix(kwargs, shapes, err, match):
    q, k, v = (np.zeros(s, numpy_dtype("bfloat16")) for s in shapes)
    with pytest.raises(err, match=match):
        tirx.ops.scaled_dot_product_attention(q, k, v, **kwargs)


def test_float32_and_mixed_dtypes_are_refused():
    q = np.zeros((1, 1, 8, 64), np.float32)
    with pytest.raises(TypeError, match="float32 query; the kernel takes bfloat16 or float16"):
        tirx.ops.scaled_dot_product_attention(q, q, q)
    h = np.zeros((1, 1, 8, 64), np.float16)
    with pytest.raises(TypeError, match="key is bfloat16, the query float16"):
        tirx.ops.scaled_dot_product_attention(h, h.astype(numpy_dtype("bfloat16")), h)


def test_explain_names_the_tensor_core_steps():
    prim = at.attention_kernel.factory(
        heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=64, d=64, dtype="bfloat16", causal=True, scale=0.125, lse=False, seq_major=False, consumers=1, bn=64
    )
    text = tirx.compile(prim, "sm_90a").explain()
    assert "(ss)" in text and "(rs)" in text  # S = Q Kᵀ from shared memory, O += P V with P in registers
    assert "masked_fill" in text


def test_on_the_gpu_against_pytorch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    cases = [(2, 4, 4, 300, 300, 128, False, False), (1, 8, 2, 257, 513, 64, True, False), (1, 2, 2, 1000, 1000, 128, True, False)]
    decoding = [(8, 32, 8, 1, 8192, 128, False, False)]  # split-KV
    for b, h, hk, sq, sk, d, causal, seq_major in cases + [(2, 8, 2, 300, 300, 128, True, True)] + decoding:
        if seq_major:  # [batch, seq, heads, d] tensors, transposed (read in place)
            q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            k = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            v = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        else:
            q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
        out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != hk, return_lse=True)
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=h != hk)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != hk)
        ours_err = (out.double() - want).abs().max().item()
        their_err = (theirs.double() - want).abs().max().item()
        assert ours_err <= 2 * their_err + 1e-3, (ours_err, their_err)
        s = torch.einsum("bhid,bhjd->bhij", q.double(), k.double().repeat_interleave(h // hk, 1)) / d**0.5
        if causal:
            s = s.masked_fill(torch.ones(sq, sk, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), rtol=1e-5, atol=1e-4)


def test_torch_compile_traces_the_registered_op():
    """`torch.compile(fullgraph=True)` traces the op (`torch.ops.tirx.scaled_dot_product_attention`,
    its fake implementation giving the shapes); on CPU tensors it runs in the simulator. A mask
    that needs its own gradient is refused, not silently left without one (the gradients:
    test_attention_backward.py)."""
    torch = pytest.importorskip("torch")
    at.register_torch_op()  # (this module imported tirx.ops before torch: registered here, as the error says)
    q = torch.randn(1, 2, 64, 64).bfloat16()
    k, v = torch.randn(1, 2, 80, 64).bfloat16(), torch.randn(1, 2, 80, 64).bfloat16()
    f = torch.compile(lambda q, k, v: tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True) * 2, fullgraph=True)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True) * 2
    torch.testing.assert_close(f(q, k, v).double(), want, rtol=2.0**-6, atol=2.0**-6)
    with pytest.raises(NotImplementedError, match=r"gradient of attn_mask is not computed; pass attn_mask.detach\(\)"):
        tirx.ops.scaled_dot_product_attention(q.requires_grad_(), k, v, attn_mask=torch.zeros(64, 80, dtype=torch.bfloat16, requires_grad=True))


@pytest.mark.parametrize("sq", [1, 5, 70])
def test_grouped_query_heads_packed_into_one_block_of_rows(sq):
    """Grouped-query heads, not causal, contiguous: a group's query heads run as one block of
    group * seq_q rows against their K/V head (decoding's short queries fill the tiles)."""
    q, k, v = inputs("bfloat16", 2, 8, 2, sq, 150, 128, seed=sq)
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, enable_gqa=True, return_lse=True)
    want, want_lse = reference(q, k, v, False, 1 / np.sqrt(128))
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_torch_plans_read_q_k_v_as_stored():
    """The torch path's plan decides once how it reads Q, K and V (`_kernel_args_of`): contiguous
    ones as views, strided ones (a slice of a wider head dim) copied, grouped-query heads packed
    into one block of rows; each bit for bit the NumPy path's, twice per call signature."""
    torch = pytest.importorskip("torch")

    def as_numpy(t):
        return _host_array(t.contiguous())

    for seed in (0, 1):
        g = torch.Generator().manual_seed(seed)
        wide = torch.randn(1, 4, 80, 128, generator=g).bfloat16()
        kv = torch.randn(1, 2, 96, 64, generator=g).bfloat16()
        for q, k, v, causal in ((wide[..., :64], kv, kv, False), (wide[..., 64:].contiguous(), kv, kv[..., :], True), (wide[..., :64], wide[:, :2, :, 64:], wide[:, 2:, :, 64:], True)):
            got = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            want = tirx.ops.scaled_dot_product_attention(*(as_numpy(t) for t in (q, k, v)), is_causal=causal, enable_gqa=True)
            np.testing.assert_array_equal(as_numpy(got), want)


@pytest.mark.parametrize(
    "b,h,hk,sq,sk,d,splits", [(1, 2, 2, 1, 300, 64, 3), (2, 8, 2, 1, 1000, 128, 4), (1, 4, 4, 70, 260, 64, 2), (1, 8, 1, 3, 129, 128, 2)]
)
def test_split_kv_matches_float64(b, h, hk, sq, sk, d, splits):
    """Split-KV (decoding's few query rows over a long cache): each split's O / l and
    log-sum-exp in float32, then `attention_combine_kernel`; ragged last splits, grouped-query
    heads packed, the log-sum-exp of the whole row."""
    q, k, v = inputs("bfloat16", b, h, hk, sq, sk, d, seed=sk)
    out, lse = at._run(q, k, v, False, None, hk != h, True, splits=splits)
    want, want_lse = reference(q, k, v, False, 1 / np.sqrt(d))
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_split_counts():
    """None where the CTAs fill half the GPU; else the parts one wave holds, whole parts of at least a tile."""
    assert at.split_count(ctas=200, kv_tiles=64, sms=132) == 1
    assert at.split_count(ctas=64, kv_tiles=256, sms=132) == 2  # (3 would start a second wave of 60)
    assert at.split_count(ctas=8, kv_tiles=256, sms=132) == 16  # 132 // 8 = 16 parts of 16 tiles
    assert at.split_count(ctas=8, kv_tiles=5, sms=132) == 5
    assert at.split_count(ctas=8, kv_tiles=1, sms=132) == 1
    assert at.split_count(ctas=8, kv_tiles=64, sms=0) == 1  # the simulator
    with pytest.raises(ValueError, match="splits: 3 splits of 4 K/V tiles .2 each. must each hold keys"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=1, seq_k=512, d=64, dtype="bfloat16", causal=False, scale=0.125, lse=False,
            seq_major=False, consumers=1, bn=128, splits=3,
        )



@pytest.mark.parametrize("lead", [(), (1, 1), (2, 1), (1, 3), (2, 3)], ids=["2d", "one", "batch", "heads", "all"])
def test_attention_masks_as_pytorch(lead):
    """``attn_mask``, bool or additive, broadcast over batch and heads as PyTorch's: against
    PyTorch's math in float64 (a row whose keys are all masked is 0 there, its log-sum-exp -inf)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    b, h, sq, sk, d = 2, 3, 70, 150, 64
    q, k, v = inputs("bfloat16", b, h, h, sq, sk, d, seed=len(lead) + sum(lead))
    rng = np.random.default_rng(4)
    keep = rng.random(lead + (sq, sk)) > 0.3
    keep[..., 5, :] = False  # a row that sees no key
    for mask in (keep, np.where(keep, rng.standard_normal(keep.shape), -np.inf).astype(q.dtype)):
        out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_lse=True)
        tq, tk, tv = (torch.from_numpy(t.astype(F64)) for t in (q, k, v))
        tm = torch.from_numpy(mask if mask.dtype == bool else mask.astype(F64))
        want = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm).numpy()
        np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
        assert (out[..., 5, :].astype(F64) == 0).all() and np.isneginf(lse[..., 5]).all()
        scores = torch.einsum("bhid,bhjd->bhij", tq, tk) / np.sqrt(d) + (torch.where(tm, 0.0, -np.inf) if mask.dtype == bool else tm)
        want_lse = torch.logsumexp(scores, -1).numpy()
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 1, 1, 150), (1, 150), (1, 3, 70, 1)], ids=["key-padding", "2d-row", "per-query"])
def test_attention_masks_broadcast_over_queries_or_keys(shape):
    """A mask broadcast over the queries (a key-padding mask [batch, 1, 1, seq_k], a row [1, seq_k]) or
    over the keys, as PyTorch broadcasts it: against its math in float64."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    b, h, sq, sk, d = 2, 3, 70, 150, 64
    q, k, v = inputs("bfloat16", b, h, h, sq, sk, d, seed=len(shape))
    keep = np.random.default_rng(5).random(shape) > 0.3
    keep.reshape(-1)[0] = True  # (some key seen by every row)
    out = tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    tq, tk, tv = (torch.from_numpy(t.astype(F64)) for t in (q, k, v))
    want = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(keep)).numpy()
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")  # (PyTorch's warning for seq_q > seq_k: NaN in some backends)
@pytest.mark.parametrize("sq,sk", [(70, 200), (200, 70), (1, 300), (130, 130)])
def test_lower_right_causal_bias(sq, sk):
    """``attn_mask=causal_lower_right(seq_q, seq_k)`` (FlashAttention's diagonal, decoding's and
    chunked prefill's): query i sees keys j <= i + seq_k - seq_q; rows above it see none (0, as
    PyTorch's); ``causal_upper_left`` is ``is_causal``. Both schedules (the tuner's first choice
    overlapped, and in turn)."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    F = torch.nn.functional
    q, k, v = (torch.from_numpy(t.astype(np.float32)).bfloat16() for t in inputs("bfloat16", 1, 2, 2, sq, sk, 64, seed=sq + sk))
    for bias in (causal_lower_right(sq, sk), causal_upper_left(sq, sk)):
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=bias)
        got = tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        torch.testing.assert_close(got.double(), want, rtol=2.0**-7, atol=2.0**-7)
    q3, k3, v3 = (t.float().numpy().astype(numpy_dtype("bfloat16")).reshape(2, sq if t is q else sk, 64) for t in (q, k, v))
    for overlap in (False, True):
        prim = at.attention_kernel.factory(
            heads=2, kv_heads=2, batch=1, seq_q=sq, seq_k=sk, d=64, dtype="bfloat16", causal=True, scale=0.125, lse=False,
            seq_major=False, consumers=1, bn=64, overlap=overlap, offset=sk - sq,
        )
        o = np.zeros((2, sq, 64), q3.dtype)
        tirx.compile(prim, "sm_90a")(q3, k3, v3, o, np.zeros((2, at.lse_rows(sq)), np.float32))
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=causal_lower_right(sq, sk))
        np.testing.assert_allclose(o.astype(F64).reshape(want.shape), want.numpy(), rtol=2.0**-7, atol=2.0**-7)


def varlen_reference(q, k, v, cq, ck, causal, scale):
    """Per sequence: attention in float64 (causal on its lower-right diagonal), a row with no key 0."""
    out = np.zeros(q.shape, F64)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    group = q.shape[1] // k.shape[1]
    for b in range(len(cq) - 1):
        n, m = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        if n == 0:
            continue
        qb = q[cq[b] : cq[b + 1]].astype(F64).transpose(1, 0, 2)
        kb = np.repeat(k[ck[b] : ck[b + 1]].astype(F64).transpose(1, 0, 2), group, 0)
        vb = np.repeat(v[ck[b] : ck[b + 1]].astype(F64).transpose(1, 0, 2), group, 0)
        s = np.einsum("hid,hjd->hij", qb, kb) * scale
        if causal:
            i, j = np.indices(s.shape[-2:])
            s = np.where(j > i + m - n, -np.inf, s)
        mx = s.max(-1, keepdims=True) if m else np.full(s.shape[:-1] + (1,), -np.inf)
        top = np.where(np.isfinite(mx), mx, 0)
        e = np.exp(s - top)
        total = e.sum(-1, keepdims=True)
        out[cq[b] : cq[b + 1]] = np.where(total > 0, e @ vb / np.where(total > 0, total, 1), 0).transpose(1, 0, 2)
        with np.errstate(divide="ignore"):  # (a row with no key: log 0 = -inf)
            lse[:, cq[b] : cq[b + 1]] = (top + np.log(total))[..., 0]
    return out, lse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "cfg",
    [{"consumers": 2, "bn": 128, "overlap": True}, {"consumers": 1, "bn": 64}, {"consumers": 2, "bn": 128, "overlap": True, "pingpong": True, "rotate": True}],
    ids=["overlapped", "in_turn", "rotated"],
)
def test_varlen_packed_sequences_match_float64(causal, cfg):
    """Packed sequences (FlashAttention's varlen): ragged lengths, an empty sequence, more and fewer
    keys than queries, grouped-query heads; causal on each sequence's lower-right diagonal;
    nothing written outside a sequence's rows; the log-sum-exp in (heads, total_q)."""
    lens_q, lens_k = [5, 130, 0, 64, 77], [40, 200, 10, 64, 30]
    h, hk, d = 4, 2, 64
    cq = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    rng = np.random.default_rng(11)
    nd = numpy_dtype("bfloat16")
    q = rng.standard_normal((cq[-1], h, d)).astype(nd)
    k, v = (rng.standard_normal((ck[-1], hk, d)).astype(nd) for _ in range(2))
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=0, seq_q=0, seq_k=0, d=d, dtype="bfloat16", causal=causal, scale=0.125, lse=True,
        seq_major=False, varlen=True, **cfg,
    )
    out = np.full((cq[-1] + 3, h, d), 7, nd)  # three rows past the packed ones: never written
    lse = np.zeros((cq[-1], h), np.float32)
    tirx.compile(prim, "sm_90a")(q, k, v, cq, ck, out[: cq[-1]], lse, len(lens_q), max(lens_q), cq[-1], ck[-1])
    assert (out[cq[-1] :] == 7).all()
    want, want_lse = varlen_reference(q, k, v, cq, ck, causal, 0.125)
    np.testing.assert_allclose(out[: cq[-1]].astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse.T, want_lse, rtol=1e-5, atol=1e-5)
    got, got_lse = tirx.ops.varlen_attention(q, k, v, cq, ck, max(lens_q), is_causal=causal, scale=0.125, return_lse=True)
    np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(got_lse, want_lse, rtol=1e-5, atol=1e-5)


def test_varlen_errors():
    nd = numpy_dtype("bfloat16")
    q, k = np.zeros((10, 4, 64), nd), np.zeros((12, 2, 64), nd)
    cu = np.array([0, 10], np.int32)
    with pytest.raises(ValueError, match="int32, one entry per sequence and one more, alike"):
        tirx.ops.varlen_attention(q, k, k, cu, np.array([0, 6, 12], np.int32), 10)
    with pytest.raises(ValueError, match=r"q of shape \[10, 256\]; expected \(total, heads, head_dim\)"):
        tirx.ops.varlen_attention(q.reshape(10, 256), k, k, cu, cu, 10)
    with pytest.raises(ValueError, match="the query heads a multiple of the key/value heads"):
        tirx.ops.varlen_attention(np.zeros((10, 3, 64), nd), k, k, cu, cu, 10)


def test_varlen_on_the_gpu_against_pytorch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    lens = [(300, 300), (1, 1000), (513, 700), (0, 5), (64, 64)]
    h, hk, d = 8, 2, 128
    cq = torch.tensor([0] + list(np.cumsum([a for a, _ in lens])), dtype=torch.int32, device="cuda")
    ck = torch.tensor([0] + list(np.cumsum([b for _, b in lens])), dtype=torch.int32, device="cuda")
    q = torch.randn(int(cq[-1]), h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(int(ck[-1]), hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for causal in (False, True):
        out = tirx.ops.varlen_attention(q, k, v, cq, ck, max(a for a, _ in lens), is_causal=causal)
        for b, (n, m) in enumerate(lens):
            if n == 0:
                continue
            qb = q[int(cq[b]) : int(cq[b + 1])].transpose(0, 1)[None].double()
            kb = k[int(ck[b]) : int(ck[b + 1])].transpose(0, 1)[None].double()
            vb = v[int(ck[b]) : int(ck[b + 1])].transpose(0, 1)[None].double()
            mask = None
            if causal:
                from torch.nn.attention.bias import causal_lower_right

                mask = causal_lower_right(n, m)
            want = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, enable_gqa=True)[0].transpose(0, 1)
            torch.testing.assert_close(out[int(cq[b]) : int(cq[b + 1])].double(), want, rtol=2.0**-7, atol=2.0**-7)


def kvcache_reference(q, kc, vc, lens, causal, scale):
    """Per sequence: its cache's first lens[b] rows, causal on the lower-right diagonal; none: 0."""
    b, sq, h, d = q.shape
    out = np.zeros(q.shape, F64)
    lse = np.full((b, h, sq), -np.inf)
    for i in range(b):
        n = int(lens[i])
        if n == 0:
            continue
        want, wl = reference(q[i : i + 1].transpose(0, 2, 1, 3), kc[i : i + 1, :n].transpose(0, 2, 1, 3), vc[i : i + 1, :n].transpose(0, 2, 1, 3), False, scale) if not causal else _causal_lower_right(q[i : i + 1], kc[i : i + 1, :n], vc[i : i + 1, :n], scale)
        out[i] = want[0].transpose(1, 0, 2)
        lse[i] = wl[0]
    return out, lse


def _causal_lower_right(q, k, v, scale):
    qd, kd, vd = (t.astype(F64).transpose(0, 2, 1, 3) for t in (q, k, v))
    group = qd.shape[1] // kd.shape[1]
    kd, vd = np.repeat(kd, group, 1), np.repeat(vd, group, 1)
    s = np.einsum("bhid,bhjd->bhij", qd, kd) * scale
    n, m = s.shape[-2:]
    i, j = np.indices((n, m))
    s = np.where(j > i + m - n, -np.inf, s)
    mx = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(s - top)
    total = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, e @ vd / total, 0), (top + np.log(total))[..., 0]


def run_cache_kernel(prim, inputs, scalars, splits, h, group=1):
    """A KV-cache kernel on ``inputs`` (q first, [batch, seq_q, heads, d]) then ``scalars``; with
    ``splits``, its float32 parts combined by `attention_combine_kernel`: ``(out, lse)`` (``lse``
    (batch * heads, rows)). ``group``: the kernel packs that many query heads a K/V head
    (``q_group``): q's rows gathered, out's and lse's scattered back here."""
    q = inputs[0]
    b, sq, _, d = q.shape
    hk, rows = h // group, sq * group
    if group > 1:  # (b * hk, rows, d), row r: head r % group of the group at position r // group
        inputs = (np.ascontiguousarray(q.reshape(b, sq, hk, group, d).swapaxes(1, 2)).reshape(b * hk, rows, d),) + tuple(inputs[1:])
    kernel = tirx.compile(prim, "sm_90a")
    out = np.zeros(q.shape, q.dtype)
    lse = np.zeros((b * hk, at.lse_rows(rows)), np.float32)
    if splits == 1:
        o_rows = out if group == 1 else np.zeros((b * hk, rows, d), q.dtype)
        kernel(*inputs, o_rows, lse, *scalars)
        if group > 1:
            out[...] = o_rows.reshape(b, hk, sq, group, d).swapaxes(1, 2).reshape(out.shape)
    else:
        parts = np.zeros((splits, b * hk, rows, d), np.float32)
        plse = np.zeros((splits, b * hk, at.lse_rows(rows)), np.float32)
        kernel(*inputs, parts, plse, *scalars)
        combine = at.attention_combine_kernel.factory(splits=splits, bhs=b * hk, seq_q=rows, d=d, dtype="bfloat16", lse=True, heads=hk, group=group)
        tirx.compile(combine, "sm_90a")(parts, plse, out, lse)
    return out, lse[:, :rows].reshape(b, hk, sq, group).swapaxes(2, 3).reshape(b * h, sq)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("packed", [False, True])
def test_kvcache_attention_matches_float64(causal, splits, packed):
    """Decoding over KV caches of different filled lengths (FlashAttention's cache_seqlens): the
    rows past a cache's length not counted (filled with large values here; they must be finite:
    a tile's last rows are read and weighted by 0), an empty cache gives 0, causal on each
    cache's lower-right diagonal; split-KV's parts past a cache's length empty. ``packed``: a K/V
    head's query heads one block of rows (``q_group``, the op's design), else a block each."""
    b, sq, h, hk, s_max, d = 4, 3, 4, 2, 300, 64
    group = h // hk if packed else 1
    rng = np.random.default_rng(splits + causal)
    nd = numpy_dtype("bfloat16")
    q = rng.standard_normal((b, sq, h, d)).astype(nd)
    kc, vc = (rng.standard_normal((b, s_max, hk, d)).astype(nd) for _ in range(2))
    lens = np.array([300, 5, 0, 130], np.int32)
    for i, n in enumerate(lens):
        kc[i, n:], vc[i, n:] = 1e4, -1e4  # not counted
    prim = at.attention_kernel.factory(
        heads=h // group, kv_heads=hk, batch=b, seq_q=sq * group, seq_k=s_max, d=d, dtype="bfloat16", causal=causal, scale=0.125, lse=True,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=splits, kv_lens=True, q_group=group,
    )
    out, lse = run_cache_kernel(prim, (q, kc, vc, lens), (), splits, h, group)
    want, want_lse = kvcache_reference(q, kc, vc, lens, causal, 0.125)
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse.reshape(b, h, sq), want_lse, rtol=1e-5, atol=1e-5)
    got = tirx.ops.kvcache_attention(q, kc, vc, lens, is_causal=causal, scale=0.125)
    np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)


@pytest.mark.parametrize("causal", [False, True])
def test_split_kv_over_seq_major_tensors_and_causal(causal):
    """Split-KV over [batch, seq, heads, d] tensors (the combine writes that layout) and causal
    (each part's tiles cut at the diagonal)."""
    b, h, sq, sk, d = 2, 2, 5, 600, 64  # (5 K/V tiles: 3 parts of 2)
    rng = np.random.default_rng(21)
    nd = numpy_dtype("bfloat16")
    q = np.swapaxes(rng.standard_normal((b, sq, h, d)).astype(nd), 1, 2)
    k, v = (np.swapaxes(rng.standard_normal((b, sk, h, d)).astype(nd), 1, 2) for _ in range(2))
    out, lse = at._run(q, k, v, causal, None, False, True, splits=3)
    assert np.swapaxes(out, 1, 2).flags.c_contiguous
    want, want_lse = reference(q, k, v, causal, 1 / np.sqrt(d))
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_kvcache_on_the_gpu_against_pytorch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    b, sq, h, hk, s_max, d = 8, 1, 32, 8, 8192, 128
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(b, s_max, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.tensor([8192, 1, 0, 4000, 129, 7000, 64, 5555], dtype=torch.int32, device="cuda")
    out = tirx.ops.kvcache_attention(q, kc, vc, lens)
    for i in range(b):
        n = int(lens[i])
        if n == 0:
            assert (out[i] == 0).all()
            continue
        want = F.scaled_dot_product_attention(
            q[i : i + 1].transpose(1, 2).double(), kc[i : i + 1, :n].transpose(1, 2).double(), vc[i : i + 1, :n].transpose(1, 2).double(), enable_gqa=True
        )
        torch.testing.assert_close(out[i : i + 1].transpose(1, 2).double(), want, rtol=2.0**-7, atol=2.0**-7)



def test_a_decoding_plans_later_calls_launch_on_their_own_tensors_on_the_gpu():
    """A plan's calls after its first launch their kernels (split-KV's and the combine) from
    their tensors' pointers, unchecked (`Kernel.launcher(fixed_signature=True)`): calls of one
    signature with new queries, caches and lengths, and on another stream, each match PyTorch."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    b, h, hk, s, d = 2, 32, 8, 4096, 128
    calls = []
    for i in range(3):
        q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
        kc, vc = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.tensor([s - 7 * i, 1000 + i], dtype=torch.int32, device="cuda")
        calls.append((q, kc, vc, lens))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    outs = [tirx.ops.kvcache_attention(*x) for x in calls]
    with torch.cuda.stream(side):
        on_side = [tirx.ops.kvcache_attention(*x) for x in calls]
    torch.cuda.current_stream().wait_stream(side)
    sdpa = [tirx.ops.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True) for q, kc, vc, _ in calls]
    for (q, kc, vc, lens), out, again, full in zip(calls, outs, on_side, sdpa):
        assert torch.equal(out, again)
        want = F.scaled_dot_product_attention(q.transpose(1, 2).double(), kc.transpose(1, 2).double(), vc.transpose(1, 2).double(), enable_gqa=True)
        torch.testing.assert_close(full.double(), want, rtol=2.0**-7, atol=2.0**-7)
        for i in range(b):
            n = int(lens[i])
            want = F.scaled_dot_product_attention(
                q[i : i + 1].transpose(1, 2).double(), kc[i : i + 1, :n].transpose(1, 2).double(), vc[i : i + 1, :n].transpose(1, 2).double(), enable_gqa=True
            )
            torch.testing.assert_close(out[i : i + 1].transpose(1, 2).double(), want, rtol=2.0**-7, atol=2.0**-7)


def paged(cache, page, rng, spare=3):
    """``cache`` (batch, seq, kv_heads, d) cut into pages of ``page`` rows, shuffled among
    ``spare`` unused ones (random values): ``(pages, block_table)``."""
    b, s, hk, d = cache.shape
    n = b * (s // page)
    pages = rng.standard_normal((n + spare, page, hk, d)).astype(cache.dtype)
    table = rng.permutation(n + spare)[:n].reshape(b, s // page).astype(np.int32)
    for i in range(b):
        pages[table[i]] = cache[i].reshape(s // page, page, hk, d)
    return pages, table


@pytest.mark.parametrize(
    "page,s_max,d,causal,splits",
    [(16, 256, 64, False, 1), (8, 128, 128, True, 1), (64, 320, 96, True, 2), (256, 512, 64, False, 2), (32, 96, 256, False, 1)],
)
def test_paged_kvcache_matches_float64(page, s_max, d, causal, splits):
    """A paged KV cache (vLLM's and FlashAttention's block tables): pages smaller than a K/V tile
    (a TMA box per page and swizzle atom), a tile within a page, the table's entries past a
    sequence's length pointing anywhere; the same values as the contiguous cache, bit for bit,
    and float64's."""
    b, sq, h, hk = 3, 2, 4, 2
    rng = np.random.default_rng(page + d)
    nd = numpy_dtype("bfloat16")
    q = rng.standard_normal((b, sq, h, d)).astype(nd)
    kc, vc = (rng.standard_normal((b, s_max, hk, d)).astype(nd) for _ in range(2))
    lens = np.array([s_max, 1, s_max - page // 2 - 3], np.int32)
    (kp, table), (vp, _) = paged(kc, page, np.random.default_rng(1)), paged(vc, page, np.random.default_rng(1))
    table[1, 1:] = 10**6  # past sequence 1's length: never a key it holds (TMA reads zeros there)
    prim = at.attention_kernel.factory(  # (the op's design: a K/V head's query heads packed)
        heads=hk, kv_heads=hk, batch=b, seq_q=sq * h // hk, seq_k=s_max, d=d, dtype="bfloat16", causal=causal, scale=0.125, lse=True,
        seq_major=True, consumers=1, bn=64 if page < 64 else 128, overlap=True, splits=splits, kv_lens=True, page=page, q_group=h // hk,
    )
    out, lse = run_cache_kernel(prim, (q, kp, vp, lens, table), (len(kp),), splits, h, h // hk)
    want, want_lse = kvcache_reference(q, kc, vc, lens, causal, 0.125)
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_allclose(lse.reshape(b, h, sq), want_lse, rtol=1e-5, atol=1e-5)
    got, got_lse = tirx.ops.kvcache_attention(q, kp, vp, lens, is_causal=causal, scale=0.125, block_table=table, return_lse=True)
    contiguous, contiguous_lse = tirx.ops.kvcache_attention(q, kc, vc, lens, is_causal=causal, scale=0.125, return_lse=True)
    np.testing.assert_array_equal(got, contiguous)
    np.testing.assert_array_equal(got_lse, contiguous_lse)


@pytest.mark.parametrize(
    "table,page,match",
    [
        (np.zeros((2, 4), np.int64), 16, r"block_table of shape \[2, 4\] \(int64\); expected int32 \(batch=2, max_pages\)"),
        (np.zeros((3, 4), np.int32), 16, r"block_table of shape \[3, 4\]"),
        (np.zeros((2, 4), np.int32), 24, "pages of 24 rows .k_cache's dim 1.; the kernel takes 8, 16, 32 or a multiple of 64"),
    ],
)
def test_paged_kvcache_errors(table, page, match):
    nd = numpy_dtype("bfloat16")
    q = np.zeros((2, 1, 4, 64), nd)
    kp = np.zeros((8, page, 2, 64), nd)
    with pytest.raises(ValueError, match=match):
        tirx.ops.kvcache_attention(q, kp, kp, np.ones(2, np.int32), block_table=table)


def test_kvcache_plans_per_call_signature(monkeypatch):
    """`kvcache_attention` on tensors decides once per call signature (shapes, strides, dtypes,
    devices, flags): its checks, split count and kernels; the caches' lengths are data, read by
    the kernel at each call. Each call bit for bit the NumPy path's (which plans every call)."""
    torch = pytest.importorskip("torch")
    made = []
    plan = at._kvcache_plan
    monkeypatch.setattr(at, "_kvcache_plan", lambda *a: made.append(1) or plan(*a))
    b, sq, h, hk, s_max, d = 2, 1, 4, 2, 64, 64
    g = torch.Generator().manual_seed(5)
    q = torch.randn(b, sq, h, d, generator=g).bfloat16()
    kc, vc = torch.randn(b, s_max, hk, d, generator=g).bfloat16(), torch.randn(b, s_max, hk, d, generator=g).bfloat16()
    for lens in ([64, 20], [7, 0], [33, 64]):
        lens = torch.tensor(lens, dtype=torch.int32)
        got, lse = tirx.ops.kvcache_attention(q, kc, vc, lens, return_lse=True)
        want, want_lse = tirx.ops.kvcache_attention(*(_host_array(t) for t in (q, kc, vc, lens)), return_lse=True)
        np.testing.assert_array_equal(_host_array(got), want)
        np.testing.assert_array_equal(lse.numpy(), want_lse)
    assert len(made) == 1 + 3  # one plan for the tensors' signature, one per NumPy call
    with pytest.raises(ValueError, match="cache_seqlens: int32 of shape"):
        tirx.ops.kvcache_attention(q, kc, vc, torch.zeros(3, dtype=torch.int32))


def test_kvcache_attention_under_torch_compile():
    """`torch.compile(fullgraph=True)` traces `kvcache_attention` (the registered op
    `torch.ops.tirx.kvcache_attention`), contiguous and paged, with and without the log-sum-exp;
    CPU tensors run in the simulator."""
    torch = pytest.importorskip("torch")
    at.register_kvcache_torch_op()
    b, sq, h, hk, s_max, d = 2, 1, 4, 2, 64, 64
    q = torch.randn(b, sq, h, d).bfloat16()
    kc, vc = torch.randn(b, s_max, hk, d).bfloat16(), torch.randn(b, s_max, hk, d).bfloat16()
    lens = torch.tensor([64, 20], dtype=torch.int32)
    table = torch.tensor([[1, 3, 0, 2], [6, 4, 7, 5]], dtype=torch.int32)
    kp, vp = torch.zeros(8, 16, hk, d).bfloat16(), torch.zeros(8, 16, hk, d).bfloat16()
    kp[table.flatten().long()], vp[table.flatten().long()] = kc.reshape(8, 16, hk, d), vc.reshape(8, 16, hk, d)
    eager = tirx.ops.kvcache_attention(q, kc, vc, lens)
    f = torch.compile(lambda q, k, v: tirx.ops.kvcache_attention(q, k, v, lens) * 2, fullgraph=True)
    torch.testing.assert_close(f(q, kc, vc), eager * 2)
    g = torch.compile(lambda q, k, v: tirx.ops.kvcache_attention(q, k, v, lens, block_table=table, return_lse=True), fullgraph=True)
    out, lse = g(q, kp, vp)
    torch.testing.assert_close(out, eager)
    assert lse.shape == (b, h, sq) and torch.isfinite(lse).all()


def test_paged_kvcache_on_the_gpu_against_pytorch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    b, sq, h, hk, s_max, d = 8, 1, 32, 8, 4096, 128
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(b, s_max, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.tensor([4096, 1, 0, 4000, 129, 3000, 64, 555], dtype=torch.int32, device="cuda")
    for page in (16, 256):
        n = b * (s_max // page)
        table = torch.randperm(n, device="cuda").int().reshape(b, s_max // page)
        kp, vp = (torch.empty(n, page, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kp[table.flatten().long()] = kc.reshape(n, page, hk, d)
        vp[table.flatten().long()] = vc.reshape(n, page, hk, d)
        got = tirx.ops.kvcache_attention(q, kp, vp, lens, block_table=table)
        # (each layout tuned on its own: the configurations may differ, as may the last bits)
        torch.testing.assert_close(got.double(), tirx.ops.kvcache_attention(q, kc, vc, lens).double(), rtol=2.0**-7, atol=2.0**-7)


# Mistakes planted in the kernel's own source (the module, edited and imported from a copy): each
# one the simulator must report, as it would while the kernel is being changed.
PLANTED = {
    "O rescaled while its P V is in flight": (
        "        T.ptx.wgmma.wait_group(0)\n        release(b + j - 1, 1, empty, tid)\n        rescale(",
        "        release(b + j - 1, 1, empty, tid)\n        rescale(",
        "has not been waited for",
    ),
    "a ping-pong turn never handed over": (
        "            else:\n                T.ptx.bar.arrive(TURN_BARRIER + (cw + 1) % consumers, 256)",
        "            else:\n                pass",
        "wait at a named barrier (`bar.sync`, 256 threads)",
    ),
    "V's tile not waited for": ("        landed(b + j - 1, 1, full)\n        my_turn(cw)", "        my_turn(cw)", "data race: `V_s`"),
    "a stage waited for with the wrong parity": (
        "full.wait(ring * stages + j % stages, (j // stages) % 2)",
        "full.wait(ring * stages + j % stages, (j // stages + 1) % 2)",
        "deadlock",
    ),
    "V's stage released before its P V is waited for": (
        "        T.ptx.wgmma.wait_group(0)\n        release(b + j - 1, 1, empty, tid)\n        rescale(s_acc, p, o_acc, alpha)",
        "        release(b + j - 1, 1, empty, tid)\n        T.ptx.wgmma.wait_group(0)\n        rescale(s_acc, p, o_acc, alpha)",
        "data race: `V_s`",
    ),
    "no proxy fence before the TMA store": (
        "        T.ptx.fence.proxy.async_.shared__cta()\n        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)",
        "        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)",
        "no `fence.proxy.async` of that thread follows the write",
    ),
    "no barrier before the TMA store": (
        "        T.ptx.fence.proxy.async_.shared__cta()\n        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)",
        "        T.ptx.fence.proxy.async_.shared__cta()",
        "data race: the TMA store reads `Q_s`",
    ),
    "a persistent CTA's next Q loaded before its last O stores read Q_s": (
        "                q_free.wait(0, (it - 1) % 2)",
        "                pass",
        "data race: `Q_s`",
        dict(persistent=True, sms=1),  # (two query tiles, one CTA)
    ),
    "the rotated loop's rescale before its P V is waited for": (
        "        T.ptx.wgmma.wait_group(0)\n        if j >= 2:\n            release(b + j - 2, 1, empty, tid)\n        rescale(",
        "        if j >= 2:\n            release(b + j - 2, 1, empty, tid)\n        rescale(",
        "has not been waited for",
        dict(rotate=True),
    ),
    "mbarriers used before the CTA barrier after their init": (
        "        T.ptx.fence.mbarrier_init()\n        T.cuda.cta_sync()",
        "        T.ptx.fence.mbarrier_init()",
        "data race: `q_full`",
    ),
}


@pytest.mark.parametrize("mistake", list(PLANTED))
def test_planted_mistakes_are_reported(mistake, tmp_path):
    old, new, words, *extra = PLANTED[mistake]
    planted = planting.planted(at, old, new, tmp_path)
    b, h, sq, sk, d = 1, 1, 130, 700, 64  # (11 K/V tiles: the rings of 4 stages wrap)
    q, k, v = inputs("bfloat16", b, h, h, sq, sk, d)
    prim = planted.attention_kernel.factory(
        heads=h, kv_heads=h, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=False, scale=0.125, lse=True, seq_major=False,
        consumers=2, bn=64, overlap=True, pingpong=True, **(extra[0] if extra else {}),
    )
    o = np.zeros((b * h, sq, d), q.dtype)
    lse = np.zeros((b * h, planted.lse_rows(sq)), np.float32)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), v.reshape(-1, sk, d), o, lse)


def fp8_inputs(fp8, b, h, hk, sq, sk, d, seed=0):
    """FP8 q, k, v (values of a few units: peaked attention, so that a key read against another's
    weight shows)."""
    rng = np.random.default_rng(seed)
    nd = numpy_dtype(fp8)
    return tuple(rng.standard_normal(shape).astype(nd) for shape in ((b, h, sq, d), (b, hk, sk, d), (b, hk, sk, d)))


def fp8_bound(q, k, v, causal, scale, fp8, threshold=0.0):
    """The float64 attention of the dequantised inputs (float64 q, k, v) and the bound of the
    kernel's error: each weight rounded to FP8 (half an ulp: e4m3 2^-4 of itself where normal;
    below, half its subnormal step, 2^-10 of 256, the largest weight's value the kernel rounds
    (weights 2^8 times larger, `attention.P_OFFSET`): 2^-18 of the row's largest weight; e5m2
    2^-3 and 2^-17 of 256, 2^-25), O to bfloat16. With a ``rescale_threshold``, the largest
    weight is rounded from as little as 2^(8 - threshold): the subnormal step 2^threshold times
    larger against it."""
    rel, low = (2.0**-4, 2.0**-18) if fp8 == "float8_e4m3fn" else (2.0**-3, 2.0**-25)
    low *= 2.0**threshold
    want, want_lse = reference(q, k, v, causal, scale)
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, 1), np.repeat(v, group, 1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    w = np.exp(s - s.max(-1, keepdims=True))
    pi = w / w.sum(-1, keepdims=True)
    bound = (rel * pi + low / w.sum(-1, keepdims=True)) @ np.abs(v) + 2.0**-8 * np.abs(want) + 1e-6
    return want, want_lse, bound


@pytest.mark.parametrize(
    "consumers,bn,d,causal,overlap,h,hk,sq,sk",
    [
        (1, 64, 64, False, True, 2, 1, 70, 200),  # ragged, grouped-query heads
        (2, 128, 128, True, True, 1, 1, 130, 300),  # causal over two consumers
        (2, 64, 128, False, False, 2, 2, 96, 700),  # the ring wraps; in turn
        (2, 64, 256, True, True, 1, 1, 100, 150),
        (1, 128, 64, False, True, 1, 1, 64, 37),  # keys not a multiple of 16 (VT's zero columns)
        (2, 192, 128, False, True, 1, 1, 128, 450),  # FP8's wide tiles: three 64-byte atoms of keys
        (2, 256, 64, True, True, 2, 1, 130, 600),  # two 128-byte atoms
        (2, 224, 128, False, False, 2, 1, 70, 230),  # FlashAttention-3's FP8 tile at d = 128: seven 32-byte atoms
        (2, 224, 128, False, "rotate", 2, 1, 130, 700),  # the overlapped loop rotated (`rotate`), with ping-pong
        (2, 128, 128, True, "rotate", 1, 1, 200, 300),
        (2, 224, 128, True, True, 2, 1, 300, 450),  # causal over FlashAttention-3's tile: the diagonal across two K/V tiles
    ],
)
@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_attention_matches_float64(fp8, consumers, bn, d, causal, overlap, h, hk, sq, sk):
    """FP8 attention (FlashAttention-3's: P rounded to FP8 in S's registers, read as the wgmma's A
    fragment against V's transposed, permuted keys) with a descale per batch entry and K/V head:
    O within the bound of P's rounding of the dequantised inputs' float64 attention, the
    log-sum-exp exact to float32; the op with those descales, and with per-tensor ones."""
    b = 2
    q, k, v = fp8_inputs(fp8, b, h, hk, sq, sk, d)
    rng = np.random.default_rng(sk)
    qd, kd, vd = (rng.uniform(0.25, 2.0, (b, hk)).astype(np.float32) for _ in range(3))
    scale = 1 / np.sqrt(d)
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=fp8, causal=causal, scale=scale, lse=True,
        seq_major=False, consumers=consumers, bn=bn, overlap=bool(overlap), rotate=overlap == "rotate", pingpong=overlap == "rotate",
    )
    o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16"))
    lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
    ds = np.stack([qd * kd, vd], -1).reshape(b * hk, 2)
    tirx.compile(prim, "sm_90a")(q.reshape(-1, sq, d), k.reshape(-1, sk, d), at.fp8_values(v), ds, o, lse)
    per_q = lambda x: np.repeat(x, h // hk, 1)[:, :, None, None]  # noqa: E731 (a query head's K/V head's)
    qf, kf, vf = q.astype(F64) * per_q(qd), k.astype(F64) * kd[:, :, None, None], v.astype(F64) * vd[:, :, None, None]
    want, want_lse, bound = fp8_bound(qf, kf, vf, causal, scale, fp8)
    err = np.abs(o.reshape(want.shape).astype(F64) - want)
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"
    np.testing.assert_allclose(lse[:, :sq].reshape(want_lse.shape), want_lse, rtol=1e-5, atol=1e-5)
    got, got_lse = tirx.ops.scaled_dot_product_attention(
        q, k, v, is_causal=causal, enable_gqa=True, return_lse=True, q_descale=qd, k_descale=kd, v_descale=vd
    )
    _, _, bound = fp8_bound(qf, kf, vf, causal, scale, fp8, at.FP8_RESCALE_THRESHOLD)  # (the op's kernels rescale lazily)
    assert got.dtype == numpy_dtype("bfloat16") and (np.abs(got.astype(F64) - want) <= bound).all()
    np.testing.assert_allclose(got_lse, want_lse, rtol=1e-5, atol=1e-5)
    got = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True, q_descale=0.5, k_descale=np.float32(1.5))
    want, _, bound = fp8_bound(q.astype(F64) * 0.5, k.astype(F64) * 1.5, v.astype(F64), causal, scale, fp8, at.FP8_RESCALE_THRESHOLD)
    assert (np.abs(got.astype(F64) - want) <= bound).all()


@pytest.mark.parametrize(
    "bn,fma_columns,d,causal,sq,sk",
    [(224, 48, 128, False, 130, 700), (128, 32, 128, True, 200, 300), (128, 120, 64, False, 70, 37)],
)
def test_fp8_exponentials_on_the_fma_pipe(bn, fma_columns, d, causal, sq, sk):
    """``fma_columns``: the last keys of each tile take exp2 on the FMA pipe (a cubic within
    7.5e-5, `exp2(..., pipe="fma")`), the others MUFU's: O within the bound of P's rounding of the
    float64 attention, the log-sum-exp within the cubic's error of it (a relative error of l is
    an absolute one of its log), near the all-MUFU kernel's result; both exponentials in the CUDA."""
    b, h, hk = 2, 2, 1
    fp8 = "float8_e4m3fn"
    q, k, v = fp8_inputs(fp8, b, h, hk, sq, sk, d)
    scale = 1 / np.sqrt(d)
    outs = []
    for fc in (fma_columns, 0):
        prim = at.attention_kernel.factory(
            heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=fp8, causal=causal, scale=scale, lse=True,
            seq_major=False, consumers=2, bn=bn, overlap=True, pingpong=True, fma_columns=fc,
        )
        kernel = tirx.compile(prim, "sm_90a")
        assert ("tirx_exp2_fma(s_acc[" in kernel.cuda_source) == (fc > 0) and "tirx_exp2_ftz(s_acc[" in kernel.cuda_source
        o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16"))
        lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
        kernel(q.reshape(-1, sq, d), k.reshape(-1, sk, d), at.fp8_values(v), np.ones((b * hk, 2), np.float32), o, lse)
        outs.append((o.astype(F64), lse[:, :sq].astype(F64)))
    want, want_lse, bound = fp8_bound(q.astype(F64), k.astype(F64), v.astype(F64), causal, scale, fp8)
    (o, lse), (o_mufu, lse_mufu) = outs
    err = np.abs(o.reshape(want.shape) - want)
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"
    np.testing.assert_allclose(lse.reshape(want_lse.shape), want_lse, rtol=0, atol=1e-4)
    assert 0 < np.abs(lse - lse_mufu).max() < 1e-4 and np.abs(o - o_mufu).max() > 0


@pytest.mark.parametrize("fma_columns,bn", [(4, 128), (128, 128), (-8, 64)])
def test_fma_columns_refused(fma_columns, bn):
    with pytest.raises(ValueError, match="fma_columns: .*a multiple of 8 below the K/V tile's"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=128, seq_k=128, d=128, dtype="float8_e4m3fn", causal=False, scale=0.1, lse=False,
            seq_major=False, consumers=2, bn=bn, overlap=True, fma_columns=fma_columns,
        )


@pytest.mark.parametrize("dtype,bn", [("bfloat16", 128), ("float8_e4m3fn", 192)])
def test_softmax_exponent_is_one_fma(dtype, bn):
    """P = exp2(S c - m): the scale and the max in one fused multiply-add per score (one rounding,
    one instruction: NVRTC contracts nothing), then the MUFU.EX2 alone."""
    prim = at.attention_kernel.factory(
        heads=2, kv_heads=2, batch=1, seq_q=1024, seq_k=1024, d=128, dtype=dtype, causal=False, scale=0.088, lse=False,
        seq_major=False, consumers=2, bn=bn, overlap=True,
    )
    src = tirx.compile(prim, "sm_90a").cuda_source
    assert re.search(r"s_acc\[[^]]*\] = __fmaf_rn\(s_acc\[[^]]*\], [^,]+, m_run\[f0\]\);", src), src
    assert re.search(r"tirx_exp2_ftz\(s_acc\[[^]]*\]\)", src) and not re.search(r"tirx_exp2_ftz\(s_acc\[[^]]*\] \*", src)


@pytest.mark.parametrize("b,hk,sk,d", [(1, 2, 100, 64), (2, 1, 128, 128), (1, 1, 17, 96), (1, 1, 300, 256), (1, 1, 260, 192)])
def test_fp8_values_kernel_matches_numpy(b, hk, sk, d):
    """V's transposition with its keys permuted, as the op runs it (`fp8_values_kernel`, a block of
    128 keys a CTA, V and VT as 32-bit words): byte for byte NumPy's `fp8_values`, zeros past the
    keys, every byte of VT written."""
    import ml_dtypes

    v = np.random.default_rng(sk).integers(-100, 100, (b, hk, sk, d)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    want = at.fp8_values(v)
    assert want.shape == (b * hk, d, -(-sk // 128) * 128)
    np.testing.assert_array_equal(at._fp8_values_on_device(v).view(np.uint8), want.view(np.uint8))
    kernel = tirx.compile(at.fp8_values_kernel.factory(bhk=b * hk, seq_k=sk, d=d))
    vt = np.full(want.shape, 0x7F, np.uint8)  # (every byte written: none left as it was)
    kernel(v.reshape(b * hk, sk, d).view(np.int32), vt.view(np.int32))
    np.testing.assert_array_equal(vt, want.view(np.uint8))
    # V seq-major ([batch, seq, kv_heads, d] in memory), read in place
    major = np.swapaxes(np.ascontiguousarray(np.swapaxes(v, 1, 2)), 1, 2)
    np.testing.assert_array_equal(at._fp8_values_on_device(major).view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("bn,pingpong,causal,major", [(224, False, False, False), (128, True, True, False), (192, False, True, True)])
def test_fp8_persistent_ctas_as_one_cta_a_tile(bn, pingpong, causal, major):
    """FP8 over persistent CTAs (3 for 12 tiles: each takes four, its rings' phases running on,
    the next tile's Q loaded while the last P V and epilogue run, once the last S = Q Kᵀ is done):
    O and the log-sum-exp bit for bit one CTA a tile's, race-checked; ragged queries and keys,
    grouped heads; ``major``: Q and K seq-major ([batch, seq, heads, d]), as the op passes them.
    Also O through shared memory by TMA (``tma_epilogue``), one CTA a tile and persistent (each
    tile's O_s rewritten once the last one's stores read it)."""
    b, h, hk, sq, sk, d = 2, 2, 1, 300, 500, 128
    q, k, v = fp8_inputs("float8_e4m3fn", b, h, hk, sq, sk, d, seed=3)
    ds = np.ones((b * hk, 2), np.float32)
    qk = [np.ascontiguousarray(np.swapaxes(t, 1, 2)) for t in (q, k)] if major else [q.reshape(-1, sq, d), k.reshape(-1, sk, d)]
    outs = []
    for persistent, tma_epilogue in ((False, False), (True, False), (False, True), (True, True)):
        prim = at.attention_kernel.factory(
            heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="float8_e4m3fn", causal=causal, scale=1 / np.sqrt(d), lse=True,
            seq_major=major, consumers=2, bn=bn, overlap=True, pingpong=pingpong, persistent=persistent, sms=3, tma_epilogue=tma_epilogue,
        )
        o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16"))
        lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
        tirx.compile(prim, "sm_90a")(*qk, at.fp8_values(v), ds, o, lse)
        outs.append((o.astype(np.float32), lse[:, :sq]))
    for other in outs[1:]:
        np.testing.assert_array_equal(other[0], outs[0][0])
        np.testing.assert_array_equal(other[1], outs[0][1])


# FP8's O through O_s by TMA (``tma_epilogue``), persistent: each mistake and the simulator's words.
FP8_EPILOGUE_PLANTED = {
    "O_s rewritten before the last tile's stores read it": (
        "                        T.ptx.cp_async.bulk.wait_group_read(0)\n                    T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)\n                store_o(O, O_s",
        "                        pass\n                    T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)\n                store_o(O, O_s",
        "writes it while its own TMA store that reads it has not completed",
    ),
    "the CTA ends before its last stores read O_s": (
        "                if tid % 128 == 0:\n                    T.ptx.cp_async.bulk.wait_group_read(0)\n\n",
        "                pass\n\n",
        "exits with 1 TMA store(s) whose shared source reads were not waited for",
    ),
    # (`store_o`'s, which the 16-bit epilogue shares: `PLANTED`)
    "no proxy fence before the stores": (*PLANTED["no proxy fence before the TMA store"][:2], "no `fence.proxy.async` of that thread follows the write"),
    "no barrier before the stores": (*PLANTED["no barrier before the TMA store"][:2], "data race: the TMA store reads `O_s`"),
}


def _fp8_one_cta(module, sk, **kw):
    """FP8 attention of ``module`` (a planted copy) over one persistent CTA: two query tiles of 128
    rows, ``sk`` keys, d = 64, in the simulator."""
    q, k, v = fp8_inputs("float8_e4m3fn", 1, 1, 1, 256, sk, 64, seed=3)
    prim = module.attention_kernel.factory(
        heads=1, kv_heads=1, batch=1, seq_q=256, seq_k=sk, d=64, dtype="float8_e4m3fn", causal=False, scale=0.125, lse=False,
        seq_major=False, consumers=2, bn=128, overlap=True, persistent=True, sms=1, **kw,
    )
    o = np.zeros((1, 256, 64), numpy_dtype("bfloat16"))
    tirx.compile(prim, "sm_90a")(q.reshape(-1, 256, 64), k.reshape(-1, sk, 64), at.fp8_values(v), np.ones((1, 2), np.float32), o, np.zeros((1, at.lse_rows(256)), np.float32))


@pytest.mark.parametrize("mistake", list(FP8_EPILOGUE_PLANTED))
def test_fp8_tma_epilogue_mistakes_are_reported(mistake, tmp_path):
    old, new, words = FP8_EPILOGUE_PLANTED[mistake]
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        _fp8_one_cta(planting.planted(at, old, new, tmp_path), 256, pingpong=False, tma_epilogue=True)


def test_tma_epilogue_is_fp8s_of_one_split():
    with pytest.raises(ValueError, match="tma_epilogue: FP8 attention of one split"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=64, d=64, dtype="bfloat16", causal=False, scale=0.125, lse=False,
            seq_major=False, consumers=1, bn=64, tma_epilogue=True,
        )


def test_fp8_persistent_q_never_released_is_reported(tmp_path):
    """A persistent FP8 CTA whose consumers never free Q_s for the next tile's Q: the producer's
    wait is reported as a deadlock, not run forever."""
    old = "            if tid % 32 == 0:\n                q_free.arrive(0)\n"
    planted = planting.planted(at, old, "            pass\n", tmp_path)
    with pytest.raises(tirx.TirxError, match="deadlock"):
        _fp8_one_cta(planted, 256, pingpong=True)


def test_fp8_persistent_q_freed_before_its_last_s_is_reported(tmp_path):
    """A persistent FP8 CTA whose consumers free Q_s before their last S = Q Kᵀ is waited for:
    the next tile's Q, loaded by TMA into Q_s, races that wgmma's reads."""
    old = "                if fp8 and persistent:  # the last S = Q Kᵀ waited for: Q_s free for the next tile's Q now, loaded during this tile's last P V and epilogue\n"
    planted = planting.planted(at, old, "                if False:\n", tmp_path)
    old = "                if pingpong:  # the first consumer's turn first\n"
    planted = planting.planted(planted, old, "                if fp8 and persistent:\n                    free_q(q_free, tid)\n" + old, tmp_path)
    with pytest.raises(tirx.TirxError, match="race"):
        _fp8_one_cta(planted, 512, pingpong=False)


def _fp8_pair(b, h, hk, sq, sk, d, bn, causal, major, pingpong=True, kernel_module=at, persistent=False):
    """O and the log-sum-exp of FP8 attention over V as the op's pass leaves it (`fp8_values`) and
    with ``transpose_v`` (V as it is; ``kernel_module``: a planted copy for the second;
    ``persistent``: the second over 3 persistent CTAs, ``"dynamic"``: taking tiles from a counter)."""
    q, k, v = fp8_inputs("float8_e4m3fn", b, h, hk, sq, sk, d, seed=5)
    ds = np.random.default_rng(1).uniform(0.5, 2.0, (b * hk, 2)).astype(np.float32)
    sw = lambda t: np.ascontiguousarray(np.swapaxes(t, 1, 2))  # noqa: E731 (seq-major)
    qk = [sw(q), sw(k)] if major else [q.reshape(-1, sq, d), k.reshape(-1, sk, d)]
    outs = []
    for tv, module in ((False, at), (True, kernel_module)):
        prim = module.attention_kernel.factory(
            heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="float8_e4m3fn", causal=causal, scale=1 / np.sqrt(d), lse=True,
            seq_major=major, consumers=2, bn=bn, overlap=True, pingpong=pingpong, transpose_v=tv, persistent=tv and bool(persistent), sms=3,
            dynamic=tv and persistent == "dynamic",
        )
        o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16"))
        lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
        vv = (sw(v) if major else v.reshape(-1, sk, d)) if tv else at.fp8_values(v)
        counter = np.zeros(1, np.int32)
        kernel = tirx.compile(prim, "sm_90a")
        kernel(*qk, vv, ds, o, lse, *([counter] if len(kernel.params) > 6 else []))
        assert counter[0] == 0
        outs.append((o.astype(np.float32), lse[:, :sq]))
    return outs


@pytest.mark.parametrize(
    "b,h,hk,sq,sk,d,bn,causal,major",
    [
        (2, 2, 1, 130, 700, 128, 224, False, True),  # FlashAttention-3's tile, grouped heads, seq-major, a ragged last tile
        (1, 2, 1, 300, 450, 128, 224, True, False),  # causal: the diagonal across two K/V tiles
        (1, 2, 1, 130, 600, 64, 256, True, True),  # d = 64: two blocks of columns
        (1, 1, 1, 64, 37, 64, 128, False, False),  # one K/V tile, keys not a multiple of 16 (TMA's zeros)
        (2, 1, 1, 128, 450, 128, 192, False, True),
    ],
)
@pytest.mark.parametrize("persistent", [False, True, "dynamic"])
def test_fp8_v_transposed_in_the_kernel(b, h, hk, sq, sk, d, bn, causal, major, persistent):
    """``transpose_v``: the producer warpgroup transposes V's tiles itself (TMA rows, ldmatrix.trans
    of byte pairs, a byte permutation in registers, stmatrix: FlashAttention-3's), V read as it is,
    one CTA a tile or persistent CTAs (the producer's threads meeting around its ring count and,
    ``dynamic``, the tile thread 0 took from the counter, left 0 after the launch); O
    and the log-sum-exp bit for bit those over `fp8_values`' copy, races, proxies and barriers
    checked."""
    plain, inside = _fp8_pair(b, h, hk, sq, sk, d, bn, causal, major, persistent=persistent)
    np.testing.assert_array_equal(inside[0], plain[0])
    np.testing.assert_array_equal(inside[1], plain[1])


@pytest.mark.parametrize(
    "old,new,words",
    [
        # no fence: the wgmma reads the generic-proxy writes of stmatrix
        ("        T.ptx.fence.proxy.async_.shared__cta()\n        T.ptx.bar.sync(PRODUCER_BARRIER, 128)\n", "        T.ptx.bar.sync(PRODUCER_BARRIER, 128)\n", "fence.proxy.async"),
        # no producers' barrier: the next TMA into the raw stage races the other warps' reads
        ("        T.ptx.bar.sync(PRODUCER_BARRIER, 128)\n        if tid == 0:\n            full.arrive(stages + g % stages)\n", "        if tid == 0:\n            full.arrive(stages + g % stages)\n", "data race: `Vr_s`"),
        # the V stage rewritten before the consumers free it: a P V reads the next tile's stores
        ("        if g >= stages:\n            empty.wait(stages + g % stages, (g // stages + 1) % 2)\n        nc", "        nc", "wrote it through the generic proxy"),
    ],
)
def test_fp8_v_transposition_mistakes_are_reported(old, new, words, tmp_path):
    """Each ordering step of the in-kernel transposition planted out is reported."""
    planted = planting.planted(at, old, new, tmp_path)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        _fp8_pair(1, 1, 1, 128, 700, 64, 128, False, False, kernel_module=planted)


@pytest.mark.parametrize("dtype,d", [("bfloat16", 64), ("float8_e4m3fn", 256)])
def test_fp8_transpose_v_errors(dtype, d):
    with pytest.raises(ValueError, match="transpose_v: FP8 attention of one split, head dim 128 at most"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=64, d=d, dtype=dtype, causal=False, scale=0.125, lse=False,
            seq_major=False, consumers=2, bn=128, overlap=True, transpose_v=True,
        )


DYNAMIC = [
    # (dtype, consumers, bn, d, causal, pingpong, major, sms)
    ("float8_e4m3fn", 2, 192, 128, True, False, True, 3),  # the tuner's FP8 persistent form
    ("float8_e4m3fn", 2, 128, 64, False, True, False, 2),
    ("bfloat16", 2, 128, 64, True, True, False, 3),  # 16-bit: O leaves through Q_s, freed after its stores
    ("bfloat16", 1, 64, 64, True, False, False, 4),  # in turn (no overlap), more CTAs than a head's tiles
]


def _dynamic_run(planted, dtype, consumers, bn, d, causal, pingpong, major, sms, dynamic, persistent=True, launches=1):
    """O and the log-sum-exp of ``planted``'s kernel (one CTA a tile, persistent, or persistent
    taking tiles from a counter: then the counter after each launch too)."""
    b, h, hk, sq, sk = 1, 2, 1, 300, 420
    fp8 = dtype.startswith("float8")
    q, k, v = fp8_inputs(dtype, b, h, hk, sq, sk, d, seed=sms) if fp8 else inputs(dtype, b, h, hk, sq, sk, d, seed=sms)
    prim = planted.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=1 / np.sqrt(d), lse=True,
        seq_major=major, consumers=consumers, bn=bn, overlap=consumers > 1, pingpong=pingpong, persistent=persistent, sms=sms, dynamic=dynamic,
    )
    qk = [np.ascontiguousarray(np.swapaxes(t, 1, 2)) for t in (q, k)] if major else [q.reshape(-1, sq, d), k.reshape(-1, sk, d)]
    vv = at.fp8_values(v) if fp8 else v.reshape(-1, sk, d)
    o = np.zeros((b * h, sq, d), numpy_dtype("bfloat16") if fp8 else q.dtype)
    lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
    args = [*qk, vv] + ([np.ones((b * hk, 2), np.float32)] if fp8 else []) + [o, lse]
    kern = tirx.compile(prim, "sm_90a")
    full = at._with_counter(kern, args)  # (the op's tuner adds the counter so: a zero int32 word)
    assert len(full) == len(args) + dynamic and (not dynamic or full[-1].tolist() == [0])
    counters = []
    for _ in range(launches):
        kern(*full)
        counters += [int(full[-1][0])] if dynamic else []
    return o.astype(np.float32), lse[:, :sq], counters


@pytest.mark.parametrize("dtype,consumers,bn,d,causal,pingpong,major,sms", DYNAMIC)
def test_dynamic_tiles_as_one_cta_a_tile(dtype, consumers, bn, d, causal, pingpong, major, sms):
    """Persistent CTAs taking their tiles from an atomic counter (FlashAttention-3's scheduler:
    each CTA's first tile its own, the next taken by its producer as its Q loads, handed to the
    consumers in shared memory with that Q; a miss past the last tile their way out): O and the
    log-sum-exp bit for bit one CTA a tile's, race-checked, and the counter back at 0 after
    each of two launches (the last taker's subtraction)."""
    want = _dynamic_run(at, dtype, consumers, bn, d, causal, pingpong, major, sms, dynamic=False, persistent=False)
    got = _dynamic_run(at, dtype, consumers, bn, d, causal, pingpong, major, sms, dynamic=True, launches=2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2] == [0, 0]


def test_dynamic_needs_persistent_ctas():
    with pytest.raises(ValueError, match="dynamic: persistent CTAs"):
        at.attention_kernel.factory(
            heads=1, kv_heads=1, batch=1, seq_q=128, seq_k=128, d=64, dtype="bfloat16", causal=False, scale=0.125, lse=False,
            seq_major=False, consumers=1, bn=64, dynamic=True,
        )


@pytest.mark.parametrize(
    "what,old,new",
    [
        (  # the consumers read the next tile's index before its Q's barrier says it is there
            "read before the wait",
            "                    q_full.wait(0, c_it % 2)\n",
            "                    pass\n",
        ),
        (  # the producer writes the next index before the consumers freed Q_s (and read the last one)
            "written before the consumers are done",
            "        if dynamic:  # the tile, for the consumers (who read it before they free Q_s: the wait above orders this after)\n            T_s[0] = p_tile\n",
            "",
        ),
    ],
)
def test_dynamic_hand_off_mistakes_are_reported(what, old, new, tmp_path):
    """The tile index's hand-off from producer to consumers, each mistake planted (the second
    moves the producer's write before its wait for Q_s): reported as a race (or a hang), not a
    wrong answer."""
    planted = planting.planted(at, old, new, tmp_path)
    if not new:  # (the write moved before the wait)
        planted = planting.planted(
            planted, "        if persistent:  # Q_s holds the previous tile's O until its TMA stores have read it\n",
            "        if dynamic:\n            T_s[0] = p_tile\n        if persistent:  # Q_s holds the previous tile's O until its TMA stores have read it\n", tmp_path,
        )
    with pytest.raises(tirx.TirxError, match="race|deadlock"):
        _dynamic_run(planted, "bfloat16", 2, 128, 64, False, False, False, 2, dynamic=True)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_reads_seq_major_tensors_in_place(causal):
    """FP8 attention over [batch, seq, heads, d] tensors transposed (a projection's output, as
    FlashAttention-3 takes them): Q and K read in place by the kernel (seq-major TMA boxes) and V
    by its transposition, grouped-query heads and ragged lengths; the same O and log-sum-exp, bit
    for bit, as over contiguous copies."""
    q, k, v = fp8_inputs("float8_e4m3fn", 2, 4, 2, 130, 300, 128, seed=7)
    major = [np.swapaxes(np.ascontiguousarray(np.swapaxes(t, 1, 2)), 1, 2) for t in (q, k, v)]
    assert at.seq_major(*major) and not any(t.flags.c_contiguous for t in major)
    kw = dict(is_causal=causal, enable_gqa=True, return_lse=True, q_descale=0.5, k_descale=1.5, v_descale=2.0)
    want, want_lse = tirx.ops.scaled_dot_product_attention(q, k, v, **kw)
    got, got_lse = tirx.ops.scaled_dot_product_attention(*major, **kw)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(got_lse, want_lse)


def test_fp8_values_without_its_barrier_is_a_reported_race(tmp_path):
    """V's transposition with its CTA barrier between the tile's stores and its reads removed: the
    simulator reports the race on the tile."""
    import ml_dtypes

    old = "            Tx.thread.copy(tile[row, c4 : c4 + 4], vec[0:4])\n        T.cuda.cta_sync()\n"
    planted = planting.planted(at, old, old.replace("        T.cuda.cta_sync()\n", ""), tmp_path)
    v = np.random.default_rng(0).integers(-100, 100, (1, 1, 200, 128)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    kernel = tirx.compile(planted.fp8_values_kernel.factory(bhk=1, seq_k=200, d=128))
    vt = np.zeros((1, 128, 256), np.uint8)
    with pytest.raises(tirx.TirxError, match="data race: `tile`"):
        kernel(v.reshape(1, 200, 128).view(np.int32), vt.view(np.int32))


def test_fp8_values_on_the_gpu():
    """V's transposition on the GPU, ragged keys over several heads: byte for byte `fp8_values`,
    every byte of VT written."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    b, hk, sk, d = 2, 3, 1000, 128
    v = torch.randn(b, hk, sk, d, device="cuda").to(torch.float8_e4m3fn)
    want = at.fp8_values(v)
    vt = torch.full(want.shape, 0x7F, dtype=torch.uint8, device="cuda")
    kernel = tirx.compile(at.fp8_values_kernel.factory(bhk=b * hk, seq_k=sk, d=d))
    kernel(v.reshape(b * hk, sk, d).view(torch.int32), vt.view(torch.int32))
    assert torch.equal(vt, want.view(torch.uint8))


def test_the_kernels_with_and_without_the_lse_share_one_tuned_choice():
    """The registered op (under torch.compile) and autograd's forward write the log-sum-exp, the
    eager call does not: their kernels share the autotuner's choice (one cache key), so they run
    the same tile shape and give the same values bit for bit — each its own kernel still."""
    for dtype in ("bfloat16", "float8_e4m3fn"):
        kw = dict(heads=4, kv_heads=2, batch=2, seq_q=300, seq_k=500, d=128, dtype=dtype, causal=True, scale=0.088, seq_major=False, sms=132)
        with_lse, without = at.attention_kernel(**kw, lse=True), at.attention_kernel(**kw, lse=False)
        assert with_lse is not without and with_lse.cache_key == without.cache_key


def test_fp8_attention_under_torch_compile():
    """`torch.compile(fullgraph=True)` traces FP8 attention (`torch.ops.tirx.scaled_dot_product_attention_fp8`,
    the descales folded into one tensor before it); on CPU tensors it runs in the simulator, the
    same values as the eager call."""
    torch = pytest.importorskip("torch")
    at.register_fp8_torch_op()  # (this module imported tirx.ops before torch: registered here)
    q, k, v = (torch.from_numpy(t.astype(np.float32)).to(torch.float8_e4m3fn) for t in fp8_inputs("float8_e4m3fn", 1, 2, 1, 70, 150, 64))
    kd = torch.tensor([[1.5]])

    def attend(q, k, v):
        out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, return_lse=True, q_descale=0.5, k_descale=kd)
        return out.float() * 2, lse

    out, lse = torch.compile(attend, fullgraph=True)(q, k, v)
    want_out, want_lse = attend(q, k, v)
    assert out.shape == (1, 2, 70, 64) and lse.shape == (1, 2, 70)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)
    torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)


def test_fp8_attention_one_tile_is_p_rounded_once():
    """One K/V tile: the running max is the row's, so P = fp8(exp2(s scale log2 e - max + 8))
    exactly as NumPy rounds it (`attention.P_OFFSET`), and O = P V / sum(2^8 exp) to float32's
    accuracy: any key read against another's weight would show."""
    import ml_dtypes

    q, k, v = fp8_inputs("float8_e4m3fn", 1, 1, 1, 64, 128, 128, seed=3)
    scale = 2 / np.sqrt(128)
    prim = at.attention_kernel.factory(
        heads=1, kv_heads=1, batch=1, seq_q=64, seq_k=128, d=128, dtype="float8_e4m3fn", causal=False, scale=scale, lse=False,
        seq_major=False, consumers=1, bn=128, overlap=False,
    )
    o = np.zeros((1, 64, 128), numpy_dtype("bfloat16"))
    ds = np.ones((1, 2), np.float32)
    tirx.compile(prim, "sm_90a")(q.reshape(1, 64, 128), k.reshape(1, 128, 128), at.fp8_values(v), ds, o, np.zeros((1, 192), np.float32))
    s = (q[0, 0].astype(np.float32) @ k[0, 0].astype(np.float32).T).astype(F64) * scale * at.LOG2E
    w = np.exp2(s - s.max(-1, keepdims=True))
    p = (w * 2.0**at.P_OFFSET).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(F64)
    want = p @ v[0, 0].astype(F64) / (w.sum(-1, keepdims=True) * 2.0**at.P_OFFSET)
    np.testing.assert_allclose(o[0].astype(F64), want, rtol=2.0**-8, atol=1e-6)


def test_fp8_on_the_gpu_against_float64():
    """FP8 attention on the GPU (e4m3, per K/V head descales as tensors, grouped-query heads,
    causal, a split-KV decoding shape; seq-major tensors read in place): within the bound of P's
    rounding of the dequantised inputs' float64 attention (the tensor cores' FP8 sums are exact
    products, summed in f32 or better)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    cases = [(2, 4, 2, 300, 500, 128, True, False), (1, 2, 2, 1000, 1000, 64, False, False), (4, 8, 8, 1, 4096, 128, False, False)]
    cases += [(2, 4, 2, 300, 500, 128, True, True), (2, 4, 4, 700, 900, 256, False, True)]
    for b, h, hk, sq, sk, d, causal, major in cases:
        shapes = ((h, sq), (hk, sk), (hk, sk))
        if major:  # ([batch, seq, heads, d] in memory, transposed)
            q, k, v = (torch.randn(b, s, n, d, device="cuda").to(torch.float8_e4m3fn).transpose(1, 2) for n, s in shapes)
            assert at.seq_major(q, k, v)
        else:
            q, k, v = (torch.randn(b, n, s, d, device="cuda").to(torch.float8_e4m3fn) for n, s in shapes)
        qd, kd, vd = (torch.rand(b, hk, device="cuda") + 0.5 for _ in range(3))
        got = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True, q_descale=qd, k_descale=kd, v_descale=vd)
        f64 = lambda t, s: t.double().cpu().numpy() * s.double().cpu().numpy()[:, :, None, None]  # noqa: E731
        want, _, bound = fp8_bound(f64(q, qd.repeat_interleave(h // hk, 1)), f64(k, kd), f64(v, vd), causal, 1 / d**0.5, "float8_e4m3fn", at.FP8_RESCALE_THRESHOLD)
        err = np.abs(got.double().cpu().numpy() - want)
        assert (err <= bound).all(), (b, h, sq, sk, d, causal, err.max())
        if causal:  # the registered op under torch.compile: the eager call's values

            def attend(q, k, v):
                return tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, q_descale=qd, k_descale=kd, v_descale=vd)

            assert torch.equal(torch.compile(attend, fullgraph=True)(q, k, v), got)


WIDE_FP8 = [(192, 128, 0, False, False, True), (224, 128, 0, False, False, True), (256, 64, 0, False, False, True), (224, 128, 48, False, False, True), (128, 256, 32, False, False, True)]
PERSISTENT_FP8 = [(192, 128, 0, True, False, False), (224, 128, 0, True, True, False), (128, 256, 0, True, True, True)]


@pytest.mark.parametrize("bn,d,persistent,causal", [(224, 128, False, False), (192, 128, "dynamic", True), (128, 128, False, True), (256, 64, True, False)])
def test_fp8_v_transposed_in_the_kernel_on_the_gpu(bn, d, persistent, causal):
    """``transpose_v`` on the GPU (ldmatrix.trans / stmatrix of byte pairs through TMA's and
    wgmma's swizzles, the producers' proxy fence and barrier): O and the log-sum-exp bit for bit
    the same kernel's over `fp8_values`' copy of V."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    b, h, hk, sq, sk = 2, 4, 2, 300, 1000
    q, k, v = fp8_inputs("float8_e4m3fn", b, h, hk, sq, sk, d, seed=bn)
    f8 = lambda x: torch.from_numpy(np.ascontiguousarray(x).view(np.uint8)).cuda().view(torch.float8_e4m3fn)  # noqa: E731
    qkv = [np.swapaxes(t, 1, 2) for t in (q, k, v)] if causal else [t.reshape(-1, t.shape[2], d) for t in (q, k, v)]
    ds = torch.rand((b * hk, 2), dtype=torch.float32, device="cuda") + 0.5
    outs = []
    for tv in (False, True):
        prim = at.attention_kernel.factory(
            heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="float8_e4m3fn", causal=causal, scale=1 / np.sqrt(d), lse=True,
            seq_major=causal, consumers=2, bn=bn, overlap=True, pingpong=not persistent, persistent=bool(persistent), sms=5, transpose_v=tv,
            dynamic=persistent == "dynamic",
        )
        o = torch.zeros((b * h, sq, d), dtype=torch.bfloat16, device="cuda")
        lse = torch.zeros((b * h, at.lse_rows(sq)), dtype=torch.float32, device="cuda")
        counter = [torch.zeros(1, dtype=torch.int32, device="cuda")] if persistent == "dynamic" else []
        tirx.compile(prim)(f8(qkv[0]), f8(qkv[1]), f8(qkv[2]) if tv else f8(at.fp8_values(v)), ds, o, lse, *counter)
        outs.append((o, lse[:, :sq]))
    assert torch.equal(outs[1][0], outs[0][0]) and torch.equal(outs[1][1], outs[0][1])


@pytest.mark.parametrize(
    "dtype,threshold,bn,d,causal,fma_columns",
    [("float8_e4m3fn", 2.0, 224, 128, False, 16), ("float8_e4m3fn", 4.0, 192, 128, True, 0), ("bfloat16", 8.0, 128, 128, True, 0)],
)
def test_lazy_rescale_on_the_gpu(dtype, threshold, bn, d, causal, fma_columns):
    """``rescale_threshold`` on the GPU (O's products behind a branch some warps take and others
    skip, between the wgmmas that accumulate O) over rows whose maxima move and rows whose maxima
    do not (`_moving_maxima`): within the float64 bound, as `test_lazy_rescale_matches_float64`."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    b, h, hk, sq, sk = 2, 4, 2, 300, 1000
    fp8 = dtype.startswith("float8")
    q, k, v = fp8_inputs(dtype, b, h, hk, sq, sk, d, seed=bn) if fp8 else inputs(dtype, b, h, hk, sq, sk, d, seed=bn)
    q, k = _moving_maxima(q, k)
    scale = 1 / np.sqrt(d)
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=scale, lse=True,
        seq_major=False, consumers=2, bn=bn, overlap=True, pingpong=True, fma_columns=fma_columns, rescale_threshold=threshold,
    )
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x).view(np.uint8 if fp8 else np.uint16)).cuda().view(getattr(torch, dtype))  # noqa: E731
    o = torch.zeros((b * h, sq, d), dtype=torch.bfloat16, device="cuda")
    lse = torch.zeros((b * h, at.lse_rows(sq)), dtype=torch.float32, device="cuda")
    if fp8:
        args = (dev(q.reshape(-1, sq, d)), dev(k.reshape(-1, sk, d)), dev(at.fp8_values(v)), torch.ones((b * hk, 2), device="cuda"))
    else:
        args = tuple(dev(t.reshape(-1, t.shape[2], d)) for t in (q, k, v))
    tirx.compile(prim)(*args, o, lse)
    got = o.float().cpu().numpy().reshape(b, h, sq, d).astype(F64)
    got_lse = lse[:, :sq].cpu().numpy().reshape(b, h, sq)
    if fp8:  # (the log-sum-exp: `fp8_gpu_lse_bound`)
        want, want_lse, bound = fp8_bound(q.astype(F64), k.astype(F64), v.astype(F64), causal, scale, dtype, threshold)
        assert (np.abs(got - want) <= bound).all()
        assert (np.abs(got_lse - want_lse) <= fp8_gpu_lse_bound(q, k, causal, want_lse, fma_columns)).all()
    else:
        want, want_lse = reference(q, k, v, causal, scale)
        np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype))
        np.testing.assert_allclose(got_lse, want_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bn,d,fma_columns,persistent,causal,pingpong", WIDE_FP8 + PERSISTENT_FP8)
def test_fp8_wide_tiles_on_the_gpu(bn, d, fma_columns, persistent, causal, pingpong):
    """FP8's wide K/V tiles on the GPU (V's transposed tile three 64-byte, seven 32-byte or two
    128-byte swizzle atoms a row: TMA's and wgmma's swizzles must agree), ragged keys, grouped
    heads, (``fma_columns``) exponentials on the FMA pipe, and (``persistent``) 5 CTAs taking
    the 24 tiles in turn (``causal``: the tuner's persistent forms, seq-major Q and K, with and
    without ping-pong): within the bound of P's rounding of the float64 attention."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    b, h, hk, sq, sk = 2, 4, 2, 300, 1000
    q, k, v = fp8_inputs("float8_e4m3fn", b, h, hk, sq, sk, d, seed=bn)
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="float8_e4m3fn", causal=causal, scale=1 / np.sqrt(d), lse=True,
        seq_major=causal, consumers=2, bn=bn, overlap=True, pingpong=pingpong, fma_columns=fma_columns, persistent=persistent, sms=5,
    )
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()  # noqa: E731
    f8 = lambda x: dev(x.view(np.uint8)).view(torch.float8_e4m3fn)  # noqa: E731
    o = torch.zeros((b * h, sq, d), dtype=torch.bfloat16, device="cuda")
    lse = torch.zeros((b * h, at.lse_rows(sq)), dtype=torch.float32, device="cuda")
    ds = torch.ones((b * hk, 2), dtype=torch.float32, device="cuda")
    qk = [np.swapaxes(t, 1, 2) for t in (q, k)] if causal else [q.reshape(-1, sq, d), k.reshape(-1, sk, d)]
    tirx.compile(prim)(*map(f8, qk), f8(at.fp8_values(v)), ds, o, lse)
    want, want_lse, bound = fp8_bound(q.astype(F64), k.astype(F64), v.astype(F64), causal, 1 / np.sqrt(d), "float8_e4m3fn")
    err = np.abs(o.double().cpu().numpy().reshape(want.shape) - want)
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"
    err = np.abs(lse[:, :sq].cpu().numpy().reshape(want_lse.shape) - want_lse)
    assert (err <= fp8_gpu_lse_bound(q, k, causal, want_lse, fma_columns)).all(), f"log-sum-exp's error {err.max()}"


def fp8_gpu_lse_bound(q, k, causal, want_lse, fma_columns):
    """The GPU's FP8 log-sum-exp's error bound: MUFU.EX2 and MUFU.LG2 approximate (the log-sum-exp
    to about 1e-5, as bfloat16's); the FMA pipe's cubic to 7.5e-5 relative in l, as much absolute
    in its log; and the FP8 wgmma's sums keep about 13 fraction bits an instruction
    (docs/numerics.md): a score within d / 32 of 2^-13 of its products' magnitudes, which a short
    causal row's log-sum-exp shows."""
    d, h, hk = q.shape[-1], q.shape[1], k.shape[1]
    qk = np.einsum("bhid,bhjd->bhij", np.abs(q.astype(F64)), np.repeat(np.abs(k.astype(F64)), h // hk, 1)) / np.sqrt(d)
    if causal:  # (PyTorch's diagonal: query i sees keys j <= i)
        i, j = np.indices(qk.shape[-2:])
        qk = np.where(j <= i, qk, 0)
    accumulation = d / 32 * 2.0**-13 * qk.max(-1)
    return 1e-5 * np.abs(want_lse) + (2e-4 if fma_columns else 1e-4) + accumulation


def test_fp8_plan_follows_each_calls_descales():
    """The FP8 op's plan per call signature (torch tensors): number descales are not part of the
    signature, so one plan serves calls with other values, each call's own (NumPy's result bit for
    bit); descale tensors are; seq-major operands and the log-sum-exp through it too."""
    torch = pytest.importorskip("torch")
    q, k, v = fp8_inputs("float8_e4m3fn", 1, 2, 1, 70, 90, 64, seed=11)
    tq, tk, tv = (torch.from_numpy(t.view(np.uint8)).view(torch.float8_e4m3fn) for t in (q, k, v))
    c.PLANS.clear()  # (plans are remade on demand: the count below is this test's alone)
    for qd, vd in ((0.5, 2.0), (1.5, 0.25), (0.5, 2.0)):
        want = tirx.ops.scaled_dot_product_attention(q, k, v, enable_gqa=True, q_descale=qd, v_descale=vd)
        got = tirx.ops.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True, q_descale=qd, v_descale=vd)
        np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))
    assert len(c.PLANS) == 1
    kd = np.array([[0.75]], np.float32)
    want, want_lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, k_descale=kd, return_lse=True)
    major = [torch.from_numpy(np.ascontiguousarray(np.swapaxes(t, 1, 2)).view(np.uint8)).view(torch.float8_e4m3fn).transpose(1, 2) for t in (q, k, v)]
    got, got_lse = tirx.ops.scaled_dot_product_attention(*major, is_causal=True, enable_gqa=True, k_descale=torch.from_numpy(kd), return_lse=True)
    np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(got_lse.numpy(), want_lse)
    with pytest.raises(ValueError, match="k_descale of shape"):
        tirx.ops.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True, k_descale=torch.ones(3))


def test_fp8_on_torch_tensors_as_on_numpy():
    """The FP8 op on CPU torch tensors (the simulator) gives NumPy's result bit for bit: V's
    transposition and the descales (a 0-d tensor, a (batch, kv_heads) one, a number) alike."""
    torch = pytest.importorskip("torch")
    q, k, v = fp8_inputs("float8_e4m3fn", 2, 2, 1, 70, 90, 64, seed=5)
    kd = np.array([[1.5], [0.75]], np.float32)
    want = tirx.ops.scaled_dot_product_attention(q, k, v, enable_gqa=True, q_descale=0.5, k_descale=kd, v_descale=2.0)
    tq, tk, tv = (torch.from_numpy(t.view(np.uint8)).view(torch.float8_e4m3fn) for t in (q, k, v))
    got = tirx.ops.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True, q_descale=torch.tensor(0.5), k_descale=torch.from_numpy(kd), v_descale=2.0)
    np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))
    # V a contiguous view from an odd byte (its transposition reads words: copied first)
    flat = torch.empty(1 + tv.numel(), dtype=tv.dtype)
    flat[1:] = tv.reshape(-1)
    got = tirx.ops.scaled_dot_product_attention(tq, tk, flat[1:].view(tv.shape), enable_gqa=True, q_descale=0.5, k_descale=torch.from_numpy(kd), v_descale=2.0)
    np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))


def test_fp8_errors():
    q, k, v = fp8_inputs("float8_e4m3fn", 1, 2, 1, 8, 8, 64)
    with pytest.raises(ValueError, match="FP8 inputs take no attn_mask"):
        tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((8, 8), bool), enable_gqa=True)
    with pytest.raises(ValueError, match=r"k_descale of shape \[2\]; a number, one value, or \(batch, kv_heads\) = \(1, 1\)"):
        tirx.ops.scaled_dot_product_attention(q, k, v, enable_gqa=True, k_descale=np.ones(2, np.float32))
    with pytest.raises(TypeError, match="key is float8_e5m2, the query float8_e4m3fn: give all one dtype"):
        tirx.ops.scaled_dot_product_attention(q, k.astype(numpy_dtype("float8_e5m2")), v, enable_gqa=True)
    b16 = numpy_dtype("bfloat16")
    with pytest.raises(ValueError, match="q_descale, k_descale, v_descale are for FP8 inputs, not bfloat16"):
        tirx.ops.scaled_dot_product_attention(q.astype(b16), k.astype(b16), v.astype(b16), enable_gqa=True, v_descale=2.0)


def _combined_run(mod, kw, inputs, scalars=(), launches=2):
    """Split-KV kernel ``kw`` of module ``mod`` (`attention_kernel`'s factory) run through
    `_launcher` (q of ``inputs`` already in the kernel's rows), with its combine in a second launch
    and in the same one (``combine``), ``launches`` times over one ticket array (checked 0 after
    each): ``(out, lse)`` of each form."""
    b, hk, rows, d = kw["batch"], kw["heads"], kw["seq_q"], kw["d"]
    group = kw.get("q_group", 1)
    o_shape = at._combined_shape(b * hk, rows, d, hk if kw["seq_major"] else 0, group)
    results, tickets = [], None
    for combine in (False, True):
        kernel = tirx.compile(mod.attention_kernel.factory(**kw, combine=combine), "sm_90a")
        out = np.zeros(o_shape, numpy_dtype(kw["dtype"]))
        lse = np.zeros((b * hk, at.lse_rows(rows)), np.float32)
        if combine:
            tickets = np.zeros(b * hk * at.ticket_blocks(rows), np.int32)
            for _ in range(launches):
                parts = np.zeros((kw["splits"], b * hk, rows, d), np.float32)
                plse = np.zeros((kw["splits"], b * hk, at.lse_rows(rows)), np.float32)
                kernel(*inputs, parts, plse, out, lse, tickets, *scalars)
                assert not tickets.any(), "the last split of each block leaves its ticket 0"
        else:
            mod._launcher(kernel, kw["splits"], b * hk, rows, d, kw["dtype"], kw["lse"], hk if kw["seq_major"] else 0, group)(inputs, out, lse, scalars)
        results.append((out, lse))
    return results


@pytest.mark.parametrize(
    "case",
    ["cache packed causal", "cache d96", "cache d256 two consumers", "paged", "dense seq-major"],
)
def test_split_kv_combined_in_one_launch(case):
    """Split-KV's combine in the kernel's own launch (the split that takes a block's last ticket,
    between two `T.cuda.thread_fence`s, reads every split's parts): O and the log-sum-exp bit for
    bit `attention_combine_kernel`'s after the same parts, the simulator's race checks on (the
    other CTAs' parts read only through the fences' release and acquire), the tickets 0 after
    each of two launches; head dims of two, three, four and eight columns a lane (64, 96, 128,
    256; a warp a row), a paged cache, dense seq-major attention."""
    rng = np.random.default_rng(len(case))
    nd = numpy_dtype("bfloat16")
    d = 96 if "d96" in case else 256 if "d256" in case else 128 if case.startswith("dense") else 64
    b, sq, h, hk, s_max = 2, 2, 4, 2, 320
    kw = dict(dtype="bfloat16", scale=0.125, lse=True, seq_major=True, overlap=True, causal="causal" in case, d=d)
    if case.startswith("dense"):
        q = np.swapaxes(rng.standard_normal((b, 70, h, d)).astype(nd), 1, 2)
        k, v = (np.swapaxes(rng.standard_normal((b, s_max, h, d)).astype(nd), 1, 2) for _ in range(2))
        q, k, v = (np.ascontiguousarray(np.swapaxes(t, 1, 2)) for t in (q, k, v))
        kw.update(heads=h, kv_heads=h, batch=b, seq_q=70, seq_k=s_max, consumers=1, bn=128, splits=3)
        inputs, scalars = (q, k, v), ()
    else:
        q = rng.standard_normal((b, sq, h, d)).astype(nd)
        kc, vc = (rng.standard_normal((b, s_max, hk, d)).astype(nd) for _ in range(2))
        lens = np.array([s_max, 130], np.int32)
        g = h // hk
        qr = np.ascontiguousarray(q.reshape(b, sq, hk, g, d).swapaxes(1, 2)).reshape(b * hk, sq * g, d)
        consumers = 2 if "two consumers" in case else 1
        kw.update(heads=hk, kv_heads=hk, batch=b, seq_q=sq * g, seq_k=s_max, consumers=consumers, bn=64 if d == 256 else 128, splits=3 if d != 256 else 5, kv_lens=True, q_group=g)
        inputs, scalars = (qr, kc, vc, lens), ()
        if case == "paged":
            (kp, table), (vp, _) = paged(kc, 64, np.random.default_rng(1)), paged(vc, 64, np.random.default_rng(1))
            kw.update(page=64, splits=2)
            inputs, scalars = (qr, kp, vp, lens, table), (len(kp),)
    (two, two_lse), (one, one_lse) = _combined_run(at, kw, inputs, scalars)
    np.testing.assert_array_equal(one.view(np.uint16), two.view(np.uint16))
    np.testing.assert_array_equal(one_lse[:, : kw["seq_q"]], two_lse[:, : kw["seq_q"]])


@pytest.mark.parametrize(
    "what,old",
    [
        ("release", "                T.cuda.thread_fence()  # (release: the parts before the ticket)\n"),
        ("acquire", "                T.cuda.thread_fence()  # (acquire: the other splits' parts after it)\n"),
        ("parts' barrier", "            T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)  # (the warpgroup's parts written)\n"),
    ],
)
def test_split_kv_combine_mistakes_are_reported(what, old, tmp_path):
    """Each ordering step of the one-launch combine taken out: the last split's reads of the
    other splits' parts race their writes, reported (not a right answer by luck)."""
    planted = planting.planted(at, old, "", tmp_path)
    nd = numpy_dtype("bfloat16")
    rng = np.random.default_rng(3)
    b, hk, g, d, s_max = 1, 2, 2, 64, 300
    q = rng.standard_normal((b * hk, g, d)).astype(nd)
    kc, vc = (rng.standard_normal((b, s_max, hk, d)).astype(nd) for _ in range(2))
    kw = dict(heads=hk, kv_heads=hk, batch=b, seq_q=g, seq_k=s_max, d=d, dtype="bfloat16", causal=False, scale=0.125, lse=False,
              seq_major=True, consumers=1, bn=128, overlap=True, splits=3, kv_lens=True, q_group=g)
    with pytest.raises(tirx.TirxError, match="race"):
        _combined_run(planted, kw, (q, kc, vc, np.array([s_max], np.int32)), launches=1)


def _dependent_pair(mod, dependent: bool):
    """Split-KV decoding (one packed group of 4 query heads over 2 K/V heads of a 320-row cache,
    3 splits) through `_launcher`, the combine kernel a programmatic dependent of the split-KV
    kernel (``dependent``: made with ``launch_dependents``) or not: ``(out, lse)``."""
    rng = np.random.default_rng(5)
    nd = numpy_dtype("bfloat16")
    b, h, hk, d, s_max = 2, 4, 2, 64, 320
    q = rng.standard_normal((b, 1, h, d)).astype(nd)
    kc, vc = (rng.standard_normal((b, s_max, hk, d)).astype(nd) for _ in range(2))
    lens = np.array([s_max, 130], np.int32)
    kw = dict(heads=hk, kv_heads=hk, batch=b, seq_q=2, seq_k=s_max, d=d, dtype="bfloat16", causal=False, scale=0.125, lse=True,
              seq_major=True, consumers=1, bn=128, overlap=True, splits=3, kv_lens=True, q_group=2)
    kernel = tirx.compile(mod.attention_kernel.factory(**kw, launch_dependents=dependent), "sm_90a")
    out = np.zeros(at._combined_shape(b * hk, 2, d, hk, 2), nd)
    lse = np.zeros((b * hk, at.lse_rows(2)), np.float32)
    mod._launcher(kernel, 3, b * hk, 2, d, "bfloat16", True, hk, group=2, dependent=dependent)((q.reshape(b * hk, 2, d), kc, vc, lens), out, lse)
    return out, lse


def test_split_kv_with_a_dependent_combine(tmp_path):
    """The combine kernel as the split-KV kernel's programmatic dependent (its CTAs may start
    while the parts are written; `T.ptx.griddepcontrol.wait()` before it reads them): the same
    O and log-sum-exp bit for bit; a read of the parts moved before the wait is reported."""
    (two, two_lse), (dep, dep_lse) = _dependent_pair(at, False), _dependent_pair(at, True)
    np.testing.assert_array_equal(dep.view(np.uint16), two.view(np.uint16))
    np.testing.assert_array_equal(dep_lse, two_lse)
    src = tirx.compile(at.attention_combine_kernel.factory(splits=3, bhs=4, seq_q=2, d=64, dtype="bfloat16", lse=True, heads=2, group=2, dependent=True), "sm_90a").cuda_source
    assert src.index('asm volatile("griddepcontrol.wait;"') < src.index("LP[")
    old = "        if dependent:  # (the parts are the kernel before's: nothing global before the wait)\n            T.ptx.griddepcontrol.wait()\n"
    planted = planting.planted(at, old, "", tmp_path)
    old = "        combine_part(OP, LP, O, LSE, top, acc, bh, i, t)\n"
    planted = planting.planted(planted, old, old + "        if dependent:\n            T.ptx.griddepcontrol.wait()\n", tmp_path)
    with pytest.raises(tirx.TirxError, match=r"read of `LP` .* before its `griddepcontrol.wait`"):
        _dependent_pair(planted, True)


def test_combine_needs_16_bit_split_kv():
    kw = dict(heads=2, kv_heads=2, batch=1, seq_q=64, seq_k=512, d=128, causal=False, scale=0.1, lse=False, seq_major=False, consumers=1, bn=128)
    with pytest.raises(ValueError, match=r"combine: split-KV \(splits > 1\) of 16-bit attention, a head dim of whole 32 columns"):
        at.attention_kernel.factory(**kw, dtype="bfloat16", combine=True)
