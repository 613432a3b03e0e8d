//! [`LayoutError`]: every way a layout operation can refuse its input.
//!
//! Operations never panic and never return a silently wrong layout: each
//! failure is one of these variants, and its `Display` says what is wrong with
//! which operand and, where one exists, how to fix it.

use crate::axis::{Axis, ExecScope};
use std::fmt;

/// Largest extent product, stride or offset magnitude an operation accepts.
/// Real tiles are far below this (a whole H100 holds ~2^36 bytes); anything
/// above is a typo or a fuzzer, and rejecting it keeps all arithmetic in `i64`.
pub const LIMIT: i64 = 1 << 40;

/// Most coordinates [`crate::TileLayout::apply_set`] enumerates for one element.
pub const MAX_REPLICAS: i64 = 1 << 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// An iter extent is not positive (`part` is "shard" or "replica").
    BadExtent { part: &'static str, index: usize, extent: i64 },
    /// A value or product exceeds [`LIMIT`] or overflows `i64`.
    TooLarge { what: String },
    /// Two thread axes index the same sub-scope inside different scopes (e.g. `laneid` + `tx`).
    ScopeConflict { first: Axis, second: Axis },
    /// The thread axes do not form one chain from the innermost sub-scope outwards (e.g. `wgid` + `laneid`).
    ScopeChainBroken { inner: ExecScope, axes: Vec<Axis> },
    /// The scope chain loops back on itself.
    ScopeCycle { axes: Vec<Axis> },
    /// A grid axis (`bx/by/bz`) is mixed with axes inside a CTA (e.g. `bx` + `tx`).
    GridMixedWithThreads { grid: Axis, inner: Axis },
    /// A shape has a non-positive dimension.
    BadShape { shape: Vec<i64> },
    /// The layout's shard iters cannot be regrouped into `shape`.
    ShapeMismatch { shape: Vec<i64>, extents: Vec<i64>, detail: String },
    /// A list has the wrong length (`what` names it).
    RankMismatch { what: &'static str, expected: usize, got: usize },
    /// A coordinate lies outside its dimension.
    CoordOutOfRange { dim: usize, value: i64, extent: i64 },
    /// A slice region is empty or leaves the buffer.
    RegionOutOfRange { dim: usize, begin: i64, extent: i64, size: i64 },
    /// The region is in range but its elements are not one strided box of the layout.
    SliceInexpressible { dim: usize, begin: i64, extent: i64, reason: String },
    /// A permutation is not a permutation of `0..len`.
    BadPermutation { perm: Vec<usize>, len: usize },
    /// Group separators are not `0 = s_0 <= s_1 <= ... = len`.
    BadSeparators { seps: Vec<usize>, len: usize },
    /// Swizzle parameters out of range.
    BadSwizzle { reason: String },
    /// An element has more replicas than [`MAX_REPLICAS`].
    TooManyReplicas { count: i64 },
    /// `tile` was called with inconsistent ranks.
    TileRank { outer: usize, inner: usize },
    /// An argument of a layout constructor or helper is outside what it supports:
    /// `op` names the operation, `arg` the parameter at fault (e.g. `tile_to` /
    /// `shape`), `reason` what is wrong and what would be accepted.
    BadArgument { op: &'static str, arg: &'static str, reason: String },
}

pub type Result<T, E = LayoutError> = std::result::Result<T, E>;

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LayoutError::*;
        match self {
            BadExtent { part, index, extent } => write!(
                f,
                "{part} iter {index} has extent {extent}; extents must be positive (use extent 1 for a unit iter)"
            ),
            TooLarge { what } => {
                write!(f, "{what} is too large (limit {LIMIT}); check for a typo in extents or strides")
            }
            ScopeConflict { first, second } => {
                let (s1, sub) = first.scopes().unwrap_or((ExecScope::Kernel, ExecScope::Thread));
                let (s2, _) = second.scopes().unwrap_or((ExecScope::Kernel, ExecScope::Thread));
                write!(
                    f,
                    "conflicting thread axes: `{first}` indexes a {sub} inside a {s1} but `{second}` indexes a {sub} inside a {s2}; \
                     use one of them (e.g. express `{first}` through `{second}`)"
                )
            }
            ScopeChainBroken { inner, axes } => write!(
                f,
                "thread axes {} do not form one scope chain from the {inner} level outwards; \
                 add the missing level (e.g. `laneid` + `warpid` + `wgid`, not `laneid` + `wgid`)",
                axis_list(axes)
            ),
            ScopeCycle { axes } => write!(f, "thread axes {} form a scope cycle", axis_list(axes)),
            GridMixedWithThreads { grid, inner } => write!(
                f,
                "grid axis `{grid}` (a CTA index in the grid) cannot be combined with `{inner}` in one layout: \
                 a tile layout distributes data inside one CTA or cluster; slice per CTA instead"
            ),
            BadShape { shape } => {
                write!(f, "shape {shape:?} has a non-positive dimension; every dimension must be >= 1")
            }
            ShapeMismatch { shape, extents, detail } => {
                write!(f, "layout with shard extents {extents:?} does not admit shape {shape:?}: {detail}")
            }
            RankMismatch { what, expected, got } => write!(f, "{what}: expected {expected} entries, got {got}"),
            CoordOutOfRange { dim, value, extent } => {
                write!(f, "coordinate {value} in dimension {dim} is outside [0, {extent})")
            }
            RegionOutOfRange { dim, begin, extent, size } => write!(
                f,
                "region [{begin}, {}) in dimension {dim} is not a non-empty part of [0, {size})",
                begin.saturating_add(*extent)
            ),
            SliceInexpressible { dim, begin, extent, reason } => write!(
                f,
                "region [{begin}, {}) in dimension {dim} is not expressible as one tile layout: {reason}; \
                 split the region at the crossed boundary",
                begin.saturating_add(*extent)
            ),
            BadPermutation { perm, len } => write!(f, "{perm:?} is not a permutation of 0..{len}"),
            BadSeparators { seps, len } => {
                write!(f, "group separators {seps:?} must start at 0, be non-decreasing and end at {len}")
            }
            BadSwizzle { reason } => write!(f, "invalid swizzle: {reason}"),
            TooManyReplicas { count } => {
                write!(f, "an element has {count} replicas, more than the {MAX_REPLICAS} that can be listed")
            }
            TileRank { outer, inner } => {
                write!(f, "tile: outer shape has rank {outer} but inner shape has rank {inner}; ranks must be equal")
            }
            BadArgument { op, arg, reason } => write!(f, "{op}: `{arg}` {reason}"),
        }
    }
}

impl std::error::Error for LayoutError {}

fn axis_list(axes: &[Axis]) -> String {
    axes.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
}

/// Checked arithmetic helpers that name the quantity on overflow.
pub(crate) fn mul(a: i64, b: i64, what: &str) -> Result<i64> {
    a.checked_mul(b).ok_or_else(|| LayoutError::TooLarge { what: what.to_string() })
}
pub(crate) fn add(a: i64, b: i64, what: &str) -> Result<i64> {
    a.checked_add(b).ok_or_else(|| LayoutError::TooLarge { what: what.to_string() })
}

/// Product of `values`, rejecting anything above [`LIMIT`].
pub(crate) fn product(values: impl IntoIterator<Item = i64>, what: &str) -> Result<i64> {
    let mut p = 1i64;
    for v in values {
        p = mul(p, v, what)?;
        if p > LIMIT {
            return Err(LayoutError::TooLarge { what: what.to_string() });
        }
    }
    Ok(p)
}

/// Validates a logical shape: every dimension positive, total within [`LIMIT`].
pub(crate) fn check_shape(shape: &[i64]) -> Result<i64> {
    if shape.iter().any(|&d| d <= 0) {
        return Err(LayoutError::BadShape { shape: shape.to_vec() });
    }
    product(shape.iter().copied(), "shape size")
}
