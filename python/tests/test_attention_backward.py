"""`tirx.ops.scaled_dot_product_attention_backward` and autograd through
`scaled_dot_product_attention` (issue 31): both pipelines, the dQ kernel (with D = rowsum(dO ∘
O)) and the dK / dV kernel (deterministic), and D, the dK / dV kernel reducing dQ into float32 by
TMA, dQ's rounding, against float64 gradients in the simulator (causal or not, grouped-query
heads, ragged lengths, a K/V tile no query sees, the forward's attn_mask), the races and waits of
each checked (planted mistakes reported); `loss.backward()` on CPU tensors and under
torch.compile; on the GPU against PyTorch's SDPA gradients."""

import re

import numpy as np
import pytest

import planting
import tirx
import tirx.ops
from tirx.device import _host_array  # (a CPU tensor as NumPy, bf16 included)
from tirx.ops import attention as at
from tirx.ops import attention_backward as ab
from tirx.runtime import numpy_dtype

F64 = np.float64


def reference(q, k, v, do, causal, scale, mask=None):
    """Attention's output, log-sum-exp and gradients in float64 (causal: key j <= query i;
    ``mask``: added to the scaled scores)."""
    q, k, v, do = (t.astype(F64) for t in (q, k, v, do))
    g = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = np.einsum("bhid,bhjd->bhij", q, kr) * scale
    if mask is not None:
        s = s + mask.astype(F64)
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    p = e / e.sum(-1, keepdims=True)
    o = p @ vr
    dp = np.einsum("bhid,bhjd->bhij", do, vr)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    dq = np.einsum("bhij,bhjd->bhid", ds, kr) * scale
    dk = np.einsum("bhij,bhid->bhjd", ds, q) * scale
    dv = np.einsum("bhij,bhid->bhjd", p, do)
    b, hk = k.shape[:2]
    fold = lambda x: x.reshape(b, hk, g, *x.shape[2:]).sum(2)  # noqa: E731 (a group's heads summed)
    return o, (m + np.log(e.sum(-1, keepdims=True)))[..., 0], dq, fold(dk), fold(dv)


CASES = [
    # (b, h, hk, sq, sk, d, causal)
    (1, 1, 1, 64, 64, 64, False),
    (1, 2, 1, 100, 150, 64, True),  # ragged, grouped-query heads, causal
    (2, 4, 2, 130, 70, 128, True),  # fewer keys than queries
    (1, 2, 2, 70, 200, 128, False),
    (1, 1, 1, 40, 300, 96, True),  # K/V tiles no query sees (causal, top-left): dK = dV = 0 there
    (1, 2, 1, 100, 150, 256, True),  # head dims past 128: Q and dO from shared memory, two warpgroups' dK / dV columns
    (1, 1, 1, 70, 130, 192, False),
]


@pytest.mark.parametrize("deterministic", [False, True], ids=["dq_reduced", "deterministic"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", CASES, ids=str)
def test_gradients_match_float64(dtype, b, h, hk, sq, sk, d, causal, deterministic):
    """dQ, dK, dV from the forward's output and log-sum-exp (both exact here: the kernels'
    error alone), P and dS rounded to the inputs' dtype for the tensor cores as FlashAttention's,
    every sum float32, each gradient rounded once; dQ by TMA reductions into float32 (D, dK / dV
    with dQ's parts, dQ rounded) or by its own kernel (deterministic; past head dim 128 both)."""
    if d > 128 and not deterministic:
        pytest.skip("past head dim 128 the backward is the deterministic one")
    rng = np.random.default_rng(sq + sk)
    nd = numpy_dtype(dtype)
    q, do = (rng.standard_normal((b, h, sq, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(nd) for _ in range(2))
    scale = 1 / np.sqrt(d)
    o, lse, dq, dk, dv = reference(q, k, v, do, causal, scale)
    got = tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, o.astype(nd), lse.astype(np.float32), is_causal=causal, enable_gqa=h != hk, deterministic=deterministic)
    t = 2.0**-7 if dtype == "bfloat16" else 2.0**-9
    for name, g, want in zip(("dq", "dk", "dv"), got, (dq, dk, dv)):
        assert g.dtype == nd and g.shape == want.shape, name
        np.testing.assert_allclose(g.astype(F64), want, rtol=t, atol=t * np.abs(want).max(), err_msg=name)
    if causal and sk > sq:  # keys after every query: no gradient
        assert not dk[..., sq:, :].any() and not got[1][..., sq:, :].astype(F64).any()


@pytest.mark.parametrize("seq_major", [False, True], ids=["heads_rows", "seq_major"])
@pytest.mark.parametrize("d", [64, 96, 128])
def test_d_kernel_sums_rows_and_zeroes_the_dq_sums(d, seq_major):
    """The preprocessing kernel: D = rowsum(dO ∘ O) in float64's tolerance (0 past the rows, of
    a ragged last tile), and DQA, the dQ reductions' float32 sums, zeroed over garbage (NaN)
    for the dK / dV kernel to add into; 16-byte rows where a row's vectors divide the threads
    (d = 64, 128), the accumulator's layout else (96)."""
    b, h, sq = 2, 3, 100
    rng = np.random.default_rng(d)
    nd = numpy_dtype("bfloat16")
    o, do = (rng.standard_normal((b, h, sq, d)).astype(nd) for _ in range(2))
    rows = ab.d_rows(sq)
    dd, dqa = np.full((b * h, rows), np.nan, np.float32), np.full((b * h, rows, d), np.nan, np.float32)
    if seq_major:
        args = tuple(np.ascontiguousarray(np.swapaxes(t, 1, 2)) for t in (o, do))
    else:
        args = (o.reshape(b * h, sq, d), do.reshape(b * h, sq, d))
    tirx.compile(ab.attention_dd_kernel.factory(rows=b * h, seq_q=sq, d=d, dtype="bfloat16", heads=h if seq_major else 0), "sm_90a")(*args, dd, dqa)
    want = (o.astype(F64) * do.astype(F64)).sum(-1).reshape(b * h, sq)
    np.testing.assert_allclose(dd[:, :sq], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert not dd[:, sq:].any() and not dqa.any()


@pytest.mark.parametrize("dout_order", ["seq_major", "contiguous"])
@pytest.mark.parametrize("deterministic", [False, True], ids=["dq_reduced", "deterministic"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", [CASES[1], CASES[2], CASES[5]], ids=str)
def test_seq_major_operands_are_read_and_written_in_place(b, h, hk, sq, sk, d, causal, deterministic, dout_order):
    """[batch, seq, heads, d] tensors seen as [batch, heads, seq, d] (a projection's output
    transposed, as the forward reads them): the backward's kernels read Q, K, V, O, dO and write
    dQ, dK, dV in that memory order, no copies; the gradients as the contiguous operands'. A
    contiguous dO beside them (autograd's gradient of ``out[0]``) is read as a seq-major copy:
    the same gradients, still in the operands' order."""
    if d > 128 and not deterministic:
        pytest.skip("past head dim 128 the backward is the deterministic one")
    rng = np.random.default_rng(sq + sk)
    nd = numpy_dtype("bfloat16")
    q, do = (rng.standard_normal((b, h, sq, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(nd) for _ in range(2))
    o, lse, *want = reference(q, k, v, do, causal, 1 / np.sqrt(d))
    major = [np.swapaxes(np.ascontiguousarray(np.swapaxes(t, 1, 2)), 1, 2) for t in (do, q, k, v, o.astype(nd))]
    assert at.seq_major(*major) and not at.seq_major(q, k)
    if dout_order == "contiguous":
        major[0] = do
    got = tirx.ops.scaled_dot_product_attention_backward(*major, lse.astype(np.float32), is_causal=causal, enable_gqa=h != hk, deterministic=deterministic)
    contiguous = tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, o.astype(nd), lse.astype(np.float32), is_causal=causal, enable_gqa=h != hk, deterministic=deterministic)
    for name, g, c_, w in zip(("dq", "dk", "dv"), got, contiguous, want):
        assert at._dense(g, (0, 2, 1, 3)), name  # (seq-major, as the operands)
        np.testing.assert_array_equal(g, c_, err_msg=name)
        np.testing.assert_allclose(g.astype(F64), w, rtol=2.0**-7, atol=2.0**-7 * np.abs(w).max(), err_msg=name)
    reduce, tuned = ab.dkv_kernel_for(major[1], major[2], is_causal=causal, enable_gqa=h != hk, deterministic=deterministic)
    assert tuned.key_values.get("seq_major") and tuned.choice is not None


@pytest.mark.parametrize("deterministic", [False, True], ids=["dq_reduced", "deterministic"])
@pytest.mark.parametrize("shape,kind", [((100, 150), "float"), ((2, 1, 100, 150), "bool"), ((2, 4, 100, 150), "float")], ids=str)
def test_gradients_with_an_attn_mask_match_float64(shape, kind, deterministic):
    """The forward's attn_mask (additive, or bool as 0 / -inf; one matrix, per batch entry, per
    batch entry and head) added to the scores in both kernels (staged in P's or dS's registers)."""
    rng = np.random.default_rng(7)
    nd = numpy_dtype("bfloat16")
    q, do = (rng.standard_normal((2, 4, 100, 64)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((2, 2, 150, 64)).astype(nd) for _ in range(2))
    if kind == "bool":
        mask = rng.random(shape) > 0.3
        additive = np.where(mask, 0.0, -np.inf)
    else:
        mask = rng.standard_normal(shape).astype(nd)
        additive = mask
    o, lse, dq, dk, dv = reference(q, k, v, do, False, 0.125, additive)
    out, got_lse = tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, return_lse=True)
    np.testing.assert_allclose(got_lse, lse, rtol=1e-5, atol=1e-4)
    got = tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, got_lse, enable_gqa=True, attn_mask=mask, deterministic=deterministic)
    t = 2.0**-6
    for name, g, want in zip(("dq", "dk", "dv"), got, (dq, dk, dv)):
        np.testing.assert_allclose(g.astype(F64), want, rtol=t, atol=t * np.abs(want).max(), err_msg=name)
    with pytest.raises(ValueError, match="attn_mask and is_causal together"):
        tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, got_lse, is_causal=True, enable_gqa=True, attn_mask=mask)


def test_through_the_forward_and_its_errors():
    """The forward's own output and log-sum-exp (return_lse=True) feed the backward; wrong shapes,
    dtypes and head dims are errors that name the operand."""
    nd = numpy_dtype("bfloat16")
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((1, 2, 90, 64)).astype(nd) for _ in range(4))
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True)
    _, _, dq, dk, dv = reference(q, k, v, do, True, 0.125)
    got = tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse, is_causal=True)
    for g, want in zip(got, (dq, dk, dv)):
        np.testing.assert_allclose(g.astype(F64), want, rtol=2.0**-6, atol=2.0**-6 * np.abs(want).max())
    reduce, tuned = ab.dkv_kernel_for(q, k, is_causal=True)  # (the dK / dV kernel that backward ran: chosen)
    assert not reduce and tuned.choice is not None and tuned.key_values["seq_q"] == 90
    with pytest.raises(ValueError, match=r"lse of shape \[1, 2\]; expected \[1, 2, 90\]"):
        tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse[:, :, 0])
    with pytest.raises(TypeError, match="lse float32"):
        tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse.astype(np.float64))
    odd = np.zeros((1, 1, 8, 80), nd)
    with pytest.raises(ValueError, match="head_dim 80; the kernel takes 64, 96, 128, 192 or 256"):
        tirx.ops.scaled_dot_product_attention_backward(odd, odd, odd, odd, odd, np.zeros((1, 1, 8), np.float32))


def test_backward_plan_per_call_signature():
    """Torch tensors' backward through one plan per call signature (its checks and kernel lookups
    made once): a second call of the same shapes with other values gives its own gradients (the
    NumPy path's, made per call, bit for bit), and PyTorch's deterministic-algorithms switch takes
    a plan of its own (the dQ kernel, no reduction)."""
    torch = pytest.importorskip("torch")
    from tirx.ops import _common as c

    def operands(seed):
        g = torch.Generator().manual_seed(seed)
        q, do = (torch.randn(1, 2, 40, 64, generator=g).bfloat16() for _ in range(2))
        k, v = (torch.randn(1, 1, 50, 64, generator=g).bfloat16() for _ in range(2))
        out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
        return do, q, k, v, out, lse

    def as_numpy(t):
        return _host_array(t)

    backward = tirx.ops.scaled_dot_product_attention_backward

    def plans():
        return sum(key[0] == "sdpa_backward" for key in c.PLANS)

    before = plans()
    for seed in (1, 2):
        args = operands(seed)
        got = backward(*args, is_causal=True, enable_gqa=True)
        want = backward(*(as_numpy(t) for t in args), is_causal=True, enable_gqa=True)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(as_numpy(g.contiguous()), w)
    assert plans() == before + 1
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        got = backward(*args, is_causal=True, enable_gqa=True)
    finally:
        torch.use_deterministic_algorithms(was)
    assert plans() == before + 2
    want = backward(*(as_numpy(t) for t in args), is_causal=True, enable_gqa=True, deterministic=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(as_numpy(g.contiguous()), w)


def test_autograd_and_torch_compile_on_cpu_tensors():
    """`loss.backward()` through the op (the registered op's backward: these kernels), eager and
    under torch.compile, and with a lower-right causal bias, against PyTorch's SDPA in float64."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    torch.manual_seed(0)
    q = torch.randn(1, 4, 70, 64).bfloat16().requires_grad_()
    k, v = (torch.randn(1, 2, 90, 64).bfloat16().requires_grad_() for _ in range(2))
    do = torch.randn(1, 4, 70, 64).bfloat16()
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, is_causal=True, enable_gqa=True).backward(do.double())
    for fn in (tirx.ops.scaled_dot_product_attention, torch.compile(tirx.ops.scaled_dot_product_attention, fullgraph=True)):
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v, is_causal=True, enable_gqa=True).backward(do)
        for t, r in zip((q, k, v), ref):
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2.0**-6, atol=2.0**-6 * r.grad.abs().max().item())
    # seq-major operands (a projection's [batch, seq, heads, d] output transposed), the output
    # transposed back as a model does: under torch.compile too (the ops' fake tensors have the
    # seq-major strides the kernels give their outputs)
    qs, ks, vs = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))

    def block(qs, ks, vs, fn):
        out = fn(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2), is_causal=True, enable_gqa=True)
        return out.transpose(1, 2).reshape(1, 70, 4 * 64)

    def block_indexed(qs, ks, vs, fn):  # (``out[0]``: autograd's gradient of the output reaches the backward contiguous)
        out = fn(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2), is_causal=True, enable_gqa=True)
        return out[0].transpose(0, 1).reshape(1, 70, 4 * 64)

    ref = [t.detach().double().requires_grad_() for t in (qs, ks, vs)]
    dy = do.transpose(1, 2).reshape(1, 70, 256)
    block(*ref, F.scaled_dot_product_attention).backward(dy.double())
    for run in (block, torch.compile(block, fullgraph=True), block_indexed, torch.compile(block_indexed, fullgraph=True)):
        for t in (qs, ks, vs):
            t.grad = None
        run(qs, ks, vs, tirx.ops.scaled_dot_product_attention).backward(dy)
        for t, r in zip((qs, ks, vs), ref):
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2.0**-6, atol=2.0**-6 * r.grad.abs().max().item())
    # FlashAttention's lower-right diagonal (a causal bias): the backward kernels' offset
    from torch.nn.attention.bias import causal_lower_right

    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, attn_mask=causal_lower_right(70, 90), enable_gqa=True).backward(do.double())
    for t in (q, k, v):
        t.grad = None
    tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(70, 90), enable_gqa=True).backward(do)
    for t, r in zip((q, k, v), ref):
        torch.testing.assert_close(t.grad.double(), r.grad, rtol=2.0**-6, atol=2.0**-6 * r.grad.abs().max().item())
    # a mask (bool, per batch entry and head): the backward adds it as the forward does
    keep = torch.rand(1, 4, 70, 90) > 0.3
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, attn_mask=keep, enable_gqa=True).backward(do.double())
    for fn in (tirx.ops.scaled_dot_product_attention, torch.compile(tirx.ops.scaled_dot_product_attention, fullgraph=True)):
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v, attn_mask=keep, enable_gqa=True).backward(do)
        for t, r in zip((q, k, v), ref):
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2.0**-6, atol=2.0**-6 * r.grad.abs().max().item())


def test_on_the_gpu_against_pytorch():
    """On the GPU: the gradients against float64 SDPA, no further from it than PyTorch's own bf16
    gradients (twice theirs, plus a little); causal or not, grouped-query heads, a padding mask."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    cases = [(2, 8, 2, 1000, 128, True, False), (1, 4, 4, 513, 64, False, False), (2, 4, 4, 2048, 128, True, False)]
    # seq-major operands (a projection's [batch, seq, heads, d] transposed): read and written in place
    cases += [(2, 8, 2, 1000, 128, True, True), (1, 4, 4, 513, 64, False, True), (1, 4, 4, 700, 256, True, True)]
    for b, h, hk, s, d, causal, major in cases:
        def new(n):
            if major:
                return torch.randn(b, s, n, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
            return torch.randn(b, n, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)

        q, k, v = new(h), new(hk), new(hk)
        do = new(h).detach()
        ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*ref, is_causal=causal, enable_gqa=True).backward(do.double())
        tirx.ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True).backward(do)
        ours = [t.grad.double() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True).backward(do)
        for name, mine, theirs, r in zip("qkv", ours, [t.grad.double() for t in (q, k, v)], ref):
            assert (mine - r.grad).abs().max() <= 2 * (theirs - r.grad).abs().max() + 1e-3, name
    # a padding mask (bool, per batch entry), 2k keys: dQ by TMA reductions
    b, h, s, d = 2, 8, 2048, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    keep = (torch.arange(s, device="cuda") < torch.tensor([[1500], [2048]], device="cuda"))[:, None, None, :]
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, attn_mask=keep).backward(do.double())
    tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=keep).backward(do)
    ours = [t.grad.double() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    F.scaled_dot_product_attention(q, k, v, attn_mask=keep).backward(do)
    for name, mine, theirs, r in zip("qkv", ours, [t.grad.double() for t in (q, k, v)], ref):
        assert (mine - r.grad).abs().max() <= 2 * (theirs - r.grad).abs().max() + 1e-3, f"masked {name}"


PLANTED = {
    "dS read from shared memory before every thread wrote it": (
        "                    T.ptx.fence.proxy.async_.shared__cta()\n                    T.cuda.cta_sync()\n",
        "                    T.ptx.fence.proxy.async_.shared__cta()\n",
        "wgmma misuse: wgmma.mma_async reads `P_s`",
    ),
    "P written to shared memory without a proxy fence": (
        "                    T.ptx.fence.proxy.async_.shared__cta()\n                    T.cuda.cta_sync()\n",
        "                    T.cuda.cta_sync()\n",
        "through the generic proxy and no",
    ),
    "a K/V tile read before its TMA landed": ("    full.wait(j % 2, (j // 2) % 2)\n    Tx.warpgroup.gemm_async(s[0:BM", "    Tx.warpgroup.gemm_async(s[0:BM", "data race: `K_s`"),
    "dQ's stage rewritten while its last TMA reduction may still read it": (
        "                            T.ptx.cp_async.bulk.wait_group_read(0)\n",
        "                            T.ptx.cp_async.bulk.wait_group_read(1)\n",
        "data race: `DQ_s`",
    ),
    "dQ staged for the TMA reduction without a proxy fence": (
        "        Tx.warpgroup.copy(DQ_s[0:BM, 0:d], dq[0:BM, 0:d])\n        T.ptx.fence.proxy.async_.shared__cta()\n",
        "        Tx.warpgroup.copy(DQ_s[0:BM, 0:d], dq[0:BM, 0:d])\n",
        "through the generic proxy and no",
    ),
    "a query tile waited for with the wrong parity": (
        "                    full.wait(t % stages, (t // stages) % 2)\n",
        "                    full.wait(t % stages, (t // stages + 1) % 2)\n",
        "deadlock: threads 0-127",
    ),
}


@pytest.mark.parametrize("mistake", list(PLANTED))
def test_planted_mistakes_are_reported(mistake, tmp_path):
    """Mistakes planted in the kernels' source, each reported by the simulator (a refill without
    a barrier after the warpgroup's wait is not one: the waited-for wgmma has read its operands)."""
    old, new, words = PLANTED[mistake]
    planted = planting.planted(ab, old, new, tmp_path)
    nd = numpy_dtype("bfloat16")
    rng = np.random.default_rng(0)
    q, do = (rng.standard_normal((1, 200, 64)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((1, 130, 64)).astype(nd) for _ in range(2))
    lse = np.zeros((1, planted.d_rows(200)), np.float32)
    dd = np.zeros_like(lse)
    kw = dict(heads=1, kv_heads=1, batch=1, seq_q=200, seq_k=130, d=64, dtype="bfloat16", causal=False, scale=0.125)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        tirx.compile(planted.attention_dq_kernel.factory(**kw), "sm_90a")(q, k, v, q, do, lse, np.zeros_like(q), dd)
        tirx.compile(planted.attention_dkv_kernel.factory(**kw), "sm_90a")(q, k, v, do, lse, dd, np.zeros_like(k), np.zeros_like(v))
        dqa = np.zeros((1, planted.d_rows(200), 64), np.float32)
        tirx.compile(planted.attention_dkv_kernel.factory(**kw, reduce_dq=True), "sm_90a")(q, k, v, do, lse, dd, np.zeros_like(k), np.zeros_like(v), dqa)


def dkv_ws_inputs(b, h, hk, sq, sk, d, causal, seed=0):
    """Inputs of `attention_dkv_kernel(reduce_dq=True)` (heads flattened; LSE +inf and D 0 past
    the queries, D from the rounded output as the backward's) and the float64 gradients."""
    rng = np.random.default_rng(seed + sq + sk)
    nd = numpy_dtype("bfloat16")
    q, do = (rng.standard_normal((b, h, sq, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(nd) for _ in range(2))
    scale = 1 / np.sqrt(d)
    o, lse, dq, dk, dv = reference(q, k, v, do, causal, scale)
    rows = ab.d_rows(sq)
    lse_p = np.full((b * h, rows), np.inf, np.float32)
    lse_p[:, :sq] = lse.reshape(b * h, sq)
    dd = np.zeros((b * h, rows), np.float32)
    dd[:, :sq] = (do.astype(F64) * o.astype(nd).astype(F64)).sum(-1).reshape(b * h, sq)
    args = (q.reshape(b * h, sq, d), k.reshape(b * hk, sk, d), v.reshape(b * hk, sk, d), do.reshape(b * h, sq, d), lse_p, dd)
    outs = (np.zeros((b * hk, sk, d), nd), np.zeros((b * hk, sk, d), nd), np.zeros((b * h, rows, d), np.float32))
    kw = dict(heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=causal, scale=scale, reduce_dq=True)
    return kw, args, outs, (dq, dk, dv)


@pytest.mark.parametrize("seq_major", [False, True], ids=["heads_rows", "seq_major"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", CASES, ids=str)
def test_tma_epilogues_store_the_same_bits(b, h, hk, sq, sk, d, causal, seq_major):
    """`tma_epilogue`: the dQ kernel's dQ and the one-warpgroup dK / dV kernel's dK and dV
    (reducing dQ or not, head dims past 128 as two warpgroups' columns) staged in shared memory
    and stored by TMA (a box per swizzle atom's columns, rows past the sequence clipped): the
    same bits as the stores from registers, the simulator checking the hand-over's barriers and
    proxy fence."""
    rng = np.random.default_rng(sq + sk + d)
    nd = numpy_dtype("bfloat16")
    q, do = (rng.standard_normal((b, h, sq, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(nd) for _ in range(2))
    scale = 1 / np.sqrt(d)
    o, lse, *_ = reference(q, k, v, do, causal, scale)
    rows = ab.d_rows(sq)
    lse_p = np.full((b * h, rows), np.inf, np.float32)
    lse_p[:, :sq] = lse.reshape(b * h, sq)

    def stored(t, n):  # (batch, n, seq, d) as the kernels take it
        return np.ascontiguousarray(np.swapaxes(t, 1, 2)) if seq_major else t.reshape(b * n, t.shape[2], d)

    qs, ks, vs, os_, dos = stored(q, h), stored(k, hk), stored(v, hk), stored(o.astype(nd), h), stored(do, h)
    kw = dict(heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=causal, scale=scale, seq_major=seq_major)
    got = {}
    for tma in (False, True):
        dq, dd = np.zeros_like(qs), np.zeros((b * h, rows), np.float32)
        tirx.compile(ab.attention_dq_kernel.factory(**kw, tma_epilogue=tma), "sm_90a")(qs, ks, vs, os_, dos, lse_p, dq, dd)
        outs = [dq]
        for reduce in (False, True) if d <= 128 else (False,):
            dk, dv = np.zeros_like(ks), np.zeros_like(vs)
            dqa = (np.zeros((b * h, rows, d), np.float32),) if reduce else ()
            factory = ab.attention_dkv_kernel.factory(**kw, reduce_dq=reduce, tma_epilogue=tma)
            tirx.compile(factory, "sm_90a")(qs, ks, vs, dos, lse_p, dd, dk, dv, *dqa)
            outs += [dk, dv, *dqa]
        got[tma] = outs
    for i, (a, c_) in enumerate(zip(got[False], got[True])):
        np.testing.assert_array_equal(c_, a, err_msg=f"output {i}")
    assert got[True][0].any() and got[True][1].any()  # (not vacuously equal)


def test_tma_epilogues_on_the_gpu():
    """On the GPU: the TMA epilogues' dQ, dK and dV bit-equal to the stores from registers
    (ragged and causal at d 128, seq-major, two warpgroups' columns at d 256)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    for b, h, hk, sq, sk, d, causal, major in [(2, 8, 2, 1000, 1100, 128, True, False), (1, 4, 4, 513, 700, 64, False, True), (1, 4, 2, 700, 600, 256, True, False)]:
        q, do, o = (torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        rows = ab.d_rows(sq)
        lse_p = torch.full((b * h, rows), float("inf"), device="cuda")
        lse_p[:, :sq] = torch.randn(b * h, sq, device="cuda").abs() + 5

        def stored(t, n):
            return t.transpose(1, 2).contiguous() if major else t.reshape(b * n, t.shape[2], d)

        qs, ks, vs, os_, dos = stored(q, h), stored(k, hk), stored(v, hk), stored(o, h), stored(do, h)
        kw = dict(heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=causal, scale=d**-0.5, seq_major=major)
        got = {}
        for tma in (False, True):
            dq, dd = torch.zeros_like(qs), torch.zeros(b * h, rows, device="cuda")
            tirx.compile(ab.attention_dq_kernel.factory(**kw, tma_epilogue=tma))(qs, ks, vs, os_, dos, lse_p, dq, dd)
            dk, dv = torch.zeros_like(ks), torch.zeros_like(vs)
            tirx.compile(ab.attention_dkv_kernel.factory(**kw, tma_epilogue=tma))(qs, ks, vs, dos, lse_p, dd, dk, dv)
            got[tma] = (dq, dk, dv)
        for name, a, c_ in zip(("dq", "dk", "dv"), got[False], got[True]):
            assert torch.equal(a, c_), f"{name} d={d} causal={causal} seq_major={major}"


_FENCED_DQ = "            T.ptx.fence.proxy.async_.shared__cta()\n            T.cuda.cta_sync()\n            if tid == 0:\n                for c0 in list(range(0, d, atom)):\n                    Tx.copy_async(L.rows(DQ"
_FENCED_DKV = "            T.ptx.fence.proxy.async_.shared__cta()\n            T.cuda.cta_sync()\n            if tid == 0:\n                for c0 in list(range(0, d, atom)):\n                    Tx.copy_async(L.rows(DK"
PLANTED_TMA_EPILOGUES = {
    "dQ stored by TMA without a proxy fence": ("dq", _FENCED_DQ, _FENCED_DQ.replace("            T.ptx.fence.proxy.async_.shared__cta()\n", ""), "generic proxy"),
    "dQ stored by TMA before the other threads wrote theirs": ("dq", _FENCED_DQ, _FENCED_DQ.replace("            T.cuda.cta_sync()\n", ""), "data race"),
    "dK and dV stored by TMA without a proxy fence": ("dkv", _FENCED_DKV, _FENCED_DKV.replace("            T.ptx.fence.proxy.async_.shared__cta()\n", ""), "generic proxy"),
    "dK and dV stored by TMA before the other threads wrote theirs": ("dkv", _FENCED_DKV, _FENCED_DKV.replace("            T.cuda.cta_sync()\n", ""), "data race"),
}


@pytest.mark.parametrize("mistake", list(PLANTED_TMA_EPILOGUES))
def test_planted_mistakes_in_the_tma_epilogues_are_reported(mistake, tmp_path):
    which, old, new, words = PLANTED_TMA_EPILOGUES[mistake]
    planted = planting.planted(ab, old, new, tmp_path)
    kw, args, (dk, dv, _), _ = dkv_ws_inputs(1, 2, 1, 100, 150, 64, True)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        if which == "dq":  # (dO as O too: D's values do not matter here)
            q, k, v, do, lse_p, dd = args
            dq_kw = {n: x for n, x in kw.items() if n != "reduce_dq"}
            tirx.compile(planted.attention_dq_kernel.factory(**dq_kw, tma_epilogue=True), "sm_90a")(q, k, v, do, do, lse_p, np.zeros_like(q), dd)
        else:
            tirx.compile(planted.attention_dkv_kernel.factory(**{**kw, "reduce_dq": False}, tma_epilogue=True), "sm_90a")(*args, dk, dv)


@pytest.mark.parametrize("dq_overlap", [False, True], ids=["gemms_back_to_back", "dq_stored_during_dk"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", [c for c in CASES if c[5] <= 128], ids=str)
def test_warp_specialised_dkv_matches_float64(b, h, hk, sq, sk, d, causal, dq_overlap):
    """The warp-specialised dK / dV kernel (FlashAttention-3's: 128 keys a CTA, two consumer
    warpgroups computing transposed, each step's dQ part reduced by a producer thread's TMA, dK
    and dV stored through K's and V's shared memory by TMA, rows past the keys clipped) against
    float64; its races, waits and fences checked by the simulator."""
    kw, args, (dk, dv, dqa), want = dkv_ws_inputs(b, h, hk, sq, sk, d, causal)
    tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=dq_overlap), "sm_90a")(*args, dk, dv, dqa)
    got = ((dqa[:, :sq] * kw["scale"]).reshape(b, h, sq, d), dk.reshape(b, hk, sk, d), dv.reshape(b, hk, sk, d))
    t = 2.0**-7
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g.astype(F64), w, rtol=t, atol=t * np.abs(w).max(), err_msg=name)


@pytest.mark.parametrize("dq_overlap", [False, True], ids=["gemms_back_to_back", "dq_stored_during_dk"])
@pytest.mark.parametrize(
    "b,h,hk,sq,sk,d,causal",
    [
        (1, 2, 1, 256, 200, 64, True),  # grouped-query heads, keys ragged, causal through two query tiles
        (1, 2, 2, 128, 384, 64, False),  # one query tile, three CTAs of keys
        (1, 2, 1, 250, 300, 64, True),  # queries ragged (whole tiles of 128 rows in D and LSE)
        (1, 1, 1, 200, 64, 64, True),  # fewer keys than queries: the first query tile's rows see none past the diagonal
    ],
    ids=str,
)
def test_warp_specialised_dkv_over_query_tiles_of_128_rows(b, h, hk, sq, sk, d, causal, dq_overlap):
    """``q_rows=128`` (head dim 64): each step 128 queries, each consumer's dQ part half its rows
    (a block of DQ_s each, a TMA reduction each) rather than half its columns: against float64,
    races, waits and fences checked by the simulator."""
    kw, args, (dk, dv, dqa), want = dkv_ws_inputs(b, h, hk, sq, sk, d, causal)
    tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=dq_overlap, q_rows=128), "sm_90a")(*args, dk, dv, dqa)
    got = ((dqa[:, :sq] * kw["scale"]).reshape(b, h, sq, d), dk.reshape(b, hk, sk, d), dv.reshape(b, hk, sk, d))
    t = 2.0**-7
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g.astype(F64), w, rtol=t, atol=t * np.abs(w).max(), err_msg=name)


@pytest.mark.parametrize("dq_overlap", [False, True], ids=["gemms_back_to_back", "dq_stored_during_dk"])
@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", [CASES[2], CASES[3]], ids=str)
def test_own_dq_registers_give_the_same_bits(b, h, hk, sq, sk, d, causal, dq_overlap):
    """``own_dq`` (head dim 128): dQ's part in registers of its own rather than Sᵀ's, the same
    GEMMs in the same order: bit for bit the kernel that shares Sᵀ's registers (which the float64
    test checks), races and waits checked by the simulator."""
    kw, args, outs, _ = dkv_ws_inputs(b, h, hk, sq, sk, d, causal)
    got = []
    for own in (False, True):
        o = tuple(np.zeros_like(x) for x in outs)
        tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=dq_overlap, own_dq=own), "sm_90a")(*args, *o)
        got.append(o)
    for name, x, y in zip(("dk", "dv", "dqa"), *got):
        np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize("dq_overlap", [False, True], ids=["gemms_back_to_back", "dq_stored_during_dk"])
@pytest.mark.parametrize(
    "b,h,hk,sq,sk,d,causal,design",
    [
        (1, 2, 1, 192, 200, 128, True, {}),  # dQ's parts half the columns, keys ragged, grouped
        (1, 2, 2, 128, 256, 64, False, {}),  # ... of 32 columns
        (1, 2, 1, 250, 300, 64, True, {"q_rows": 128}),  # half the rows, queries ragged
        (1, 1, 1, 130, 128, 128, False, {"own_dq": True}),  # a query tile of 2 rows past 128
    ],
    ids=str,
)
def test_flat_dq_parts_give_the_same_bits(b, h, hk, sq, sk, d, causal, design, dq_overlap):
    """``flat_dq``: dQ's parts stored in their accumulator's register order (`fragment_order`:
    16-byte stores; DQA in rows of 128 columns, a TMA box per part) and rounded by the convert
    kernel that reads that order (``part_cols``): dK and dV the kernel's bits without it, dQ the
    natural order's rounded bits; races, waits and fences checked by the simulator."""
    kw, args, outs, want = dkv_ws_inputs(b, h, hk, sq, sk, d, causal)
    got = []
    for flat in (False, True):
        o = tuple(np.zeros_like(x) for x in outs)
        tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=dq_overlap, flat_dq=flat, **design), "sm_90a")(*args, *o)
        dq = np.zeros((b * h, sq, d), numpy_dtype("bfloat16"))
        part_cols = (d if design.get("q_rows") else d // 2) if flat else 0
        tirx.compile(ab.attention_dq_convert_kernel.factory(rows=b * h, seq_q=sq, d=d, dtype="bfloat16", scale=kw["scale"], part_cols=part_cols), "sm_90a")(o[2], dq)
        got.append((o[0], o[1], dq))
    for name, x, y in zip(("dk", "dv", "dq"), *got):
        np.testing.assert_array_equal(x, y, err_msg=name)
    t = 2.0**-7
    np.testing.assert_allclose(got[1][2].astype(F64).reshape(want[0].shape), want[0], rtol=t, atol=t * np.abs(want[0]).max(), err_msg="dq")


def to_fragment_order(a, cols):
    """``a`` (rows, q_tiles · 64, d) as `fragment_order` parts of 64 x ``cols`` (the parts of a
    query tile's columns in turn): a part's element (128 j + 32 w + 4 g + t) · 4 + 2 h + e, thread
    (w, g, t)'s register 4 j + 2 h + e, is its row 16 w + 8 h + g, column 8 j + 2 t + e."""
    rows, n, d = a.shape
    parts = a.reshape(rows, n // 64, 64, d // cols, cols).transpose(0, 1, 3, 2, 4).reshape(-1, 4, 2, 8, cols // 8, 4, 2)
    return parts.transpose(0, 4, 1, 3, 5, 2, 6).reshape(a.shape)


@pytest.mark.parametrize(
    "rows,heads,sq,d,part_cols",
    [(2, 0, 300, 128, 64), (4, 2, 130, 64, 32), (2, 2, 64, 64, 64), (3, 3, 100, 32, 16), (2, 0, 256, 128, 128)],
    ids=str,
)
def test_dq_parts_in_fragment_order_round_to_the_bits_of_rows(rows, heads, sq, d, part_cols):
    """`attention_dq_convert_kernel(part_cols=)`: DQA's parts in `fragment_order`, read in the
    accumulator's layout and stored through swizzled shared memory by TMA (swizzles of 128, 64 and
    32 bytes; rows past the sequence clipped; seq-major dQ), give the bits of DQA in rows."""
    rng = np.random.default_rng(d + sq)
    dqa = rng.standard_normal((rows, ab.d_rows(sq), d)).astype(np.float32)
    shape = ab._Heads(heads > 0, rows // max(heads, 1), d).shape(max(heads, 1), sq)
    got = []
    for pc, a in ((0, dqa), (part_cols, to_fragment_order(dqa, part_cols))):
        dq = np.zeros(shape, numpy_dtype("bfloat16"))
        tirx.compile(ab.attention_dq_convert_kernel.factory(rows=rows, seq_q=sq, d=d, dtype="bfloat16", scale=0.125, heads=heads, part_cols=pc), "sm_90a")(np.ascontiguousarray(a), dq)
        got.append(dq)
    np.testing.assert_array_equal(got[1], got[0])
    assert np.abs(got[0].astype(F64)).max() > 0


@pytest.mark.parametrize("d,sq,design", [(128, 192, {}), (64, 256, {"q_rows": 128})], ids=str)
def test_the_backward_reads_dq_in_the_order_its_dkv_kernel_chose(d, sq, design, monkeypatch):
    """The default pipeline rounds DQA with the convert kernel of the order the tuned dK / dV
    kernel adds dQ's parts in (`flat_dq`: `fragment_order`): the same gradients whichever the
    tuner chose (here its only configuration)."""
    rng = np.random.default_rng(d + sq)
    nd = numpy_dtype("bfloat16")
    q, do = (rng.standard_normal((1, 2, sq, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((1, 2, 200, d)).astype(nd) for _ in range(2))
    out, lse = tirx.ops.scaled_dot_product_attention(q, k, v, return_lse=True)
    got = []
    for flat in (False, True):
        monkeypatch.setattr(ab.attention_dkv_kernel, "configs", [{"ws": True, "dq_overlap": True, "flat_dq": flat, **design}])
        monkeypatch.setattr(ab.attention_dkv_kernel, "_tuned", {})
        monkeypatch.setattr(ab.attention_dkv_kernel, "_by_call", {})
        got.append(tirx.ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse))
        (tuned,) = ab.attention_dkv_kernel._tuned.values()  # (the reducing pipeline's, this design)
        assert tuned.configs[tuned.choice] == {"ws": True, "dq_overlap": True, "flat_dq": flat, **design}
    for name, x, y in zip(("dq", "dk", "dv"), *got):
        np.testing.assert_array_equal(x, y, err_msg=name)


def test_causal_head_dim_64_reduces_dq_from_1k_keys_over_query_tiles_of_128_rows():
    """The default pipeline (measured on an H200): causal at head dim 64 dQ by its own kernel under
    2k keys, under 1k where the queries are whole tiles of 128 rows (the dK / dV kernel's tuner may
    take them), else reduced; ``deterministic`` decides where given."""
    q = np.zeros((1, 1, 1, 64), np.float32)
    assert ab._reduce_dq(q, 64, True, 1024, 1024, None)
    assert ab._reduce_dq(q, 64, True, 1000, 1024, None)  # (1,024 rows of D: 8 tiles of 128)
    assert not ab._reduce_dq(q, 64, True, 1088, 1024, None)  # (17 tiles of 64)
    assert not ab._reduce_dq(q, 64, True, 512, 512, None)
    assert ab._reduce_dq(q, 64, True, 1088, 2048, None)
    assert ab._reduce_dq(q, 64, False, 512, 512, None)
    assert ab._reduce_dq(q, 64, True, 512, 512, False) and not ab._reduce_dq(q, 64, False, 4096, 4096, True)


def test_query_tiles_of_128_rows_are_the_warp_specialised_designs_at_head_dim_64():
    """``q_rows=128``: declined, with the reason, where its registers or tiles do not fit; the tuner
    tries it only where they do."""
    kw, *_ = dkv_ws_inputs(1, 2, 1, 128, 128, 64, False)
    with pytest.raises(ValueError, match="ws=True"):
        ab.attention_dkv_kernel.factory(**kw, q_rows=128)
    with pytest.raises(ValueError, match="ws=True"):
        ab.attention_dkv_kernel.factory(**kw, own_dq=True)
    with pytest.raises(ValueError, match="ws=True"):
        ab.attention_dkv_kernel.factory(**kw, flat_dq=True)
    with pytest.raises(ValueError, match="part_cols=48"):
        ab.attention_dq_convert_kernel.factory(rows=2, seq_q=128, d=64, dtype="bfloat16", scale=1.0, part_cols=48)
    with pytest.raises(ValueError, match="128 at head dim 64"):
        ab.attention_dkv_kernel.factory(**{**kw, "d": 128}, ws=True, q_rows=128)
    with pytest.raises(ValueError, match="whole tiles of 128 rows"):
        ab.attention_dkv_kernel.factory(**{**kw, "seq_q": 64}, ws=True, q_rows=128)
    key = dict(d=64, varlen=False, reduce_dq=True, mask="")
    assert {"ws": True, "q_rows": 128} in ab._dkv_prune(ab.DKV_CONFIGS, seq_q=1000, **key)
    assert not any(cfg.get("q_rows") for cfg in ab._dkv_prune(ab.DKV_CONFIGS, seq_q=1050, **key))
    assert not any(cfg.get("q_rows") for cfg in ab._dkv_prune(ab.DKV_CONFIGS, seq_q=1024, **{**key, "d": 128}))


@pytest.mark.parametrize("b,h,hk,sq,sk,d,causal", [CASES[1], CASES[2]], ids=str)
def test_warp_specialised_dkv_reads_seq_major_operands(b, h, hk, sq, sk, d, causal):
    """`seq_major`: the warp-specialised kernel's Q, K, V, dO read and dK, dV written as
    [batch, seq, heads, d] (TMA boxes of one head's rows): the same bits as the flattened heads."""
    kw, args, (dk, dv, dqa), want = dkv_ws_inputs(b, h, hk, sq, sk, d, causal)
    tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=True), "sm_90a")(*args, dk, dv, dqa)

    def major(t, n):  # (batch * n, seq, d) -> (batch, seq, n, d)
        return np.ascontiguousarray(np.swapaxes(t.reshape(b, n, *t.shape[1:]), 1, 2))

    q, k, v, do = major(args[0], h), major(args[1], hk), major(args[2], hk), major(args[3], h)
    dk2, dv2, dqa2 = np.zeros_like(k), np.zeros_like(v), np.zeros_like(dqa)
    tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=True, seq_major=True), "sm_90a")(q, k, v, do, *args[4:], dk2, dv2, dqa2)
    np.testing.assert_array_equal(dk2, major(dk, hk))
    np.testing.assert_array_equal(dv2, major(dv, hk))
    np.testing.assert_array_equal(dqa2, dqa)


def test_warp_specialised_dkv_on_the_gpu():
    """On the GPU: the warp-specialised dK / dV kernel, in both orders (and over query tiles of
    128 rows at head dim 64, with dQ's part in registers of its own at 128; each also with dQ's
    parts in register order, `flat_dq`, rounded by their convert kernel), against float64
    (causal or not, grouped-query heads, ragged lengths, head dims 64 and 128)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    def cuda(a):  # (bfloat16 arrays through their bits: torch takes no ml_dtypes array)
        t = torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16) if a.dtype == numpy_dtype("bfloat16") else torch.from_numpy(a)
        return t.cuda()

    shapes = [(2, 8, 2, 1000, 1100, 128, True), (1, 4, 4, 513, 700, 64, False), (1, 2, 1, 2048, 2048, 128, False), (2, 4, 2, 1000, 900, 64, True)]
    for shape in shapes:
        b, h, hk, sq, sk, d, causal = shape
        kw, args, outs, want = dkv_ws_inputs(*shape)
        designs = [dict(q_rows=128)] if d == 64 and ab.d_rows(sq) % 128 == 0 else [dict(own_dq=True)] if d == 128 else []
        designs = [{}] + designs
        for design in designs + [dict(x, flat_dq=True) for x in designs]:
            for dq_overlap in (False, True):
                dk, dv, dqa = (cuda(np.zeros_like(o)) for o in outs)
                tirx.compile(ab.attention_dkv_kernel.factory(**kw, ws=True, dq_overlap=dq_overlap, **design))(*(cuda(a) for a in args), dk, dv, dqa)
                if design.get("flat_dq"):  # (DQA's parts in register order: the convert kernel's dQ)
                    dq = torch.zeros((b * h, sq, d), dtype=torch.bfloat16, device="cuda")
                    part_cols = d if design.get("q_rows") else d // 2
                    tirx.compile(ab.attention_dq_convert_kernel.factory(rows=b * h, seq_q=sq, d=d, dtype="bfloat16", scale=kw["scale"], part_cols=part_cols))(dqa, dq)
                else:
                    dq = dqa[:, :sq] * kw["scale"]
                got = (dq.reshape(b, h, sq, d), dk.reshape(b, hk, sk, d), dv.reshape(b, hk, sk, d))
                t = 2.0**-7
                for name, g, w in zip(("dq", "dk", "dv"), got, want):
                    err = f"{name} {shape} dq_overlap={dq_overlap} {design}"
                    np.testing.assert_allclose(g.double().cpu().numpy(), w, rtol=t, atol=t * np.abs(w).max(), err_msg=err)


PLANTED_WS = {
    "dS read by the other warpgroup before it wrote its half": ("                        T.ptx.bar.sync(DS_BARRIER, 256)\n", "", "wgmma misuse: wgmma.mma_async reads `DS_s`"),
    # (the consumers run ahead: their arrivals complete phases of dq_full the reducing thread never sees)
    "dQ's parts handed over without waiting for the last reduction": ("            if u >= 1:\n                dq_empty.wait(0, (u - 1) % 2)\n", "", "on `dq_full[0]`"),
    "dQ's part handed over without a proxy fence": (
        "            T.ptx.fence.proxy.async_.shared__cta()\n            T.cuda.warp_sync()\n            if tid % 32 == 0:\n                dq_full",
        "            T.cuda.warp_sync()\n            if tid % 32 == 0:\n                dq_full",
        "wrote it through the generic proxy",
    ),
    "a stage refilled before both consumers released it": ("                    if t >= 2:\n                        empty.wait(t % 2, (t // 2 + 1) % 2)\n", "", "data race"),
    # dK over K while the other warpgroup's last dQ GEMM may read it; stored by TMA without a
    # proxy fence after the generic writes
    "dK staged over K before the other consumer's last GEMMs": (
        "            T.ptx.bar.sync(DS_BARRIER, 256)\n            Tx.warpgroup.cast(out",
        "            Tx.warpgroup.cast(out",
        "data race",
    ),
    "dK and dV stored by TMA without a proxy fence": (
        "            T.ptx.fence.proxy.async_.shared__cta()\n            T.ptx.bar.sync(EPILOGUE_BARRIER",
        "            T.ptx.bar.sync(EPILOGUE_BARRIER",
        "generic proxy",
    ),
}


@pytest.mark.parametrize("mistake", list(PLANTED_WS))
def test_planted_mistakes_in_the_warp_specialised_dkv_are_reported(mistake, tmp_path):
    old, new, words = PLANTED_WS[mistake]
    planted = planting.planted(ab, old, new, tmp_path)
    kw, args, (dk, dv, dqa), _ = dkv_ws_inputs(1, 2, 1, 200, 130, 64, True)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        tirx.compile(planted.attention_dkv_kernel.factory(**kw, ws=True), "sm_90a")(*args, dk, dv, dqa)


def varlen_reference(q, k, v, do, cuq, cuk, causal, scale):
    """Per packed sequence, causal on its lower-right diagonal: ``(dq, dk, dv)`` in float64 (rows
    outside every sequence 0, a sequence without keys 0)."""
    dq, dk, dv = (np.zeros(t.shape) for t in (q, k, v))
    h, hk = q.shape[1], k.shape[1]
    for b in range(len(cuq) - 1):
        (qs, qe), (ks, ke) = (cuq[b], cuq[b + 1]), (cuk[b], cuk[b + 1])
        if qe == qs or ke == ks:
            continue
        qb, kb, vb, dob = (t[s:e].astype(F64).transpose(1, 0, 2)[None] for t, s, e in ((q, qs, qe), (k, ks, ke), (v, ks, ke), (do, qs, qe)))
        kr, vr = np.repeat(kb, h // hk, 1), np.repeat(vb, h // hk, 1)
        s = np.einsum("bhid,bhjd->bhij", qb, kr) * scale
        if causal:
            i, j = np.indices(s.shape[-2:])
            s = np.where(j > i + (ke - ks) - (qe - qs), -np.inf, s)
        m = s.max(-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(m), m, 0))
        total = e.sum(-1, keepdims=True)
        p = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
        o = p @ vr
        ds = p * (np.einsum("bhid,bhjd->bhij", dob, vr) - (dob * o).sum(-1, keepdims=True))
        dq[qs:qe] = (np.einsum("bhij,bhjd->bhid", ds, kr) * scale)[0].transpose(1, 0, 2)
        fold = lambda x: x.reshape(1, hk, h // hk, *x.shape[2:]).sum(2)[0].transpose(1, 0, 2)  # noqa: E731
        dk[ks:ke] = fold(np.einsum("bhij,bhid->bhjd", ds, qb) * scale)
        dv[ks:ke] = fold(np.einsum("bhij,bhid->bhjd", p, dob))
    return dq, dk, dv


@pytest.mark.parametrize("d", [64, 256, 192])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_gradients_match_float64(causal, d):
    """Packed sequences (FlashAttention's varlen): lengths not multiples of a tile, a sequence with
    no queries, one with fewer keys than queries, trailing rows outside every sequence (gradient
    0), grouped-query heads; from `varlen_attention`'s output and log-sum-exp. Past head dim 128:
    Q and dO from shared memory in the dQ kernel, two warpgroups' column halves of dK / dV."""
    nd = numpy_dtype("bfloat16")
    rng = np.random.default_rng(7 + causal)
    lq, lk, h, hk = [70, 0, 130, 40], [90, 3, 130, 5], 4, 2
    cuq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cuk = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q, do = (rng.standard_normal((cuq[-1] + 2, h, d)).astype(nd) for _ in range(2))
    k, v = (rng.standard_normal((cuk[-1] + 3, hk, d)).astype(nd) for _ in range(2))
    out, lse = tirx.ops.varlen_attention(q, k, v, cuq, cuk, max(lq), is_causal=causal, return_lse=True)
    got = tirx.ops.varlen_attention_backward(do, q, k, v, out, lse, cuq, cuk, max(lq), max(lk), is_causal=causal)
    want = varlen_reference(q, k, v, do, cuq, cuk, causal, 1 / np.sqrt(d))
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g.astype(F64), w, rtol=2.0**-6, atol=2.0**-6 * np.abs(w).max(), err_msg=name)


def test_varlen_autograd_on_cpu_tensors():
    """`loss.backward()` through `varlen_attention` (the registered op `torch.ops.tirx.varlen_attention`
    and its backward): eager (max_seqlen_k computed from cu_seqlens_k) and under
    torch.compile(fullgraph=True) (max_seqlen_k given)."""
    torch = pytest.importorskip("torch")
    at.register_varlen_torch_op()  # (this module imported tirx.ops before torch)
    torch.manual_seed(1)
    cuq, cuk = torch.tensor([0, 50, 120], dtype=torch.int32), torch.tensor([0, 64, 100], dtype=torch.int32)
    q = torch.randn(120, 2, 64).bfloat16().requires_grad_()
    k, v = (torch.randn(100, 1, 64).bfloat16().requires_grad_() for _ in range(2))
    do = torch.randn(120, 2, 64).bfloat16()
    want = varlen_reference(*(t.detach().float().numpy() for t in (q, k, v, do)), cuq.numpy(), cuk.numpy(), True, 0.125)
    compiled = torch.compile(lambda q, k, v: tirx.ops.varlen_attention(q, k, v, cuq, cuk, 70, is_causal=True, max_seqlen_k=64), fullgraph=True)
    for fn in (lambda q, k, v: tirx.ops.varlen_attention(q, k, v, cuq, cuk, 70, is_causal=True), compiled):
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v).backward(do)
        for t, w in zip((q, k, v), want):
            np.testing.assert_allclose(t.grad.double().numpy(), w, rtol=2.0**-6, atol=2.0**-6 * np.abs(w).max())


@pytest.mark.filterwarnings("ignore:Lower right causal bias")  # (PyTorch's NaN rows; ours are 0)
def test_rows_that_see_no_key_get_zero_gradients():
    """A lower-right causal bias with more queries than keys: the first rows see no key (their
    log-sum-exp -inf, their output 0); their gradients are 0, not NaN, and the rest match float64."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right

    torch.manual_seed(2)
    q = torch.randn(1, 2, 90, 64).bfloat16().requires_grad_()
    k, v = (torch.randn(1, 2, 70, 64).bfloat16().requires_grad_() for _ in range(2))
    do = torch.randn(1, 2, 90, 64).bfloat16()
    tirx.ops.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(90, 70)).backward(do)
    seq = lambda t: t.detach()[0].transpose(0, 1).float().numpy()  # noqa: E731 ((seq, heads, d), one sequence)
    want = varlen_reference(seq(q), seq(k), seq(v), seq(do), [0, 90], [0, 70], True, 0.125)
    for t, w in zip((q, k, v), want):
        g = t.grad[0].transpose(0, 1).double().numpy()
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, w, rtol=2.0**-6, atol=2.0**-6 * np.abs(w).max())
    assert not q.grad[0, :, :20].any()


@pytest.mark.parametrize("n_kv,k_tiles,section", [(32, 64, 4), (64, 32, 8), (6, 5, 3), (4, 7, 1), (8, 1, 8)])
def test_key_tile_order_covers_every_tile_once(n_kv, k_tiles, section):
    """The dK / dV kernels' CTA order (causal: sections of K/V heads, each section's first key
    tiles first) takes every (K/V head, key tile) once, and within a section the key tiles in
    order."""
    order = [ab._key_tile_order(bx, k_tiles, section) for bx in range(n_kv * k_tiles)]
    assert sorted(order) == [(kv, kt) for kv in range(n_kv) for kt in range(k_tiles)]
    per = section * k_tiles
    for s0 in range(0, len(order), per):
        kts = [kt for _, kt in order[s0 : s0 + per]]
        assert kts == sorted(kts)
