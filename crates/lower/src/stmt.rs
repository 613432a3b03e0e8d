//! HIR statements → LIR, in program order: buffers to flat arrays (parameters
//! first, views aliasing their base), scope ids to kernel-level lets of
//! hardware ids, loops/ifs/lets/stores/barriers as such, and each tile call
//! through the dispatcher with the active-thread set of its program point.

use crate::build::{Builder, Hw};
use crate::dispatch::{dispatch, CallCx, Registry};
use crate::explain::CallExplain;
use crate::scope::{resolve_launch, Active, IdRange, Launch, ScopeView, TidKind};
use crate::{addr, expr, lay, LowerOptions, Lowered};
use std::collections::{HashMap, HashSet};
use tirx_ir::hir::{
    BinOp, BufId, BufferOrigin, Expr, ExprKind, ForKind, Kernel, MemScope, ScopeIdDef, ScopeIdKind, Stmt, StmtKind,
    VarId,
};
use tirx_ir::lir::{LBuf, LBufId, LExpr, LKernel, LStmt, LStmtKind, Space};
use tirx_ir::{DType, Diagnostic};
use tirx_layout::ExecScope;

/// What lowered code refers to: HIR buffers → flat arrays, HIR vars → values.
#[derive(Default)]
pub struct Env {
    bufs: HashMap<BufId, (LBufId, DType)>,
    vars: HashMap<VarId, LExpr>,
    /// Scope-id vars: (kind, dim, declared with several dims).
    scope_vars: HashMap<VarId, (ScopeIdKind, usize, bool)>,
    /// Per var, the narrowest scope its value can differ between (`Thread` for
    /// lane-derived values, `Warpgroup` for `wg * 128`, `Cta` for cta ids);
    /// absent = the same in every thread.
    grain: HashMap<VarId, ExecScope>,
}

impl Env {
    /// The flat array of a buffer and the index type of its addressing.
    pub fn lbuf(&self, b: BufId) -> Option<(LBufId, DType)> {
        self.bufs.get(&b).copied()
    }
    pub fn var(&self, v: VarId) -> Option<LExpr> {
        self.vars.get(&v).cloned()
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

/// Buffers with at least this many elements are addressed with 64-bit indices.
const I64_INDEX_ELEMS: i64 = 1 << 31;

pub fn thread_id(b: &mut Builder, kind: TidKind) -> LExpr {
    match kind {
        TidKind::Lane => b.hw(Hw::Lane, "lane"),
        TidKind::TidInWg => b.hw(Hw::TidInWg, "tid_in_wg"),
        TidKind::Tx => b.hw(Hw::Tx, "tid"),
    }
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
    };
    let params = lw.declare_buffers();
    lw.errors.extend(crate::smem::check(k, opts.arch));
    lw.bind_scope_vars(&defs, &launch);
    let active = Active::at_entry(&launch);
    let body = lw.block(&k.body, &active);
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
    let explain = lw.explain.clone();
    Outcome { lowered: Ok(Lowered { lir, explain: lw.explain, warnings: lw.warnings }), explain }
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
}

impl Lowerer<'_> {
    /// Parameters in order as global arrays, then shared/local allocations;
    /// views alias the array of their base.
    fn declare_buffers(&mut self) -> Vec<LBufId> {
        let k = self.k;
        let mut params = Vec::new();
        for p in &k.params {
            if let Some(id) = p.buffer {
                let lb = self.new_buf(id, Space::Global);
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
                    self.new_buf(id, Space::Shared);
                }
                (BufferOrigin::Alloc, MemScope::Local) => {
                    self.new_buf(id, Space::Local);
                }
                (BufferOrigin::Alloc, MemScope::Global) => self.errors.push(
                    Diagnostic::error(
                        hb.span,
                        format!("`{}`: global buffers cannot be allocated inside a kernel", hb.name),
                    )
                    .with_help("pass it as a kernel parameter (`T.match_buffer`)"),
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

    fn new_buf(&mut self, id: BufId, space: Space) -> LBufId {
        let hb = self.k.buf(id);
        let elems = lay::memory_span(&hb.layout, &hb.shape).unwrap_or_else(|m| {
            self.errors.push(Diagnostic::error(hb.span, format!("`{}`: cannot size its storage: {m}", hb.name)));
            1
        });
        let lb = self.b.add_buf(LBuf {
            name: hb.name.clone(),
            dtype: hb.dtype,
            space,
            elems,
            shape: hb.shape.clone(),
            dynamic: hb.scope == MemScope::SharedDyn,
        });
        self.env.bufs.insert(id, (lb, index_type(elems)));
        lb
    }

    /// Scope-id vars the kernel reads become kernel-level lets of hardware ids.
    fn bind_scope_vars(&mut self, defs: &[&ScopeIdDef], launch: &Launch) {
        let mut used = HashSet::new();
        used_vars(&self.k.body, &mut used);
        let one_d_block = launch.block[1] == 1 && launch.block[2] == 1;
        for d in defs {
            let multi = d.vars.len() > 1;
            for (dim, &v) in d.vars.iter().enumerate() {
                self.env.scope_vars.insert(v, (d.kind, dim, multi));
                self.env.grain.insert(v, d.kind.binding().1);
                if !used.contains(&v) {
                    continue;
                }
                let hw = match d.kind {
                    ScopeIdKind::CtaId | ScopeIdKind::CtaIdInCluster => Hw::BlockIdx(dim as u8),
                    ScopeIdKind::ThreadId if one_d_block => Hw::Tx,
                    ScopeIdKind::ThreadId => Hw::ThreadIdx(dim as u8),
                    ScopeIdKind::LaneId => Hw::Lane,
                    ScopeIdKind::WarpId => Hw::WarpId,
                    ScopeIdKind::WarpgroupId => Hw::WgId,
                    ScopeIdKind::WarpIdInWg => Hw::WarpInWg,
                    ScopeIdKind::ThreadIdInWg => Hw::TidInWg,
                    ScopeIdKind::ClusterId => {
                        self.errors
                            .push(Diagnostic::error(d.span, "`T.cluster_id` is not supported yet (no cluster launch)"));
                        continue;
                    }
                };
                let var = self.k.var(v);
                let val = self.b.hw(hw, &var.name);
                let val = self.b.convert(val, var.dtype);
                self.env.vars.insert(v, val);
            }
        }
    }

    fn block(&mut self, body: &[Stmt], active: &Active) -> Vec<LStmt> {
        let mut out = Vec::new();
        let mut bound = Vec::new();
        for s in body {
            self.stmt(s, active, &mut out, &mut bound);
        }
        // Lets and loop vars go out of scope with their block.
        for v in bound {
            self.env.vars.remove(&v);
        }
        out
    }

    fn stmt(&mut self, s: &Stmt, active: &Active, out: &mut Vec<LStmt>, bound: &mut Vec<VarId>) {
        let push = |out: &mut Vec<LStmt>, kind| out.push(LStmt::new(kind, s.span));
        match &s.kind {
            StmtKind::For { var, begin, extent, kind, body } => {
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
                    out.extend(self.block(body, active));
                    self.env.vars.remove(var);
                    return;
                }
                let range = match (&b0, &n) {
                    (LExpr::Int(a, _), LExpr::Int(e, _)) => Some((*a, a + e - 1)),
                    _ => None,
                };
                let lv = self.b.var(&hv.name, hv.dtype, range);
                self.set_grain(*var, &[begin, extent]);
                self.env.vars.insert(*var, LExpr::Var(lv));
                let body = self.block(body, active);
                self.env.vars.remove(var);
                if !body.is_empty() {
                    push(out, LStmtKind::For { var: lv, begin: b0, extent: n, unroll: *kind == ForKind::Unroll, body });
                }
            }
            StmtKind::If { cond, then_body, else_body } => {
                let Some(c) = self.expr(cond) else { return };
                let (then_a, else_a) = self.narrow(cond, active);
                match c {
                    LExpr::Bool(true) => out.extend(self.block(then_body, active)),
                    LExpr::Bool(false) => out.extend(self.block(else_body, active)),
                    c => {
                        let t = self.block(then_body, &then_a);
                        let e = self.block(else_body, &else_a);
                        if !t.is_empty() || !e.is_empty() {
                            push(out, LStmtKind::If { cond: c, then_body: t, else_body: e });
                        }
                    }
                }
            }
            StmtKind::Let { var, value } => {
                let Some(v) = self.expr(value) else { return };
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
                    self.env.vars.insert(*var, LExpr::Var(lv));
                }
                bound.push(*var);
            }
            StmtKind::Store { buf, indices, value } => {
                let idx: Option<Vec<LExpr>> = indices.iter().map(|i| self.expr(i)).collect();
                let (Some(idx), Some(v)) = (idx, self.expr(value)) else { return };
                match addr::element(self.k, &self.env, &self.b, *buf, &idx, false) {
                    Ok((lb, index)) => {
                        let v = self.b.convert(v, self.k.buf(*buf).dtype);
                        push(out, LStmtKind::Store { buf: lb, index, value: v });
                    }
                    Err(m) => self.errors.push(Diagnostic::error(s.span, m).with_label("direct store")),
                }
            }
            StmtKind::Barrier(kind) => push(out, LStmtKind::Barrier(*kind)),
            StmtKind::Tile(call) => {
                let view = ScopeView::new(call.scope, active);
                let cx = CallCx { kernel: self.k, call, scope: &view, opts: self.opts, env: &self.env };
                let d = dispatch(self.reg, &cx, &mut self.b);
                if let Some(chosen) = &d.explain.chosen {
                    push(out, LStmtKind::Comment(format!("{}.{} -> {chosen}", call.scope, call.op.name())));
                }
                out.extend(d.stmts);
                self.explain.push(d.explain);
                self.errors.extend(d.errors);
                self.warnings.extend(d.warnings);
            }
            StmtKind::Alloc(_) | StmtKind::ScopeId(_) | StmtKind::DeviceEntry => {}
        }
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

    /// A var defined from `values` varies as the narrowest of them.
    fn set_grain(&mut self, var: VarId, values: &[&Expr]) {
        match values.iter().filter_map(|e| self.env.grain(self.k, e)).max() {
            Some(g) => self.env.grain.insert(var, g),
            None => self.env.grain.remove(&var),
        };
    }

    /// Active sets of the then- and else-branch of `if cond` (§1.3).
    fn narrow(&self, cond: &Expr, active: &Active) -> (Active, Active) {
        let (mut then_a, mut else_a) = (active.clone(), active.clone());
        let mut atoms = Vec::new();
        conjuncts(cond, &mut atoms);
        let ranges: Vec<Option<(VarId, IdRange)>> = atoms.iter().map(|a| self.atom(a)).collect();
        let untracked = || {
            format!(
                "the enclosing `if {}` selects threads in a way tirx cannot track (tracked: `scope_id <op> constant` conjunctions, `scope_id % m == r`)",
                crate::explain::top_text(self.k, cond)
            )
        };
        let mut then_ok = true;
        for (atom, r) in atoms.iter().zip(&ranges) {
            match r {
                Some((v, r)) => {
                    let (kind, dim, multi) = self.env.scope_vars[v];
                    then_ok &= then_a.narrow(kind, dim, multi, *r);
                }
                None if self.dep(atom) => then_ok = false,
                None => {}
            }
        }
        if !then_ok {
            then_a.mark_untracked(untracked());
        }
        // Else-branch: the complement of a single one-sided range stays a range.
        if self.dep(cond) {
            let complement = match ranges.as_slice() {
                [Some((v, IdRange::Range(lo, hi)))] if *lo == i64::MIN => Some((*v, IdRange::Range(*hi, i64::MAX))),
                [Some((v, IdRange::Range(lo, hi)))] if *hi == i64::MAX => Some((*v, IdRange::Range(i64::MIN, *lo))),
                _ => None,
            };
            let ok = complement.is_some_and(|(v, r)| {
                let (kind, dim, multi) = self.env.scope_vars[&v];
                else_a.narrow(kind, dim, multi, r)
            });
            if !ok {
                else_a.mark_untracked(untracked());
            }
        }
        (then_a, else_a)
    }

    /// `scope_var (+ c) <op> const` or `scope_var % m == r` → the id range it selects.
    fn atom(&self, e: &Expr) -> Option<(VarId, IdRange)> {
        let ExprKind::Binary(op, l, r) = &e.kind else { return None };
        let konst = |e: &Expr| match e.kind {
            ExprKind::Int(v) => Some(v),
            _ => None,
        };
        if let (BinOp::Eq, ExprKind::Binary(BinOp::FloorMod, v, m)) = (op, &l.kind) {
            let (v, m, res) = (self.scope_var(v)?.0, konst(m)?, konst(r)?);
            return Some((v, IdRange::Residue(m, res)));
        }
        let (side, c, op) = match (konst(l), konst(r)) {
            (None, Some(c)) => (l, c, *op),
            (Some(c), None) => (r, c, flip(*op)?),
            _ => return None,
        };
        let (v, shift) = self.scope_var(side)?;
        let c = c - shift;
        let range = match op {
            BinOp::Lt => IdRange::Range(i64::MIN, c),
            BinOp::Le => IdRange::Range(i64::MIN, c + 1),
            BinOp::Gt => IdRange::Range(c + 1, i64::MAX),
            BinOp::Ge => IdRange::Range(c, i64::MAX),
            BinOp::Eq => IdRange::Range(c, c + 1),
            _ => return None,
        };
        Some((v, range))
    }

    /// `v` or `v ± c` for a scope-id var `v`: (v, c).
    fn scope_var(&self, e: &Expr) -> Option<(VarId, i64)> {
        let a = expr::affine(&self.env, e)?;
        match a.terms.as_slice() {
            [(v, 1)] if self.env.scope_vars.contains_key(v) => Some((*v, a.constant)),
            _ => None,
        }
    }
}

fn flip(op: BinOp) -> Option<BinOp> {
    Some(match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        BinOp::Eq => BinOp::Eq,
        BinOp::Ne => BinOp::Ne,
        _ => return None,
    })
}

fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary(BinOp::And, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        ExprKind::Binary(BinOp::BitAnd, a, b) if e.dtype == DType::Bool => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        _ => out.push(e),
    }
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
        match &e.kind {
            ExprKind::Var(v) => {
                out.insert(*v);
            }
            ExprKind::Binary(_, a, b) => {
                ex(a, out);
                ex(b, out);
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => ex(a, out),
            ExprKind::Select(c, a, b) => {
                ex(c, out);
                ex(a, out);
                ex(b, out);
            }
            ExprKind::Call(_, args) | ExprKind::Load(_, args) => args.iter().for_each(|a| ex(a, out)),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => {}
        }
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
            StmtKind::Let { value, .. } => ex(value, out),
            StmtKind::Store { indices, value, .. } => {
                indices.iter().for_each(|i| ex(i, out));
                ex(value, out);
            }
            StmtKind::Tile(call) => {
                for a in &call.args {
                    match a {
                        tirx_ir::hir::TileArg::Region(r) => r.ranges.iter().for_each(|rg| ex(&rg.begin, out)),
                        tirx_ir::hir::TileArg::Scalar(e) => ex(e, out),
                        tirx_ir::hir::TileArg::None => {}
                    }
                }
            }
            StmtKind::Alloc(_) | StmtKind::ScopeId(_) | StmtKind::Barrier(_) | StmtKind::DeviceEntry => {}
        }
    }
}
