//! HIR back to script text. The output is a complete script (imports, named
//! layouts, kernel) whose parse gives the same HIR up to spans: other
//! constants are inlined, every buffer declaration spells out its
//! dtype/scope (and layout unless row-major), regions are written out in
//! full, and literals carry their dtype whenever the parser would otherwise
//! type or fold them differently. Layouts print through `tirx_layout`'s
//! `Display` (`S[(32, 8):(1@laneid, 1)]`) wrapped in `TileLayout(...)`.

use crate::buffers::fmt_shape;
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;
use tirx_ir::hir::*;
use tirx_ir::DType;
use tirx_layout::{Axis, ExecScope, Layout, TileLayout};

/// The script text of a kernel.
pub fn print_kernel(k: &Kernel) -> String {
    let mut p = Printer { k, out: String::new(), used: HashSet::new(), layouts: vec![] };
    p.collect_used(&k.body);
    p.name_layouts();
    p.kernel();
    p.out
}

struct Printer<'k> {
    k: &'k Kernel,
    out: String,
    /// Variables referenced by some expression.
    used: HashSet<VarId>,
    /// Non-default buffer layouts, named at module level (`layout_0 = ...`)
    /// where no kernel name (a buffer called `R`, a variable called `tx`) can
    /// shadow the layout builders or axis names.
    layouts: Vec<(String, Layout)>,
}

/// Python precedence levels (higher binds tighter).
mod prec {
    pub const OR: u8 = 1;
    pub const AND: u8 = 2;
    pub const NOT: u8 = 3;
    pub const CMP: u8 = 4;
    pub const BITOR: u8 = 5;
    pub const BITXOR: u8 = 6;
    pub const BITAND: u8 = 7;
    pub const SHIFT: u8 = 8;
    pub const ADD: u8 = 9;
    pub const MUL: u8 = 10;
    pub const UNARY: u8 = 11;
    pub const ATOM: u8 = 13;
}

impl Printer<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn kernel(&mut self) {
        self.line(0, "from tvm.script import tirx as T");
        self.line(0, "from tvm.script.tirx import tile as Tx");
        let imports = self.layout_imports();
        if !imports.is_empty() {
            self.line(0, &format!("from tvm.tirx.layout import {}", imports.join(", ")));
        }
        if !self.layouts.is_empty() {
            self.out.push('\n');
            let defs: Vec<String> = self.layouts.iter().map(|(n, l)| format!("{n} = {}", layout_text(l))).collect();
            for d in defs {
                self.line(0, &d);
            }
        }
        self.out.push_str("\n\n");
        self.line(0, "@T.prim_func");
        let params: Vec<String> = self.k.params.iter().map(|p| self.param(p)).collect();
        self.line(0, &format!("def {}({}):", self.k.name, params.join(", ")));
        let mut any = false;
        for (i, b) in self.k.buffers.iter().enumerate() {
            if b.origin != BufferOrigin::Param {
                continue;
            }
            let Some(p) = self.k.params.iter().find(|p| p.buffer == Some(BufId(i as u32))) else { continue };
            if p.name == b.name {
                continue; // annotated `name: T.Buffer(...)`
            }
            let decl = format!("{} = T.match_buffer({}, {})", b.name, p.name, self.buffer_args(b, true));
            self.line(1, &decl);
            any = true;
        }
        for a in &self.k.assumes {
            let t = format!("T.assume({})", self.expr(a, 0));
            self.line(1, &t);
            any = true;
        }
        if self.k.body.is_empty() && !any {
            self.line(1, "pass");
        }
        self.block(&self.k.body, 1);
    }

    fn param(&self, p: &Param) -> String {
        if let Some(v) = p.scalar {
            return format!("{}: T.{}", p.name, self.k.var(v).dtype.name());
        }
        match p.buffer {
            Some(b) if self.k.buf(b).name == p.name => {
                format!("{}: T.Buffer({})", p.name, self.buffer_args(self.k.buf(b), true))
            }
            _ => format!("{}: T.handle", p.name),
        }
    }

    /// `shape, "dtype"[, scope=...][, layout=...]`
    fn buffer_args(&self, b: &Buffer, scope_kw: bool) -> String {
        let mut s = format!("{}, \"{}\"", self.shape(b), b.dtype.name());
        if scope_kw && b.scope != MemScope::Global {
            let _ = write!(s, ", scope=\"{}\"", b.scope.name());
        }
        s.push_str(&self.layout_kw(b));
        s
    }

    /// `(n, 128)`: dim 0 of a symbolic buffer is its expression.
    fn shape(&self, b: &Buffer) -> String {
        let Some(e) = &b.dyn_outer else { return fmt_shape(&b.shape) };
        let mut dims = vec![self.expr(e, 0)];
        dims.extend(b.shape.iter().skip(1).map(i64::to_string));
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }

    /// `, layout=...` unless the buffer has the default row-major layout.
    fn layout_kw(&self, b: &Buffer) -> String {
        if is_default(b) {
            String::new()
        } else {
            format!(", layout={}", self.layout_name(&b.layout))
        }
    }

    fn block(&mut self, body: &[Stmt], depth: usize) {
        if body.is_empty() {
            self.line(depth, "pass");
        }
        for s in body {
            self.stmt(s, depth);
        }
    }

    fn stmt(&mut self, s: &Stmt, depth: usize) {
        match &s.kind {
            StmtKind::DeviceEntry => self.line(depth, "T.device_entry()"),
            StmtKind::Barrier(BarrierKind::Cta) => self.line(depth, "T.cuda.cta_sync()"),
            StmtKind::Barrier(BarrierKind::Warp) => self.line(depth, "T.cuda.warp_sync()"),
            StmtKind::Barrier(BarrierKind::Fence) => self.line(depth, "T.cuda.thread_fence()"),
            StmtKind::ScopeId(d) => {
                let t = self.scope_id(d);
                self.line(depth, &t);
            }
            StmtKind::Alloc(b) => {
                let t = self.alloc(*b);
                self.line(depth, &t);
            }
            StmtKind::Let { var, value } => {
                let name = &self.k.var(*var).name;
                let t = if is_lit(value) {
                    format!("{name}: T.let = {}", self.expr(value, 0))
                } else {
                    format!("{name} = {}", self.expr(value, 0))
                };
                self.line(depth, &t);
            }
            StmtKind::Evaluate(e) => {
                let t = format!("T.evaluate({})", self.expr(e, 0));
                self.line(depth, &t);
            }
            StmtKind::Printf { format, args } => {
                let mut t = format!("T.cuda.printf({}", quote(format));
                for a in args {
                    t.push_str(&format!(", {}", self.expr(a, 0)));
                }
                self.line(depth, &format!("{t})"));
            }
            StmtKind::Store { buf, indices, value } => {
                let idx: Vec<String> = indices.iter().map(|e| self.expr(e, 0)).collect();
                let t = format!("{}[{}] = {}", self.k.buf(*buf).name, idx.join(", "), self.expr(value, 0));
                self.line(depth, &t);
            }
            StmtKind::For { var, begin, extent, kind, body } => {
                let f = match kind {
                    ForKind::Serial => "range",
                    ForKind::Unroll => "T.unroll",
                };
                let bounds = match (&begin.kind, &extent.kind) {
                    (ExprKind::Int(0), _) if begin.dtype == extent.dtype => self.expr(extent, 0),
                    (ExprKind::Int(b), ExprKind::Int(e)) if begin.dtype == DType::I32 && extent.dtype == DType::I32 => {
                        format!("{b}, {}", b.saturating_add(*e))
                    }
                    _ => format!("{}, {}", self.expr(begin, 0), self.sum(begin, extent)),
                };
                let t = format!("for {} in {f}({bounds}):", self.k.var(*var).name);
                self.line(depth, &t);
                self.block(body, depth + 1);
            }
            StmtKind::If { cond, then_body, else_body } => {
                let t = format!("if {}:", self.expr(cond, 0));
                self.line(depth, &t);
                self.block(then_body, depth + 1);
                self.else_chain(else_body, depth);
            }
            StmtKind::Tile(c) => {
                let t = self.tile(c);
                self.line(depth, &t);
            }
            StmtKind::Collective { var, op } => {
                let t = format!("{} = {}", self.k.var(*var).name, self.collective(op));
                self.line(depth, &t);
            }
            StmtKind::Atomic { var, atomic } => {
                let idx: Vec<String> = atomic.elem.index.iter().map(|e| self.expr(e, 0)).collect();
                let call = format!(
                    "T.cuda.{}({}.ptr_to([{}]), {})",
                    crate::names::atomic_name(atomic.op),
                    self.k.buf(atomic.elem.buf).name,
                    idx.join(", "),
                    self.expr(&atomic.value, 0)
                );
                let t = match var {
                    Some(v) => format!("{} = {call}", self.k.var(*v).name),
                    None => call,
                };
                self.line(depth, &t);
            }
            StmtKind::While { cond, body } => {
                let t = format!("while {}:", self.expr(cond, 0));
                self.line(depth, &t);
                self.block(body, depth + 1);
            }
            StmtKind::Ptx(p) => {
                let args = match p {
                    PtxStmt::WgmmaWait(n) => n.to_string(),
                    PtxStmt::SetMaxNReg { regs, .. } => regs.to_string(),
                    PtxStmt::BarSync { id, threads } | PtxStmt::BarArrive { id, threads } => {
                        format!("{}, {threads}", self.expr(id, 0))
                    }
                    PtxStmt::WgmmaFence | PtxStmt::WgmmaCommit | PtxStmt::GridDepWait | PtxStmt::GridDepLaunch => {
                        String::new()
                    }
                };
                let t = format!("{}({args})", p.script_name());
                self.line(depth, &t);
            }
            StmtKind::Async(a) => {
                let t = self.asynch(a);
                self.line(depth, &t);
            }
        }
    }

    /// `mbar.ptr_to([i])`.
    fn mbar_ptr(&self, b: &MbarRef) -> String {
        let idx: Vec<String> = b.index.iter().map(|e| self.expr(e, 0)).collect();
        format!("{}.ptr_to([{}])", self.k.buf(b.buf).name, idx.join(", "))
    }

    /// `T.ptx.cp_async.wait_group(1)`, `T.ptx.mbarrier.try_wait(bar.ptr_to([0]), 1)`, ...
    fn asynch(&self, a: &AsyncStmt) -> String {
        let ptr = |b: &MbarRef| self.mbar_ptr(b);
        match a {
            AsyncStmt::CommitGroup => "T.ptx.cp_async.commit_group()".into(),
            AsyncStmt::WaitGroup(n) => format!("T.ptx.cp_async.wait_group({n})"),
            AsyncStmt::MbarInit { bar, count } => format!("T.ptx.mbarrier.init({}, {})", ptr(bar), self.expr(count, 0)),
            AsyncStmt::MbarArrive { bar, cta: None, .. } => format!("T.ptx.mbarrier.arrive({})", ptr(bar)),
            AsyncStmt::MbarArrive { bar, cta: Some(c), cta_scope } => {
                let scope = if *cta_scope { ", scope=\"cta\"" } else { "" };
                format!("T.ptx.mbarrier.arrive({}, cta_id={}{scope})", ptr(bar), self.expr(c, 0))
            }
            AsyncStmt::MbarArriveExpectTx { bar, bytes } => {
                format!("T.ptx.mbarrier.arrive.expect_tx({}, {})", ptr(bar), self.expr(bytes, 0))
            }
            AsyncStmt::MbarWait { bar, parity } => {
                format!("T.ptx.mbarrier.try_wait({}, {})", ptr(bar), self.expr(parity, 0))
            }
            AsyncStmt::FenceProxyAsync => "T.ptx.fence.proxy_async(\"shared::cta\")".into(),
            AsyncStmt::FenceMbarrierInit => "T.ptx.fence.mbarrier_init()".into(),
            AsyncStmt::BulkCommitGroup => "T.ptx.cp.async_.bulk.commit_group()".into(),
            AsyncStmt::BulkWaitGroup { n, read: false } => format!("T.ptx.cp.async_.bulk.wait_group({n})"),
            AsyncStmt::BulkWaitGroup { n, read: true } => format!("T.ptx.cp.async_.bulk.wait_group.read({n})"),
            AsyncStmt::ClusterArrive { relaxed: false } => "T.ptx.barrier.cluster.arrive()".into(),
            AsyncStmt::ClusterArrive { relaxed: true } => "T.ptx.barrier.cluster.arrive.relaxed()".into(),
            AsyncStmt::ClusterWait => "T.ptx.barrier.cluster.wait()".into(),
            AsyncStmt::GridGroupSync { word, size } => {
                format!("T.cuda.grid_group_sync({}, {})", ptr(word), self.expr(size, 0))
            }
        }
    }

    /// `T.cuda.warp_sum(v, width=8)`, `T.cuda.cta_max(v, 4, S.ptr_to([0]))`, `T.cuda.shfl_xor(v, 1)`.
    fn collective(&mut self, op: &Collective) -> String {
        let width = |w: u32| if w == 32 { String::new() } else { format!(", width={w}") };
        match op {
            Collective::WarpReduce { op, value, width: w } => {
                format!("T.cuda.warp_{}({}{})", op.name(), self.expr(value, 0), width(*w))
            }
            Collective::CtaReduce { op, value, num_warps, scratch, index } => {
                let idx: Vec<String> = index.iter().map(|e| self.expr(e, 0)).collect();
                format!(
                    "T.cuda.cta_{}({}, {num_warps}, {}.ptr_to([{}]))",
                    op.name(),
                    self.expr(value, 0),
                    self.k.buf(*scratch).name,
                    idx.join(", ")
                )
            }
            Collective::Shuffle { mode, value, lane, width: w } => {
                let f = match mode {
                    ShuffleMode::Bfly => "shfl_xor",
                    ShuffleMode::Down => "shfl_down",
                    ShuffleMode::Up => "shfl_up",
                    ShuffleMode::Idx => "shfl",
                };
                format!("T.cuda.{f}({}, {}{})", self.expr(value, 0), self.expr(lane, 0), width(*w))
            }
        }
    }

    fn else_chain(&mut self, else_body: &[Stmt], depth: usize) {
        if else_body.is_empty() {
            return;
        }
        if let [Stmt { kind: StmtKind::If { cond, then_body, else_body: more }, .. }] = else_body {
            let t = format!("elif {}:", self.expr(cond, 0));
            self.line(depth, &t);
            self.block(then_body, depth + 1);
            self.else_chain(more, depth);
            return;
        }
        self.line(depth, "else:");
        self.block(else_body, depth + 1);
    }

    /// `begin + extent` as the parser reads it back (`end - begin` → `extent`).
    fn sum(&self, begin: &Expr, extent: &Expr) -> String {
        format!("{} + {}", self.expr(begin, prec::ADD), self.expr(extent, prec::ADD + 1))
    }

    fn scope_id(&self, d: &ScopeIdDef) -> String {
        let call = match &d.extents {
            None => format!("T.{}()", d.kind.script_name()),
            Some(e) => {
                let items: Vec<String> = e
                    .iter()
                    .enumerate()
                    .map(|(i, x)| match d.dyn_extents.get(i) {
                        Some(Some(sym)) => self.expr(sym, 0),
                        _ => x.to_string(),
                    })
                    .collect();
                format!("T.{}([{}])", d.kind.script_name(), items.join(", "))
            }
        };
        let names: Vec<&str> = d.vars.iter().map(|v| self.k.var(*v).name.as_str()).collect();
        let base = d.kind.script_name();
        let auto = if names.len() == 1 {
            names[0] == base
        } else {
            names.iter().enumerate().all(|(i, n)| *n == format!("{base}_{i}"))
        };
        if auto && d.vars.iter().all(|v| !self.used.contains(v)) {
            return call;
        }
        format!("{} = {call}", names.join(", "))
    }

    fn alloc(&self, id: BufId) -> String {
        let b = self.k.buf(id);
        match &b.origin {
            BufferOrigin::LocalView { base } => {
                let dims: Vec<String> = b.shape.iter().map(i64::to_string).collect();
                format!("{} = {}.local({}{})", b.name, self.k.buf(*base).name, dims.join(", "), self.layout_kw(b))
            }
            BufferOrigin::View { base } => {
                format!("{} = {}.view({}{})", b.name, self.k.buf(*base).name, fmt_shape(&b.shape), self.layout_kw(b))
            }
            BufferOrigin::Alloc | BufferOrigin::Param => format!(
                "{} = T.alloc_buffer({}, \"{}\", scope=\"{}\"{})",
                b.name,
                fmt_shape(&b.shape),
                b.dtype.name(),
                b.scope.name(),
                self.layout_kw(b)
            ),
        }
    }

    fn tile(&self, c: &TileCall) -> String {
        let ns = match c.scope {
            ExecScope::Thread => "Tx".to_string(),
            ExecScope::Warpgroup => "Tx.wg".to_string(),
            s => format!("Tx.{}", s.name()),
        };
        let slots = signature_names(c.op);
        let optional = |i: usize| c.op.operands().get(i).is_some_and(|s| s.default == tirx_ir::op::SlotDefault::Absent);
        let mut args: Vec<(usize, &TileArg)> = c.args.iter().enumerate().collect();
        while matches!(args.last(), Some((_, TileArg::None))) {
            args.pop();
        }
        // `Tx.sqrt(R)` for an in-place op whose src is the dst region.
        if args.len() == 2 && slots.get(1).is_some_and(|s| s.1) && same_arg(args[0].1, args[1].1) {
            args.pop();
        }
        let mut parts = vec![];
        let mut by_name = false;
        for (i, a) in args {
            // Attributes read best by name, and not at all when they hold the default.
            if let TileArg::Attr(v) = a {
                let slot = &c.op.operands()[i];
                if !matches!(slot.default, tirx_ir::op::SlotDefault::Attr(d) if d.value() == *v) {
                    parts.push(format!("{}={}", slot.name(), v.script()));
                }
                by_name = true;
                continue;
            }
            match a {
                TileArg::None => by_name = true,
                a => {
                    // `bias=` / `scale=` read better by name.
                    by_name |= optional(i);
                    let v = self.tile_arg(a);
                    if by_name {
                        parts.push(format!("{}={v}", slots.get(i).map_or("arg", |s| s.0)));
                    } else {
                        parts.push(v);
                    }
                }
            }
        }
        for c in &c.config {
            parts.push(format!("{}={}", c.key.name(), c.value.script()));
        }
        if let Some(d) = &c.dispatch {
            parts.push(format!("dispatch={}", quote(d)));
        }
        format!("{ns}.{}({})", c.op.name(), parts.join(", "))
    }

    fn tile_arg(&self, a: &TileArg) -> String {
        match a {
            TileArg::Region(r) => self.region(r),
            TileArg::Scalar(e) => self.expr(e, 0),
            TileArg::Barrier(b) => self.mbar_ptr(b),
            TileArg::Attr(a) => a.script(),
            TileArg::Mask(m) => {
                let names: Vec<&str> = m.params.iter().map(|v| self.k.var(*v).name.as_str()).collect();
                format!("lambda {}: {}", names.join(", "), self.expr(&m.cond, 0))
            }
            TileArg::None => "None".into(),
        }
    }

    fn region(&self, r: &BufferRegion) -> String {
        let dims: Vec<String> = r
            .ranges
            .iter()
            .map(|x| match &x.begin.kind {
                ExprKind::Int(b) if x.begin.dtype == DType::I32 => format!("{b}:{}", b.saturating_add(x.extent)),
                _ => {
                    let ext = Expr { kind: ExprKind::Int(x.extent), dtype: x.begin.dtype, span: x.begin.span };
                    format!("{}:{}", self.expr(&x.begin, 0), self.sum(&x.begin, &ext))
                }
            })
            .collect();
        format!("{}[{}]", self.k.buf(r.buf).name, dims.join(", "))
    }

    /// An expression, parenthesized when its precedence is below `min`.
    fn expr(&self, e: &Expr, min: u8) -> String {
        let (text, p) = self.expr_prec(e);
        if p < min {
            format!("({text})")
        } else {
            text
        }
    }

    fn expr_prec(&self, e: &Expr) -> (String, u8) {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => literal(e, false),
            ExprKind::Var(v) => (self.k.var(*v).name.clone(), prec::ATOM),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b),
            ExprKind::Unary(op, a) => match op {
                UnOp::Neg => (format!("-{}", self.expr(a, prec::UNARY)), prec::UNARY),
                UnOp::BitNot => (format!("~{}", self.expr(a, prec::UNARY)), prec::UNARY),
                UnOp::Not => (format!("not {}", self.expr(a, prec::NOT)), prec::NOT),
            },
            ExprKind::Cast(a) => (format!("T.cast({}, \"{}\")", self.expr(a, 0), e.dtype.name()), prec::ATOM),
            ExprKind::Select(c, a, b) => {
                (format!("T.if_then_else({}, {}, {})", self.expr(c, 0), self.expr(a, 0), self.expr(b, 0)), prec::ATOM)
            }
            ExprKind::Call(f, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x, 0)).collect();
                (format!("T.{}({})", f.name(), a.join(", ")), prec::ATOM)
            }
            ExprKind::Load(b, idx) => {
                let i: Vec<String> = idx.iter().map(|x| self.expr(x, 0)).collect();
                (format!("{}[{}]", self.k.buf(*b).name, i.join(", ")), prec::ATOM)
            }
        }
    }

    fn binary(&self, op: BinOp, a: &Expr, b: &Expr) -> (String, u8) {
        // Two bare literals would fold at parse time: spell their dtypes.
        let both_lit = is_lit(a) && is_lit(b);
        let side = |x: &Expr, min: u8| {
            if both_lit {
                literal(x, true).0
            } else {
                self.expr(x, min)
            }
        };
        let (sym, p) = match op {
            BinOp::Min | BinOp::Max => {
                let f = if op == BinOp::Min { "min" } else { "max" };
                return (format!("T.{f}({}, {})", side(a, 0), side(b, 0)), prec::ATOM);
            }
            BinOp::Add => ("+", prec::ADD),
            BinOp::Sub => ("-", prec::ADD),
            BinOp::Mul => ("*", prec::MUL),
            BinOp::Div => ("/", prec::MUL),
            BinOp::FloorDiv => ("//", prec::MUL),
            BinOp::FloorMod => ("%", prec::MUL),
            BinOp::Eq => ("==", prec::CMP),
            BinOp::Ne => ("!=", prec::CMP),
            BinOp::Lt => ("<", prec::CMP),
            BinOp::Le => ("<=", prec::CMP),
            BinOp::Gt => (">", prec::CMP),
            BinOp::Ge => (">=", prec::CMP),
            BinOp::And => ("and", prec::AND),
            BinOp::Or => ("or", prec::OR),
            BinOp::BitAnd => ("&", prec::BITAND),
            BinOp::BitOr => ("|", prec::BITOR),
            BinOp::BitXor => ("^", prec::BITXOR),
            BinOp::Shl => ("<<", prec::SHIFT),
            BinOp::Shr => (">>", prec::SHIFT),
        };
        // Comparisons do not chain in the printed form: both sides bind tighter.
        let lmin = if p == prec::CMP { p + 1 } else { p };
        (format!("{} {sym} {}", side(a, lmin), side(b, p + 1)), p)
    }

    fn collect_used(&mut self, body: &[Stmt]) {
        for s in body {
            match &s.kind {
                StmtKind::For { begin, extent, body, .. } => {
                    self.use_expr(begin);
                    self.use_expr(extent);
                    self.collect_used(body);
                }
                StmtKind::If { cond, then_body, else_body } => {
                    self.use_expr(cond);
                    self.collect_used(then_body);
                    self.collect_used(else_body);
                }
                StmtKind::Let { value, .. } | StmtKind::Evaluate(value) => self.use_expr(value),
                StmtKind::Printf { args, .. } => args.iter().for_each(|e| self.use_expr(e)),
                StmtKind::Store { indices, value, .. } => {
                    indices.iter().for_each(|e| self.use_expr(e));
                    self.use_expr(value);
                }
                StmtKind::Tile(c) => {
                    for a in &c.args {
                        match a {
                            TileArg::Region(r) => r.ranges.iter().for_each(|x| self.use_expr(&x.begin)),
                            TileArg::Scalar(e) => self.use_expr(e),
                            TileArg::Barrier(b) => b.index.iter().for_each(|e| self.use_expr(e)),
                            TileArg::Mask(m) => self.use_expr(&m.cond),
                            TileArg::Attr(_) | TileArg::None => {}
                        }
                    }
                }
                StmtKind::Collective { op, .. } => op.exprs().into_iter().for_each(|e| self.use_expr(e)),
                StmtKind::Atomic { atomic, .. } => atomic.exprs().into_iter().for_each(|e| self.use_expr(e)),
                StmtKind::While { cond, body } => {
                    self.use_expr(cond);
                    self.collect_used(body);
                }
                StmtKind::Ptx(p) => p.exprs().into_iter().for_each(|e| self.use_expr(e)),
                StmtKind::Async(a) => a.exprs().into_iter().for_each(|e| self.use_expr(e)),
                StmtKind::Alloc(_) | StmtKind::ScopeId(_) | StmtKind::Barrier(_) | StmtKind::DeviceEntry => {}
            }
        }
    }

    fn use_expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Var(v) => {
                self.used.insert(*v);
            }
            ExprKind::Binary(_, a, b) => {
                self.use_expr(a);
                self.use_expr(b);
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.use_expr(a),
            ExprKind::Select(c, a, b) => {
                self.use_expr(c);
                self.use_expr(a);
                self.use_expr(b);
            }
            ExprKind::Call(_, xs) | ExprKind::Load(_, xs) => xs.iter().for_each(|x| self.use_expr(x)),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => {}
        }
    }

    /// Names the distinct non-default layouts in buffer order, skipping names
    /// the kernel uses.
    fn name_layouts(&mut self) {
        let taken: HashSet<&str> =
            self.k.vars.iter().map(|v| v.name.as_str()).chain(self.k.buffers.iter().map(|b| b.name.as_str())).collect();
        let mut next = 0usize;
        for b in &self.k.buffers {
            if is_default(b) || self.layouts.iter().any(|(_, l)| *l == b.layout) {
                continue;
            }
            let name = loop {
                let n = format!("layout_{next}");
                next += 1;
                if !taken.contains(n.as_str()) {
                    break n;
                }
            };
            self.layouts.push((name, b.layout.clone()));
        }
    }

    fn layout_name(&self, l: &Layout) -> &str {
        self.layouts.iter().find(|(_, x)| x == l).map_or("None", |(n, _)| n.as_str())
    }

    /// `S, TileLayout, laneid, ...`: what the layout definitions mention.
    fn layout_imports(&self) -> Vec<&'static str> {
        let mut builders = BTreeSet::new();
        let mut axes = BTreeSet::new();
        for (_, l) in &self.layouts {
            let t = match l {
                Layout::Tile(t) => {
                    builders.insert("TileLayout");
                    t
                }
                Layout::Compose(c) => {
                    builders.insert("ComposeLayout");
                    &c.tile
                }
            };
            builders.insert("S");
            if !t.replica.is_empty() {
                builders.insert("R");
            }
            for it in t.shard.iter().chain(&t.replica) {
                axes.insert(it.axis);
            }
            axes.extend(t.offset.keys().copied());
        }
        axes.remove(&Axis::M);
        builders.into_iter().chain(axes.into_iter().map(Axis::name)).collect()
    }
}

fn is_lit(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_))
}

/// A literal; bare when the parser would give it this dtype anyway, else
/// `T.<dtype>(v)` (always when `typed`).
fn literal(e: &Expr, typed: bool) -> (String, u8) {
    let (text, default) = match e.kind {
        ExprKind::Int(v) => (v.to_string(), DType::I32),
        ExprKind::Float(v) => (float(v), DType::F32),
        ExprKind::Bool(v) => (if v { "True" } else { "False" }.to_string(), DType::Bool),
        _ => return (String::new(), prec::ATOM),
    };
    if typed || e.dtype != default {
        return (format!("T.{}({text})", e.dtype.name()), prec::ATOM);
    }
    let p = if text.starts_with('-') { prec::UNARY } else { prec::ATOM };
    (text, p)
}

/// Shortest text that reads back as the same f64.
fn float(v: f64) -> String {
    if v.is_nan() {
        return "float(\"nan\")".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "float(\"inf\")" } else { "-float(\"inf\")" }.into();
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A buffer whose layout is the default row-major one (printed without `layout=`).
fn is_default(b: &Buffer) -> bool {
    b.layout == Layout::Tile(TileLayout::row_major(&b.shape))
}

/// Script text of a layout: `tirx_layout`'s `Display`, with a tile layout
/// wrapped as `TileLayout(...)` (a `ComposeLayout(...)` prints whole).
fn layout_text(l: &Layout) -> String {
    match l {
        Layout::Tile(t) => format!("TileLayout({})", tile_text(t)),
        Layout::Compose(c) => {
            let s = c.swizzle;
            let inner = if s.inner { "" } else { ", swizzle_inner=False" };
            let (p, sw, at) = (s.per_element, s.swizzle_len, s.atom_len);
            format!("ComposeLayout({p}, {sw}, {at}, {}{inner})", tile_text(&c.tile))
        }
    }
}

/// `Display` of a tile, except that a layout of offsets only (e.g. the
/// `storage()` of a thread-only layout) starts from the empty shard `S[()]`:
/// a bare `5@laneid` is a stride, not a layout, in a script.
fn tile_text(t: &TileLayout) -> String {
    let text = t.to_string();
    if !(t.shard.is_empty() && t.replica.is_empty() && !t.offset.is_empty()) {
        return text;
    }
    match text.strip_prefix('-') {
        Some(rest) => format!("S[()] - {rest}"),
        None => format!("S[()] + {text}"),
    }
}

/// (keyword name, defaults-to-dst) per operand slot.
fn signature_names(op: TileOp) -> Vec<(&'static str, bool)> {
    op.operands().iter().map(|s| (s.name(), s.default == tirx_ir::op::SlotDefault::Dst)).collect()
}

fn same_arg(a: &TileArg, b: &TileArg) -> bool {
    match (a, b) {
        (TileArg::Region(x), TileArg::Region(y)) => {
            x.buf == y.buf
                && x.ranges.len() == y.ranges.len()
                && x.ranges
                    .iter()
                    .zip(&y.ranges)
                    .all(|(p, q)| p.extent == q.extent && crate::spans::same_expr(&p.begin, &q.begin))
        }
        _ => false,
    }
}
