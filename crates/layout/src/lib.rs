//! # tirx-layout: layouts with named hardware axes
//!
//! ## The model
//!
//! A [`TileLayout`] is a function from the logical index of a tile to a *set*
//! of points in a space of named axes ([`Axis`]): memory axes (`m`, the
//! tensor-memory `TLane`/`TCol`, Trainium `P`/`F`/`Bank`) say where an element
//! is stored, thread axes (`laneid`, `warpid`, `tx`, `wgid`, ...) say which
//! thread owns it. The layout is three things:
//!
//! * `shard`: iters `(extent, stride, axis)`, outermost first. The logical index
//!   is flattened row-major and split mixed-radix over the extents; digit `k`
//!   contributes `digit·stride` to its axis. `S[(32, 8):(1@laneid, 1)]`: lane
//!   `i` owns row `i`, register `j` holds column `j`.
//! * `replica`: iters whose every value is *also* a home of the element (a
//!   tile broadcast to several warps: `+ R[2:4@warpid]`).
//! * `offset`: a base per axis (`+ 5@warpid`, `+ 64`).
//!
//! A [`ComposeLayout`] applies an XOR [`Swizzle`] to the `m` address of its
//! tile (shared-memory bank-conflict avoidance); [`Layout`] is either.
//! Everything is integer-only and pure: no IR, no CUDA, no ambient state.
//!
//! ## The laws (each is a property test in `tests/laws.rs`)
//!
//! Maps are compared as multisets of coordinates with zero entries dropped.
//!
//! * **canonicalize preserves the map**: `L.canonicalize(f).apply_set(x)` equals
//!   `L.apply_set(x)` mapped through `L.fuse_coord(_, f)`; it is idempotent and
//!   its replica order is deterministic.
//! * **group refines**: `L.group(shape)` splits iters (never merges or reorders)
//!   so dimension `d` owns `shard[seps[d]..seps[d+1]]`, with the same map.
//! * **slice**: `L.slice(shape, region, f).apply(x, ext) ==
//!   L.canonicalize(f).apply(begin + x, shape)` for every `x` in the region.
//!   Whole dimensions and single elements always slice when the shape groups.
//! * **tile**: `inner.tile(outer, os, is, f)` maps `o·is + i` to
//!   `outer(o)·span_inner + inner(i)`, per axis; `tile_to(shape, atom)` is the
//!   tile by the row-major grid `shape / atom` (a swizzle applies to the result).
//! * **group_many** refines the shard for several shapes at once with the same
//!   map; **permute_by_groups** after `group` is the transposed map.
//! * **mma_shared_layout** is a bijection onto `[0, size)` whose aligned
//!   atom-shaped blocks are `mma_atom_layout` at period-aligned bases.
//! * **text**: `parse_layout(&l.to_string()) == l`, structurally.
//! * **swizzle**: a bijection on every aligned period `2^(p+sw+at)` that never
//!   moves the low `p` bits; a swizzled slice addresses the same elements.
//! * **injectivity**: [`TileLayout::injectivity`] answers `Injective` iff no two
//!   distinct elements share a home (checked against brute force), and every
//!   reported [`Collision`] is real: both elements reach the reported point.
//! * **totality**: no operation or parse panics on any input; each failure is a
//!   [`LayoutError`] (or [`LayoutParseError`] with a byte offset).
//!
//! ## Operations: requirements and guarantees
//!
//! | operation | requires | guarantees |
//! |---|---|---|
//! | [`TileLayout::scope`] | thread axes form one chain | `(inner sub-scope, outer scope)` or `None` without shard thread iters |
//! | [`TileLayout::canonicalize`] | valid scope | no unit shard iters, adjacent chains fused, thread axes fused (`Fusion::Cuda`) |
//! | [`TileLayout::group`] | `∏ shape == size`, boundaries cut evenly | refinement + separators |
//! | [`TileLayout::apply`] / `apply_linear` / `apply_shard` | in-range index, admitted shape | the `r = 0` representative |
//! | [`TileLayout::apply_set`] | as `apply`, ≤ 65536 replicas | every home, replica axes present |
//! | [`TileLayout::slice`] | region inside the shape, groupable | the exact sub-layout or `SliceInexpressible` |
//! | [`TileLayout::tile`] | equal ranks, both groupable | the tiled layout, canonicalized |
//! | [`TileLayout::tile_to`] / [`Layout::tile_to`] | `shape` a multiple of `atom_shape`, groupable | the atom repeated row-major over `shape` |
//! | [`TileLayout::group_many`] | equal totals, boundaries that divide each other | common refinement + separators per shape |
//! | [`TileLayout::from_iters`] | positive extents, one scope chain | the checked layout |
//! | [`mma_shared_layout`] / [`mma_atom_layout`] / [`mma_atom_shape`] | power-of-two element width, shape a multiple of the atom | the canonical (swizzled) shared tile |
//! | [`tcgen05_atom_layout`] / [`wg_local_layout`] | a PTX-allowed fragment | the warpgroup register layout |
//! | [`fragment_layout`] | sizes multiples of the atom | an mma.sync / wgmma fragment or row statistic |
//! | [`TileLayout::injectivity`] | valid layout | `Injective`, a real `Collision`, or `Unknown` above 2^20 entangled points |
//! | [`Swizzle::new`] | `at >= sw`, `p+sw+at <= 40` | `apply` is total |
//!
//! Every operation validates its input first: extents must be positive and
//! products, strides and offsets stay within [`error::LIMIT`] (2^40), and all
//! arithmetic is checked, so absurd sizes are errors, not overflows.
//!
//! ## Where we differ from the reference (TVM TIRx; pitfall numbers from its spec)
//!
//! * Thread-axis fusion is a parameter ([`Fusion`]), never the ambient target (7).
//! * Offsets fusing to one axis are summed: `1@laneid + 2@warpid` → `65@tx` (4).
//! * `wgid` at (warp, cta) fuses to `warpid ×4`; `bx/by/bz` have scope kernel,
//!   and mixing them with in-CTA axes is an error instead of an endless loop (5).
//! * Canonical replicas are sorted by (axis, stride, extent) and unit replicas
//!   dropped (8); a thread axis pinned only by a dropped unit iter or a zero
//!   offset stays as `+ 0@axis`, so canonicalization keeps the scope.
//! * Slice bounds-checks every region (3), computes the jump of a region that
//!   crosses a digit boundary from the full carry (the vacuous cap, 1), and
//!   returns an error, never a wrong layout or a panic, when the region is not
//!   one strided box (2).
//! * `apply*` reject out-of-range indices instead of extrapolating (14).
//! * Unknown axis names, extent/stride count mismatches and a second `S[...]`
//!   are parse errors (6, 21).
//! * A bare swizzle is recognized on the *canonical* tile (19), and swizzles
//!   pass non-`m` axes through instead of failing (20).
//! * `tile` scales the outer replicas and offsets as well as the outer shard
//!   iters by the inner span, so its law holds for the whole layout (8).
//! * `tile_to` and `mma_shared_layout` reject shapes that are not whole
//!   multiples of the atom instead of flooring them into a wrong-size layout,
//!   and `mma_atom_shape` of mode 0 is the 16-byte core matrix (24, 25).
//!
//! Kept as in the reference: `size` counts all shard iters while `span` counts
//! memory axes (plus replicas and offsets) unless an axis is named (9).

pub mod apply;
pub mod axis;
pub mod canon;
pub mod error;
pub mod fragment;
pub mod group;
pub mod inject;
pub mod mma;
pub mod scope;
pub mod slice;
pub mod swizzle;
pub mod tcgen05;
pub mod text;
pub mod tile;
pub mod tiling;

pub use apply::{normalize, Coord};
pub use axis::{Axis, ExecScope};
pub use canon::Fusion;
pub use error::{LayoutError, Result};
pub use fragment::{fragment_layout, Fragment};
pub use inject::{Collision, Injectivity, IterRef};
pub use mma::{mma_atom_layout, mma_atom_shape, mma_shared_layout, SwizzleMode};
pub use tcgen05::{tcgen05_atom_layout, wg_local_layout, Tcgen05Shape};
pub use text::{parse_layout, LayoutParseError};
pub use tile::{ComposeLayout, Iter, Layout, Swizzle, TileLayout};
