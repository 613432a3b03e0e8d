//! Buffer addressing: the element index of `buf[i, j, ..]` is
//! `layout.apply(i, j, ..)["m"]`, built symbolically. Each index is split over
//! the extents of its dim's iter group (`/` and `%` only where a dim owns
//! several iters), then a swizzle is applied with xor/shift arithmetic.

use crate::build::Builder;
use crate::lay;
use crate::stmt::Env;
use tirx_ir::hir::{BufId, Kernel};
use tirx_ir::lir::{LBinOp, LBufId, LExpr};
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
    let tile = lay::try_compose_base(&hb.layout, &hb.shape).map_err(|e| format!("the layout of `{}`: {e}", hb.name))?;
    if !thread_axes && tile.shard.iter().any(|i| i.axis.is_thread()) {
        return Err(format!(
            "`{}` has a thread-axis layout ({}) and cannot be indexed directly; index its per-thread storage instead, e.g. `{}_l = {}.local()`",
            hb.name,
            crate::explain::layout_text(&hb.layout),
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
pub fn swizzle(b: &Builder, sw: &Swizzle, m: LExpr) -> LExpr {
    if sw.swizzle_len == 0 {
        return m;
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

pub fn swizzle_const(sw: &Swizzle, m: i64) -> i64 {
    let mask = (1i64 << sw.swizzle_len) - 1;
    let (p, at) = (sw.per_element as i64, sw.atom_len as i64);
    if sw.inner {
        m ^ (((m >> (p + at)) & mask) << p)
    } else {
        m ^ (((m >> p) & mask) << (p + at))
    }
}
