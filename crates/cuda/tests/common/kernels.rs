//! The hand-built LIR kernels: one per shape the copy and elementwise variants
//! produce, plus a kernel with every scalar expression form on every dtype.

use super::*;
use tirx_ir::hir::MathFn;
use tirx_ir::lir::{LBinOp, LExpr, LKernel, MmaShape, PackedOp, PairSrc, ShuffleMode};
use tirx_ir::DType;

/// Seed 002: a 32x32 tile global -> shared as full-row vector copies, a CTA
/// barrier, then shared -> global. `lanes` elements of `dtype` make 16 bytes.
pub fn gmem_smem_roundtrip(name: &str, dtype: DType, lanes: i64) -> LKernel {
    let mut kb = Kb::new(name, [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", dtype, &[32, 32]);
    let b = kb.param("B", dtype, &[32, 32]);
    let s = kb.shared("A_smem", dtype, &[32, 32]);
    let t = kb.var("tid", DType::I32);
    let (f1, f2) = (kb.var("f", DType::I32), kb.var("f", DType::I32));
    let rounds = 1024 / (32 * lanes);
    let off = |f| add(mul(v(f), i(32 * lanes)), mul(v(t), i(lanes)));
    kb.finish(vec![
        let_(t, tid()),
        comment("copy A -> A_smem (gmem_smem: 32 threads x 16 B per round)"),
        for_(f1, i(rounds), vec![vcopy(s, off(f1), a, off(f1), lanes as u32)]),
        cta_sync(),
        comment("copy A_smem -> B (gmem_smem)"),
        for_(f2, i(rounds), vec![vcopy(b, off(f2), s, off(f2), lanes as u32)]),
    ])
}

/// Seed 003: lane 0 copies a 4x6 tile element by element, guarded by `tid == 0`.
pub fn fallback_guarded() -> LKernel {
    let mut kb = Kb::new("fallback_copy", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[4, 6]);
    let b = kb.param("B", DType::F32, &[4, 6]);
    let s = kb.shared("A_smem", DType::F32, &[4, 6]);
    let lane = kb.var("lane", DType::I32);
    let (v3, v4) = (kb.var("v3", DType::I32), kb.var("v4", DType::I32));
    let (w3, w4) = (kb.var("v3", DType::I32), kb.var("v4", DType::I32));
    let at = |r, c| add(mul(v(r), i(6)), v(c));
    kb.finish(vec![
        let_(lane, rem(tid(), i(32))),
        comment("copy A -> A_smem (fallback: scalar, one thread)"),
        if_(
            eq(v(lane), i(0)),
            vec![for_(v3, i(4), vec![for_(v4, i(6), vec![store(s, at(v3, v4), load(a, at(v3, v4)))])])],
        ),
        warp_sync(),
        if_(
            eq(v(lane), i(0)),
            vec![for_(w3, i(4), vec![for_(w4, i(6), vec![store(b, at(w3, w4), load(s, at(w3, w4)))])])],
        ),
    ])
}

/// A guarded scalar grid: 4 CTAs x 128 threads cover 500 elements of a 20x25
/// tensor, each computing its (row, col) with Python floor division.
pub fn scalar_grid_guarded() -> LKernel {
    let mut kb = Kb::new("scalar_grid", [4, 1, 1], [128, 1, 1]);
    let a = kb.param("A", DType::F32, &[20, 25]);
    let b = kb.param("B", DType::F32, &[25, 20]);
    let g = kb.var("g", DType::I32);
    let (row, col) = (kb.var("row", DType::I32), kb.var("col", DType::I32));
    let unused = kb.var("unused", DType::I32);
    kb.finish(vec![
        let_(g, add(mul(bid(), i(128)), tid())),
        let_(unused, mul(v(g), i(3))),
        if_else(
            lt(v(g), i(500)),
            vec![
                let_(row, bin(LBinOp::FloorDiv, v(g), i(25))),
                let_(col, bin(LBinOp::FloorMod, v(g), i(25))),
                store(b, add(mul(v(col), i(20)), v(row)), math(MathFn::Sqrt, load(a, v(g)))),
            ],
            vec![if_(eq(v(g), i(500)), vec![comment("one past the end: nothing to do")])],
        ),
    ])
}

/// Scalar parameters between the buffers, `(A, n, B, scale)`: a grid of
/// `(n + 127) // 128` CTAs of 128 threads, each thread `B[g] = A[g] * scale` for
/// `g < n`, over buffers of `n` elements (64-bit indices).
pub fn scalar_params() -> LKernel {
    use tirx_ir::lir::{SymExpr, SymOp};
    let mut kb = Kb::new("scalar_params", [i32::MAX as u32, 1, 1], [128, 1, 1]);
    let a = kb.param("A", DType::F32, &[1 << 31]);
    let n = kb.scalar("n", DType::I32, 1);
    let b = kb.param("B", DType::F32, &[1 << 31]);
    let scale = kb.scalar("scale", DType::F32, 3);
    let p = || SymExpr::Param(n);
    kb.rows(a, p());
    kb.rows(b, p());
    let ctas = SymExpr::bin(SymOp::FloorDiv, SymExpr::bin(SymOp::Add, p(), SymExpr::Int(127)), SymExpr::Int(128));
    kb.grid_dim(0, ctas);
    let g = kb.var("g", DType::I32);
    let wide = |e| LExpr::Cast(DType::I64, Box::new(e));
    kb.finish(vec![
        let_(g, add(mul(bid(), i(128)), tid())),
        if_(lt(v(g), v(n)), vec![store(b, wide(v(g)), mul(load(a, wide(v(g))), v(scale)))]),
    ])
}

/// Seed 000 (copy -> reg): each lane owns row `lane` of a 32x8 f32 tile; the
/// tile comes from global (read-only path) into registers, is doubled, goes
/// through shared memory and back to global as 128-bit accesses.
pub fn reg_copy() -> LKernel {
    let mut kb = Kb::new("reg_copy", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[32, 8]);
    let b = kb.param("B", DType::F32, &[32, 8]);
    let s = kb.shared("A_smem", DType::F32, &[32, 8]);
    let r = kb.local("r", DType::F32, &[8]);
    let lane = kb.var("lane", DType::I32);
    let fs: Vec<_> = (0..5).map(|_| kb.var("f", DType::I32)).collect();
    let row = |f| add(mul(v(lane), i(8)), mul(v(f), i(4)));
    kb.finish(vec![
        let_(lane, tid()),
        comment("copy A -> r (reg, cache=\"nc\")"),
        for_(fs[0], i(2), vec![vcopy_nc(r, mul(v(fs[0]), i(4)), a, row(fs[0]), 4)]),
        for_(fs[1], i(8), vec![store(r, v(fs[1]), mul(load(r, v(fs[1])), f(2.0, DType::F32)))]),
        comment("copy r -> A_smem (reg)"),
        for_(fs[2], i(2), vec![vcopy(s, row(fs[2]), r, mul(v(fs[2]), i(4)), 4)]),
        warp_sync(),
        comment("copy A_smem -> r -> B (reg)"),
        for_(fs[3], i(2), vec![vcopy(r, mul(v(fs[3]), i(4)), s, row(fs[3]), 4)]),
        for_(fs[4], i(2), vec![vcopy(b, row(fs[4]), r, mul(v(fs[4]), i(4)), 4)]),
    ])
}

/// Seed 004: two ldmatrix .x2 load the four 8x8 quadrants of a 16x16 f16 tile
/// as fragments, and one stmatrix .x4.trans stores quadrant k transposed at
/// block (k / 2, k % 2): together a transpose, B = A^T.
pub fn ldstmatrix() -> LKernel {
    let mut kb = Kb::new("ldstmatrix", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F16, &[16, 16]);
    let b = kb.param("B", DType::F16, &[16, 16]);
    let sa = kb.shared("A_smem", DType::F16, &[16, 16]);
    let sb = kb.shared("B_smem", DType::F16, &[16, 16]);
    let r = kb.local("r", DType::F16, &[8]);
    let lane = kb.var("lane", DType::I32);
    let row = || mul(v(lane), i(8));
    kb.finish(vec![
        let_(lane, rem(tid(), i(32))),
        vcopy(sa, row(), a, row(), 8),
        cta_sync(),
        comment("copy A_smem -> r (ldstmatrix, num=2)"),
        ldmatrix(2, false, sa, add(mul(rem(v(lane), i(16)), i(16)), i(0)), r, vec![i(0), i(2)]),
        ldmatrix(2, false, sa, add(mul(rem(v(lane), i(16)), i(16)), i(8)), r, vec![i(4), i(6)]),
        comment("copy r -> B_smem (ldstmatrix, num=4, trans)"),
        stmatrix(
            4,
            true,
            sb,
            // lane l supplies row l % 8 of quadrant l / 8
            add(
                mul(add(mul(div(v(lane), i(16)), i(8)), rem(v(lane), i(8))), i(16)),
                mul(rem(div(v(lane), i(8)), i(2)), i(8)),
            ),
            r,
            vec![i(0), i(2), i(4), i(6)],
        ),
        cta_sync(),
        vcopy(b, row(), sb, row(), 8),
    ])
}

/// elementwise -> reg with packed f16 pairs: `c = a + b`, then `c = c * b + 2`.
pub fn packed_f16() -> LKernel {
    let mut kb = Kb::new("packed_f16", [1, 1, 1], [32, 1, 1]);
    let (ga, gb, gc) =
        (kb.param("A", DType::F16, &[32, 8]), kb.param("B", DType::F16, &[32, 8]), kb.param("C", DType::F16, &[32, 8]));
    let (ra, rb) = (kb.local("a", DType::F16, &[8]), kb.local("b", DType::F16, &[8]));
    let lane = kb.var("lane", DType::I32);
    let (f1, f2) = (kb.var("f", DType::I32), kb.var("f", DType::I32));
    let row = mul(v(lane), i(8));
    let pair = |f| mul(v(f), i(2));
    kb.finish(vec![
        let_(lane, tid()),
        vcopy(ra, i(0), ga, row.clone(), 8),
        vcopy(rb, i(0), gb, row.clone(), 8),
        comment("add(a, a, b) (reg, packed __half2)"),
        for_(
            f1,
            i(4),
            vec![packed2(
                PackedOp::Add,
                DType::F16,
                ra,
                pair(f1),
                vec![PairSrc::Buf(ra, pair(f1)), PairSrc::Buf(rb, pair(f1))],
            )],
        ),
        comment("fma(a, a, b, 2.0) (reg, packed __half2)"),
        for_(
            f2,
            i(4),
            vec![packed2(
                PackedOp::Fma,
                DType::F16,
                ra,
                pair(f2),
                vec![PairSrc::Buf(ra, pair(f2)), PairSrc::Buf(rb, pair(f2)), PairSrc::Scalar(f(2.0, DType::F16))],
            )],
        ),
        vcopy(gc, row, ra, i(0), 8),
    ])
}

/// Pair conversions: f32 -> f16 -> f32 and f32 -> bf16 -> f32 on 8 registers.
pub fn cast_pairs() -> LKernel {
    let mut kb = Kb::new("cast_pairs", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[32, 8]);
    let h = kb.param("H", DType::F16, &[32, 8]);
    let b = kb.param("Bf", DType::F32, &[32, 8]);
    let (rf, rh, rb, rg) = (
        kb.local("x", DType::F32, &[8]),
        kb.local("x_f16", DType::F16, &[8]),
        kb.local("x_bf16", DType::BF16, &[8]),
        kb.local("y", DType::F32, &[8]),
    );
    let lane = kb.var("lane", DType::I32);
    let fs: Vec<_> = (0..4).map(|_| kb.var("f", DType::I32)).collect();
    let row = |k| add(mul(v(lane), i(8)), i(k));
    let p = |f| mul(v(f), i(2));
    kb.finish(vec![
        let_(lane, tid()),
        vcopy(rf, i(0), a, row(0), 4),
        vcopy(rf, i(4), a, row(4), 4),
        for_(fs[0], i(4), vec![cast2(rh, p(fs[0]), rf, p(fs[0]))]),
        vcopy(h, row(0), rh, i(0), 8),
        for_(fs[1], i(4), vec![cast2(rb, p(fs[1]), rf, p(fs[1]))]),
        for_(fs[2], i(4), vec![cast2(rg, p(fs[2]), rb, p(fs[2]))]),
        for_(fs[3], i(4), vec![cast2(rf, p(fs[3]), rh, p(fs[3]))]),
        for_(fs[3], i(8), vec![store(rg, v(fs[3]), add(load(rg, v(fs[3])), load(rf, v(fs[3]))))]),
        vcopy(b, row(0), rg, i(0), 4),
        vcopy(b, row(4), rg, i(4), 4),
    ])
}

/// A 3 x 2^30 f32 tensor: element indices need 64 bits.
pub fn i64_index() -> LKernel {
    // 2^28 threads x 3 rounds x 4 elements = 3 x 2^30 elements.
    let mut kb = Kb::new("big_scale", [1 << 20, 1, 1], [256, 1, 1]);
    let a = kb.param("A", DType::F32, &[3, 1 << 30]);
    let b = kb.param("B", DType::F32, &[3, 1 << 30]);
    let g = kb.var("g", DType::I64);
    let k = kb.var("k", DType::I64);
    let e = kb.var("e", DType::I64);
    kb.finish(vec![
        let_(g, add(mul(cast(DType::I64, bid()), l(256)), cast(DType::I64, tid()))),
        for_(
            k,
            l(3),
            vec![
                let_(e, mul(add(mul(v(k), l(1 << 28)), v(g)), l(4))),
                vcopy(b, v(e), a, v(e), 4),
                store(b, v(e), mul(load(b, v(e)), f(0.5, DType::F32))),
            ],
        ),
    ])
}

/// A 64x64 f16 tile into 128-byte-swizzled shared memory: 16-byte chunk `c`
/// of row `r` lands at chunk `c ^ (r % 8)`, then back out unswizzled.
pub fn swizzle_xor() -> LKernel {
    let mut kb = Kb::new("swizzle_copy", [1, 1, 1], [128, 1, 1]);
    let a = kb.param("A", DType::F16, &[64, 64]);
    let b = kb.param("B", DType::F16, &[64, 64]);
    let s = kb.shared_dyn("A_smem", DType::F16, &[64, 64]);
    let t = kb.var("tid", DType::I32);
    let (f1, f2) = (kb.var("f", DType::I32), kb.var("f", DType::I32));
    let (r1, r2) = (kb.var("row", DType::I32), kb.var("row", DType::I32));
    let (c1, c2) = (kb.var("chunk", DType::I32), kb.var("chunk", DType::I32));
    let swz = |r, c| {
        add(mul(v(r), i(64)), bin(LBinOp::Shl, bin(LBinOp::BitXor, v(c), bin(LBinOp::BitAnd, v(r), i(7))), i(3)))
    };
    let lin = |r, c| add(mul(v(r), i(64)), mul(v(c), i(8)));
    let body = |f, r, c, to_smem: bool| {
        let fused = add(mul(v(f), i(128)), v(t));
        vec![
            let_(r, bin(LBinOp::Shr, fused.clone(), i(3))),
            let_(c, bin(LBinOp::BitAnd, fused, i(7))),
            if to_smem { vcopy(s, swz(r, c), a, lin(r, c), 8) } else { vcopy(b, lin(r, c), s, swz(r, c), 8) },
        ]
    };
    kb.finish(vec![
        let_(t, tid()),
        for_(f1, i(4), body(f1, r1, c1, true)),
        cta_sync(),
        for_(f2, i(4), body(f2, r2, c2, false)),
    ])
}

/// Every scalar expression form on every dtype, so that the CUDA spelling of
/// each (operators, casts, math functions, literals) is compiled by nvcc.
pub fn dtype_zoo() -> LKernel {
    use tirx_ir::hir::UnOp;
    let mut kb = Kb::new("dtype_zoo", [1, 1, 1], [32, 1, 1]);
    let mut body = Vec::new();
    for t in DType::ALL {
        let x = kb.param(&format!("x_{}", t.name()), t, &[16]);
        let at = |j: i64| load(x, i(j));
        let lit = if t.is_float() {
            f(1.5, t)
        } else if t == DType::Bool {
            LExpr::Bool(true)
        } else {
            LExpr::Int(3, t)
        };
        let mut set = |j: i64, e: LExpr| body.push(store(x, i(j), e));
        set(0, cast(t, cast(DType::F32, at(1))));
        set(1, cast(t, cast(DType::I32, at(2))));
        set(2, cast(t, cast(DType::Bool, at(3))));
        set(3, cast(t, cast(DType::I64, at(4))));
        let cmp = if t == DType::Bool { eq(at(5), at(6)) } else { lt(at(5), at(6)) };
        set(4, LExpr::Select(Box::new(cmp), Box::new(at(5)), Box::new(lit.clone())));
        if t == DType::Bool {
            set(5, bin(LBinOp::And, at(6), LExpr::Un(UnOp::Not, Box::new(at(7)))));
            continue;
        }
        set(5, add(mul(at(6), at(7)), sub(at(8), lit.clone())));
        set(6, div(at(7), lit.clone()));
        set(7, bin(LBinOp::Max, at(8), bin(LBinOp::Min, at(9), lit.clone())));
        set(8, bin(LBinOp::FloorDiv, at(9), lit.clone()));
        set(9, bin(LBinOp::FloorMod, at(10), lit.clone()));
        set(10, rem(at(11), lit.clone()));
        if t.is_signed() {
            set(11, LExpr::Un(UnOp::Neg, Box::new(at(12))));
        }
        if t.is_float() {
            for (j, m) in MathFn::ALL.into_iter().enumerate() {
                set(12, math(m, add(at(12), LExpr::Float(j as f64, t))));
            }
        } else {
            set(12, math(MathFn::Abs, at(13)));
            set(
                13,
                bin(
                    LBinOp::BitXor,
                    bin(LBinOp::Shl, at(14), LExpr::Int(2, t)),
                    bin(LBinOp::BitAnd, at(15), lit.clone()),
                ),
            );
            set(
                14,
                bin(
                    LBinOp::BitOr,
                    bin(LBinOp::Shr, at(15), LExpr::Int(1, t)),
                    LExpr::Un(UnOp::BitNot, Box::new(at(0))),
                ),
            );
        }
    }
    kb.finish(vec![if_(eq(tid(), i(0)), body)])
}

const FULL: u32 = 0xffff_ffff;

/// Warp shuffles over two warps: a 32-lane xor-butterfly sum of float32 (every
/// lane ends with its warp's total), a bfloat16 exchange with lane ^ 5, and on
/// int32 width-8 segment sums, shfl.down by 3 and shfl.idx of lane 7 in width-16
/// segments, and shfl.up by 1 in width-8 segments (`F[tid][0..4]`).
pub fn warp_shuffle() -> LKernel {
    let mut kb = Kb::new("warp_shuffle", [1, 1, 1], [64, 1, 1]);
    let a = kb.param("A", DType::F32, &[64]);
    let b = kb.param("B", DType::F32, &[64]);
    let c = kb.param("C", DType::BF16, &[64]);
    let d = kb.param("D", DType::BF16, &[64]);
    let e = kb.param("E", DType::I32, &[64]);
    let o = kb.param("F", DType::I32, &[64, 4]);
    let t = kb.var("tid", DType::I32);
    let mut body = vec![let_(t, tid()), comment("warp sum: xor butterfly over 32 lanes")];
    let mut x = kb.var("x", DType::F32);
    body.push(let_(x, load(a, v(t))));
    for delta in [16, 8, 4, 2, 1] {
        let (s, next) = (kb.var("s", DType::F32), kb.var("x", DType::F32));
        body.push(shfl(s, v(x), ShuffleMode::Bfly, i(delta), 32, FULL));
        body.push(let_(next, add(v(x), v(s))));
        x = next;
    }
    body.push(store(b, v(t), v(x)));
    let (y, z) = (kb.var("y", DType::BF16), kb.var("z", DType::BF16));
    body.extend([let_(y, load(c, v(t))), shfl(z, v(y), ShuffleMode::Bfly, i(5), 32, FULL), store(d, v(t), v(z))]);
    body.push(comment("int32: segment sums (width 8), down / idx (width 16), up (width 8)"));
    let mut q = kb.var("q", DType::I32);
    let q0 = q;
    body.push(let_(q, load(e, v(t))));
    for delta in [4, 2, 1] {
        let (s, next) = (kb.var("s", DType::I32), kb.var("q", DType::I32));
        body.push(shfl(s, v(q), ShuffleMode::Bfly, i(delta), 8, FULL));
        body.push(let_(next, add(v(q), v(s))));
        q = next;
    }
    let (dn, ix, up) = (kb.var("dn", DType::I32), kb.var("ix", DType::I32), kb.var("up", DType::I32));
    let out = |k| add(mul(v(t), i(4)), i(k));
    body.extend([
        shfl(dn, v(q0), ShuffleMode::Down, i(3), 16, FULL),
        shfl(ix, v(q0), ShuffleMode::Idx, i(7), 16, FULL),
        shfl(up, v(q0), ShuffleMode::Up, i(1), 8, FULL),
        store(o, out(0), v(q)),
        store(o, out(1), v(dn)),
        store(o, out(2), v(ix)),
        store(o, out(3), v(up)),
    ]);
    kb.finish(body)
}

/// cp.async global -> shared in two groups: 16 B per thread (.cg), then 8 B
/// with a source size (odd threads copy, even threads zero-fill) and two 4 B
/// copies (.ca). After wait_group 1 the first group has landed and is read back
/// reversed across threads; after wait_group 0 the second.
pub fn cp_async_copy() -> LKernel {
    let mut kb = Kb::new("cp_async_copy", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[256]);
    let b = kb.param("B", DType::F32, &[256]);
    let s = kb.shared("A_smem", DType::F32, &[256]);
    let t = kb.var("tid", DType::I32);
    let (j1, j2) = (kb.var("j", DType::I32), kb.var("j", DType::I32));
    let lo = || mul(v(t), i(4));
    let hi = |j: LExpr| add(add(i(128), mul(v(t), i(4))), j);
    kb.finish(vec![
        let_(t, tid()),
        comment("group 0: 16 bytes per thread, the L2 prefetching 128 bytes around them"),
        cp_async_prefetch(s, lo(), a, lo(), 128),
        commit_group(),
        comment("group 1: 8 bytes read by odd threads (zero-filled by even ones), 2 x 4 bytes"),
        cp_async(s, hi(i(0)), a, hi(i(0)), 8, Some(mul(rem(v(t), i(2)), i(8)))),
        cp_async(s, hi(i(2)), a, hi(i(2)), 4, None),
        cp_async(s, hi(i(3)), a, hi(i(3)), 4, None),
        commit_group(),
        wait_group(1),
        cta_sync(),
        for_(j1, i(4), vec![store(b, add(lo(), v(j1)), load(s, add(mul(sub(i(31), v(t)), i(4)), v(j1))))]),
        wait_group(0),
        for_(j2, i(4), vec![store(b, hi(v(j2)), load(s, hi(v(j2))))]),
    ])
}

/// A one-slot producer/consumer pipeline over mbarriers: warp 0 produces
/// `S = 2 A[round]` four times, warp 1 consumes `B[round] = S + S[0]`. `full`
/// (32 arrivals, lane 0 through arrive.expect_tx of 0 bytes) says the slot is
/// written, `empty` (32 arrivals) that it was read; round r waits on parity
/// r & 1 (the producer on the opposite one, so its first wait passes at once).
pub fn mbarrier_pipeline() -> LKernel {
    let mut kb = Kb::new("mbarrier_pipeline", [1, 1, 1], [64, 1, 1]);
    let a = kb.param("A", DType::F32, &[4, 32]);
    let b = kb.param("B", DType::F32, &[4, 32]);
    let s = kb.shared("slot", DType::F32, &[32]);
    let bars = kb.shared("bars", DType::I64, &[2]);
    let (full, empty) = (i(0), i(1));
    let (t, lane) = (kb.var("tid", DType::I32), kb.var("lane", DType::I32));
    let (r1, r2) = (kb.var("r", DType::I32), kb.var("r", DType::I32));
    let parity = |r| bin(LBinOp::BitAnd, v(r), i(1));
    let at = |r| add(mul(v(r), i(32)), v(lane));
    let produce = vec![
        mbar_wait(bars, empty.clone(), bin(LBinOp::BitXor, parity(r1), i(1))),
        store(s, v(lane), mul(load(a, at(r1)), f(2.0, DType::F32))),
        fence_proxy_async(),
        if_else(
            eq(v(lane), i(0)),
            vec![mbar_arrive_expect_tx(bars, full.clone(), i(0))],
            vec![mbar_arrive(bars, full.clone())],
        ),
    ];
    let consume = vec![
        mbar_wait(bars, full.clone(), parity(r2)),
        store(b, at(r2), add(load(s, v(lane)), load(s, i(0)))),
        mbar_arrive(bars, empty.clone()),
    ];
    kb.finish(vec![
        let_(t, tid()),
        let_(lane, rem(v(t), i(32))),
        if_(
            eq(v(t), i(0)),
            vec![mbar_init(bars, full.clone(), i(32)), mbar_init(bars, empty.clone(), i(32)), fence_mbarrier_init()],
        ),
        cta_sync(),
        if_else(lt(v(t), i(32)), vec![for_(r1, i(4), produce)], vec![for_(r2, i(4), consume)]),
    ])
}

/// One warp, one `mma.sync` of `shape`: each lane loads its A, B and C
/// registers from lane-major arrays (`A[lane * na + j]`), accumulates
/// `c = a * b + c` in place and stores its four accumulators to `D`.
pub fn mma_one(name: &str, shape: MmaShape, ab: DType, acc: DType) -> LKernel {
    let k = shape.k();
    let per = 32 / i64::from(ab.bits());
    let (na, nb) = (16 * k / 32, k * 8 / 32);
    let mut kb = Kb::new(name, [1, 1, 1], [32, 1, 1]);
    let (ga, gb) = (kb.param("A", ab, &[32, na]), kb.param("B", ab, &[32, nb]));
    let (gc, gd) = (kb.param("C", acc, &[32, 4]), kb.param("D", acc, &[32, 4]));
    let (a, b, c) = (kb.local("a", ab, &[na]), kb.local("b", ab, &[nb]), kb.local("acc", acc, &[4]));
    let lane = kb.var("lane", DType::I32);
    let js: Vec<_> = (0..4).map(|_| kb.var("j", DType::I32)).collect();
    let fill = |r, g, n: i64, j| unroll(j, i(n), vec![store(r, v(j), load(g, add(mul(v(lane), i(n)), v(j))))]);
    let regs = |n: i64, per: i64| (0..n / per).map(|r| r * per).collect::<Vec<_>>();
    kb.finish(vec![
        let_(lane, rem(tid(), i(32))),
        fill(a, ga, na, js[0]),
        fill(b, gb, nb, js[1]),
        fill(c, gc, 4, js[2]),
        comment(&format!("gemm -> mma.{} (one instruction)", shape.name())),
        mma(shape, c, regs(4, 1), a, regs(na, per), b, regs(nb, per), c, regs(4, 1)),
        unroll(js[3], i(4), vec![store(gd, add(mul(v(lane), i(4)), v(js[3])), load(c, v(js[3])))]),
    ])
}

/// Named barriers: each warpgroup of 256 threads exchanges through shared
/// memory behind its own barrier (`bar.sync 1 + wg, 128`), then warpgroup 0
/// alone behind a constant id (`bar.sync 2, 128`).
pub fn named_barrier() -> LKernel {
    let mut kb = Kb::new("named_barrier", [1, 1, 1], [256, 1, 1]);
    let a = kb.param("A", DType::F32, &[256]);
    let b = kb.param("B", DType::F32, &[256]);
    let s = kb.shared("S", DType::F32, &[256]);
    let (t, wg) = (kb.var("tid", DType::I32), kb.var("wg", DType::I32));
    let mirror = add(mul(v(wg), i(128)), sub(i(127), rem(v(t), i(128))));
    kb.finish(vec![
        let_(t, tid()),
        let_(wg, div(v(t), i(128))),
        store(s, v(t), load(a, v(t))),
        bar_sync(add(v(wg), i(1)), 128),
        store(b, v(t), load(s, mirror)),
        if_(lt(v(t), i(128)), vec![bar_sync(i(2), 128), store(s, v(t), f(0.0, DType::F32))]),
    ])
}

/// `printf` (the debug family): every thread prints its id, an element as f32 and f16,
/// and a 64-bit integer, in the C format the CUDA printer writes back with `ll` and casts.
pub fn printf_values() -> LKernel {
    let mut kb = Kb::new("printf_values", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[32]);
    let n = kb.param("N", DType::I64, &[1]);
    let t = kb.var("tid", DType::I32);
    kb.finish(vec![
        let_(t, tid()),
        printf(
            "thread %2d: %8.3f %g %x %d%%\n",
            vec![v(t), load(a, v(t)), cast(DType::F16, load(a, v(t))), load(n, i(0)), v(t)],
        ),
    ])
}

/// The forced-width copies' PTX accesses (`PtxVec`): each of 32 threads loads 16 bytes of f32
/// through the read-only path with L1/L2 hints, stores them to shared memory, then (after the
/// barrier) reads its neighbour's as two 8-byte halves and writes them out; and the same
/// path for one u16 per thread in 2-byte accesses.
pub fn ptx_vec_copy() -> LKernel {
    let mut kb = Kb::new("ptx_vec_copy", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, &[32, 4]);
    let b = kb.param("B", DType::F32, &[32, 4]);
    let h = kb.param("H", DType::U16, &[32]);
    let g = kb.param("G", DType::U16, &[32]);
    let s = kb.shared("S", DType::F32, &[32, 4]);
    let sh = kb.shared("Sh", DType::U16, &[32]);
    let r = kb.local("R", DType::F32, &[4]);
    let rh = kb.local("Rh", DType::U16, &[1]);
    let (t, next) = (kb.var("tid", DType::I32), kb.var("next", DType::I32));
    let hints = LoadHints { nc: true, l1: Some(tirx_ir::op::Evict::NoAllocate), l2: None, prefetch: Some(128) };
    let row = |x| mul(v(x), i(4));
    kb.finish(vec![
        let_(t, tid()),
        let_(next, rem(add(v(t), i(1)), i(32))),
        comment("copy A -> S (vec_128b, cache=\"nc\", l1_evict=\"no_allocate\", prefetch_size=128)"),
        ptx_ld(r, i(0), a, row(t), 16, hints),
        ptx_st(s, row(t), r, i(0), 16),
        ptx_ld(rh, i(0), h, v(t), 2, LoadHints::default()),
        ptx_st(sh, v(t), rh, i(0), 2),
        cta_sync(),
        comment("copy S -> B in two 8-byte halves (vec_64b)"),
        ptx_ld(r, i(0), s, row(next), 8, LoadHints::default()),
        ptx_ld(r, i(2), s, add(row(next), i(2)), 8, LoadHints::default()),
        ptx_st(b, row(next), r, i(0), 16),
        ptx_ld(rh, i(0), sh, v(next), 2, LoadHints::default()),
        ptx_st(g, v(next), rh, i(0), 2),
    ])
}

pub fn all_kernels() -> Vec<(&'static str, LKernel)> {
    vec![
        ("copy_f32_gmem_smem", gmem_smem_roundtrip("copy_f32", DType::F32, 4)),
        ("copy_f16_gmem_smem", gmem_smem_roundtrip("copy_f16", DType::F16, 8)),
        ("copy_u8_gmem_smem", gmem_smem_roundtrip("copy_u8", DType::U8, 16)),
        ("fallback_guarded", fallback_guarded()),
        ("scalar_grid_guarded", scalar_grid_guarded()),
        ("scalar_params", scalar_params()),
        ("reg_copy", reg_copy()),
        ("ldstmatrix", ldstmatrix()),
        ("packed_f16", packed_f16()),
        ("cast_pairs", cast_pairs()),
        ("i64_index", i64_index()),
        ("swizzle_xor", swizzle_xor()),
        ("dtype_zoo", dtype_zoo()),
        ("warp_shuffle", warp_shuffle()),
        ("cp_async_copy", cp_async_copy()),
        ("mbarrier_pipeline", mbarrier_pipeline()),
        ("ptx_vec_copy", ptx_vec_copy()),
        ("mma_f16", mma_one("mma_f16", MmaShape::M16N8K16, DType::F16, DType::F32)),
        ("mma_bf16", mma_one("mma_bf16", MmaShape::M16N8K16, DType::BF16, DType::F32)),
        ("mma_f16_k8", mma_one("mma_f16_k8", MmaShape::M16N8K8, DType::F16, DType::F32)),
        ("mma_tf32", mma_one("mma_tf32", MmaShape::M16N8K8, DType::F32, DType::F32)),
        ("mma_s8", mma_one("mma_s8", MmaShape::M16N8K32, DType::I8, DType::I32)),
        ("named_barrier", named_barrier()),
        ("wgmma_ss", wgmma_ss()),
        ("wgmma_rs_f16acc", wgmma_rs_f16acc()),
        ("warp_specialized", warp_specialized()),
        ("printf_values", printf_values()),
        ("dependent_launch", dependent_launch()),
    ]
}

/// Programmatic dependent launch: each thread waits for the kernel before it
/// (`griddepcontrol.wait`), then B = 2 A, then lets the next kernel in
/// (`griddepcontrol.launch_dependents`).
pub fn dependent_launch() -> LKernel {
    let mut kb = Kb::new("dependent_launch", [1, 1, 1], [64, 1, 1]);
    let a = kb.param("A", DType::F32, &[64]);
    let b = kb.param("B", DType::F32, &[64]);
    let t = kb.var("tid", DType::I32);
    kb.finish(vec![
        let_(t, tid()),
        st(LStmtKind::Sync(SyncOp::GridDepWait)),
        store(b, v(t), mul(load(a, v(t)), f(2.0, DType::F32))),
        st(LStmtKind::Sync(SyncOp::GridDepLaunch)),
    ])
}

/// One warpgroup, one 64x64x16 bf16 tile: A (64x16, K-major, 32-byte swizzle) and B
/// (16x64 stored K x N, MN-major, 128-byte swizzle) global -> shared, the proxy fence,
/// then `wgmma.m64n64k16` accumulating when `flag[0]` says so, and the accumulator out.
pub fn wgmma_ss() -> LKernel {
    let mut kb = Kb::new("wgmma_ss", [1, 1, 1], [128, 1, 1]);
    let (ga, gb) = (kb.param("A", DType::BF16, &[64, 16]), kb.param("B", DType::BF16, &[16, 64]));
    let flag = kb.param("flag", DType::I32, &[1]);
    let gd = kb.param("D", DType::F32, &[128, 32]);
    let (sa, sb) = (kb.shared("A_smem", DType::BF16, &[64, 16]), kb.shared("B_smem", DType::BF16, &[16, 64]));
    let acc = kb.local("acc", DType::F32, &[32]);
    let (t, j) = (kb.var("tid", DType::I32), kb.var("j", DType::I32));
    // 16-byte chunks: A has 128 (one per thread), B 128.
    kb.finish(vec![
        let_(t, tid()),
        vcopy(sa, mul(v(t), i(8)), ga, mul(v(t), i(8)), 8),
        vcopy(sb, mul(v(t), i(8)), gb, mul(v(t), i(8)), 8),
        fence_proxy_async(),
        cta_sync(),
        unroll(j, i(32), vec![store(acc, v(j), f(1.0, DType::F32))]),
        comment("warpgroup.gemm_async -> wgmma"),
        wgmma_sync(WgmmaSync::Fence),
        wgmma(Wgmma {
            n: 64,
            d: acc,
            d_index: (0..32).map(i).collect(),
            a: WgmmaA::Smem(desc(sa, i(0), Major::K, WgmmaSwizzle::B32, 16, 256)),
            b: desc(sb, i(0), Major::MN, WgmmaSwizzle::B128, 2048, 1024),
            scale_d: bin(LBinOp::Ne, load(flag, i(0)), i(0)),
        }),
        wgmma_sync(WgmmaSync::Commit),
        wgmma_sync(WgmmaSync::Wait(0)),
        unroll(j, i(32), vec![store(gd, add(mul(v(t), i(32)), v(j)), load(acc, v(j)))]),
    ])
}

/// The register form with a float16 accumulator: A's four registers per thread
/// from global, B (32x16 f16, K-major, no swizzle: core matrices) from shared.
pub fn wgmma_rs_f16acc() -> LKernel {
    let mut kb = Kb::new("wgmma_rs_f16acc", [1, 1, 1], [128, 1, 1]);
    let ga = kb.param("A", DType::F16, &[128, 8]);
    let gb = kb.param("B", DType::F16, &[32, 16]);
    let gd = kb.param("D", DType::F16, &[128, 16]);
    let sb = kb.shared("B_smem", DType::F16, &[32, 16]);
    let (a, acc) = (kb.local("a", DType::F16, &[8]), kb.local("acc", DType::F16, &[16]));
    let (t, j) = (kb.var("tid", DType::I32), kb.var("j", DType::I32));
    kb.finish(vec![
        let_(t, tid()),
        vcopy(a, i(0), ga, mul(v(t), i(8)), 8),
        if_(lt(v(t), i(64)), vec![vcopy(sb, mul(v(t), i(8)), gb, mul(v(t), i(8)), 8)]),
        fence_proxy_async(),
        cta_sync(),
        wgmma_sync(WgmmaSync::Fence),
        wgmma(Wgmma {
            n: 32,
            d: acc,
            d_index: (0..8).map(|r| i(2 * r)).collect(),
            a: WgmmaA::Regs { buf: a, index: vec![i(0), i(2), i(4), i(6)] },
            b: desc(sb, i(0), Major::K, WgmmaSwizzle::None, 512, 128),
            scale_d: LExpr::Bool(false),
        }),
        wgmma_sync(WgmmaSync::Commit),
        wgmma_sync(WgmmaSync::Wait(0)),
        unroll(j, i(16), vec![store(gd, add(mul(v(t), i(16)), v(j)), load(acc, v(j)))]),
    ])
}

/// Warpgroup specialisation: warpgroup 0 gives registers up and signals with
/// `bar.arrive`, warpgroup 1 takes them and waits with `bar.sync`.
pub fn warp_specialized() -> LKernel {
    let mut kb = Kb::new("warp_specialized", [1, 1, 1], [256, 1, 1]);
    let a = kb.param("A", DType::F32, &[128]);
    let b = kb.param("B", DType::F32, &[128]);
    let s = kb.shared("S", DType::F32, &[128]);
    let t = kb.var("tid", DType::I32);
    kb.finish(vec![
        let_(t, tid()),
        if_else(
            lt(v(t), i(128)),
            vec![setmaxnreg(false, 40), store(s, v(t), load(a, v(t))), bar_arrive(i(9), 256)],
            vec![setmaxnreg(true, 216), bar_sync(i(9), 256), store(b, sub(v(t), i(128)), load(s, sub(i(255), v(t))))],
        ),
    ])
}
