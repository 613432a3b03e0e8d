//! The execution scope a layout distributes over (`TileLayout::scope`).
//!
//! Each thread axis reads "a `sub` index inside a `scope`". A layout's thread
//! axes must chain from the narrowest sub-scope outwards without gaps
//! (`laneid`: thread→warp, `warpid`: warp→cta gives (thread, cta)). Unlike the
//! reference, a broken chain, a conflict, a cycle, or grid axes mixed with
//! in-CTA axes are typed errors; nothing can loop.

use crate::axis::{Axis, ExecScope};
use crate::error::{LayoutError, Result};
use crate::tile::TileLayout;
use std::collections::BTreeMap;

impl TileLayout {
    /// `(inner sub-scope, outer scope)` of the thread axes, or `None` when no
    /// shard iter is on a thread axis (thread axes only in replica/offset then
    /// do not count, as in the reference). `laneid` → (thread, warp);
    /// `laneid` + `warpid` → (thread, cta).
    pub fn scope(&self) -> Result<Option<(ExecScope, ExecScope)>> {
        if !self.has_thread_axis() {
            return Ok(None);
        }
        let axes = self.thread_axes();
        // sub-scope -> (scope, axis that declared it)
        let mut parent: BTreeMap<ExecScope, (ExecScope, Axis)> = BTreeMap::new();
        let mut inner: Option<(ExecScope, Axis)> = None;
        for &axis in &axes {
            let Some((scope, sub)) = axis.scopes() else { continue };
            if inner.is_none_or(|(s, _)| sub.rank() > s.rank()) {
                inner = Some((sub, axis));
            }
            match parent.get(&sub) {
                Some(&(other, first)) if other != scope => {
                    return Err(LayoutError::ScopeConflict { first, second: axis });
                }
                _ => {
                    parent.insert(sub, (scope, axis));
                }
            }
        }
        let Some((inner, inner_axis)) = inner else { return Ok(None) };
        let mut outer = inner;
        let mut steps = 0usize;
        while let Some(&(next, _)) = parent.get(&outer) {
            outer = next;
            steps += 1;
            if steps > parent.len() {
                return Err(LayoutError::ScopeCycle { axes });
            }
        }
        if steps != parent.len() {
            return Err(LayoutError::ScopeChainBroken { inner, axes });
        }
        if outer == ExecScope::Kernel && inner != ExecScope::Cta {
            let grid = axes.iter().copied().find(|a| a.scopes().is_some_and(|(s, _)| s == ExecScope::Kernel));
            return Err(LayoutError::GridMixedWithThreads { grid: grid.unwrap_or(Axis::Bx), inner: inner_axis });
        }
        Ok(Some((inner, outer)))
    }
}
