//! Execution scopes (docs/tile-primitives.md §1.2–§1.6).
//!
//! * [`resolve_launch`]: scope-id declarations → binding extents (the shared
//!   Compose/Complement closure of [`tirx_ir::scope_ids`], e.g.
//!   `warp_id([4]) + lane_id([32])` ⇒ `cta→thread = 128`) → grid and block.
//! * [`Active`]: the threads active at a program point: lane and warp ranges in
//!   the CTA and the CTA range in the grid, narrowed by `if` on scope ids
//!   (then-branch, and the else-branch of a single range test). A condition on
//!   thread ids that cannot be tracked marks the set *untracked*, which every
//!   multi-thread variant treats as "not all threads active".
//! * [`Facts`]: the active set and the ranges of loop variables at a program
//!   point (both narrowed by `if`s); [`Active::hw_bounds`] gives the values of
//!   a hardware id over the active threads, the source of every scope-id range.
//! * [`ScopeView`]: what one tile call sees: its scope, the cooperating threads
//!   (`intra`) and the instances (`inter`), thread count and thread-id kind.

use crate::affine::{Source, VarBounds};
use crate::build::Hw;
use serde::Serialize;
use std::collections::BTreeMap;
use tirx_ir::hir::{ScopeIdDef, ScopeIdKind, VarId};
use tirx_ir::scope_ids::{infer_extents, kind_of, KINDS};
use tirx_ir::{Diagnostic, Span};
use tirx_layout::ExecScope;

/// Grid, block and the extent of every scope binding (declared or inferred).
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Fused extent per binding kind.
    pub extents: BTreeMap<ScopeIdKindKey, i64>,
    /// CTAs per cluster in each dimension (`T.cta_id_in_cluster([..])`; `[1, 1, 1]`: no clusters).
    pub cluster: [u32; 3],
}

/// `ScopeIdKind` as an ordered map key.
pub type ScopeIdKindKey = u8;

pub fn key(k: ScopeIdKind) -> ScopeIdKindKey {
    KINDS.iter().position(|x| *x == k).unwrap_or(0) as u8
}

impl Launch {
    pub fn threads(&self) -> i64 {
        self.block.iter().map(|&b| b as i64).product()
    }
    pub fn extent(&self, k: ScopeIdKind) -> Option<i64> {
        self.extents.get(&key(k)).copied()
    }
}

/// Resolves every scope-id declaration into launch dimensions (§1.2): the
/// closure fixes the fused extents (and checks them, incl. the 1024-thread
/// limit); the declared dims of `T.cta_id` / `T.thread_id` shape grid and block.
pub fn resolve_launch(defs: &[&ScopeIdDef], kernel_span: Span) -> Result<Launch, Vec<Diagnostic>> {
    let ext = infer_extents(defs).map_err(|errs| errs.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
    let cluster = cluster_dims(defs, &ext, kernel_span)?;
    // A kernel without scope ids runs one thread.
    let threads = if defs.is_empty() { 1 } else { ext.require_threads(kernel_span).map_err(|e| vec![e.into()])? };
    let block = declared_dims(defs, ScopeIdKind::ThreadId).map_or([threads as u32, 1, 1], dims3);
    let cta_dims = declared_dims(defs, ScopeIdKind::CtaId)
        .map(<[i64]>::to_vec)
        .or_else(|| ext.of(ScopeIdKind::CtaId).map(|c| vec![c]));
    // CUDA: gridDim.x < 2^31, gridDim.y/z ≤ 65535.
    if let Some(d) = &cta_dims {
        if d.iter().enumerate().any(|(i, &e)| e > if i == 0 { i64::from(i32::MAX) } else { 65535 }) {
            return Err(vec![Diagnostic::error(
                kernel_span,
                format!("the grid {d:?} exceeds CUDA's launch limits (x < 2^31, y and z ≤ 65535)"),
            )]);
        }
    }
    let grid = cta_dims.as_deref().map_or([1, 1, 1], dims3);
    let extents = ext.iter().filter_map(|(b, e)| kind_of(b).map(|k| (key(k), e))).collect();
    Ok(Launch { grid, block, extents, cluster })
}

/// The cluster shape: the declared dims of `T.cta_id_in_cluster` (its fused extent in x
/// when undeclared); at most 16 CTAs, Hopper's non-portable cluster size (over 8, the runtime
/// opts the kernel in; docs/tile-primitives.md §3.21).
fn cluster_dims(
    defs: &[&ScopeIdDef],
    ext: &tirx_ir::scope_ids::ScopeExtents,
    span: Span,
) -> Result<[u32; 3], Vec<Diagnostic>> {
    let dims = declared_dims(defs, ScopeIdKind::CtaIdInCluster)
        .map(<[i64]>::to_vec)
        .or_else(|| ext.of(ScopeIdKind::CtaIdInCluster).map(|c| vec![c]))
        .unwrap_or_else(|| vec![1]);
    let size: i64 = dims.iter().product();
    let max = i64::from(tirx_ir::lir::check::MAX_CLUSTER_CTAS);
    if dims.len() > 3 || dims.iter().any(|&d| d < 1) || size > max {
        // At the declaration that gives the shape, where there is one.
        let at =
            defs.iter().find(|d| d.kind == ScopeIdKind::CtaIdInCluster && d.extents.is_some()).map_or(span, |d| d.span);
        return Err(vec![Diagnostic::error(
            at,
            format!("a cluster of {dims:?} CTAs; clusters hold 1 to {max} CTAs in up to 3 dimensions"),
        )]);
    }
    Ok(dims3(&dims))
}

/// The extents of the first declaration of `kind` that gives them.
fn declared_dims<'a>(defs: &[&'a ScopeIdDef], kind: ScopeIdKind) -> Option<&'a [i64]> {
    defs.iter().filter(|d| d.kind == kind).find_map(|d| d.extents.as_deref())
}

fn dims3(d: &[i64]) -> [u32; 3] {
    let mut out = [1u32; 3];
    for (i, &e) in d.iter().take(3).enumerate() {
        out[i] = e as u32;
    }
    out
}

/// `extent` values `offset + i·stride`, `i < extent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AxisRange {
    pub extent: i64,
    pub offset: i64,
    pub stride: i64,
}

impl AxisRange {
    pub fn full(extent: i64) -> AxisRange {
        AxisRange { extent, offset: 0, stride: 1 }
    }

    /// Keeps the values in `[lo, hi)` (`i64::MIN`/`i64::MAX`: unbounded).
    pub fn intersect(self, lo: i64, hi: i64) -> AxisRange {
        // In i128: `lo - offset` may not fit an i64 for unbounded ends.
        let (s, off) = (i128::from(self.stride.max(1)), i128::from(self.offset));
        let (lo, hi) = (i128::from(lo), i128::from(hi));
        let i_lo = if lo <= off { 0 } else { (lo - off + s - 1) / s };
        let i_hi = if hi <= off { 0 } else { ((hi - 1 - off) / s + 1).min(i128::from(self.extent)) };
        let n = (i_hi - i_lo).max(0);
        let offset = if n > 0 { off + i_lo * s } else { off };
        // `n ≤ extent` and `offset` is a value of the range: both fit.
        AxisRange { extent: n as i64, offset: offset as i64, stride: self.stride }
    }

    /// Keeps the values `r` selects; `None` when the result is not one strided range.
    pub fn narrow(self, r: IdRange) -> Option<AxisRange> {
        match r {
            IdRange::Range(lo, hi) => Some(self.intersect(lo, hi)),
            IdRange::Residue(m, k) => self.residue(m, k),
        }
    }

    /// Keeps the values `≡ r (mod m)`; `None` when the result is not one strided range.
    pub fn residue(self, m: i64, r: i64) -> Option<AxisRange> {
        if m <= 0 || self.stride != 1 {
            return None;
        }
        let first = self.offset.checked_add(r.checked_sub(self.offset)?.rem_euclid(m))?;
        let last = self.offset.checked_add(self.extent - 1)?;
        let n = if first > last { 0 } else { (last - first) / m + 1 };
        Some(AxisRange { extent: n, offset: first, stride: m })
    }

    /// The smallest and largest value; `None` when empty.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        let last = (self.extent - 1).checked_mul(self.stride).and_then(|d| self.offset.checked_add(d));
        (self.extent > 0).then_some((self.offset, last?))
    }

    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.extent.max(0)).map(|i| self.offset + i * self.stride)
    }

    fn is_full(&self, n: i64) -> bool {
        self.extent == n && self.offset == 0 && (self.stride == 1 || n <= 1)
    }

    fn text(&self) -> String {
        if self.stride == 1 {
            format!("[{}, {})", self.offset, self.offset + self.extent)
        } else {
            format!("{{{} + {}·i, i < {}}}", self.offset, self.stride, self.extent)
        }
    }
}

/// The active threads at a program point.
#[derive(Clone, Debug, PartialEq)]
pub struct Active {
    pub lane: AxisRange,
    pub warp: AxisRange,
    pub cta: AxisRange,
    /// Threads in the CTA (the launch block size).
    pub threads: i64,
    /// The launch block and grid dims (thread ids of multi-dim blocks, CTA ids of multi-dim grids).
    pub block: [u32; 3],
    pub grid: [u32; 3],
    /// Set when an enclosing condition selects threads in a way not tracked.
    pub untracked: Option<String>,
}

/// Which hardware id a condition tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRange {
    /// Values in `[lo, hi)`.
    Range(i64, i64),
    /// Values `≡ r (mod m)`.
    Residue(i64, i64),
}

impl Active {
    pub fn at_entry(l: &Launch) -> Active {
        let threads = l.threads();
        // Saturating: symbolic grid dims are CUDA's limits here.
        let ctas: i64 = l.grid.iter().fold(1i64, |a, &g| a.saturating_mul(i64::from(g)));
        Active {
            lane: AxisRange::full(threads.min(32)),
            warp: AxisRange::full((threads + 31) / 32),
            cta: AxisRange::full(ctas),
            threads,
            block: l.block,
            grid: l.grid,
            untracked: None,
        }
    }

    pub fn mark_untracked(&mut self, why: String) {
        if self.untracked.is_none() {
            self.untracked = Some(why);
        }
    }

    /// Narrows by `id ∈ r` for the scope id `kind` (dim `dim` of its declaration).
    /// Returns false when the narrowing cannot be represented (caller marks untracked).
    pub fn narrow(&mut self, kind: ScopeIdKind, dim: usize, multi_dim: bool, r: IdRange) -> bool {
        let apply = |a: AxisRange| a.narrow(r);
        match kind {
            ScopeIdKind::LaneId => apply(self.lane).map(|a| self.lane = a).is_some(),
            ScopeIdKind::WarpId => apply(self.warp).map(|a| self.warp = a).is_some(),
            ScopeIdKind::CtaId if !multi_dim => apply(self.cta).map(|a| self.cta = a).is_some(),
            ScopeIdKind::WarpgroupId => match r {
                IdRange::Range(lo, hi) if self.warp.stride == 1 => {
                    self.warp = self.warp.intersect(lo.saturating_mul(4), hi.saturating_mul(4));
                    true
                }
                _ => false,
            },
            ScopeIdKind::WarpIdInWg => {
                let one_wg =
                    self.warp.stride == 1 && self.warp.offset / 4 == (self.warp.offset + self.warp.extent - 1) / 4;
                match r {
                    IdRange::Range(lo, hi) if one_wg => {
                        let base = self.warp.offset / 4 * 4;
                        self.warp = self.warp.intersect(base.saturating_add(lo), base.saturating_add(hi));
                        true
                    }
                    // `== k` across warpgroups: warps ≡ k (mod 4); none for k outside 0..4.
                    IdRange::Range(lo, hi) if hi.checked_sub(lo) == Some(1) && !(0..4).contains(&lo) => {
                        self.warp = self.warp.intersect(0, 0);
                        true
                    }
                    IdRange::Range(lo, hi) if hi.checked_sub(lo) == Some(1) => apply_residue(&mut self.warp, 4, lo),
                    _ => false,
                }
            }
            ScopeIdKind::ThreadId if !multi_dim && dim == 0 => self.narrow_threads(0, r),
            ScopeIdKind::ThreadIdInWg => {
                let one_wg =
                    self.warp.stride == 1 && self.warp.offset / 4 == (self.warp.offset + self.warp.extent - 1) / 4;
                one_wg && self.narrow_threads(self.warp.offset / 4 * 128, r)
            }
            _ => false,
        }
    }

    /// Linear thread ids `base + [lo, hi)`: whole warps, or lanes of one warp.
    fn narrow_threads(&mut self, base: i64, r: IdRange) -> bool {
        let IdRange::Range(lo, hi) = r else { return false };
        let (lo, hi) = (base.saturating_add(lo.max(0)), base + hi.min(self.threads - base).max(0));
        if hi <= lo {
            self.lane = self.lane.intersect(0, 0);
            return true;
        }
        if self.warp.stride != 1 {
            return false;
        }
        if lo % 32 == 0 && (hi % 32 == 0 || hi == self.threads) {
            self.warp = self.warp.intersect(lo / 32, (hi + 31) / 32);
            true
        } else if lo / 32 == (hi - 1) / 32 {
            self.warp = self.warp.intersect(lo / 32, lo / 32 + 1);
            self.lane = self.lane.intersect(lo % 32, (hi - 1) % 32 + 1);
            true
        } else {
            false
        }
    }

    /// The values the hardware id `hw` takes in the active threads (a CTA id:
    /// in the active CTAs), by enumerating them (at most 1024); `None` when
    /// no thread is active. Exact unless the set is untracked.
    pub fn hw_bounds(&self, hw: Hw) -> Option<VarBounds> {
        let exact = self.untracked.is_none();
        if let Hw::BlockIdx(d) = hw {
            // The CTA range of a 1-D grid; a multi-dim grid's ids are narrowed in `Facts::values`.
            let one_d = self.grid[1] == 1 && self.grid[2] == 1;
            let r = if one_d && d == 0 { self.cta } else { AxisRange::full(i64::from(*self.grid.get(d as usize)?)) };
            let (lo, hi) = r.bounds()?;
            return Some(VarBounds { lo, hi, exact, source: Source::Cta(d) });
        }
        match hw {
            Hw::ClusterCta(d, c) => {
                return Some(VarBounds { lo: 0, hi: i64::from(c) - 1, exact, source: Source::Cta(d) })
            }
            Hw::ClusterIdx(d, c) => {
                let n = i64::from(*self.grid.get(d as usize)?) / i64::from(c.max(1));
                return Some(VarBounds { lo: 0, hi: n - 1, exact, source: Source::Cta(d) });
            }
            _ => {}
        }
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for w in self.warp.values() {
            for l in self.lane.values() {
                let tx = 32 * w + l;
                if tx < self.threads {
                    let v = thread_hw(hw, tx, self.block);
                    (lo, hi) = (lo.min(v), hi.max(v));
                }
            }
        }
        (lo <= hi).then_some(VarBounds { lo, hi, exact, source: Source::Thread })
    }
}

/// The value of a thread-level hardware id in thread `tx` (as `Builder::hw` computes it).
fn thread_hw(hw: Hw, tx: i64, block: [u32; 3]) -> i64 {
    match hw {
        Hw::Tx => tx,
        Hw::Lane => tx % 32,
        Hw::TidInWg => tx % 128,
        Hw::WarpId => tx / 32,
        Hw::WgId => tx / 128,
        Hw::WarpInWg => (tx / 32) % 4,
        Hw::ThreadIdx(d) => {
            let below: i64 = block.iter().take(d as usize).map(|&e| i64::from(e)).product();
            let e = block.get(d as usize).map_or(1, |&e| i64::from(e));
            (tx / below.max(1)) % e.max(1)
        }
        Hw::BlockIdx(_) | Hw::ClusterCta(..) | Hw::ClusterIdx(..) => 0,
    }
}

/// What lowering knows at a program point (§1.3): the active threads and the
/// values of every loop variable with constant bounds, both narrowed by the
/// enclosing `if`s.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    pub active: Active,
    /// Variables tracked by value, with the values they take here: loop
    /// variables with constant bounds, and the CTA ids of a multi-dim grid
    /// once an `if` narrows them (the active set keeps the linear CTA range).
    pub values: BTreeMap<VarId, AxisRange>,
    /// Set when an enclosing condition on variables was not captured (data,
    /// `let` values, products of ids), or inside a loop whose trip count is
    /// only known at run time (it may be zero for some values): every range
    /// stays a sound enclosure, but its ends may not be reached, so none is exact.
    pub uncaptured: bool,
    /// Affine forms the enclosing `if`s guarantee to be ≥ 0 (`if row < n:` gives
    /// `n - row - 1`): what proves an access under a guard on a run-time size
    /// (docs/tile-primitives.md §7.4).
    pub guards: Vec<crate::affine::Affine>,
}

impl Facts {
    pub fn at_entry(l: &Launch) -> Facts {
        Facts { active: Active::at_entry(l), values: BTreeMap::new(), uncaptured: false, guards: vec![] }
    }

    /// The range of the scope id bound to `hw` here.
    pub fn hw_bounds(&self, hw: Hw) -> Option<VarBounds> {
        let b = self.active.hw_bounds(hw)?;
        Some(VarBounds { exact: b.exact && !self.uncaptured, ..b })
    }

    /// No thread gets here: the enclosing `if`s leave a loop variable or a scope id
    /// no value (`if i > 5:` in `for i in range(4)`). Accesses here are never made.
    pub fn unreachable(&self) -> bool {
        let a = &self.active;
        self.values.values().any(|r| r.extent == 0) || [a.lane, a.warp, a.cta].iter().any(|r| r.extent == 0)
    }

    /// The range of `v` if it is tracked by value ([`Facts::values`]).
    pub fn value_bounds(&self, v: VarId, source: Source) -> Option<VarBounds> {
        let (lo, hi) = self.values.get(&v)?.bounds()?;
        Some(VarBounds { lo, hi, exact: !self.uncaptured, source })
    }
}

fn apply_residue(a: &mut AxisRange, m: i64, r: i64) -> bool {
    match a.residue(m, r) {
        Some(n) => {
            *a = n;
            true
        }
        None => false,
    }
}

/// Which thread id numbers the threads of a scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TidKind {
    /// `tx % 32`
    Lane,
    /// `tx % 128`
    TidInWg,
    /// the linear thread index in the CTA
    Tx,
}

/// What a tile call sees of the execution scopes (§1.4).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScopeView {
    pub kind: ExecScope,
    /// Threads cooperating in one instance of the call: `axis → range`.
    pub intra: Vec<(&'static str, AxisRange)>,
    /// Instances of the call.
    pub inter: Vec<(&'static str, AxisRange)>,
    /// Why the intra/inter split failed, if it did.
    pub switch_error: Option<String>,
    pub untracked: Option<String>,
    /// Threads in the CTA.
    pub cta_threads: i64,
}

impl ScopeView {
    pub fn new(kind: ExecScope, a: &Active) -> ScopeView {
        let mut v = ScopeView {
            kind,
            intra: vec![],
            inter: vec![],
            switch_error: None,
            untracked: a.untracked.clone(),
            cta_threads: a.threads,
        };
        let (lane, warp, cta) = (("laneid", a.lane), ("warpid", a.warp), ("cta_id", a.cta));
        match kind {
            ExecScope::Thread => v.inter = vec![lane, warp, cta],
            ExecScope::Warp => (v.intra, v.inter) = (vec![lane], vec![warp, cta]),
            ExecScope::Cta => (v.intra, v.inter) = (vec![lane, warp], vec![cta]),
            ExecScope::Warpgroup => match split_warpgroup(a.warp) {
                Ok((wid, wg)) => (v.intra, v.inter) = (vec![lane, ("wid_in_wg", wid)], vec![("wgid", wg), cta]),
                Err(m) => v.switch_error = Some(m),
            },
            ExecScope::Cluster | ExecScope::Kernel => v.switch_error = Some(format!("{kind} scope is not supported")),
        }
        v
    }

    fn axis(&self, name: &str) -> Option<AxisRange> {
        self.intra.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
    }

    /// `_all_threads_active` (§1.5) plus the checks for untracked narrowing and
    /// partial warps that the reference lacks.
    pub fn all_threads_active(&self) -> Result<(), String> {
        if self.kind == ExecScope::Thread {
            return Ok(());
        }
        if let Some(e) = &self.switch_error {
            return Err(e.clone());
        }
        if let Some(u) = &self.untracked {
            return Err(u.clone());
        }
        let warps = (self.cta_threads + 31) / 32;
        let required: Vec<(&str, i64)> = match self.kind {
            ExecScope::Warp => vec![("laneid", 32)],
            ExecScope::Warpgroup => vec![("laneid", 32), ("wid_in_wg", 4)],
            _ => vec![("laneid", 32), ("warpid", warps.max(1))],
        };
        if self.kind != ExecScope::Cta && self.cta_threads % 32 != 0 {
            return Err(format!("the CTA has {} threads, not a whole number of warps", self.cta_threads));
        }
        for (name, n) in required {
            let r = self.axis(name).ok_or_else(|| format!("{name} is not part of the {} scope", self.kind))?;
            let full = if name == "laneid" && self.kind == ExecScope::Cta { self.cta_threads.min(32) } else { n };
            if !r.is_full(full) {
                return Err(format!("{name} narrowed to {} vs full [0, {full})", r.text()));
            }
        }
        Ok(())
    }

    /// Threads cooperating in one instance (valid when all are active).
    pub fn thread_count(&self) -> Option<i64> {
        match self.kind {
            ExecScope::Thread => Some(1),
            ExecScope::Warp => Some(32),
            ExecScope::Warpgroup => Some(128),
            ExecScope::Cta => Some(self.cta_threads),
            _ => None,
        }
    }

    pub fn tid_kind(&self) -> Option<TidKind> {
        match self.kind {
            ExecScope::Warp => Some(TidKind::Lane),
            ExecScope::Warpgroup => Some(TidKind::TidInWg),
            ExecScope::Cta => Some(TidKind::Tx),
            _ => None,
        }
    }

    /// The first active thread of the scope, numbered by [`Self::tid_kind`]:
    /// lane base plus 32 × the warp offset inside the scope.
    pub fn first_thread(&self) -> Result<i64, String> {
        if let Some(e) = &self.switch_error {
            return Err(e.clone());
        }
        if let Some(u) = &self.untracked {
            return Err(format!("cannot elect a thread: {u}"));
        }
        let lane = self.axis("laneid").ok_or("no laneid range")?;
        if lane.extent == 0 {
            return Err("no thread of the scope is active here".into());
        }
        let warp_off = match self.kind {
            ExecScope::Warpgroup => self.axis("wid_in_wg").map_or(0, |r| r.offset),
            ExecScope::Cta => self.axis("warpid").map_or(0, |r| r.offset),
            _ => 0,
        };
        Ok(lane.offset + 32 * warp_off)
    }

    /// The intra/inter split as text for explain.
    pub fn describe(&self) -> String {
        let f =
            |v: &[(&str, AxisRange)]| v.iter().map(|(n, r)| format!("{n} {}", r.text())).collect::<Vec<_>>().join(", ");
        format!("intra {{{}}} inter {{{}}}", f(&self.intra), f(&self.inter))
    }
}

/// Factors the warp range into (warp in warpgroup, warpgroup) (§1.4).
fn split_warpgroup(w: AxisRange) -> Result<(AxisRange, AxisRange), String> {
    if w.stride != 1 {
        return Err(format!("warps {} do not form warpgroups", w.text()));
    }
    if w.offset % 4 == 0 && w.extent % 4 == 0 {
        Ok((AxisRange::full(4), AxisRange { extent: w.extent / 4, offset: w.offset / 4, stride: 1 }))
    } else if w.extent <= 4 - w.offset % 4 {
        Ok((
            AxisRange { extent: w.extent, offset: w.offset % 4, stride: 1 },
            AxisRange { extent: 1, offset: w.offset / 4, stride: 1 },
        ))
    } else {
        Err(format!("warps {} span a warpgroup boundary partially", w.text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(kind: ScopeIdKind, ext: Option<Vec<i64>>) -> ScopeIdDef {
        ScopeIdDef { kind, vars: vec![], extents: ext, span: Span::default(), dyn_extents: vec![] }
    }

    #[test]
    fn closure_infers_threads_from_warps_and_lanes() {
        let d = [def(ScopeIdKind::WarpId, Some(vec![4])), def(ScopeIdKind::LaneId, Some(vec![32]))];
        let l = resolve_launch(&d.iter().collect::<Vec<_>>(), Span::default()).unwrap();
        assert_eq!(l.block, [128, 1, 1]);
        assert_eq!(l.grid, [1, 1, 1]);
    }

    #[test]
    fn closure_complement_and_deferred() {
        let d = [
            def(ScopeIdKind::CtaId, Some(vec![2, 3])),
            def(ScopeIdKind::ThreadId, Some(vec![256])),
            def(ScopeIdKind::LaneId, Some(vec![32])),
            def(ScopeIdKind::WarpId, None),
        ];
        let l = resolve_launch(&d.iter().collect::<Vec<_>>(), Span::default()).unwrap();
        assert_eq!(l.extent(ScopeIdKind::WarpId), Some(8));
        assert_eq!(l.grid, [2, 3, 1]);
        let bad = [def(ScopeIdKind::ThreadId, Some(vec![32])), def(ScopeIdKind::ThreadId, Some(vec![64]))];
        assert!(resolve_launch(&bad.iter().collect::<Vec<_>>(), Span::default()).is_err());
        let deferred = [def(ScopeIdKind::ThreadId, Some(vec![32])), def(ScopeIdKind::WarpgroupId, None)];
        assert!(resolve_launch(&deferred.iter().collect::<Vec<_>>(), Span::default()).is_err());
    }

    fn active(threads: i64) -> Active {
        Active::at_entry(&Launch {
            grid: [1, 1, 1],
            block: [threads as u32, 1, 1],
            extents: BTreeMap::new(),
            cluster: [1, 1, 1],
        })
    }

    #[test]
    fn views_per_scope() {
        let a = active(256);
        let cta = ScopeView::new(ExecScope::Cta, &a);
        assert_eq!(cta.intra, vec![("laneid", AxisRange::full(32)), ("warpid", AxisRange::full(8))]);
        assert!(cta.all_threads_active().is_ok());
        let wg = ScopeView::new(ExecScope::Warpgroup, &a);
        assert_eq!(wg.intra[1], ("wid_in_wg", AxisRange::full(4)));
        assert_eq!(wg.thread_count(), Some(128));
    }

    #[test]
    fn narrowing_by_scope_ids() {
        let mut a = active(256);
        assert!(a.narrow(ScopeIdKind::WarpId, 0, false, IdRange::Range(5, 6)));
        assert!(ScopeView::new(ExecScope::Warp, &a).all_threads_active().is_ok());
        assert!(ScopeView::new(ExecScope::Cta, &a).all_threads_active().is_err());
        assert_eq!(ScopeView::new(ExecScope::Cta, &a).first_thread(), Ok(160));
        let mut b = active(256);
        assert!(b.narrow(ScopeIdKind::LaneId, 0, false, IdRange::Range(i64::MIN, 16)));
        let v = ScopeView::new(ExecScope::Warp, &b);
        assert_eq!(v.all_threads_active(), Err("laneid narrowed to [0, 16) vs full [0, 32)".into()));
        let mut c = active(256);
        assert!(c.narrow(ScopeIdKind::WarpgroupId, 0, false, IdRange::Range(1, 2)));
        assert!(ScopeView::new(ExecScope::Warpgroup, &c).all_threads_active().is_ok());
        let mut d = active(256);
        assert!(d.narrow(ScopeIdKind::ThreadId, 0, false, IdRange::Range(33, 40)));
        assert_eq!(ScopeView::new(ExecScope::Warp, &d).first_thread(), Ok(1));
        assert!(!d.clone().narrow(ScopeIdKind::ThreadId, 0, false, IdRange::Range(16, 48)));
    }

    #[test]
    fn hw_bounds_follow_the_narrowed_set() {
        let b = |a: &Active, hw| a.hw_bounds(hw).map(|b| (b.lo, b.hi, b.exact));
        let mut a = active(256);
        assert_eq!(b(&a, Hw::Tx), Some((0, 255, true)));
        assert_eq!(b(&a, Hw::WgId), Some((0, 1, true)));
        assert!(a.narrow(ScopeIdKind::WarpId, 0, false, IdRange::Range(1, i64::MAX)));
        assert_eq!(b(&a, Hw::WarpId), Some((1, 7, true)));
        assert_eq!(b(&a, Hw::Tx), Some((32, 255, true)));
        assert_eq!(b(&a, Hw::WarpInWg), Some((0, 3, true)));
        assert!(a.narrow(ScopeIdKind::WarpId, 0, false, IdRange::Range(i64::MIN, 3)));
        assert_eq!(b(&a, Hw::WarpInWg), Some((1, 2, true)));
        assert!(a.narrow(ScopeIdKind::LaneId, 0, false, IdRange::Residue(2, 1)));
        assert_eq!(b(&a, Hw::Tx), Some((33, 95, true)));
        assert_eq!(b(&a, Hw::TidInWg), Some((33, 95, true)));
        // A partial last warp: 48 threads, lanes 16.. of warp 1 do not exist.
        let p = active(48);
        assert_eq!(b(&p, Hw::Lane), Some((0, 31, true)));
        assert_eq!(b(&p, Hw::Tx), Some((0, 47, true)));
        // Untracked: still an enclosure, no longer exact; no thread active: unknown.
        a.mark_untracked("test".into());
        assert_eq!(b(&a, Hw::Tx), Some((33, 95, false)));
        let mut none = active(64);
        assert!(none.narrow(ScopeIdKind::WarpId, 0, false, IdRange::Range(5, 6)));
        assert_eq!(b(&none, Hw::Lane), None);
        // CTA ids: the narrowed range of a 1-D grid, the full extent of each dim of a 2-D one.
        let l = |grid| Launch { grid, block: [128, 1, 1], extents: BTreeMap::new(), cluster: [1, 1, 1] };
        let mut c = Active::at_entry(&l([4, 1, 1]));
        assert!(c.narrow(ScopeIdKind::CtaId, 0, false, IdRange::Range(i64::MIN, 3)));
        assert_eq!(b(&c, Hw::BlockIdx(0)), Some((0, 2, true)));
        let c2 = Active::at_entry(&l([4, 3, 1]));
        assert_eq!(b(&c2, Hw::BlockIdx(1)), Some((0, 2, true)));
        // A 2-D block: threadIdx.y of 128 = 32 × 4 threads.
        let t2 = Active::at_entry(&Launch {
            grid: [1, 1, 1],
            block: [32, 4, 1],
            extents: BTreeMap::new(),
            cluster: [1, 1, 1],
        });
        assert_eq!(b(&t2, Hw::ThreadIdx(1)), Some((0, 3, true)));
    }

    #[test]
    fn axis_range_narrowing_saturates() {
        let r = AxisRange { extent: 8, offset: -5, stride: 1 };
        assert_eq!(r.intersect(i64::MIN, i64::MAX), r);
        assert_eq!(r.narrow(IdRange::Range(0, i64::MAX)), Some(AxisRange { extent: 3, offset: 0, stride: 1 }));
        assert_eq!(r.narrow(IdRange::Residue(2, 1)).and_then(|x| x.bounds()), Some((-5, 1)));
        assert_eq!(r.intersect(10, 20).bounds(), None);
    }
}
