//! HIR statements → LIR, in program order: buffers to flat arrays (parameters
//! first, views aliasing their base), scope ids to kernel-level lets of
//! hardware ids, loops/ifs/lets/stores/barriers as such, and each tile call
//! through the dispatcher with the active-thread set of its program point.

use crate::affine::Term;
use crate::bounds::{self, Verdict};
use crate::build::{Builder, Hw};
use crate::cond::{conjuncts, floor_div, linear, Cond};
use crate::env::Env;
use crate::explain::CallExplain;
use crate::options::LowerOptions;
use crate::scope::{resolve_launch, AxisRange, Facts, IdRange, Launch, ScopeView};
use crate::select::dispatch;
use crate::variant::{CallCx, Registry};
use crate::{addr, expr, lay};
use std::collections::HashSet;
use tirx_ir::hir::{
    BinOp, BufId, BufferOrigin, Collective, Expr, ExprKind, ForKind, Kernel, MemScope, ScopeIdDef, ScopeIdKind,
    ShuffleMode, Stmt, StmtKind, TileArg, VarId,
};
use tirx_ir::lir::{
    DebugOp, LBuf, LBufId, LExpr, LKernel, LStmt, LStmtKind, LaunchCheck, MemOp, ScalarParam, Space, SymExpr, SymOp,
    SyncOp,
};
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::ExecScope;

/// Buffers with at least this many elements are addressed with 64-bit indices.
const I64_INDEX_ELEMS: i64 = 1 << 31;

/// A lowered kernel, the dispatch record of every tile call, warnings and notes.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub lir: LKernel,
    pub explain: Vec<CallExplain>,
    pub warnings: Vec<Diagnostic>,
    /// Decisions lowering made for the kernel as a whole (static shared memory
    /// over 48 KiB placed in dynamic shared memory), as notes.
    pub notes: Vec<Diagnostic>,
}

/// Everything lowering found: the kernel (when no error), the dispatch record
/// of every call reached, errors and warnings.
pub struct Outcome {
    pub lowered: Result<Lowered, Vec<Diagnostic>>,
    /// Also filled when lowering failed (for `tirx explain`).
    pub explain: Vec<CallExplain>,
}

pub fn lower(k: &Kernel, opts: &LowerOptions, reg: &Registry) -> Outcome {
    let defs = tirx_ir::scope_ids::collect_defs(&k.body);
    let launch = match resolve_launch(&defs, k.span) {
        Ok(l) => l,
        Err(e) => return Outcome { lowered: Err(e), explain: vec![] },
    };
    let mut lw = Lowerer {
        k,
        opts,
        reg,
        b: Builder::new(launch.grid, launch.block),
        env: Env::default(),
        explain: vec![],
        errors: vec![],
        warnings: vec![],
        warned: HashSet::new(),
        checks: vec![],
    };
    let scalars = lw.declare_scalars();
    let grid_dims = lw.symbolic_grid(&defs);
    lw.clusters_need_sm90(&launch, &defs);
    lw.cluster_divides_grid(&launch, &grid_dims, &defs);
    let budget = crate::smem::check(k, opts.arch);
    let params = lw.declare_buffers(&budget.made_dynamic);
    lw.collect_facts();
    lw.errors.extend(budget.errors);
    lw.env.cluster = launch.cluster;
    lw.bind_scope_vars(&defs, &launch);
    let facts = Facts::at_entry(&launch);
    let body = lw.block(&k.body, &facts);
    // A body lowered several times (an unrolled `T.unroll` loop) reports a problem once.
    dedup(&mut lw.errors);
    dedup(&mut lw.warnings);
    if !lw.errors.is_empty() {
        let mut errs = lw.errors;
        errs.extend(lw.warnings);
        return Outcome { lowered: Err(errs), explain: lw.explain };
    }
    let mut full = std::mem::take(&mut lw.b.prelude);
    full.extend(body);
    let lir = LKernel {
        name: k.name.clone(),
        grid: launch.grid,
        block: launch.block,
        params,
        scalars,
        grid_dims,
        grid_span: grid_span(&defs, k.span),
        checks: std::mem::take(&mut lw.checks),
        tmaps: std::mem::take(&mut lw.b.tmaps),
        cluster: launch.cluster,
        bufs: std::mem::take(&mut lw.b.bufs),
        vars: std::mem::take(&mut lw.b.vars),
        body: full,
    };
    if let Err(m) = lir.validate() {
        let d = Diagnostic::internal(k.span, format!("the lowered kernel is malformed: {m}"));
        return Outcome { lowered: Err(vec![d]), explain: lw.explain };
    }
    // A variant that emits past its declared minimum arch is a bug, caught here rather than in NVRTC.
    if let Some(s) = lir.first_unsupported(opts.arch) {
        let d = Diagnostic::internal(
            s.span,
            format!("an instruction needing {} was emitted for target {}", lir.min_arch(s), opts.arch),
        );
        return Outcome { lowered: Err(vec![d]), explain: lw.explain };
    }
    // The budget above counted the HIR's buffers as the generator places them; the LIR's
    // placement over the target's limit would be a launch failure the budget missed: a bug.
    let placed = lir.shared_layout(|_| true).total();
    if placed > opts.arch.max_smem_per_cta() {
        let d = Diagnostic::internal(
            k.span,
            format!(
                "the kernel's shared arrays are placed in {placed} bytes, over the {} bytes of {}, which the \
                 shared-memory budget did not report",
                opts.arch.max_smem_per_cta(),
                opts.arch
            ),
        );
        return Outcome { lowered: Err(vec![d]), explain: lw.explain };
    }
    let explain = lw.explain.clone();
    Outcome { lowered: Ok(Lowered { lir, explain: lw.explain, warnings: lw.warnings, notes: budget.notes }), explain }
}

struct Lowerer<'a> {
    k: &'a Kernel,
    opts: &'a LowerOptions,
    reg: &'a Registry,
    b: Builder,
    env: Env,
    explain: Vec<CallExplain>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// Spans already warned about (a bounds warning is given once per access).
    warned: HashSet<Span>,
    /// Conditions every launch checks: `T.assume` facts and region bounds decided at launch.
    checks: Vec<LaunchCheck>,
}

impl Lowerer<'_> {
    /// Scalar parameters as variables in scope in the whole body, each with its
    /// position among the parameters the kernel takes (unbound handles take none).
    fn declare_scalars(&mut self) -> Vec<ScalarParam> {
        let mut out = Vec::new();
        let mut index = 0;
        for p in &self.k.params {
            if let Some(v) = p.scalar {
                let hv = self.k.var(v);
                let lv = self.b.var(&hv.name, hv.dtype, None);
                self.env.vars.insert(v, LExpr::Var(lv));
                let (lo, hi) = hv.dtype.int_range().map_or((None, None), |(lo, hi)| (Some(lo), Some(hi)));
                let info = crate::symbols::ParamInfo {
                    lv,
                    name: hv.name.clone(),
                    dtype: hv.dtype,
                    lo,
                    hi,
                    unit: 1,
                    facts: vec![],
                };
                self.env.sym.params.insert(v, info);
                out.push(ScalarParam { var: lv, index });
            }
            if p.scalar.is_some() || p.buffer.is_some() {
                index += 1;
            }
        }
        out
    }

    /// Clusters (`__cluster_dims__`) are an sm_90 feature: an older target is a user
    /// error at the `T.cta_id_in_cluster` declaring them, so `check` fails as nvcc would.
    fn clusters_need_sm90(&mut self, launch: &Launch, defs: &[&ScopeIdDef]) {
        if launch.cluster == [1, 1, 1] || self.opts.arch.supports(tirx_ir::Arch::SM_90) {
            return;
        }
        let at = defs.iter().find(|d| d.kind == ScopeIdKind::CtaIdInCluster).map_or(self.k.span, |d| d.span);
        let c = launch.cluster;
        self.errors.push(
            Diagnostic::error(
                at,
                format!("a cluster of {}x{}x{} CTAs needs sm_90; the target is {}", c[0], c[1], c[2], self.opts.arch),
            )
            .with_label("clusters (`__cluster_dims__`) need sm_90")
            .with_help("compile for a Hopper GPU (`--arch sm_90a`), or drop `T.cta_id_in_cluster`"),
        );
    }

    /// A constant grid dimension is a whole number of clusters; a run-time one is a
    /// launch check (at the `T.cta_id` declaring it): CUDA refuses such a launch.
    fn cluster_divides_grid(&mut self, launch: &Launch, grid_dims: &[Option<SymExpr>; 3], defs: &[&ScopeIdDef]) {
        let (grid, cluster) = (launch.grid, launch.cluster);
        let at = grid_span(defs, self.k.span);
        for d in (0..3).filter(|&d| cluster[d] > 1) {
            let Some(e) = &grid_dims[d] else { continue };
            let m = SymExpr::bin(SymOp::FloorMod, e.clone(), SymExpr::Int(i64::from(cluster[d])));
            let cond = SymExpr::bin(SymOp::Eq, m, SymExpr::Int(0));
            let what = format!(
                "grid dimension {} is a whole number of clusters (`__cluster_dims__({}, {}, {})`)",
                ["x", "y", "z"][d],
                cluster[0],
                cluster[1],
                cluster[2]
            );
            self.checks.push(LaunchCheck { cond, what, span: at });
        }
        if let Some(d) = (0..3).find(|&d| grid_dims[d].is_none() && grid[d] % cluster[d] != 0) {
            self.errors.push(
                Diagnostic::error(
                    at,
                    format!(
                        "the grid {grid:?} is not a whole number of clusters {cluster:?} (dimension {})",
                        ["x", "y", "z"][d]
                    ),
                )
                .with_help("declare `T.cta_id([...])` with a multiple of the cluster size in every dimension"),
            );
        }
    }

    /// The grid dims `T.cta_id` gives as expressions of scalar parameters; every
    /// declaration of the CTA ids must give the same ones.
    fn symbolic_grid(&mut self, defs: &[&ScopeIdDef]) -> [Option<SymExpr>; 3] {
        let mut out: [Option<SymExpr>; 3] = [None, None, None];
        let mut first: Option<&ScopeIdDef> = None;
        for d in defs.iter().filter(|d| d.kind == ScopeIdKind::CtaId && d.extents.is_some()) {
            let dims: Vec<Option<SymExpr>> =
                d.dyn_extents.iter().map(|e| e.as_ref().and_then(|e| crate::launch::to_sym(&self.env, e))).collect();
            match first {
                None => {
                    first = Some(d);
                    for (i, e) in dims.into_iter().enumerate().take(3) {
                        out[i] = e;
                    }
                }
                Some(f) => {
                    let same = (0..3).all(|i| dims.get(i).cloned().flatten() == out[i]);
                    if !same {
                        self.errors.push(
                            Diagnostic::error(d.span, "`T.cta_id` is declared again with other run-time extents")
                                .with_secondary(f.span, "first declared here")
                                .with_help("declare the grid once, or with the same expressions"),
                        );
                    }
                }
            }
        }
        for (i, e) in out.iter().enumerate() {
            let Some(e) = e else { continue };
            let hir = first.and_then(|f| f.dyn_extents.get(i).cloned().flatten());
            let affine = hir.as_ref().and_then(|h| expr::affine(&self.env, h));
            let text = self.env.sym.text(e);
            self.env.sym.grid[i] = Some(crate::symbols::SymGrid { expr: e.clone(), affine, text });
        }
        out
    }

    /// Facts of `T.assume` (and the implicit ones of a launch) about the parameters;
    /// every `T.assume` becomes a launch check.
    fn collect_facts(&mut self) {
        let k = self.k;
        let mut implied: Vec<crate::affine::Affine> =
            self.env.sym.grid.iter().flatten().filter_map(|g| g.affine.clone()).collect();
        implied.extend(k.buffers.iter().filter_map(|b| b.dyn_outer.as_ref().and_then(|e| expr::affine(&self.env, e))));
        crate::launch::collect_facts(k, &mut self.env, &implied);
        for p in self.env.sym.params.values() {
            if let (Some(lo), Some(hi)) = (p.lo, p.hi) {
                self.b.set_range(p.lv, (lo, hi));
            }
        }
        for a in &k.assumes {
            match crate::launch::to_sym(&self.env, a) {
                Some(cond) => self.checks.push(LaunchCheck {
                    cond,
                    what: format!("T.assume({})", crate::launch::assume_text(&self.env, k, a)),
                    span: a.span,
                }),
                None => self
                    .errors
                    .push(Diagnostic::error(a.span, "`T.assume` needs a condition on integer scalar parameters")),
            }
        }
    }

    /// Parameters in order as global arrays, then shared/local allocations;
    /// views alias the array of their base.
    /// `made_dynamic`: the `scope="shared"` buffers placed in dynamic shared memory (§2.7).
    fn declare_buffers(&mut self, made_dynamic: &HashSet<BufId>) -> Vec<LBufId> {
        let k = self.k;
        let mut params = Vec::new();
        for p in &k.params {
            if let Some(id) = p.buffer {
                let lb = self.new_buf(id, Space::Global, false);
                params.push(lb);
            }
        }
        for (i, hb) in k.buffers.iter().enumerate() {
            let id = BufId(i as u32);
            if self.env.bufs.contains_key(&id) {
                continue;
            }
            match (&hb.origin, hb.scope) {
                (BufferOrigin::Alloc, MemScope::Shared | MemScope::SharedDyn) => {
                    let dynamic = hb.scope == MemScope::SharedDyn || made_dynamic.contains(&id);
                    self.new_buf(id, Space::Shared, dynamic);
                }
                (BufferOrigin::Alloc, MemScope::Local) => {
                    self.new_buf(id, Space::Local, false);
                }
                (BufferOrigin::Alloc, MemScope::Global) => self.errors.push(
                    Diagnostic::error(
                        hb.span,
                        format!("`{}`: global buffers cannot be allocated inside a kernel", hb.name),
                    )
                    .with_label("`scope=\"global\"` allocation")
                    .with_help(
                        "pass it as a kernel parameter (a `T.handle` argument and `T.match_buffer`), or allocate it in `scope=\"shared\"` or `scope=\"local\"`",
                    ),
                ),
                (BufferOrigin::Param, _) => self.errors.push(Diagnostic::error(
                    hb.span,
                    format!("`{}` is declared as a parameter buffer but is not bound to a kernel parameter", hb.name),
                )),
                (BufferOrigin::LocalView { .. } | BufferOrigin::View { .. }, _) => {}
            }
        }
        // Views after their bases (a view of a view resolves through the chain).
        for (i, hb) in k.buffers.iter().enumerate() {
            let id = BufId(i as u32);
            if let BufferOrigin::LocalView { base } | BufferOrigin::View { base } = hb.origin {
                match self.root(base) {
                    Some(root) => {
                        let (lb, _) = self.env.bufs[&root];
                        let elems = self.b.bufs[lb.0 as usize].elems;
                        match lay::memory_span(&hb.layout, &hb.shape) {
                            Err(m) => self.errors.push(Diagnostic::error(
                                hb.span,
                                format!("view `{}`: cannot size its storage: {m}", hb.name),
                            )),
                            Ok(view_span) if view_span > elems => self.errors.push(Diagnostic::error(
                                hb.span,
                                format!(
                                    "view `{}` spans {view_span} elements but its base `{}` has {elems}",
                                    hb.name,
                                    k.buf(root).name
                                ),
                            )),
                            Ok(_) => {}
                        }
                        self.env.bufs.insert(id, (lb, index_type(elems)));
                    }
                    None => self
                        .errors
                        .push(Diagnostic::error(hb.span, format!("view `{}` has no allocated base buffer", hb.name))),
                }
            }
        }
        params
    }

    fn root(&self, mut b: BufId) -> Option<BufId> {
        for _ in 0..=self.k.buffers.len() {
            match self.k.buffers.get(b.0 as usize)?.origin {
                BufferOrigin::LocalView { base } | BufferOrigin::View { base } => b = base,
                _ => return self.env.bufs.contains_key(&b).then_some(b),
            }
        }
        None
    }

    fn new_buf(&mut self, id: BufId, space: Space, dynamic: bool) -> LBufId {
        /// CUDA's local memory per thread.
        const LOCAL_BYTES: i64 = 512 << 10;
        let hb = self.k.buf(id);
        let elems = lay::memory_span(&hb.layout, &hb.shape).unwrap_or_else(|m| {
            self.errors.push(Diagnostic::error(hb.span, format!("`{}`: cannot size its storage: {m}", hb.name)));
            1
        });
        let bytes = elems.saturating_mul(i64::from(hb.dtype.bytes()));
        if space == Space::Local && bytes > LOCAL_BYTES {
            self.errors.push(
                Diagnostic::error(hb.span, format!("`{}` needs {elems} {} registers per thread", hb.name, hb.dtype))
                    .with_label(format!("{bytes} bytes per thread"))
                    .with_note("CUDA gives a thread at most 512 KiB of local memory (what does not fit registers spills there)")
                    .with_help("check the shape and the register strides of the layout"),
            );
        }
        let dyn_rows = hb.dyn_outer.as_ref().and_then(|e| {
            let r = crate::launch::to_sym(&self.env, e);
            if r.is_none() {
                self.errors.push(Diagnostic::error(
                    e.span,
                    format!("dim 0 of `{}` is not an integer expression of scalar parameters", hb.name),
                ));
            }
            r
        });
        let strides = match &hb.dyn_strides {
            Some(xs) => Some(self.dyn_strides(hb, xs)),
            None if space == Space::Global => padded_strides(hb),
            None => None,
        };
        // Run-time strides may reach past 2^31 elements: 64-bit indices.
        let elems = if hb.has_dyn_strides() { elems.max(1 << 31) } else { elems };
        let lb = self.b.add_buf(LBuf {
            name: hb.name.clone(),
            dtype: hb.dtype,
            space,
            elems,
            shape: hb.shape.clone(),
            dynamic,
            dyn_rows,
            strides,
            align: if space == Space::Shared { lay::smem_align(&hb.layout, hb.dtype) } else { 0 },
        });
        self.env.bufs.insert(id, (lb, index_type(elems)));
        if let Some(xs) = &hb.dyn_strides {
            let values = xs.iter().map(|e| crate::expr::lower(self.k, &self.env, &self.b, e));
            match values.collect::<Result<Vec<_>, _>>() {
                Ok(v) => {
                    self.env.strides.insert(id, v);
                }
                Err(d) => self.errors.push(d),
            }
        }
        lb
    }

    /// The strides of `hb` given as expressions of scalar parameters, for the launch, which
    /// checks that each run-time one is not negative (at the stride).
    fn dyn_strides(&mut self, hb: &tirx_ir::hir::Buffer, xs: &[Expr]) -> Vec<SymExpr> {
        let mut out = Vec::with_capacity(xs.len());
        for (d, e) in xs.iter().enumerate() {
            let Some(s) = crate::launch::to_sym(&self.env, e) else {
                self.errors.push(Diagnostic::error(
                    e.span,
                    format!("a stride of `{}` is not an integer expression of scalar parameters", hb.name),
                ));
                out.push(SymExpr::Int(1));
                continue;
            };
            if s.as_int().is_none() {
                let cond = SymExpr::bin(SymOp::Ge, s.clone(), SymExpr::Int(0));
                self.checks.push(LaunchCheck {
                    cond,
                    what: format!("stride {d} of `{}` is not negative", hb.name),
                    span: e.span,
                });
            }
            out.push(s);
        }
        out
    }

    /// Scope-id vars the kernel reads become kernel-level lets of hardware ids.
    fn bind_scope_vars(&mut self, defs: &[&ScopeIdDef], launch: &Launch) {
        let mut used = HashSet::new();
        used_vars(&self.k.body, &mut used);
        let one_d_block = launch.block[1] == 1 && launch.block[2] == 1;
        for d in defs {
            let multi = d.vars.len() > 1;
            for (dim, &v) in d.vars.iter().enumerate() {
                let hw = match d.kind {
                    ScopeIdKind::CtaId => Hw::BlockIdx(dim as u8),
                    ScopeIdKind::CtaIdInCluster => Hw::ClusterCta(dim as u8, launch.cluster[dim.min(2)]),
                    ScopeIdKind::ClusterId => Hw::ClusterIdx(dim as u8, launch.cluster[dim.min(2)]),
                    ScopeIdKind::ThreadId if one_d_block => Hw::Tx,
                    ScopeIdKind::ThreadId => Hw::ThreadIdx(dim as u8),
                    ScopeIdKind::LaneId => Hw::Lane,
                    ScopeIdKind::WarpId => Hw::WarpId,
                    ScopeIdKind::WarpgroupId => Hw::WgId,
                    ScopeIdKind::WarpIdInWg => Hw::WarpInWg,
                    ScopeIdKind::ThreadIdInWg => Hw::TidInWg,
                };
                self.env.scope_vars.insert(v, (d.kind, dim, multi, Some(hw)));
                self.env.grain.insert(v, d.kind.binding().1);
                if !used.contains(&v) {
                    continue;
                }
                let var = self.k.var(v);
                let val = self.b.hw(hw, &var.name);
                let val = self.b.convert(val, var.dtype);
                self.env.vars.insert(v, val);
            }
        }
    }

    fn block(&mut self, body: &[Stmt], at: &Facts) -> Vec<LStmt> {
        let mut out = Vec::new();
        let mut bound = Vec::new();
        for s in body {
            self.stmt(s, at, &mut out, &mut bound);
        }
        // Lets and loop vars go out of scope with their block.
        for v in bound {
            self.env.vars.remove(&v);
            self.env.lets.remove(&v);
            self.env.let_ranges.remove(&v);
        }
        out
    }

    fn stmt(&mut self, s: &Stmt, at: &Facts, out: &mut Vec<LStmt>, bound: &mut Vec<VarId>) {
        let push = |out: &mut Vec<LStmt>, kind| out.push(LStmt::new(kind, s.span));
        match &s.kind {
            StmtKind::For { var, begin, extent, kind, body } => {
                self.scalar_bounds(&[begin, extent], None, at, out);
                let (Some(b0), Some(n)) = (self.expr(begin), self.expr(extent)) else { return };
                if matches!(n, LExpr::Int(e, _) if e <= 0) {
                    return;
                }
                let hv = self.k.var(*var);
                let (b0, n) = (self.b.convert(b0, hv.dtype), self.b.convert(n, hv.dtype));
                if matches!(n, LExpr::Int(1, _)) {
                    // A one-trip loop is its body with the variable bound to `begin`.
                    self.set_grain(*var, &[begin]);
                    self.env.vars.insert(*var, b0);
                    out.extend(self.block(body, at));
                    self.env.vars.remove(var);
                    return;
                }
                // `T.unroll` whose variable indexes registers (`A_f[kk % 2, ...]`): registers
                // cannot be indexed at run time, so the loop is unrolled here and the variable is
                // a constant in each copy (docs/python.md §2.2).
                if let (ForKind::Unroll, LExpr::Int(a, _), LExpr::Int(e, _)) = (kind, &b0, &n) {
                    if *e <= MAX_UNROLL && indexes_registers(self.k, *var, body) {
                        self.set_grain(*var, &[begin, extent]);
                        for i in *a..a + e {
                            self.env.vars.insert(*var, LExpr::Int(i, hv.dtype));
                            out.extend(self.block(body, at));
                        }
                        self.env.vars.remove(var);
                        return;
                    }
                }
                // A loop with constant bounds: its variable's range, for the body's facts.
                let mut inner = at.clone();
                // A run-time trip count may be zero for some values of the enclosing
                // variables: the body need not run for every value, so no range is exact there.
                // Where it runs, `begin ≤ var < begin + extent` (guards: docs/tile-primitives.md §7.7).
                if !matches!(n, LExpr::Int(..)) {
                    inner.uncaptured = true;
                    inner.guards.extend(self.loop_guards(*var, begin, extent));
                }
                let range = match (&b0, &n) {
                    (LExpr::Int(a, _), LExpr::Int(e, _)) => {
                        inner.values.insert(*var, AxisRange { extent: *e, offset: *a, stride: 1 });
                        a.checked_add(e - 1).map(|hi| (*a, hi))
                    }
                    _ => None,
                };
                let lv = self.b.var(&hv.name, hv.dtype, range);
                self.set_grain(*var, &[begin, extent]);
                self.env.vars.insert(*var, LExpr::Var(lv));
                let body = self.block(body, &inner);
                self.env.vars.remove(var);
                if !body.is_empty() {
                    push(out, LStmtKind::For { var: lv, begin: b0, extent: n, unroll: *kind == ForKind::Unroll, body });
                }
            }
            StmtKind::If { cond, then_body, else_body } => {
                self.scalar_bounds(&[cond], None, at, out);
                let Some(c) = self.expr(cond) else { return };
                let (then_a, else_a) = self.narrow(cond, at);
                match c {
                    LExpr::Bool(true) => out.extend(self.block(then_body, at)),
                    LExpr::Bool(false) => out.extend(self.block(else_body, at)),
                    c => {
                        let t = self.block(then_body, &then_a);
                        let e = self.block(else_body, &else_a);
                        if !t.is_empty() || !e.is_empty() {
                            push(out, LStmtKind::If { cond: c, then_body: t, else_body: e });
                        }
                    }
                }
            }
            StmtKind::While { cond, body } => {
                self.scalar_bounds(&[cond], None, at, out);
                let Some(c) = self.expr(cond) else { return };
                if let LExpr::Bool(_) = c {
                    self.errors.push(
                        Diagnostic::error(cond.span, "this `while` condition is a constant once lowered")
                            .with_label("never changes")
                            .with_help("loop on a value the body changes (a mutable scalar, a buffer element)"),
                    );
                    return;
                }
                // As in a loop of a run-time trip count: the body may run for some values of
                // the enclosing variables and not others (no range exact there), and the
                // condition is taken as uniform over the scope of each call in the body — the
                // simulator reports a call that part of its scope does not reach.
                let (mut inner, _) = self.narrow(cond, at);
                inner.uncaptured = true;
                let body = self.block(body, &inner);
                push(out, LStmtKind::While { cond: c, body });
            }
            StmtKind::Atomic { var, atomic } => {
                let exprs = atomic.exprs();
                self.scalar_bounds(&exprs, Some((atomic.elem.buf, &atomic.elem.index)), at, out);
                let idx: Option<Vec<LExpr>> = atomic.elem.index.iter().map(|i| self.expr(i)).collect();
                let (Some(idx), Some(v)) = (idx, self.expr(&atomic.value)) else {
                    if let Some(var) = var {
                        self.poison(*var, bound);
                    }
                    return;
                };
                match addr::element(self.k, &self.env, &self.b, atomic.elem.buf, &idx, false) {
                    Ok((lb, index)) => {
                        let dtype = self.k.buf(atomic.elem.buf).dtype;
                        let old = var.map(|hv| {
                            let lv = self.b.var(&self.k.var(hv).name, dtype, None);
                            // Each thread gets its own value.
                            self.env.grain.insert(hv, ExecScope::Thread);
                            self.env.vars.insert(hv, LExpr::Var(lv));
                            bound.push(hv);
                            lv
                        });
                        let value = self.b.convert(v, dtype);
                        push(out, LStmtKind::Memory(MemOp::Atomic { op: atomic.op, buf: lb, index, value, old }));
                    }
                    Err(m) => {
                        self.errors.push(Diagnostic::error(atomic.elem.span, m).with_label("atomic element"));
                        if let Some(var) = var {
                            self.poison(*var, bound);
                        }
                    }
                }
            }
            StmtKind::Let { var, value } => {
                self.scalar_bounds(&[value], None, at, out);
                let Some(v) = self.expr(value) else { return self.poison(*var, bound) };
                let hv = self.k.var(*var);
                let v = self.b.convert(v, hv.dtype);
                self.set_grain(*var, &[value]);
                // Constants are substituted: no dead lets in the output.
                if let LExpr::Int(..) | LExpr::Float(..) | LExpr::Bool(_) = v {
                    self.env.vars.insert(*var, v);
                } else {
                    let range = self.b.bounds(&v);
                    let lv = self.b.var(&hv.name, hv.dtype, range);
                    push(out, LStmtKind::Let { var: lv, value: v });
                    if hv.dtype.is_int() {
                        if let Some(a) = expr::affine(&self.env, value) {
                            self.env.lets.insert(*var, a);
                        } else {
                            let unit = expr::pow2_multiple(&self.env, value);
                            if unit > 1 {
                                self.env.let_units.insert(*var, unit);
                            }
                            if let (Some(lo), Some(hi)) = bounds::clamped(&self.env, at, value) {
                                self.env.let_ranges.insert(*var, (lo, hi));
                            }
                        }
                    }
                    self.env.vars.insert(*var, LExpr::Var(lv));
                }
                bound.push(*var);
            }
            StmtKind::Store { buf, indices, value } => {
                // A buffer without storage: its declaration has an error already.
                if self.env.lbuf(*buf).is_none() && !self.errors.is_empty() {
                    return;
                }
                let mut exprs: Vec<&Expr> = indices.iter().collect();
                exprs.push(value);
                self.scalar_bounds(&exprs, Some((*buf, indices)), at, out);
                let idx: Option<Vec<LExpr>> = indices.iter().map(|i| self.expr(i)).collect();
                let (Some(idx), Some(v)) = (idx, self.expr(value)) else { return };
                match addr::element(self.k, &self.env, &self.b, *buf, &idx, false) {
                    Ok((lb, index)) => {
                        let v = self.b.convert(v, self.k.buf(*buf).dtype);
                        push(out, LStmtKind::Memory(MemOp::Store { buf: lb, index, value: v }));
                    }
                    Err(m) => self.errors.push(Diagnostic::error(s.span, m).with_label("direct store")),
                }
            }
            StmtKind::Barrier(kind) => push(out, LStmtKind::Sync(SyncOp::Barrier(*kind))),
            StmtKind::Collective { var, op } => {
                self.scalar_bounds(&op.exprs(), None, at, out);
                match crate::collective::lower(self.k, &self.env, &mut self.b, at, op, *var, s.span) {
                    Ok((stmts, value)) => {
                        out.extend(stmts);
                        match self.collective_grain(op) {
                            ExecScope::Kernel => self.env.grain.remove(var),
                            grain => self.env.grain.insert(*var, grain),
                        };
                        self.env.vars.insert(*var, value);
                        bound.push(*var);
                    }
                    Err(d) => {
                        self.errors.push(d);
                        self.poison(*var, bound);
                    }
                }
            }
            StmtKind::Printf { format, args } => {
                let refs: Vec<&Expr> = args.iter().collect();
                self.scalar_bounds(&refs, None, at, out);
                let args: Option<Vec<LExpr>> = args.iter().map(|a| self.expr(a)).collect();
                if let Some(args) = args {
                    push(out, LStmtKind::Debug(DebugOp::Printf { format: format.clone(), args }));
                }
            }
            // Checked as an expression (bounds of its loads, lowerable); nothing runs.
            StmtKind::Evaluate(value) => {
                self.scalar_bounds(&[value], None, at, out);
                let _ = self.expr(value);
            }
            StmtKind::Tile(call) => {
                let view = ScopeView::new(call.scope, &at.active);
                let cx = CallCx { kernel: self.k, call, scope: &view, opts: self.opts, env: &self.env, facts: at };
                // An operand without a flat array: its declaration has an error already.
                if bounds::call_regions(call).any(|(r, _)| self.env.lbuf(r.buf).is_none()) {
                    if self.errors.is_empty() {
                        self.errors.push(Diagnostic::internal(call.span, "a tile-call operand has no storage"));
                    }
                    return;
                }
                // Bounds before dispatch (module `bounds`): no variant sees a region that
                // provably leaves its buffer; an unproven one is checked by the simulator.
                let mut lines = Vec::new();
                let mut launch_lines = Vec::new();
                let mut outside = false;
                for (r, write) in bounds::call_regions(call) {
                    let hb = self.k.buf(r.buf);
                    if bounds::hardware_bounded(call, hb) || bounds::clipped(call, hb) {
                        continue;
                    }
                    let what = crate::text::region_text(self.k, r);
                    let dims: Vec<(&Expr, i64)> = r.ranges.iter().map(|g| (&g.begin, g.extent)).collect();
                    match bounds::region(self.k, &self.env, at, r) {
                        Verdict::Inside => continue,
                        Verdict::AtLaunch(conds) => {
                            launch_lines.extend(launch_checks(&mut self.checks, conds, hb.shape.len(), &what, r.span));
                            continue;
                        }
                        Verdict::Outside(e) if !self.opts.defer_bounds => {
                            lines.push(format!("`{what}` is out of bounds: {}", e.reason(&hb.name, write)));
                            self.errors.push(bounds::outside_error(self.k, hb, &what, r.span, &e, write));
                            outside = true;
                            continue;
                        }
                        Verdict::Never { why, .. } if !self.opts.defer_bounds => {
                            lines.push(format!("`{what}` is out of bounds for every launch: {why}"));
                            self.errors.push(bounds::never_error(self.k, hb, &what, r.span, &why));
                            outside = true;
                            continue;
                        }
                        Verdict::Outside(e) => {
                            lines.push(format!("`{what}` is out of bounds (deferred): {}", e.reason(&hb.name, write)));
                            if self.warned.insert(r.span) {
                                self.warnings.push(bounds::deferred_warning(self.k, hb, &what, r.span, &e, write));
                            }
                        }
                        Verdict::Never { why, .. } => {
                            lines.push(format!("`{what}` is out of bounds for every launch (deferred): {why}"));
                            if self.warned.insert(r.span) {
                                self.warnings.push(bounds::never_deferred_warning(self.k, hb, &what, r.span, &why));
                            }
                        }
                        Verdict::Unproven { why, .. } => {
                            lines.push(format!("`{what}` not proven in bounds, checked by the simulator: {why}"));
                            if self.warned.insert(r.span) {
                                self.warnings.push(bounds::unproven_warning(self.k, hb, &what, r.span, &why));
                            }
                        }
                    }
                    if !outside {
                        out.extend(bounds::check_stmt(self.k, &self.env, &self.b, r.buf, &dims, write, r.span));
                    }
                }
                if outside {
                    let mut ex = crate::explain::CallExplain::new(&cx);
                    ex.bounds = lines;
                    ex.launch = launch_lines;
                    self.explain.push(ex);
                    return;
                }
                let mut d = dispatch(self.reg, &cx, &mut self.b);
                d.explain.bounds = lines;
                d.explain.launch = launch_lines;
                if let Some(chosen) = &d.explain.chosen {
                    push(out, LStmtKind::Comment(format!("{}.{} -> {chosen}", call.scope, call.op.name())));
                }
                out.extend(d.stmts);
                self.explain.push(d.explain);
                self.errors.extend(d.errors);
                self.warnings.extend(d.warnings);
            }
            StmtKind::Ptx(p) => {
                self.scalar_bounds(&p.exprs(), None, at, out);
                match crate::ptx::lower(self.k, &self.env, &mut self.b, at, self.opts, p, s.span) {
                    Ok(stmts) => out.extend(stmts),
                    Err(d) => self.errors.push(d),
                }
            }
            StmtKind::Async(a) => {
                // The barrier element is checked like a store (an mbarrier instruction updates it).
                let store = a.mbar().map(|r| (r.buf, r.index.as_slice()));
                self.scalar_bounds(&a.exprs(), store, at, out);
                match crate::asynch::lower(self.k, &self.env, &self.b, self.opts.arch, a, s.span) {
                    Ok(kind) => push(out, kind),
                    Err(d) => self.errors.push(d),
                }
            }
            StmtKind::Alloc(_) | StmtKind::ScopeId(_) | StmtKind::DeviceEntry => {}
        }
    }

    /// Bounds of the scalar loads `exprs` always evaluate and of the store
    /// `store` (module `bounds`): a provably out-of-bounds access is an error
    /// at its index, an unproven one a warning once and a check before the
    /// statement (appended to `out`).
    fn scalar_bounds(&mut self, exprs: &[&Expr], store: Option<(BufId, &[Expr])>, at: &Facts, out: &mut Vec<LStmt>) {
        let mut loads = Vec::new();
        for e in exprs {
            bounds::strict_loads(e, &mut loads);
        }
        let accesses = loads
            .into_iter()
            .map(|(b, idx, sp)| (b, idx, false, Some(sp)))
            .chain(store.map(|(b, idx)| (b, idx, true, None)));
        for (buf, indices, write, span) in accesses {
            let hb = self.k.buf(buf);
            let what = bounds::element_text(self.k, buf, indices);
            let at_dim = |d: usize| indices.get(d).map_or(Span::default(), |i| i.span);
            let dims: Vec<(&Expr, i64)> = indices.iter().map(|i| (i, 1)).collect();
            match bounds::element(self.k, &self.env, at, buf, indices) {
                Verdict::Inside => continue,
                Verdict::AtLaunch(conds) => {
                    let joined =
                        indices.first().map_or(Span::default(), |f| f.span.to(indices[indices.len() - 1].span));
                    launch_checks(&mut self.checks, conds, hb.shape.len(), &what, span.unwrap_or(joined));
                    continue;
                }
                Verdict::Outside(e) if !self.opts.defer_bounds => {
                    self.errors.push(bounds::outside_error(self.k, hb, &what, at_dim(e.dim), &e, write));
                    continue;
                }
                Verdict::Never { dim, why } if !self.opts.defer_bounds => {
                    self.errors.push(bounds::never_error(self.k, hb, &what, at_dim(dim), &why));
                    continue;
                }
                Verdict::Outside(e) => {
                    if self.warned.insert(at_dim(e.dim)) {
                        self.warnings.push(bounds::deferred_warning(self.k, hb, &what, at_dim(e.dim), &e, write));
                    }
                }
                Verdict::Never { dim, why } => {
                    if self.warned.insert(at_dim(dim)) {
                        self.warnings.push(bounds::never_deferred_warning(self.k, hb, &what, at_dim(dim), &why));
                    }
                }
                Verdict::Unproven { dim, why } => {
                    if self.warned.insert(at_dim(dim)) {
                        self.warnings.push(bounds::unproven_warning(self.k, hb, &what, at_dim(dim), &why));
                    }
                }
            }
            let joined = || indices.first().map_or(Span::default(), |f| f.span.to(indices[indices.len() - 1].span));
            let span = span.unwrap_or_else(joined);
            out.extend(bounds::check_stmt(self.k, &self.env, &self.b, buf, &dims, write, span));
        }
    }

    /// After an error in the statement defining `var`: `var` stands for an
    /// unknown value, so that its uses report their own errors and not a
    /// follow-up "`var` is not defined" (the kernel has errors; nothing is emitted).
    fn poison(&mut self, var: VarId, bound: &mut Vec<VarId>) {
        let hv = self.k.var(var);
        let lv = self.b.var(&hv.name, hv.dtype, None);
        self.env.vars.insert(var, LExpr::Var(lv));
        self.env.grain.insert(var, ExecScope::Thread);
        bound.push(var);
    }

    fn expr(&mut self, e: &Expr) -> Option<LExpr> {
        match expr::lower(self.k, &self.env, &self.b, e) {
            Ok(v) => Some(v),
            Err(d) => {
                self.errors.push(d);
                None
            }
        }
    }

    /// The value may differ between threads of a CTA.
    fn dep(&self, e: &Expr) -> bool {
        self.env.varies_within(self.k, e, ExecScope::Cta)
    }

    /// How a collective's result varies: a whole-warp reduction's, or a whole-warp shuffle's from one
    /// lane (`T.cuda.shfl(v, 0)`: CUTLASS's broadcast that lets the compiler see a warp-uniform
    /// value), is uniform within a warp, and is the value itself where that was uniform in a wider
    /// scope (the lane too, for the shuffle); any other collective's lanes may get different values.
    fn collective_grain(&self, op: &Collective) -> ExecScope {
        let warp_uniform = |g: Option<ExecScope>| g.map_or(ExecScope::Kernel, |g| g.min(ExecScope::Warp));
        match op {
            Collective::Shuffle { mode: ShuffleMode::Idx, value, lane, width: 32 }
                if !self.env.varies_within(self.k, lane, ExecScope::Warp) =>
            {
                warp_uniform(self.env.grain(self.k, value)).max(warp_uniform(self.env.grain(self.k, lane)))
            }
            Collective::WarpReduce { value, width: 32, .. } => warp_uniform(self.env.grain(self.k, value)),
            _ => ExecScope::Thread,
        }
    }

    /// A var defined from `values` varies as the narrowest of them.
    fn set_grain(&mut self, var: VarId, values: &[&Expr]) {
        match values.iter().filter_map(|e| self.env.grain(self.k, e)).max() {
            Some(g) => self.env.grain.insert(var, g),
            None => self.env.grain.remove(&var),
        };
    }

    /// Facts of the then- and else-branch of `if cond` (§1.3): each conjunct
    /// `lhs <op> rhs` that is affine in one tracked variable (a scope id, a
    /// loop variable) narrows its range in the then-branch; the else-branch
    /// is narrowed by the complement of a single such conjunct. A conjunct
    /// that is not captured makes the active set untracked when it depends on
    /// the thread, and every range inexact when it mentions a variable.
    fn narrow(&self, cond: &Expr, at: &Facts) -> (Facts, Facts) {
        let (mut then_f, mut else_f) = (at.clone(), at.clone());
        let mut atoms = Vec::new();
        conjuncts(cond, &mut atoms);
        let solved: Vec<Option<(Subject, Cond)>> = atoms.iter().map(|a| self.solve(a)).collect();
        let why = || {
            format!(
                "the enclosing `if {}` selects threads in a way tirx cannot track (tracked: conjunctions of `scope_id <op> constant`, `scope_id % m == r`)",
                crate::text::top_text(self.k, cond)
            )
        };
        for (atom, s) in atoms.iter().zip(&solved) {
            if !s.is_some_and(|(v, c)| self.restrict(&mut then_f, v, c)) {
                self.not_captured(&mut then_f, atom, &why);
            }
            then_f.guards.extend(self.guards(atom, false, at));
        }
        if mentions_var(cond) {
            let complement = match solved.as_slice() {
                [Some((v, c))] => c.complement().map(|c| (*v, c)),
                _ => None,
            };
            if !complement.is_some_and(|(v, c)| self.restrict(&mut else_f, v, c)) {
                self.not_captured(&mut else_f, cond, &why);
            }
            if let [atom] = atoms.as_slice() {
                else_f.guards.extend(self.guards(atom, true, at));
            }
        }
        (then_f, else_f)
    }

    /// `var - begin` and `begin + extent - 1 - var`, ≥ 0 in the body of a loop whose
    /// trip count is known at run time only (when the bounds are affine).
    fn loop_guards(&self, var: VarId, begin: &Expr, extent: &Expr) -> Vec<crate::affine::Affine> {
        let (Some(b), Some(e)) = (expr::affine(&self.env, begin), expr::affine(&self.env, extent)) else {
            return vec![];
        };
        let v = crate::affine::Affine::var(var);
        let below = v.clone().minus(b.clone());
        let above = b.plus(e).and_then(|x| x.minus(crate::affine::Affine::constant(1))).and_then(|x| x.minus(v));
        [below, above].into_iter().flatten().collect()
    }

    /// The affine forms ≥ 0 a comparison `l <op> r` guarantees where it holds (`negated`:
    /// where it does not), when both sides are affine and a scalar parameter or a `let`
    /// value is involved (the facts `at` track the other variables' ranges themselves).
    fn guards(&self, e: &Expr, negated: bool, at: &Facts) -> Vec<crate::affine::Affine> {
        let ExprKind::Binary(op, l, r) = &e.kind else { return vec![] };
        let (Some(l), Some(r)) = (expr::affine(&self.env, l), expr::affine(&self.env, r)) else { return vec![] };
        let op = match (op, negated) {
            (op, false) => *op,
            (BinOp::Lt, true) => BinOp::Ge,
            (BinOp::Le, true) => BinOp::Gt,
            (BinOp::Gt, true) => BinOp::Le,
            (BinOp::Ge, true) => BinOp::Lt,
            _ => return vec![],
        };
        let one = crate::affine::Affine::constant(1);
        let forms = match op {
            BinOp::Lt => vec![r.minus(l).and_then(|d| d.minus(one))],
            BinOp::Le => vec![r.minus(l)],
            BinOp::Gt => vec![l.minus(r).and_then(|d| d.minus(one))],
            BinOp::Ge => vec![l.minus(r)],
            BinOp::Eq => vec![r.clone().minus(l.clone()), l.minus(r)],
            _ => vec![],
        };
        // Kept where a variable has no range of its own to narrow: a parameter (a run-time
        // size), or a `let` value (`first = b // cn * rows`: a product of ids and sizes).
        let untracked = |v: &VarId| {
            self.env.sym.is_param(*v) || (!self.env.scope_vars.contains_key(v) && !at.values.contains_key(v))
        };
        forms.into_iter().flatten().filter(|f| f.vars().iter().any(untracked)).collect()
    }

    /// `e` restricts values in a way the facts do not capture.
    fn not_captured(&self, f: &mut Facts, e: &Expr, why: &dyn Fn() -> String) {
        if self.dep(e) {
            f.active.mark_untracked(why());
        }
        if mentions_var(e) {
            f.uncaptured = true;
        }
    }

    /// Narrows the range of the subject's variable in `f` by `c`; false when
    /// the variable is not tracked or the result is not one strided range.
    fn restrict(&self, f: &mut Facts, subj: Subject, c: Cond) -> bool {
        let Subject { var: v, shift, div } = subj;
        let r = match c {
            Cond::Always => return true,
            Cond::In(r) => r,
            // `q != x` is a range when `x` is an end of q's current range (or outside it).
            Cond::Except(x) => {
                let Some(b) = self.env.var_bounds(f, v) else { return false };
                let q = |v: i64| v.checked_add(shift).and_then(|v| floor_div(v, div));
                let (Some(lo), Some(hi)) = (q(b.lo), q(b.hi)) else { return false };
                if x < lo || x > hi {
                    return true;
                } else if x == lo {
                    IdRange::Range(x.saturating_add(1), i64::MAX)
                } else if x == hi {
                    IdRange::Range(i64::MIN, x)
                } else {
                    return false;
                }
            }
        };
        let Some(r) = subj.on_var(r) else { return false };
        let current = match self.env.scope_vars.get(&v) {
            // A CTA id of a multi-dim grid is narrowed by value.
            Some(&(ScopeIdKind::CtaId, _, true, Some(Hw::BlockIdx(d)))) => f.values.get(&v).copied().or_else(|| {
                let e = f.active.grid.get(d as usize)?;
                Some(AxisRange::full(i64::from(*e)))
            }),
            Some(&(kind, dim, multi, _)) => return f.active.narrow(kind, dim, multi, r),
            None => f.values.get(&v).copied(),
        };
        match current.and_then(|a| a.narrow(r)) {
            Some(n) => {
                f.values.insert(v, n);
                true
            }
            None => false,
        }
    }

    /// `lhs <op> rhs` with `lhs - rhs` affine in one term: `a·v + k`,
    /// `a·⌊(v + s) / c⌋ + k`, or `(v + s) % m` compared for (in)equality →
    /// what it says of `v` (or of the quotient).
    fn solve(&self, e: &Expr) -> Option<(Subject, Cond)> {
        let ExprKind::Binary(op, l, r) = &e.kind else { return None };
        if !matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne) {
            return None;
        }
        let d = expr::affine(&self.env, l)?.minus(expr::affine(&self.env, r)?)?;
        let [(t, a)] = d.terms.as_slice() else { return None };
        let k = d.constant;
        match t {
            Term::Var(v) => Some((Subject::var(*v), linear(*a, k, *op)?)),
            Term::FloorMod(x, m) => {
                let [(Term::Var(v), 1)] = x.terms.as_slice() else { return None };
                // a·(x mod m) + k = 0 ⇔ x mod m = -k / a, and x = v + s.
                let nk = k.checked_neg()?;
                let res = (nk.checked_rem(*a)? == 0).then(|| nk / a).filter(|r| (0..*m).contains(r));
                let s = x.constant;
                let cond = match (op, res) {
                    (BinOp::Eq, Some(r)) => Cond::In(IdRange::Residue(*m, (r - s).rem_euclid(*m))),
                    (BinOp::Eq, None) => Cond::NEVER,
                    (BinOp::Ne, None) => Cond::Always,
                    (BinOp::Ne, Some(r)) if *m == 2 => Cond::In(IdRange::Residue(2, (1 - r - s).rem_euclid(2))),
                    _ => return None,
                };
                Some((Subject::var(*v), cond))
            }
            Term::FloorDiv(x, c) => {
                let [(Term::Var(v), 1)] = x.terms.as_slice() else { return None };
                Some((Subject { var: *v, shift: x.constant, div: *c }, linear(*a, k, *op)?))
            }
        }
    }
}

/// Records the launch checks of an access (`what`, at `span`) of a buffer of
/// `rank` dims, once per condition and access; returns explain's lines for them.
fn launch_checks(
    checks: &mut Vec<LaunchCheck>,
    conds: Vec<bounds::LaunchCond>,
    rank: usize,
    what: &str,
    span: Span,
) -> Vec<String> {
    let mut lines = Vec::new();
    for c in conds {
        let what = format!("{} of `{what}`", bounds::dim_nouns(rank, c.dim).1);
        lines.push(format!("{} ({what})", c.text));
        // One check per condition, naming every access that relies on it.
        match checks.iter_mut().find(|x| x.cond == c.cond) {
            Some(x) if !x.what.contains(&what) => x.what = format!("{}; {what}", x.what),
            Some(_) => {}
            None => checks.push(LaunchCheck { cond: c.cond, what, span }),
        }
    }
    lines
}

/// What a condition is about: `⌊(var + shift) / div⌋` (`div ≥ 1`; the variable
/// itself for `shift = 0, div = 1`): `tid // 32 == 1` is about `tid`'s warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subject {
    var: VarId,
    shift: i64,
    div: i64,
}

impl Subject {
    fn var(var: VarId) -> Subject {
        Subject { var, shift: 0, div: 1 }
    }

    /// A range of the subject as a range of its variable: `q ∈ [lo, hi)` ⇔
    /// `var ∈ [div·lo - shift, div·hi - shift)`; residues only of the variable itself.
    fn on_var(self, r: IdRange) -> Option<IdRange> {
        if (self.shift, self.div) == (0, 1) {
            return Some(r);
        }
        let IdRange::Range(lo, hi) = r else { return None };
        let scale = |q: i64| {
            if q == i64::MIN || q == i64::MAX {
                q
            } else {
                q.saturating_mul(self.div).saturating_sub(self.shift)
            }
        };
        Some(IdRange::Range(scale(lo), scale(hi)))
    }
}

/// Drops the diagnostics equal to an earlier one.
fn dedup(ds: &mut Vec<Diagnostic>) {
    let mut kept: Vec<Diagnostic> = Vec::with_capacity(ds.len());
    for d in ds.drain(..) {
        if !kept.contains(&d) {
            kept.push(d);
        }
    }
    *ds = kept;
}

/// The most trips a `T.unroll` loop is unrolled at lowering (when its variable indexes registers).
const MAX_UNROLL: i64 = 64;

/// `v` occurs in an index of a register (`local`) buffer in `body`: a tile call's region or a
/// scalar load or store.
fn indexes_registers(k: &Kernel, v: VarId, body: &[Stmt]) -> bool {
    let local = |b: BufId| k.buf(b).scope == MemScope::Local;
    // A scalar load of a register at an index that uses `v`.
    let in_expr = |e: &Expr| {
        e.any(&mut |x| matches!(&x.kind, ExprKind::Load(b, idx) if local(*b) && idx.iter().any(|i| i.uses(v))))
    };
    body.iter().any(|s| match &s.kind {
        StmtKind::For { begin, extent, body, .. } => in_expr(begin) || in_expr(extent) || indexes_registers(k, v, body),
        StmtKind::While { cond, body } => in_expr(cond) || indexes_registers(k, v, body),
        StmtKind::Atomic { atomic, .. } => atomic.exprs().into_iter().any(in_expr),
        StmtKind::If { cond, then_body, else_body } => {
            in_expr(cond) || indexes_registers(k, v, then_body) || indexes_registers(k, v, else_body)
        }
        StmtKind::Let { value, .. } | StmtKind::Evaluate(value) => in_expr(value),
        StmtKind::Store { buf, indices, value } => (local(*buf) && indices.iter().any(|x| x.uses(v))) || in_expr(value),
        StmtKind::Tile(call) => call.args.iter().any(|a| match a {
            TileArg::Region(r) => local(r.buf) && r.ranges.iter().any(|x| x.begin.uses(v)),
            TileArg::Scalar(e) => in_expr(e),
            _ => false,
        }),
        _ => false,
    })
}

/// Some variable occurs in `e`.
fn mentions_var(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x.kind, ExprKind::Var(_)))
}

/// The constant strides of a global buffer whose strided layout spans more elements than
/// it holds (rows of 32 stored 40 apart): what the launch tells array libraries, which pass
/// the logical array. A layout that permutes its elements without gaps keeps taking the
/// storage's bytes as they are (docs/python.md §5.3).
fn padded_strides(hb: &tirx_ir::hir::Buffer) -> Option<Vec<SymExpr>> {
    let strides = lay::plain_strides(&hb.layout, &hb.shape)?;
    let span = hb.shape.iter().zip(&strides).try_fold(1i64, |acc, (&n, &s)| acc.checked_add((n - 1).checked_mul(s)?));
    let elems = hb.shape.iter().try_fold(1i64, |acc, &n| acc.checked_mul(n));
    (span != elems).then(|| strides.into_iter().map(SymExpr::Int).collect())
}

fn index_type(elems: i64) -> DType {
    if elems >= I64_INDEX_ELEMS {
        DType::I64
    } else {
        DType::I32
    }
}

fn used_vars(body: &[Stmt], out: &mut HashSet<VarId>) {
    fn ex(e: &Expr, out: &mut HashSet<VarId>) {
        e.any(&mut |x| {
            if let ExprKind::Var(v) = x.kind {
                out.insert(v);
            }
            false
        });
    }
    for s in body {
        match &s.kind {
            StmtKind::For { begin, extent, body, .. } => {
                ex(begin, out);
                ex(extent, out);
                used_vars(body, out);
            }
            StmtKind::If { cond, then_body, else_body } => {
                ex(cond, out);
                used_vars(then_body, out);
                used_vars(else_body, out);
            }
            StmtKind::While { cond, body } => {
                ex(cond, out);
                used_vars(body, out);
            }
            StmtKind::Atomic { atomic, .. } => atomic.exprs().into_iter().for_each(|e| ex(e, out)),
            StmtKind::Let { value, .. } | StmtKind::Evaluate(value) => ex(value, out),
            StmtKind::Printf { args, .. } => args.iter().for_each(|a| ex(a, out)),
            StmtKind::Store { indices, value, .. } => {
                indices.iter().for_each(|i| ex(i, out));
                ex(value, out);
            }
            StmtKind::Tile(call) => {
                for a in &call.args {
                    match a {
                        tirx_ir::hir::TileArg::Region(r) => r.ranges.iter().for_each(|rg| ex(&rg.begin, out)),
                        tirx_ir::hir::TileArg::Scalar(e) => ex(e, out),
                        tirx_ir::hir::TileArg::Barrier(b) => b.index.iter().for_each(|e| ex(e, out)),
                        tirx_ir::hir::TileArg::Mask(m) => ex(&m.cond, out),
                        tirx_ir::hir::TileArg::Attr(_) | tirx_ir::hir::TileArg::None => {}
                    }
                }
            }
            StmtKind::Collective { op, .. } => op.exprs().into_iter().for_each(|e| ex(e, out)),
            StmtKind::Ptx(p) => p.exprs().into_iter().for_each(|e| ex(e, out)),
            StmtKind::Async(a) => a.exprs().into_iter().for_each(|e| ex(e, out)),
            StmtKind::Alloc(_) | StmtKind::ScopeId(_) | StmtKind::Barrier(_) | StmtKind::DeviceEntry => {}
        }
    }
}

/// Where the grid is declared: the first `T.cta_id` with extents, else the kernel.
fn grid_span(defs: &[&ScopeIdDef], kernel: Span) -> Span {
    defs.iter().find(|d| d.kind == ScopeIdKind::CtaId && d.extents.is_some()).map_or(kernel, |d| d.span)
}
