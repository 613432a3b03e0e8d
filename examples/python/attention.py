"""Attention's forward on Hopper in TIRx: a walkthrough of `tirx.ops.scaled_dot_product_attention`'s
kernel (python/tirx/ops/attention.py, `attention_kernel`; docs/tile-primitives.md §10 says how the
pieces fit). `attention(...)` builds one tile configuration of it; `python
examples/python/attention.py` runs two in the simulator against NumPy in float64 and prints what
`explain` says of each step.

The kernel, for one CTA of ``64 * consumers`` query rows of one head:

1. A producer warpgroup (`T.ptx.setmaxnreg.dec`: few registers) whose one thread loads the Q tile
   once, then K and V tiles of ``bn`` keys into two rings of swizzled shared-memory stages with
   TMA (`Tx.copy_async(..., dispatch="tma_auto", mbar=...)`): a stage's bytes are announced on its
   ``full`` mbarrier (`mbarrier.arrive.expect_tx`), and a stage is refilled only after every
   consumer has released it on ``empty``. K's stage is released as soon as S = Q Kᵀ is done, V's
   once P V is: the producer loads the next K while the softmax runs.
2. Consumer warpgroups (`setmaxnreg.inc`), each of 64 query rows, per K/V tile:
   `Tx.warpgroup.gemm_async(S, Q_s, K_s)` (a `wgmma` from two shared descriptors); the mask only on
   the tiles that need it (`Tx.warpgroup.masked_fill`: keys past the sequence, causal near the
   diagonal); the online softmax on the accumulator's own layout (`Tx.warpgroup.max`/`sum` into
   `wgmma_row_layout` statistics; `Tx.warpgroup.fma(S, S, scale·log2 e, -m)` then
   `Tx.warpgroup.exp2(S, S, ftz=True)`: one fma and one MUFU.EX2 a score — exp2's own `bias=`
   and `scale=` would be a multiply and an add, each rounded); O rescaled by exp2(m_old -
   m_new); P = S cast to bf16 in the same registers' layout (the accumulator's layout is the A
   fragment's); and
   `Tx.warpgroup.gemm_async(O, P, V_s, transB=True, accum=True)` with P from registers.
3. Schedules (the first three chosen by the autotuner): each tile in turn; `overlap` (FlashAttention-3's
   intra-warpgroup pipelining: tile j's S = Q Kᵀ and tile j - 1's P V issued together,
   `wgmma.wait_group(1)` waits for the older only, and tile j's softmax runs while P V does);
   `pingpong` (two or three consumers take turns issuing their GEMMs through a ring of named
   barriers, so one's softmax runs while the others' GEMMs do); `rotate` (the overlapped loop
   turned: each step opens with the previous P V's wait and O's rescale and ends with its
   softmax, so that ptxas cannot move that wait above the softmax; the same values, bit for bit;
   a kernel option: it timed slower on an H200, S being live across the loop's back edge).
4. The epilogue: O times the reciprocal of the row sums, rounded, stored over the consumer's own
   Q rows in shared memory (`fence.proxy.async`, a named barrier of the warpgroup) and written by
   TMA stores, one per 64-column swizzle atom (rows past the sequence clipped by TMA); with
   ``lse`` the rows' log-sum-exp in float32, which the backward reads.

The simulator runs every thread of every CTA: it checks each value against float64 here, and
reports races, missing fences and waits, wrong phases and deadlocks (python/tests/test_attention.py
plants such mistakes in the kernel's source).

    python examples/python/attention.py
"""

import numpy as np

from tirx.ops import attention as at


def attention(b, h, hk, sq, sk, d, causal, consumers=2, bn=128, overlap=True, pingpong=False, rotate=False, dtype="bfloat16"):
    """One tile configuration of the kernel: ``k(Q, K, V, O, LSE)`` on (b·h, sq, d) Q and O, (b·hk,
    sk, d) K and V (grouped-query heads when hk < h), LSE (b·h, `lse_rows`(sq)) float32."""
    return at.attention_kernel.factory(
        heads=h, kv_heads=hk, batch=b, seq_q=sq, seq_k=sk, d=d, dtype=dtype, causal=causal, scale=1 / np.sqrt(d), lse=True,
        seq_major=False, consumers=consumers, bn=bn, overlap=overlap, pingpong=pingpong, rotate=rotate,
    )


def reference(q, k, v, causal):
    """Attention in float64 (PyTorch's semantics; causal: query i sees keys j <= i)."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e @ v / e.sum(-1, keepdims=True)


def run(b, h, hk, sq, sk, d, causal, **config):
    """The configuration's kernel in the simulator on random inputs: its largest error against
    float64, and `explain`'s text."""
    import tirx
    from tirx.runtime import numpy_dtype

    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, h, sq, d)).astype(numpy_dtype("bfloat16"))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(numpy_dtype("bfloat16")) for _ in range(2))
    kernel = tirx.compile(attention(b, h, hk, sq, sk, d, causal, **config), "sm_90a")
    o = np.zeros((b * h, sq, d), q.dtype)
    lse = np.zeros((b * h, at.lse_rows(sq)), np.float32)
    kernel(q.reshape(-1, sq, d), k.reshape(-1, sk, d), v.reshape(-1, sk, d), o, lse)
    err = np.abs(o.reshape(b, h, sq, d).astype(np.float64) - reference(q, k, v, causal)).max()
    return err, kernel.explain()


if __name__ == "__main__":
    cases = [
        ((1, 2, 1, 150, 330, 64, True), dict(consumers=2, bn=64, overlap=True, pingpong=True)),
        ((1, 1, 1, 200, 400, 128, False), dict(consumers=2, bn=176, overlap=True)),
        ((1, 2, 1, 150, 330, 64, True), dict(consumers=2, bn=128, overlap=True, pingpong=True, rotate=True)),
    ]
    for shape, config in cases:
        err, text = run(*shape, **config)
        b, h, hk, sq, sk, d, causal = shape
        print(f"b={b} h={h} kv_heads={hk} seq_q={sq} seq_k={sk} d={d} causal={causal} {config}: max |error| vs float64 {err:.3g}")
    # What explain says of each step (the first configuration's): the op, then the variant chosen.
    seen = set()
    for block in run(*cases[0][0], **cases[0][1])[1].split("\n\n"):
        lines = block.strip().splitlines()
        chosen = next((x.strip() for x in lines if x.strip().startswith("chosen")), None)
        op = lines[0].rsplit(": ", 1)[-1] if lines else ""
        if chosen and (op, chosen) not in seen:
            seen.add((op, chosen))
            print(f"{op:28} {chosen}")
