//! Buffer addressing: the element index of `buf[i, j, ..]` is
//! `layout.apply(i, j, ..)["m"]`, built symbolically. Each index is split over
//! the extents of its dim's iter group (`/` and `%` only where a dim owns
//! several iters), then a swizzle is applied with xor/shift arithmetic.

use crate::build::Builder;
use crate::env::Env;
use crate::lay;
use tirx_ir::hir::{BufId, Kernel};
use tirx_ir::lir::{LBinOp, LBufId, LExpr};
use tirx_ir::DType;
use tirx_layout::{Axis, Iter, Layout, Swizzle};

/// `(flat buffer, element index)` of `buf[idx]`. `thread_axes` allows layouts
/// with thread axes (their memory part is addressed); scalar accesses in
/// scripts pass false and get a diagnostic suggesting `.local()`.
pub fn element(
    k: &Kernel,
    env: &Env,
    b: &Builder,
    buf: BufId,
    idx: &[LExpr],
    thread_axes: bool,
) -> Result<(LBufId, LExpr), String> {
    let hb = k.buf(buf);
    let (lb, ity) = env.lbuf(buf).ok_or_else(|| format!("buffer `{}` is used before its allocation", hb.name))?;
    if idx.len() != hb.shape.len() {
        return Err(format!("`{}` has {} dims but is indexed with {}", hb.name, hb.shape.len(), idx.len()));
    }
    if hb.has_dyn_strides() {
        let strides = env.strides.get(&buf).ok_or_else(|| format!("the strides of `{}` are not bound", hb.name))?;
        return Ok((lb, strided(b, strides, idx, ity)));
    }
    let tile = lay::try_compose_base(&hb.layout, &hb.shape).map_err(|e| format!("the layout of `{}`: {e}", hb.name))?;
    if !thread_axes && tile.shard.iter().any(|i| i.axis.is_thread()) {
        return Err(format!(
            "`{}` has a thread-axis layout ({}) and cannot be indexed directly; index its per-thread storage instead, e.g. `{}_l = {}.local()`",
            hb.name,
            crate::text::layout_text(&hb.layout),
            hb.name,
            hb.name
        ));
    }
    let (g, seps) = lay::group(&lay::canon(&tile.shard), &hb.shape)
        .ok_or_else(|| format!("the layout of `{}` does not split over its shape {:?}", hb.name, hb.shape))?;
    let mut flat = LExpr::Int(lay::m_offset(&tile), ity);
    for (d, x) in idx.iter().enumerate() {
        let x = b.to_int(x.clone(), ity);
        flat = b.add(flat, dim_offset(b, &g[seps[d]..seps[d + 1]], x));
    }
    let flat = match &hb.layout {
        Layout::Compose(c) => swizzle(b, &c.swizzle, flat),
        Layout::Tile(_) => flat,
    };
    Ok((lb, flat))
}

/// `Σ idx[d] · stride[d]` of a buffer with run-time strides, in `ity`.
fn strided(b: &Builder, strides: &[LExpr], idx: &[LExpr], ity: DType) -> LExpr {
    let mut flat = LExpr::Int(0, ity);
    for (x, s) in idx.iter().zip(strides) {
        flat = b.add(flat, b.mul(b.to_int(x.clone(), ity), b.to_int(s.clone(), ity)));
    }
    flat
}

/// The thread-axis coordinates of `buf[idx]`: which thread owns the element
/// (`[(laneid, i)]` for `S[(32,8):(1@laneid,1)]`), in `I32`.
pub fn owner(k: &Kernel, b: &Builder, buf: BufId, idx: &[LExpr]) -> Result<Vec<(Axis, LExpr)>, String> {
    let hb = k.buf(buf);
    let tile = lay::tile_of(&hb.layout);
    let (g, seps) = lay::group(&lay::canon(&tile.shard), &hb.shape)
        .ok_or_else(|| format!("the layout of `{}` does not split over its shape {:?}", hb.name, hb.shape))?;
    let mut axes: Vec<Axis> =
        tile.shard.iter().map(|i| i.axis).chain(tile.offset.keys().copied()).filter(|a| a.is_thread()).collect();
    axes.sort();
    axes.dedup();
    Ok(axes
        .into_iter()
        .map(|a| {
            let mut v = LExpr::i32(tile.offset.get(&a).copied().unwrap_or(0));
            for (d, x) in idx.iter().enumerate() {
                v = b.add(v, dim_offset_on(b, &g[seps[d]..seps[d + 1]], b.to_int(x.clone(), tirx_ir::DType::I32), a));
            }
            (a, v)
        })
        .collect())
}

/// `Σ c_k · s_k` over the `m` iters of one dim, `c` = `x` split over the group
/// extents (innermost `% e`, outermost takes the quotient).
pub fn dim_offset(b: &Builder, group: &[Iter], x: LExpr) -> LExpr {
    dim_offset_on(b, group, x, Axis::M)
}

/// [`dim_offset`] on any axis.
pub fn dim_offset_on(b: &Builder, group: &[Iter], x: LExpr, axis: Axis) -> LExpr {
    let ity = b.ity(&x);
    let mut acc = LExpr::Int(0, ity);
    let mut rest = x;
    for (k, it) in group.iter().enumerate().rev() {
        let c = if k == 0 { rest.clone() } else { b.rem_c(rest.clone(), it.extent) };
        if it.axis == axis {
            acc = b.add(b.mul(c, LExpr::Int(it.stride, ity)), acc);
        }
        if k > 0 {
            rest = b.div_c(rest, it.extent);
        }
    }
    acc
}

/// `x`, a row-major flat index over the extents `ext` of `dims`, split into
/// those dims' entries of `coords` (the outermost takes the quotient).
pub fn split_row_major(b: &Builder, x: &LExpr, dims: &[usize], ext: &[i64], coords: &mut [LExpr]) {
    let mut rest = x.clone();
    for (k, &d) in dims.iter().enumerate().rev() {
        if k == 0 {
            coords[d] = rest.clone();
        } else {
            coords[d] = b.rem_c(rest.clone(), ext[d]);
            rest = b.div_c(rest, ext[d]);
        }
    }
}

/// The swizzled element index (docs/layout-model.md §2.9):
/// inner: `m ^ (((m >> (p+at)) & mask) << p)`; outer: `m ^ (((m >> p) & mask) << (p+at))`.
///
/// The swizzle reads and writes only the bits of `m` below its period `2^(p+at+sw)`, so
/// `swizzle(x + k·2^period) = swizzle(x) + k·2^period`: the terms of `m` that are multiples of
/// the period (stage and tile offsets, outer loop steps) are added after the swizzle, and the
/// swizzled part keeps only what varies within one period (loop-invariant in a K loop).
pub fn swizzle(b: &Builder, sw: &Swizzle, m: LExpr) -> LExpr {
    if sw.swizzle_len == 0 {
        return m;
    }
    let (low, high) = split_multiples(b, &m, period_bits(sw));
    if !matches!(high, LExpr::Int(0, _)) {
        return b.add(swizzle(b, sw, low), high);
    }
    if let LExpr::Int(v, t) = m {
        return LExpr::Int(swizzle_const(sw, v), t);
    }
    let mask = (1i64 << sw.swizzle_len) - 1;
    let (p, at) = (sw.per_element as i64, sw.atom_len as i64);
    let bits = if sw.inner {
        b.bin_c(LBinOp::Shl, b.bin_c(LBinOp::BitAnd, b.bin_c(LBinOp::Shr, m.clone(), p + at), mask), p)
    } else {
        b.bin_c(LBinOp::Shl, b.bin_c(LBinOp::BitAnd, b.bin_c(LBinOp::Shr, m.clone(), p), mask), p + at)
    };
    b.xor(m, bits)
}

/// `log2` of the swizzle's period: it reads and writes only the bits below it.
pub fn period_bits(sw: &Swizzle) -> u32 {
    sw.per_element + sw.atom_len + sw.swizzle_len
}

/// `m = low + high` where `high` sums the terms of `m` that are multiples of `2^k` (constants
/// are split into their residue and the rest) and `low` the other terms.
pub fn split_multiples(b: &Builder, m: &LExpr, k: u32) -> (LExpr, LExpr) {
    let t = b.ity(m);
    let unit = 1i64 << k;
    let (mut low, mut high) = (LExpr::Int(0, t), LExpr::Int(0, t));
    let mut terms = Vec::new();
    additive_terms(m, false, &mut terms);
    for (term, negated) in terms {
        let (lo, hi) = match term {
            LExpr::Int(c, t) => {
                let c = if negated { -c } else { *c };
                (LExpr::Int(c.rem_euclid(unit), *t), LExpr::Int(c - c.rem_euclid(unit), *t))
            }
            _ if multiple_of(term, k) => {
                let hi = if negated { b.sub(high, term.clone()) } else { b.add(high, term.clone()) };
                high = hi;
                continue;
            }
            _ => {
                low = if negated { b.sub(low, term.clone()) } else { b.add(low, term.clone()) };
                continue;
            }
        };
        low = b.add(low, lo);
        high = match hi {
            LExpr::Int(c, t) if c < 0 => b.sub(high, LExpr::Int(-c, t)),
            hi => b.add(high, hi),
        };
    }
    (low, high)
}

/// The summands of `e` (`a + b`, `a - b`), each with whether it is subtracted.
fn additive_terms<'e>(e: &'e LExpr, negated: bool, out: &mut Vec<(&'e LExpr, bool)>) {
    match e {
        LExpr::Bin(LBinOp::Add, a, c) => {
            additive_terms(a, negated, out);
            additive_terms(c, negated, out);
        }
        LExpr::Bin(LBinOp::Sub, a, c) => {
            additive_terms(a, negated, out);
            additive_terms(c, !negated, out);
        }
        _ => out.push((e, negated)),
    }
}

/// `e` is a multiple of `2^k` for every value of its variables.
fn multiple_of(e: &LExpr, k: u32) -> bool {
    let unit = 1i64 << k;
    match e {
        LExpr::Int(c, _) => c % unit == 0,
        LExpr::Bin(LBinOp::Mul, a, c) => multiple_of(a, k) || multiple_of(c, k),
        LExpr::Bin(LBinOp::Shl, a, c) => match **c {
            LExpr::Int(s, _) if (0..63).contains(&s) => s >= k as i64 || multiple_of(a, k - s as u32),
            _ => multiple_of(a, k),
        },
        LExpr::Bin(LBinOp::Add | LBinOp::Sub, a, c) => multiple_of(a, k) && multiple_of(c, k),
        _ => false,
    }
}

pub fn swizzle_const(sw: &Swizzle, m: i64) -> i64 {
    let mask = (1i64 << sw.swizzle_len) - 1;
    let (p, at) = (sw.per_element as i64, sw.atom_len as i64);
    if sw.inner {
        m ^ (((m >> (p + at)) & mask) << p)
    } else {
        m ^ (((m >> p) & mask) << (p + at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tirx_ir::lir::LVarId;
    use tirx_ir::DType;

    fn eval(e: &LExpr, x: i64, y: i64, vx: LVarId) -> i64 {
        match e {
            LExpr::Int(c, _) => *c,
            LExpr::Var(v) => {
                if *v == vx {
                    x
                } else {
                    y
                }
            }
            LExpr::Bin(op, a, b) => {
                let (a, b) = (eval(a, x, y, vx), eval(b, x, y, vx));
                match op {
                    LBinOp::Add => a + b,
                    LBinOp::Sub => a - b,
                    LBinOp::Mul => a * b,
                    LBinOp::Shl => a << b,
                    LBinOp::Shr => a >> b,
                    LBinOp::BitAnd => a & b,
                    LBinOp::BitXor => a ^ b,
                    op => panic!("unexpected {op:?}"),
                }
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    proptest! {
        /// swizzle(low) + high == swizzle(m) for every split of m into period multiples.
        #[test]
        fn swizzle_moves_period_multiples_out(
            p in 0u32..4, sw in 1u32..4, extra in 0u32..3, inner: bool,
            c1 in 0i64..40, c2 in 0i64..6, c0 in -4096i64..4096, x in 0i64..64, y in 0i64..16,
        ) {
            let sw = Swizzle::new(p, sw, sw + extra, inner).unwrap();
            let mut b = Builder::new([1, 1, 1], [1, 1, 1]);
            let (vx, vy) = (b.var("x", DType::I32, Some((0, 63))), b.var("y", DType::I32, Some((0, 15))));
            let period = 1i64 << period_bits(&sw);
            // x * c1 + y * (c2 * period) + c0: a mix of inner terms, multiples and a constant.
            let m = b.add(
                b.add(b.mul(LExpr::Var(vx), LExpr::i32(c1)), b.mul(LExpr::Var(vy), LExpr::i32(c2 * period))),
                LExpr::i32(c0 + 8 * period),
            );
            let want = swizzle_const(&sw, eval(&m, x, y, vx));
            prop_assert_eq!(eval(&swizzle(&b, &sw, m), x, y, vx), want);
        }
    }
}
