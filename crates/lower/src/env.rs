//! [`Env`]: what lowered code refers to — HIR buffers as flat LIR arrays, HIR
//! variables as LIR values, the ranges and grain of scope ids — and the thread
//! ids a call's scope names. The statement lowerer fills it; variants read it
//! through their call context.

use crate::affine::{Affine, Source, VarBounds};
use crate::build::{Builder, Hw};
use crate::scope::{Facts, TidKind};
use std::collections::HashMap;
use tirx_ir::hir::{BufId, Expr, ExprKind, Kernel, MemScope, ScopeIdKind, VarId};
use tirx_ir::lir::{LBufId, LExpr};
use tirx_ir::DType;
use tirx_layout::ExecScope;

/// What lowered code refers to: HIR buffers → flat arrays, HIR vars → values.
#[derive(Default)]
pub struct Env {
    pub(crate) bufs: HashMap<BufId, (LBufId, DType)>,
    /// Buffers with run-time strides: each dim's stride as a value of the scalar parameters.
    pub(crate) strides: HashMap<BufId, Vec<LExpr>>,
    pub(crate) vars: HashMap<VarId, LExpr>,
    /// `let` variables bound to an affine value: that value (`row = tid // 4`).
    pub(crate) lets: HashMap<VarId, Affine>,
    /// Integer `let` variables without an affine value: a power of two every value is a
    /// multiple of (`d_n = tile[0] * 128`: 128), for alignment proofs ([`Env::unit`]).
    pub(crate) let_units: HashMap<VarId, i64>,
    /// Integer `let` variables without an affine value whose value's range a clamp or a
    /// remainder by a constant fixes (`t = T_s[0] % n`: [0, n - 1]): that enclosure.
    pub(crate) let_ranges: HashMap<VarId, (i64, i64)>,
    /// Scope-id vars: (kind, dim, declared with several dims, the hardware id
    /// it is; `None` for ids with no hardware id such as cluster ids).
    pub(crate) scope_vars: HashMap<VarId, (ScopeIdKind, usize, bool, Option<Hw>)>,
    /// Per var, the narrowest scope its value can differ between (`Thread` for
    /// lane-derived values, `Warpgroup` for `wg * 128`, `Cta` for cta ids);
    /// absent = the same in every thread.
    pub(crate) grain: HashMap<VarId, ExecScope>,
    /// Scalar parameters and their facts, symbolic grid dims (`launch`).
    pub(crate) sym: crate::symbols::Symbols,
    /// CTAs per cluster (`[1, 1, 1]` or all zero before the launch is resolved: no clusters).
    pub(crate) cluster: [u32; 3],
}

/// What is wrong with a peer CTA's rank (`Env::cluster_rank_problem`).
pub(crate) enum RankProblem {
    NoCluster,
    NotInteger,
    /// The constant rank, and the cluster's size.
    Outside(i64, u32),
}

impl Env {
    /// The flat array of a buffer and the index type of its addressing.
    pub fn lbuf(&self, b: BufId) -> Option<(LBufId, DType)> {
        self.bufs.get(&b).copied()
    }
    /// CTAs per cluster (1: the kernel is not launched in clusters).
    pub fn cluster_size(&self) -> u32 {
        self.cluster.iter().product::<u32>().max(1)
    }

    /// Why `rank` cannot name a peer CTA of this kernel's cluster (a dsmem copy's
    /// `remote_cta_id=`, a remote arrive's `cta_id=`): no cluster launch, not an integer, or a
    /// constant outside the cluster; `None` where it can (a run-time rank: the simulator checks it).
    pub(crate) fn cluster_rank_problem(&self, rank: &Expr) -> Option<RankProblem> {
        let size = self.cluster_size();
        if size == 1 {
            return Some(RankProblem::NoCluster);
        }
        if !rank.dtype.is_int() {
            return Some(RankProblem::NotInteger);
        }
        match rank.kind {
            ExprKind::Int(v) if !(0..i64::from(size)).contains(&v) => Some(RankProblem::Outside(v, size)),
            _ => None,
        }
    }
    pub fn var(&self, v: VarId) -> Option<LExpr> {
        self.vars.get(&v).cloned()
    }
    /// A number every value of variable `v` is a multiple of: a scalar parameter's
    /// `T.assume(v % k == 0)`, a `let` of a known multiple ([`Env::let_units`]); else 1.
    pub fn unit(&self, v: VarId) -> i64 {
        self.let_units.get(&v).copied().unwrap_or_else(|| self.sym.unit(v))
    }

    /// The affine value of a `let` variable, when it has one.
    pub fn let_affine(&self, v: VarId) -> Option<&Affine> {
        self.lets.get(&v)
    }

    /// The range of `v` at a program point whose facts are `at`: a scope id
    /// over the active threads (CTAs), a loop variable over its narrowed
    /// extent; `None` for anything else (lets, loops with symbolic bounds).
    /// Every range lowering reasons with comes from here (docs/tile-primitives.md §1.3).
    pub fn var_bounds(&self, at: &Facts, v: VarId) -> Option<VarBounds> {
        let b = match self.scope_vars.get(&v) {
            Some(&(.., Some(Hw::BlockIdx(d)))) if at.values.contains_key(&v) => at.value_bounds(v, Source::Cta(d)),
            Some(&(.., hw)) => at.hw_bounds(hw?),
            // (a let of data: its own source, an enclosure only)
            None => at.value_bounds(v, Source::Loop(v)).or_else(|| {
                let &(lo, hi) = self.let_ranges.get(&v)?;
                Some(VarBounds { lo, hi, exact: false, source: Source::Loop(v) })
            }),
        }?;
        // A CTA id of a symbolic grid dim runs to CUDA's limit here: an enclosure only
        // (the launch module knows its real end).
        let symbolic = self.cta_dim(v).is_some_and(|d| self.sym.grid[d as usize].is_some());
        Some(VarBounds { exact: b.exact && !symbolic, ..b })
    }

    /// The grid dim of a CTA-id variable.
    pub fn cta_dim(&self, v: VarId) -> Option<u8> {
        match self.scope_vars.get(&v) {
            Some(&(.., Some(Hw::BlockIdx(d)))) => Some(d),
            _ => None,
        }
    }

    /// The value of `e` may differ between threads of one instance of `scope`
    /// (lane ids within a warp, warp ids within a CTA, values derived from them).
    pub fn varies_within(&self, k: &Kernel, e: &Expr, scope: ExecScope) -> bool {
        self.grain(k, e).is_some_and(|g| scope.wider_than(g))
    }

    /// The narrowest scope whose instances may see different values of `e`.
    pub fn grain(&self, k: &Kernel, e: &Expr) -> Option<ExecScope> {
        let narrowest = |a: Option<ExecScope>, b: Option<ExecScope>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, None) | (None, x) => x,
        };
        match &e.kind {
            ExprKind::Var(v) => self.grain.get(v).copied(),
            ExprKind::Load(b, idx) => {
                let own = (k.buf(*b).scope == MemScope::Local).then_some(ExecScope::Thread);
                idx.iter().fold(own, |g, i| narrowest(g, self.grain(k, i)))
            }
            ExprKind::Binary(_, a, b) => narrowest(self.grain(k, a), self.grain(k, b)),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.grain(k, a),
            ExprKind::Select(c, a, b) => narrowest(self.grain(k, c), narrowest(self.grain(k, a), self.grain(k, b))),
            ExprKind::Call(_, args) => args.iter().fold(None, |g, a| narrowest(g, self.grain(k, a))),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => None,
        }
    }
}

pub fn thread_id(b: &mut Builder, kind: TidKind) -> LExpr {
    match kind {
        TidKind::Lane => b.hw(Hw::Lane, "lane"),
        TidKind::TidInWg => b.hw(Hw::TidInWg, "tid_in_wg"),
        TidKind::Tx => b.hw(Hw::Tx, "tid"),
    }
}
