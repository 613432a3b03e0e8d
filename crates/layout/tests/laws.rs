//! Property tests of the layout laws (≥1000 cases each unless `PROPTEST_CASES` says otherwise).
//!
//! Maps are compared as multisets of normalized coordinates (zero entries
//! dropped), so `S[(1,8):(1@laneid,1)]` and `S[8:1]` count as the same map.

use proptest::prelude::*;
use proptest::test_runner::Config;
use tirx_layout::{
    mma_atom_layout, mma_atom_shape, mma_shared_layout, normalize, parse_layout, Axis, ComposeLayout, Coord, Fusion,
    Injectivity, Iter, Layout, LayoutError, Swizzle, SwizzleMode, TileLayout,
};

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    Config { cases, failure_persistence: None, ..Config::default() }
}

/// Axis sets whose thread axes form a valid scope chain.
const PROFILES: &[&[Axis]] = &[
    &[Axis::M],
    &[Axis::M, Axis::TLane, Axis::TCol],
    &[Axis::M, Axis::LaneId],
    &[Axis::M, Axis::LaneId, Axis::WarpId],
    &[Axis::M, Axis::LaneId, Axis::WidInWg],
    &[Axis::M, Axis::LaneId, Axis::WidInWg, Axis::WgId],
    &[Axis::M, Axis::Tx],
    &[Axis::M, Axis::WgId, Axis::WidInWg],
    &[Axis::M, Axis::TidInWg],
];

fn iter_in(axes: &'static [Axis]) -> impl Strategy<Value = Iter> {
    (prop::sample::select(vec![1i64, 1, 2, 2, 3, 4, 4, 8]), -2i64..40, 0..axes.len())
        .prop_map(move |(e, s, a)| Iter::new(e, s, axes[a]))
}

/// A well-formed layout of at most 8·8·... elements on one profile.
fn layout() -> impl Strategy<Value = TileLayout> {
    (0..PROFILES.len())
        .prop_flat_map(|p| {
            let axes = PROFILES[p];
            (
                prop::collection::vec(iter_in(axes), 1..=5),
                prop::collection::vec(iter_in(axes), 0..=2),
                prop::collection::vec((0..axes.len(), -3i64..70), 0..=3),
            )
                .prop_map(move |(mut shard, replica, offs)| {
                    // Keep enumeration cheap: at most 512 elements.
                    while shard.iter().map(|it| it.extent).product::<i64>() > 512 {
                        shard.pop();
                    }
                    let mut offset = Coord::new();
                    for (a, v) in offs {
                        *offset.entry(axes[a]).or_insert(0) += v;
                    }
                    TileLayout::new(shard, replica, offset)
                })
        })
        // e.g. laneid + wgid without wid_in_wg: a broken chain, tested separately.
        .prop_filter("thread axes must form a scope chain", |l| l.scope().is_ok())
}

/// An injective layout by construction: per axis, the iters on it get the
/// strides of a compact (optionally padded) layout in a random nesting order,
/// possibly negative, plus offsets.
fn compact() -> impl Strategy<Value = TileLayout> {
    (0..PROFILES.len())
        .prop_flat_map(|p| {
            let axes = PROFILES[p];
            (
                prop::collection::vec((1i64..5, 0..axes.len(), any::<u32>(), any::<bool>()), 1..=5),
                0i64..3,
                prop::collection::vec((0..axes.len(), -3i64..70), 0..=2),
            )
                .prop_map(move |(iters, pad, offs)| {
                    let mut shard: Vec<Iter> = iters.iter().map(|&(e, a, _, _)| Iter::new(e, 0, axes[a])).collect();
                    // Nesting order per axis: by the random key; each stride clears the ones inside.
                    let mut order: Vec<usize> = (0..shard.len()).collect();
                    order.sort_by_key(|&i| iters[i].2);
                    let mut next: std::collections::BTreeMap<Axis, i64> = Default::default();
                    for i in order {
                        let slot = next.entry(shard[i].axis).or_insert(1);
                        shard[i].stride = if iters[i].3 { -*slot } else { *slot };
                        *slot = *slot * shard[i].extent + pad;
                    }
                    let mut offset = Coord::new();
                    for (a, v) in offs {
                        *offset.entry(axes[a]).or_insert(0) += v;
                    }
                    TileLayout::new(shard, vec![], offset)
                })
        })
        .prop_filter("thread axes must form a scope chain", |l| l.scope().is_ok())
}

fn sorted(mut v: Vec<Coord>) -> Vec<Coord> {
    v.sort();
    v
}

/// The full map as a list (index = flat logical index) of sorted coordinate multisets.
fn full_map(l: &TileLayout, project: impl Fn(&Coord) -> Coord) -> Vec<Vec<Coord>> {
    let n = l.size(None).unwrap();
    (0..n).map(|x| sorted(l.apply_set(&[x], &[n]).unwrap().iter().map(&project).collect())).collect()
}

/// A shape of up to 3 dims whose product is `size`, from its divisors.
fn shape_for(size: i64, a: u32, b: u32) -> Vec<i64> {
    let divisors: Vec<i64> = (1..=size).filter(|d| size % d == 0).collect();
    let d0 = divisors[a as usize % divisors.len()];
    let rest = size / d0;
    let divisors: Vec<i64> = (1..=rest).filter(|d| rest % d == 0).collect();
    let d1 = divisors[b as usize % divisors.len()];
    match (a % 3, b % 2) {
        (0, _) => vec![size],
        (_, 0) => vec![d0, rest],
        _ => vec![d0, d1, rest / d1],
    }
}

fn coords(shape: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &e in shape {
        out = out.into_iter().flat_map(|c| (0..e).map(move |i| [c.clone(), vec![i]].concat())).collect();
    }
    out
}

/// Brute force: two distinct elements with a common home, as (first, second), if any.
fn brute_collision(l: &TileLayout) -> Option<(i64, i64)> {
    let mut owner: std::collections::BTreeMap<Coord, i64> = Default::default();
    for (x, homes) in full_map(l, normalize).into_iter().enumerate() {
        for h in homes {
            match owner.get(&h) {
                Some(&y) if y != x as i64 => return Some((y, x as i64)),
                _ => {
                    owner.insert(h, x as i64);
                }
            }
        }
    }
    None
}

/// `c.at` is a home of both reported elements.
fn collision_is_real(l: &TileLayout, c: &tirx_layout::Collision) -> bool {
    let homes = |x: i64| l.apply_set(&[x], &[l.size(None).unwrap()]).unwrap().iter().map(normalize).collect::<Vec<_>>();
    let at = normalize(&c.at);
    c.first < c.second && homes(c.first).contains(&at) && homes(c.second).contains(&at)
}

fn fusion(cuda: bool) -> Fusion {
    if cuda {
        Fusion::Cuda
    } else {
        Fusion::None
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn canonicalize_preserves_the_map(l in layout(), cuda in any::<bool>()) {
        let f = fusion(cuda);
        let c = l.canonicalize(f).unwrap();
        let expected = full_map(&l, |p| normalize(&l.fuse_coord(p, f).unwrap()));
        prop_assert_eq!(full_map(&c, normalize), expected);
        prop_assert_eq!(c.canonicalize(f).unwrap(), c.clone(), "canonicalize is idempotent");
        prop_assert!(c.replica.windows(2).all(|w| (w[0].axis, w[0].stride, w[0].extent) <= (w[1].axis, w[1].stride, w[1].extent)));
    }

    #[test]
    fn group_preserves_the_map(l in layout(), a in any::<u32>(), b in any::<u32>()) {
        let shape = shape_for(l.size(None).unwrap(), a, b);
        match l.group(&shape) {
            Ok((g, seps)) => {
                prop_assert_eq!(seps.len(), shape.len() + 1);
                for d in 0..shape.len() {
                    let p: i64 = g.shard[seps[d]..seps[d + 1]].iter().map(|it| it.extent).product();
                    prop_assert_eq!(p, shape[d]);
                }
                for c in coords(&shape) {
                    prop_assert_eq!(sorted(g.apply_set(&c, &shape).unwrap().iter().map(normalize).collect()), sorted(l.apply_set(&c, &shape).unwrap().iter().map(normalize).collect()));
                }
            }
            Err(e) => prop_assert!(matches!(e, LayoutError::ShapeMismatch { .. }), "{}", e),
        }
    }

    /// `reach` is the lowest and highest coordinate of every element and replica
    /// (per axis, and over the memory axes summed); `span` is one past the highest.
    #[test]
    fn reach_agrees_with_brute_force(l in layout()) {
        let shape = l.extents();
        let n: i64 = shape.iter().product();
        let mut axes: Vec<Option<Axis>> = vec![None];
        axes.extend(Axis::ALL.iter().map(|&a| Some(a)));
        for axis in axes {
            let (mut lo, mut hi) = (i64::MAX, i64::MIN);
            for x in 0..n {
                let c = tirx_layout::apply::split_coord(x, &shape);
                for at in l.apply_set(&c, &shape).unwrap() {
                    let v: i64 = at.iter().filter(|(a, _)| axis.map_or(a.is_memory(), |w| **a == w)).map(|(_, v)| *v).sum();
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
            prop_assert_eq!(l.reach(axis).unwrap(), (lo, hi), "{} on {:?}", l, axis);
            prop_assert_eq!(l.span(axis).unwrap(), hi + 1);
        }
    }

    #[test]
    fn injectivity_agrees_with_brute_force(l in layout()) {
        let brute = brute_collision(&l);
        match l.injectivity().unwrap() {
            Injectivity::Injective => prop_assert_eq!(brute, None, "{} is not injective", l),
            Injectivity::Collides(c) => prop_assert!(collision_is_real(&l, &c), "{} reported {:?}", l, c),
            Injectivity::Unknown { .. } => prop_assert!(false, "at most 512 elements are always decided: {}", l),
        }
    }

    #[test]
    fn compact_layouts_are_injective_and_a_duplicated_stride_collides(
        l in compact(),
        pick in any::<prop::sample::Index>(),
        extent in 2i64..4,
    ) {
        prop_assert_eq!(l.injectivity().unwrap(), Injectivity::Injective, "{}", l);
        // Repeat one iter of extent > 1 next to itself (or add a repeated pair).
        let mut dup = l.clone();
        let wide: Vec<usize> = (0..l.shard.len()).filter(|&i| l.shard[i].extent > 1).collect();
        if wide.is_empty() {
            let it = Iter::new(extent, 1 + pick.index(7) as i64, l.shard.first().map_or(Axis::M, |it| it.axis));
            dup.shard.extend([it, it]);
        } else {
            let i = wide[pick.index(wide.len())];
            dup.shard.insert(i, Iter::new(extent, l.shard[i].stride, l.shard[i].axis));
        }
        match dup.injectivity().unwrap() {
            Injectivity::Collides(c) => prop_assert!(collision_is_real(&dup, &c), "{} reported {:?}", dup, c),
            v => prop_assert!(false, "{} with a duplicated stride: {:?}", dup, v),
        }
    }

    #[test]
    fn print_then_parse_is_identity(l in layout(), sw in prop::option::of((0u32..4, 0u32..4, 0u32..3, any::<bool>()))) {
        let layout: Layout = match sw {
            Some((p, s, extra, inner)) => ComposeLayout { swizzle: Swizzle::new(p, s, s + extra, inner).unwrap(), tile: l }.into(),
            None => l.into(),
        };
        let text = layout.to_string();
        prop_assert_eq!(parse_layout(&text).map_err(|e| e.render(&text)), Ok(layout));
    }

    #[test]
    fn slice_law(l in layout(), a in any::<u32>(), b in any::<u32>(), picks in prop::collection::vec((any::<u32>(), any::<u32>()), 3), cuda in any::<bool>()) {
        let f = fusion(cuda);
        let shape = shape_for(l.size(None).unwrap(), a, b);
        let region: Vec<(i64, i64)> = shape.iter().zip(&picks).map(|(&e, &(x, y))| {
            let begin = x as i64 % e;
            (begin, 1 + y as i64 % (e - begin))
        }).collect();
        let canon = l.canonicalize(f).unwrap();
        match l.slice(&shape, &region, f) {
            Ok(s) => {
                let ext: Vec<i64> = region.iter().map(|r| r.1).collect();
                for x in coords(&ext) {
                    let at: Vec<i64> = x.iter().zip(&region).map(|(x, r)| x + r.0).collect();
                    let got = sorted(s.apply_set(&x, &ext).unwrap().iter().map(normalize).collect());
                    let want = sorted(canon.apply_set(&at, &shape).unwrap().iter().map(normalize).collect());
                    prop_assert_eq!(got, want, "slice {} of {} region {:?}", s, l, region);
                }
            }
            Err(e) => prop_assert!(matches!(e, LayoutError::ShapeMismatch { .. } | LayoutError::SliceInexpressible { .. }), "{}", e),
        }
        // Whole-dimension and single-element regions always slice when the shape groups.
        if canon.group(&shape).is_ok() {
            let whole: Vec<(i64, i64)> = shape.iter().map(|&e| (0, e)).collect();
            prop_assert!(l.slice(&shape, &whole, f).is_ok());
            let one: Vec<(i64, i64)> = region.iter().map(|r| (r.0, 1)).collect();
            prop_assert!(l.slice(&shape, &one, f).is_ok());
        }
    }

    #[test]
    fn tile_law(inner in layout(), outer in layout(), a in any::<u32>(), b in any::<u32>(), c in any::<u32>()) {
        let inner_shape = shape_for(inner.size(None).unwrap(), a, b);
        let rank = inner_shape.len();
        // The outer grid runs along one dimension (the others are 1).
        let mut outer_shape = vec![1i64; rank];
        outer_shape[c as usize % rank] = outer.size(None).unwrap();
        let Ok(t) = inner.tile(&outer, &outer_shape, &inner_shape, Fusion::None) else {
            // Only grouping or a scope clash between inner and outer axes may refuse.
            let e = inner.tile(&outer, &outer_shape, &inner_shape, Fusion::None).unwrap_err();
            prop_assert!(matches!(e, LayoutError::ShapeMismatch { .. } | LayoutError::ScopeConflict { .. } | LayoutError::ScopeChainBroken { .. }), "{}", e);
            return Ok(());
        };
        let tiled_shape: Vec<i64> = outer_shape.iter().zip(&inner_shape).map(|(o, i)| o * i).collect();
        let inner_c = inner.canonicalize(Fusion::None).unwrap();
        let outer_c = outer.canonicalize(Fusion::None).unwrap();
        let inner_coords = coords(&inner_shape);
        for o in coords(&outer_shape).into_iter().take((8192 / inner_coords.len()).max(1)) {
            for i in &inner_coords {
                let x: Vec<i64> = (0..rank).map(|d| o[d] * inner_shape[d] + i[d]).collect();
                let mut want = inner_c.apply(i, &inner_shape).unwrap();
                for (axis, v) in outer_c.apply(&o, &outer_shape).unwrap() {
                    let on_inner = inner_c.shard.iter().any(|it| it.axis == axis);
                    let f = if on_inner { inner_c.span(Some(axis)).unwrap() } else { 1 };
                    *want.entry(axis).or_insert(0) += v * f;
                }
                prop_assert_eq!(normalize(&t.apply(&x, &tiled_shape).unwrap()), normalize(&want));
            }
        }
    }

    #[test]
    fn tile_to_law(
        inner in layout(),
        a in any::<u32>(),
        b in any::<u32>(),
        grid in prop::collection::vec(1i64..4, 3),
        sw in prop::option::of((0u32..4, 0u32..3, 0u32..2)),
        cuda in any::<bool>(),
    ) {
        // `L.tile_to(to, atom).apply(o·atom + i, to)` = `L(i)` plus the row-major grid
        // index `o` on `m`, scaled by the span of L on `m` when L occupies `m`; a
        // ComposeLayout swizzles that address.
        let f = fusion(cuda);
        let atom = shape_for(inner.size(None).unwrap(), a, b);
        let grid = &grid[..atom.len()];
        let to: Vec<i64> = atom.iter().zip(grid).map(|(a, g)| a * g).collect();
        let layout: Layout = match sw {
            Some((p, s, extra)) => ComposeLayout { swizzle: Swizzle::new(p, s, s + extra, true).unwrap(), tile: inner.clone() }.into(),
            None => inner.clone().into(),
        };
        let t = match layout.tile_to(&to, &atom, f) {
            Ok(t) => t,
            Err(e) => {
                prop_assert!(matches!(e, LayoutError::ShapeMismatch { .. }), "{}", e);
                return Ok(());
            }
        };
        let base = match &layout {
            Layout::Tile(_) => inner.clone(),
            Layout::Compose(c) => c.base_tile(&atom).unwrap(),
        };
        let inner_c = base.canonicalize(f).unwrap();
        let scale = if inner_c.shard.iter().any(|it| it.axis == Axis::M) { inner_c.span(Some(Axis::M)).unwrap() } else { 1 };
        let atoms = coords(&atom);
        for o in coords(grid).into_iter().take((4096 / atoms.len()).max(1)) {
            let cell = o.iter().zip(grid).fold(0, |acc, (x, g)| acc * g + x);
            for i in &atoms {
                let x: Vec<i64> = (0..atom.len()).map(|d| o[d] * atom[d] + i[d]).collect();
                let mut want = inner_c.apply(i, &atom).unwrap();
                *want.entry(Axis::M).or_insert(0) += cell * scale;
                if let Some(s) = layout.swizzle() {
                    let m = want[&Axis::M];
                    want.insert(Axis::M, s.apply(m));
                }
                prop_assert_eq!(normalize(&t.apply(&x, &to).unwrap()), normalize(&want), "{} tiled to {:?}: {}", layout, to, t);
            }
        }
    }

    #[test]
    fn group_then_permute_by_groups_transposes_the_map(l in layout(), a in any::<u32>(), b in any::<u32>(), perm in Just(vec![0usize, 1, 2]).prop_shuffle()) {
        // Group d of `g.permute_by_groups(seps, perm)` is group perm[d] of g, so the
        // permuted layout over the permuted shape is the transposed map.
        let shape = shape_for(l.size(None).unwrap(), a, b);
        let Ok((g, seps)) = l.group(&shape) else { return Ok(()) };
        let perm: Vec<usize> = perm.into_iter().filter(|&d| d < shape.len()).collect();
        let p = g.permute_by_groups(&seps, &perm).unwrap();
        let pshape: Vec<i64> = perm.iter().map(|&d| shape[d]).collect();
        for c in coords(&shape) {
            let pc: Vec<i64> = perm.iter().map(|&d| c[d]).collect();
            prop_assert_eq!(
                sorted(p.apply_set(&pc, &pshape).unwrap().iter().map(normalize).collect()),
                sorted(l.apply_set(&c, &shape).unwrap().iter().map(normalize).collect())
            );
        }
    }

    #[test]
    fn group_many_refines_for_every_shape(l in layout(), a in any::<u32>(), b in any::<u32>(), c in any::<u32>(), d in any::<u32>()) {
        let n = l.size(None).unwrap();
        let shapes = vec![shape_for(n, a, b), shape_for(n, c, d)];
        match l.group_many(&shapes) {
            Ok((g, seps)) => {
                prop_assert_eq!(full_map(&g, normalize), full_map(&l, normalize));
                prop_assert_eq!(seps.len(), 2);
                for (shape, seps) in shapes.iter().zip(&seps) {
                    prop_assert_eq!(seps.len(), shape.len() + 1);
                    prop_assert_eq!(seps[0], 0);
                    prop_assert_eq!(*seps.last().unwrap(), g.shard.len());
                    for d in 0..shape.len() {
                        let p: i64 = g.shard[seps[d]..seps[d + 1]].iter().map(|it| it.extent).product();
                        prop_assert_eq!(p, shape[d]);
                    }
                    // A common refinement exists, so each shape alone groups too.
                    prop_assert!(l.group(shape).is_ok(), "{} groups by {:?} jointly but not alone", l, shape);
                }
                // Only splits: the non-unit pieces of each non-unit input iter multiply back.
                let mut it = g.shard.iter().filter(|it| it.extent > 1);
                for orig in l.shard.iter().filter(|it| it.extent > 1) {
                    let mut p = 1i64;
                    while p < orig.extent {
                        let next = it.next().unwrap();
                        prop_assert_eq!(next.axis, orig.axis);
                        p *= next.extent;
                    }
                    prop_assert_eq!(p, orig.extent);
                }
            }
            Err(e) => prop_assert!(matches!(e, LayoutError::BadArgument { .. }), "{}", e),
        }
    }

    #[test]
    fn mma_shared_layout_is_a_bijection_made_of_atoms(
        bits in prop::sample::select(vec![8u32, 16, 32]),
        mode in 0i64..4,
        lead in prop::option::of(1i64..4),
        row_atoms in 1i64..5,
        col_atoms in 1i64..4,
    ) {
        let mode = SwizzleMode::from_index(mode).unwrap();
        let atom_shape = mma_atom_shape(bits, mode, 2).unwrap();
        let (ar, ac) = (atom_shape[0], atom_shape[1]);
        let mut shape: Vec<i64> = lead.into_iter().collect();
        shape.extend([ar * row_atoms, ac * col_atoms]);
        let l = mma_shared_layout(bits, mode, &shape).unwrap();
        prop_assert_eq!(l.tile().injectivity().unwrap(), Injectivity::Injective, "{}", l);
        let n: i64 = shape.iter().product();
        // One address per element, together exactly [0, n): dense and injective.
        let addr = |x: i64| -> i64 {
            let m = l.tile().apply_linear(x).unwrap()[&Axis::M];
            l.swizzle().map_or(m, |s| s.apply(m))
        };
        let mut all: Vec<i64> = (0..n).map(addr).collect();
        all.sort();
        prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
        // Each aligned atom-shaped block is the atom layout at a period-aligned base.
        let atom = mma_atom_layout(bits, mode).unwrap();
        let period = atom.swizzle.period();
        let flat = |c: &[i64]| c.iter().zip(&shape).fold(0, |acc, (x, e)| acc * e + x);
        let r = shape.len();
        for origin in coords(&shape).into_iter().filter(|c| c[r - 2] % ar == 0 && c[r - 1] % ac == 0) {
            let base = addr(flat(&origin));
            prop_assert_eq!(base % period, 0, "{} block {:?}", l, origin);
            for i in 0..ar {
                for j in 0..ac {
                    let mut c = origin.clone();
                    c[r - 2] += i;
                    c[r - 1] += j;
                    let want = base + atom.apply(&[i, j], &[ar, ac]).unwrap()[&Axis::M];
                    prop_assert_eq!(addr(flat(&c)), want, "{} at {:?}", l, c);
                }
            }
        }
    }

    #[test]
    fn swizzled_slice_law(p in 0u32..3, s in 0u32..3, extra in 0u32..2, r0 in 0i64..8, rn in 1i64..8, c0 in 0i64..32, cn in 1i64..32) {
        let swizzle = Swizzle::new(p, s, s + extra, true).unwrap();
        let shape = [8i64, 32];
        let (rn, cn) = (rn.min(8 - r0), cn.min(32 - c0));
        let bare = ComposeLayout { swizzle, tile: TileLayout::from_shard(vec![Iter::m(swizzle.period(), 1)]) };
        let sliced = bare.slice(&shape, &[(r0, rn), (c0, cn)], Fusion::Cuda);
        if let Ok(sl) = sliced {
            for x in coords(&[rn, cn]) {
                prop_assert_eq!(sl.apply(&x, &[rn, cn]).unwrap(), bare.apply(&[x[0] + r0, x[1] + c0], &shape).unwrap());
            }
        }
    }

    #[test]
    fn swizzle_is_a_bijection_on_its_period(p in 0u32..5, s in 0u32..5, extra in 0u32..3, inner in any::<bool>(), k in -3i64..4) {
        let sw = Swizzle::new(p, s, s + extra, inner).unwrap();
        let period = sw.period();
        let base = k * period;
        let mut image: Vec<i64> = (base..base + period).map(|a| sw.apply(a)).collect();
        for (a, &y) in (base..base + period).zip(&image) {
            prop_assert_eq!(y.rem_euclid(sw.chunk()), a.rem_euclid(sw.chunk()), "chunk bits untouched");
        }
        image.sort();
        prop_assert_eq!(image, (base..base + period).collect::<Vec<_>>());
    }

    #[test]
    fn operations_never_panic(
        shard in prop::collection::vec((any::<i64>(), any::<i64>(), 0..Axis::ALL.len()), 0..5),
        replica in prop::collection::vec((-2i64..5, any::<i64>(), 0..Axis::ALL.len()), 0..3),
        offs in prop::collection::vec((0..Axis::ALL.len(), any::<i64>()), 0..3),
        small in any::<bool>(),
        shape in prop::collection::vec(-2i64..10, 0..4),
        coord in prop::collection::vec(-2i64..10, 0..4),
        x in any::<i64>(),
    ) {
        let squash = |v: i64| if small { v.rem_euclid(7) - 1 } else { v };
        let mk = |(e, s, a): (i64, i64, usize)| Iter::new(squash(e), squash(s), Axis::ALL[a]);
        let l = TileLayout::new(
            shard.into_iter().map(mk).collect(),
            replica.into_iter().map(mk).collect(),
            offs.into_iter().map(|(a, v)| (Axis::ALL[a], squash(v))).collect(),
        );
        let region: Vec<(i64, i64)> = coord.iter().map(|&c| (c, 2)).collect();
        for f in [Fusion::None, Fusion::Cuda] {
            let _ = l.canonicalize(f);
            let _ = l.slice(&shape, &region, f);
            let _ = l.is_trivial(f);
            if let Ok(c) = l.canonicalize(f) { let _ = l.fuse_coord(&c.offset, f); }
        }
        let _ = (l.scope(), l.size(None), l.span(None), l.span(Some(Axis::M)), l.group(&shape));
        let _ = (l.tile_to(&shape, &coord, Fusion::None), l.group_many(&[shape.clone(), coord.clone()]));
        let perm: Vec<usize> = coord.iter().map(|&c| c.unsigned_abs() as usize).collect();
        let _ = (l.permute_by_groups(&perm, &perm), l.permute_dims(&perm));
        let _ = TileLayout::from_iters(l.shard.clone(), l.replica.clone(), l.offset.clone());
        if let Ok(sw) = Swizzle::new(3, 3, 3, true) {
            let _ = ComposeLayout { swizzle: sw, tile: l.clone() }.tile_to(&shape, &coord, Fusion::Cuda);
        }
        for mode in SwizzleMode::ALL {
            let bits = x.unsigned_abs() as u32;
            let _ = (mma_shared_layout(bits, mode, &shape), mma_atom_shape(bits, mode, shape.len()), mma_atom_layout(bits, mode));
        }
        for shape_name in tirx_layout::Tcgen05Shape::ALL {
            let (rows, cols) = (shape.first().copied().unwrap_or(64), coord.first().copied().unwrap_or(64));
            let _ = tirx_layout::tcgen05_atom_layout(shape_name, rows.wrapping_mul(64), cols.wrapping_mul(8), x as u32);
        }
        let _ = l.injectivity();
        let _ = (l.apply_linear(x), l.apply(&coord, &shape), l.apply_set(&coord, &shape), l.apply_shard(&coord));
        let text = l.to_string();
        let parsed = parse_layout(&text);
        if l.shard.iter().chain(&l.replica).all(|it| it.extent > 0) {
            prop_assert_eq!(parsed.map_err(|e| e.render(&text)), Ok(Layout::Tile(l.clone())));
        }
    }

    #[test]
    fn parse_never_panics_on_random_text(s in "\\PC{0,40}") {
        let _ = parse_layout(&s);
    }

    #[test]
    fn parse_never_panics_on_mutated_layouts(l in layout(), at in any::<prop::sample::Index>(), junk in "[\\[\\]():,@+\\- 0-9a-zA-Z\"'_.=]{0,3}", cut in 0usize..3) {
        let text = l.to_string();
        let i = at.index(text.len() + 1);
        let mutated = format!("{}{}{}", &text[..i], junk, &text[(i + cut).min(text.len())..]);
        if let Err(e) = parse_layout(&mutated) {
            prop_assert!(e.offset <= mutated.len());
            let _ = e.render(&mutated);
        }
    }
}
