//! Partition synthesis for global ↔ shared copies (`align_layouts_gs`,
//! docs/layout-model.md §3.3): split the region into `[outer, threads, vec]` so that
//! thread `t` in round `f` moves the `vec` elements at `g_p.apply(f, t, 0)` and
//! `s_p.apply(f, t, 0)` as one vector access on each side.
//!
//! Deliberate differences from the reference (pitfalls 15–17):
//! * the global vector iter must be one iter of stride 1 (a column copy never
//!   loads neighbouring columns);
//! * offsets, every non-vector stride of both sides, and the known divisor of a
//!   symbolic region begin must be multiples of `vec` (no misaligned vectors);
//! * when the shared layout cannot follow the global iters, both sides are
//!   walked in their unsorted logical order (vec 1), never a mixed order.

use crate::lay::{self, canon, group};
use tirx_layout::{Iter, TileLayout};

/// Inputs: both sides sliced to the region (memory-only tile layouts).
pub struct Sides<'a> {
    pub g: &'a TileLayout,
    pub s: &'a TileLayout,
    pub elem_bytes: i64,
    pub threads: i64,
    /// Elements per swizzle chunk of the shared side.
    pub chunk: Option<i64>,
    /// Known divisors of the symbolic begin parts (0 = none).
    pub g_sym_div: i64,
    pub s_sym_div: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Partition {
    /// `g_p` and `s_p` have the same extents `[outer.., threads.., vec]`.
    Grid { g: TileLayout, s: TileLayout, vec: i64, rounds: i64 },
    /// Element `L = f·T + t` of the region, each side split over its own shard (vec 1).
    Linear { g: TileLayout, s: TileLayout, rounds: i64 },
}

impl Partition {
    pub fn vec(&self) -> i64 {
        match self {
            Partition::Grid { vec, .. } => *vec,
            Partition::Linear { .. } => 1,
        }
    }
    pub fn rounds(&self) -> i64 {
        match self {
            Partition::Grid { rounds, .. } | Partition::Linear { rounds, .. } => *rounds,
        }
    }
}

/// The widest aligned partition, and why wider vectors were not possible.
pub fn align(x: &Sides) -> (Partition, Vec<String>) {
    let mut limits = Vec::new();
    let n: i64 = x.g.shard.iter().map(|i| i.extent).product();
    let t = x.threads;
    let linear = |limits: Vec<String>| (Partition::Linear { g: x.g.clone(), s: x.s.clone(), rounds: n / t }, limits);
    let Some((g_sorted, s_aligned)) = global_order(x) else {
        limits.push("the shared layout cannot follow the global iters: one element per thread and round".into());
        return linear(limits);
    };
    for vec in vec_candidates((x.elem_bytes * 8) as u32) {
        match try_vec(x, &g_sorted, &s_aligned, vec, n) {
            Ok(p) => {
                if limits.is_empty() {
                    // The first candidate is 16 bytes: only the hardware limits it.
                    limits.push(format!("vec {vec} × {} B = 16 B, the widest vector access", x.elem_bytes));
                }
                return (p, limits);
            }
            Err(why) => limits.push(why),
        }
    }
    limits.push("no [outer, threads, vec] split exists: one element per thread and round".into());
    linear(limits)
}

/// Both sides in the global side's order (step 2 of docs/layout-model.md §3.3):
/// the global iters sorted by stride descending, and the shared side grouped by
/// the global iters and permuted the same way (it keeps its own strides), both
/// canonical. `None` when the shared layout cannot follow the global iters.
pub fn global_order(x: &Sides) -> Option<(Vec<Iter>, Vec<Iter>)> {
    let gx: Vec<i64> = x.g.shard.iter().map(|i| i.extent).collect();
    let (s1, seps) = group(&x.s.shard, &gx)?;
    let mut perm: Vec<usize> = (0..x.g.shard.len()).collect();
    perm.sort_by(|&a, &b| x.g.shard[b].stride.cmp(&x.g.shard[a].stride));
    let s_perm: Vec<Iter> = perm.iter().flat_map(|&d| s1[seps[d]..seps[d + 1]].iter().copied()).collect();
    Some((canon(&perm.iter().map(|&d| x.g.shard[d]).collect::<Vec<_>>()), canon(&s_perm)))
}

fn try_vec(x: &Sides, g: &[Iter], s: &[Iter], vec: i64, n: i64) -> Result<Partition, String> {
    let t = x.threads;
    let bytes = x.elem_bytes;
    if let Some(c) = x.chunk {
        if vec > c {
            return Err(format!("vec {vec} would cross the swizzle chunk of {c} elements"));
        }
    }
    let gav = if vec == 1 {
        let mut v = g.to_vec();
        v.push(Iter::m(1, 1));
        v
    } else {
        carve_tail(g, vec)
            .ok_or_else(|| format!("vec {vec}: the global region ({} elements) has no contiguous tail of {vec}", n))?
    };
    let Some((&vit, outer)) = gav.split_last() else { return Err("empty region".into()) };
    if vec > 1 && (vit.extent != vec || vit.stride != 1) {
        return Err(format!(
            "vec {vec}: the global elements are not contiguous (innermost stride {}), a vector would read neighbouring elements",
            g.last().map_or(0, |i| i.stride)
        ));
    }
    let outer = if t > 1 {
        carve_tail(outer, t).ok_or_else(|| {
            if n % (t * vec) != 0 {
                format!("vec {vec}: thread count {t} × vec {vec} does not divide {n} elements")
            } else {
                format!("vec {vec}: the region's iters {} do not split into {t} threads × {vec}", extents_text(g))
            }
        })?
    } else {
        outer.to_vec()
    };
    let mut gfin = outer;
    gfin.push(vit);
    let ext: Vec<i64> = gfin.iter().map(|i| i.extent).collect();
    let (s_p, _) = group(s, &ext).ok_or_else(|| format!("vec {vec}: the shared layout does not split as {ext:?}"))?;
    if vec > 1 && !tail_contiguous(&s_p, vec) {
        return Err(format!("vec {vec}: the shared elements of a vector are not contiguous"));
    }
    let g_p = TileLayout { shard: gfin, replica: vec![], offset: x.g.offset.clone() };
    let s_p = TileLayout { shard: s_p, replica: vec![], offset: x.s.offset.clone() };
    if vec > 1 {
        check_aligned(vec, bytes, "global", &g_p, x.g_sym_div)?;
        check_aligned(vec, bytes, "shared", &s_p, x.s_sym_div)?;
    }
    Ok(Partition::Grid { g: g_p, s: s_p, vec, rounds: n / (t * vec) })
}

fn extents_text(iters: &[Iter]) -> String {
    let e: Vec<String> = iters.iter().map(|i| format!("{}:{}", i.extent, i.stride)).collect();
    format!("({})", e.join(", "))
}

/// Every stride but the vector's, the offset and the symbolic divisor are multiples of `vec`.
fn check_aligned(vec: i64, bytes: i64, side: &str, l: &TileLayout, sym_div: i64) -> Result<(), String> {
    let fail = |what: &str, v: i64| {
        Err(format!(
            "vec {vec}: {side} {what} {v} × {bytes} B = {} B is not {}-B aligned",
            v.saturating_mul(bytes),
            vec * bytes
        ))
    };
    let n = l.shard.len();
    for it in &l.shard[..n.saturating_sub(1)] {
        if it.extent > 1 && it.stride % vec != 0 {
            return fail("stride", it.stride);
        }
    }
    let off = lay::m_offset(l);
    if off % vec != 0 {
        return fail("region offset", off);
    }
    if sym_div != 0 && sym_div % vec != 0 {
        return fail("symbolic begin step", sym_div);
    }
    Ok(())
}

/// Splits the suffix of `iters` whose extent product is `k` off as its own
/// iters (at most one split). `None` when `k` does not divide the tail.
fn carve_tail(iters: &[Iter], k: i64) -> Option<Vec<Iter>> {
    if iters.is_empty() || k <= 0 {
        return None;
    }
    let mut rem = k;
    for idx in (0..iters.len()).rev() {
        let it = iters[idx];
        if it.extent == rem {
            return Some(iters.to_vec());
        }
        if it.extent < rem {
            if rem % it.extent != 0 {
                return None;
            }
            rem /= it.extent;
            continue;
        }
        if it.extent % rem != 0 {
            return None;
        }
        let mut out = iters[..idx].to_vec();
        out.push(Iter::new(it.extent / rem, it.stride * rem, it.axis));
        out.push(Iter::new(rem, it.stride, it.axis));
        out.extend_from_slice(&iters[idx + 1..]);
        return Some(out);
    }
    None
}

/// The innermost `vec` elements of `iters` are contiguous (stride-1 chain).
fn tail_contiguous(iters: &[Iter], vec: i64) -> bool {
    let Some(last) = iters.last() else { return vec == 1 };
    if last.stride != 1 {
        return false;
    }
    let mut acc = last.extent;
    if acc == vec {
        return true;
    }
    for it in iters[..iters.len() - 1].iter().rev() {
        if it.stride != acc {
            break;
        }
        acc *= it.extent;
        if acc == vec {
            return true;
        }
        if acc > vec {
            return false;
        }
    }
    acc >= vec && acc % vec == 0
}

/// Vector widths to try, widest first: 128/64/32/16/8-bit groups of elements, then 1.
pub fn vec_candidates(elem_bits: u32) -> Vec<i64> {
    let mut v: Vec<i64> = Vec::new();
    for bits in [128u32, 64, 32, 16, 8] {
        if bits >= elem_bits && bits % elem_bits == 0 {
            let n = (bits / elem_bits) as i64;
            if !v.contains(&n) {
                v.push(n);
            }
        }
    }
    if !v.contains(&1) {
        v.push(1);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lay::slice;

    fn sides<'a>(g: &'a TileLayout, s: &'a TileLayout, bytes: i64, t: i64) -> Sides<'a> {
        Sides { g, s, elem_bytes: bytes, threads: t, chunk: None, g_sym_div: 0, s_sym_div: 0 }
    }

    #[test]
    fn carve_and_tail() {
        assert_eq!(
            carve_tail(&[Iter::m(32, 32), Iter::m(32, 1)], 4).unwrap(),
            vec![Iter::m(32, 32), Iter::m(8, 4), Iter::m(4, 1)]
        );
        assert!(carve_tail(&[Iter::m(6, 1)], 4).is_none());
        assert!(tail_contiguous(&[Iter::m(8, 4), Iter::m(4, 1)], 4));
        assert!(!tail_contiguous(&[Iter::m(4, 2)], 4));
    }

    #[test]
    fn seed_table() {
        let l = TileLayout::row_major(&[32, 32]);
        let g = slice(&l, &[32, 32], &[0, 0], &[32, 32]).unwrap();
        for (bytes, vec, rounds) in [(4, 4, 8), (2, 8, 4), (1, 16, 2)] {
            let (p, _) = align(&sides(&g, &g, bytes, 32));
            assert_eq!((p.vec(), p.rounds()), (vec, rounds));
        }
    }

    #[test]
    fn column_copy_is_scalar() {
        let l = TileLayout::row_major(&[64, 64]);
        let g = slice(&l, &[64, 64], &[0, 0], &[64, 1]).unwrap();
        let s = slice(&TileLayout::row_major(&[64, 1]), &[64, 1], &[0, 0], &[64, 1]).unwrap();
        let (p, limits) = align(&sides(&g, &s, 2, 1));
        assert_eq!(p.vec(), 1, "{limits:?}");
    }

    #[test]
    fn unaligned_strides_and_offsets() {
        // g = s = S[(2,16):(20,1)] f16, T=4 → vec 4 (stride 20 % 8 != 0).
        let l = TileLayout::from_shard(vec![Iter::m(2, 20), Iter::m(16, 1)]);
        let (p, _) = align(&sides(&l, &l, 2, 4));
        assert_eq!(p.vec(), 4);
        // Region starting at column 3 → vec 1.
        let g = slice(&TileLayout::row_major(&[4, 32]), &[4, 32], &[0, 3], &[4, 16]).unwrap();
        let s = TileLayout::row_major(&[4, 16]);
        let (p, _) = align(&sides(&g, &s, 2, 4));
        assert_eq!(p.vec(), 1);
    }

    #[test]
    fn permuted_smem_keeps_strides() {
        let g = TileLayout::row_major(&[128, 64]);
        let s = TileLayout::from_shard(vec![Iter::m(128, 8), Iter::m(8, 1024), Iter::m(8, 1)]);
        let (p, _) = align(&sides(&g, &s, 2, 128));
        let Partition::Grid { s, vec, .. } = p else { panic!("not a grid") };
        assert_eq!(vec, 8);
        assert!(s.shard.iter().any(|i| i.stride == 1024));
    }
}
