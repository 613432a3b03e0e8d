//! From syntax tree to HIR: module constants, the `@T.prim_func` kernel and
//! its statements (bindings, scope ids, loops, ifs; buffers in `buffers`,
//! tile calls in `tile`). User errors are reported as
//! diagnostics on the exact operand; a failed statement is skipped and the
//! build goes on, so one run reports every independent error.

use crate::ast::{self, ExprKind as AK, StmtKind as AS};
use crate::builder::{Builder, KState, R};
use crate::eval::Args;
use crate::names::{
    layout_import, pipeline_import, script_names, t_attr, tma_utils_import, Namespace, PIPELINE_MODULES,
    TMA_UTILS_MODULES,
};
use crate::value::*;
use std::collections::HashMap;
use tirx_ir::hir::*;
use tirx_ir::{DType, Diagnostic, Span};

impl<'s> Builder<'s> {
    // ------------------------------------------------------------------ module

    /// `syntax_errors`: earlier stages failed, so a missing kernel is expected.
    pub fn module(mut self, stmts: &[ast::Stmt], syntax_errors: bool) -> (Option<Kernel>, Vec<Diagnostic>) {
        for s in stmts {
            let _ = self.module_stmt(s);
        }
        if self.kernel_done.is_none() && !syntax_errors && !self.diags.iter().any(|d| d.is_error()) {
            let end = self.src.len();
            self.diags.push(
                Diagnostic::error(Span::new(end, end), "no kernel found")
                    .with_help("define one with `@T.prim_func` followed by `def kernel(A_ptr: T.handle): ...`"),
            );
        }
        (self.kernel_done, self.diags)
    }

    /// [`crate::MAX_DIAGS`] reached: says so once; the remaining statements are skipped.
    fn too_many(&mut self, s: &ast::Stmt) -> bool {
        if !self.stopped && self.diags.len() >= crate::MAX_DIAGS {
            self.stopped = true;
            crate::stop_reporting(&mut self.diags, Span::new(s.span.lo as usize, s.span.lo as usize));
        }
        self.stopped
    }

    pub(crate) fn module_stmt(&mut self, s: &ast::Stmt) -> R<()> {
        if self.too_many(s) {
            return Err(());
        }
        match &s.kind {
            AS::FromImport { module, names } => {
                for n in names {
                    let bound = n.alias.clone().unwrap_or_else(|| n.name.clone());
                    let v = self.import_value(module, &n.name, n.span)?;
                    self.define(&bound, v);
                }
                Ok(())
            }
            AS::Import { module, alias } => {
                let bound = alias.clone().unwrap_or_else(|| module.split('.').next().unwrap_or("").to_string());
                self.define(&bound, Val::Builtin(Builtin::Opaque));
                Ok(())
            }
            AS::Assign { target, value } => {
                let r = self.eval(value).and_then(|v| self.bind_const_target(target, v));
                self.poison_on_error(r, target)
            }
            AS::FuncDef { decorators, name, name_span, params, body } => {
                if !self.is_prim_func(decorators)? {
                    // Plain Python helpers (test harness code) are not kernels.
                    return Ok(());
                }
                if self.kernel_done.is_some() {
                    return self.fail(
                        Diagnostic::error(*name_span, "only one kernel per file is supported")
                            .with_label("second `@T.prim_func`")
                            .with_help("move this kernel to its own file"),
                    );
                }
                self.kernel(name, *name_span, params, body, s.span);
                Ok(())
            }
            AS::Pass => Ok(()),
            // Docstrings.
            AS::Expr(ast::Expr { kind: AK::Str(_), .. }) => Ok(()),
            // `if __name__ == "__main__":` and other compile-time switches.
            AS::If { cond, body, orelse } => {
                let c = self.eval(cond)?;
                let Some(t) = truthy(&c) else {
                    return self.expected_kind("a compile-time condition", &c, cond.span);
                };
                for st in if t { body } else { orelse } {
                    let _ = self.module_stmt(st);
                }
                Ok(())
            }
            _ => self.fail(
                Diagnostic::error(s.span, "unsupported statement at module level")
                    .with_label("not an import, constant or kernel")
                    .with_help(
                        "module level may hold imports, constants (`shape = (32, 8)`) and one `@T.prim_func` kernel",
                    ),
            ),
        }
    }

    pub(crate) fn import_value(&mut self, module: &str, name: &str, span: Span) -> R<Val> {
        match (module, name) {
            ("tvm.script", "tirx") => Ok(Val::Builtin(Builtin::T)),
            ("tvm.script.tirx", "tile") => Ok(Val::Builtin(Builtin::Tx)),
            (m, n) if TMA_UTILS_MODULES.contains(&m) => match tma_utils_import(n) {
                Some(v) => Ok(v),
                None => {
                    let mut d = Diagnostic::error(span, format!("`{module}` has no `{n}` known to tirx"))
                        .with_label("unknown name");
                    if let Some(c) = closest(n, script_names(Namespace::TmaUtils)) {
                        d = d.with_help(format!("did you mean `{c}`?"));
                    }
                    self.fail(d)
                }
            },
            ("tvm.tirx.layout" | "tvm.script.tirx.layout", n) => match layout_import(n) {
                Some(v) => Ok(v),
                None => {
                    let mut d = Diagnostic::error(span, format!("`{module}` has no `{n}` known to tirx"))
                        .with_label("unknown name");
                    if let Some(c) = closest(n, script_names(Namespace::Layout)) {
                        d = d.with_help(format!("did you mean `{c}`?"));
                    }
                    self.fail(d)
                }
            },
            (m, n) if PIPELINE_MODULES.contains(&m) => Ok(pipeline_import(n).unwrap_or(Val::Builtin(Builtin::Opaque))),
            _ => Ok(Val::Builtin(Builtin::Opaque)),
        }
    }

    /// Whether a decorator is `T.prim_func` (or `T.prim_func(...)`). Other
    /// decorators (`@pytest.mark.gpu`) are evaluated quietly: they only mean
    /// "not a kernel".
    pub(crate) fn is_prim_func(&mut self, decorators: &[ast::Expr]) -> R<bool> {
        let quiet = self.diags.len();
        let mut found = false;
        for d in decorators {
            let target = match &d.kind {
                AK::Call(f, _) => f.as_ref(),
                _ => d,
            };
            if let Ok(Val::Builtin(Builtin::PrimFunc)) = self.eval(target) {
                found = true;
            }
        }
        let bare_t = decorators.iter().any(
            |d| matches!(&d.kind, AK::Attr(b, n, _) if n == "prim_func" && matches!(&b.kind, AK::Name(t) if t == "T")),
        );
        if !found && bare_t {
            // `@T.prim_func` without `T` imported: keep that error.
            return Ok(false);
        }
        self.diags.truncate(quiet);
        Ok(found)
    }

    // ------------------------------------------------------------------ kernel

    pub(crate) fn kernel(
        &mut self,
        name: &str,
        name_span: Span,
        params: &[ast::Param],
        body: &[ast::Stmt],
        span: Span,
    ) {
        let kernel = Kernel {
            name: name.to_string(),
            params: vec![],
            buffers: vec![],
            vars: vec![],
            body: vec![],
            span,
            assumes: vec![],
        };
        let mutable = reassigned_names(body);
        self.k = Some(KState {
            kernel,
            device: false,
            device_span: None,
            var_scopes: vec![HashMap::new()],
            mutable,
            scope_ids: vec![],
            pools: 0,
        });
        self.scopes.push(HashMap::new());
        // Scalar parameters first, so that buffer annotations may use them in any order
        // (`A: T.Buffer((n, 128), "float32"), n: T.int32`); the signature keeps source order.
        let scalar = |p: &ast::Param| {
            p.annotation.as_ref().is_some_and(|a| matches!(&a.kind, AK::Attr(b, n, _) if matches!(&b.kind, AK::Name(t) if t == "T") && matches!(t_attr(n), Some(Builtin::DTypeFn(_)))))
        };
        for p in params.iter().filter(|p| scalar(p)) {
            let _ = self.param(p);
        }
        for p in params.iter().filter(|p| !scalar(p)) {
            let _ = self.param(p);
        }
        if let Some(ks) = self.k.as_mut() {
            ks.kernel.params.sort_by_key(|p| p.span.lo);
        }
        let mut out = vec![];
        self.block(body, &mut out);
        self.scopes.pop();
        let Some(mut ks) = self.k.take() else { return };
        ks.kernel.body = out;
        if !ks.device && !self.diags.iter().any(|d| d.is_error()) {
            self.diags.push(
                Diagnostic::error(name_span, format!("kernel `{name}` has no `T.device_entry()`"))
                    .with_help("mark where device code starts with `T.device_entry()`, then declare scope ids"),
            );
        }
        self.kernel_done = Some(ks.kernel);
    }

    pub(crate) fn param(&mut self, p: &ast::Param) -> R<()> {
        let Some(ann) = &p.annotation else {
            return self.fail(
                Diagnostic::error(p.span, format!("parameter `{}` needs a type annotation", p.name)).with_help(
                    format!(
                        "write `{}: T.handle` and bind it with `T.match_buffer`, or `{}: T.Buffer(shape, dtype)`",
                        p.name, p.name
                    ),
                ),
            );
        };
        let (f, args) = match &ann.kind {
            AK::Call(f, args) => (f.as_ref(), Some(args)),
            _ => (ann, None),
        };
        let fv = self.eval(f)?;
        match (fv, args) {
            (Val::Builtin(Builtin::Handle), None) => {
                self.ks().kernel.params.push(Param { name: p.name.clone(), buffer: None, scalar: None, span: p.span });
                self.define(&p.name, Val::Handle(p.name.clone()));
                Ok(())
            }
            (Val::Builtin(Builtin::Buffer), Some(args)) => {
                let (pos, kw) = self.eval_args(args)?;
                let mut a = Args::new("T.Buffer".into(), pos, kw, ann.span);
                let b = self.declare_buffer(&p.name, &mut a, MemScope::Global, true, BufferOrigin::Param, p.span)?;
                self.ks().kernel.params.push(Param { name: p.name.clone(), buffer: Some(b), scalar: None, span: p.span });
                self.define(&p.name, Val::Buffer(b));
                Ok(())
            }
            (Val::Builtin(Builtin::DTypeFn(dt)), None) => self.scalar_param(p, dt, ann.span),
            _ => self.fail(
                Diagnostic::error(
                    ann.span,
                    "parameter annotations must be `T.handle`, `T.Buffer(shape, dtype, ...)` or a scalar type like `T.int32`",
                )
                .with_label("unsupported annotation")
                .with_help("write `A_ptr: T.handle` (bound with `T.match_buffer`), `A: T.Buffer((32, 8), \"float32\")` or `n: T.int32`"),
            ),
        }
    }

    /// `n: T.int32`: a scalar parameter, a run-time value the whole kernel reads
    /// (also shapes, grid extents and `T.assume`); immutable.
    fn scalar_param(&mut self, p: &ast::Param, dt: DType, ann: Span) -> R<()> {
        if !tirx_ir::lir::launch::SCALAR_DTYPES.contains(&dt) {
            return self.fail(
                Diagnostic::error(ann, format!("scalar parameters of type {dt} are not supported"))
                    .with_label("unsupported scalar type")
                    .with_help("scalar parameters are `T.int32`, `T.int64`, `T.uint32`, `T.float32` or `T.float64`"),
            );
        }
        let var = self.new_var(&p.name, dt, p.span);
        self.ks().kernel.params.push(Param { name: p.name.clone(), buffer: None, scalar: Some(var), span: p.span });
        Ok(())
    }

    // ------------------------------------------------------------------ blocks

    pub(crate) fn block(&mut self, stmts: &[ast::Stmt], out: &mut Vec<Stmt>) {
        for s in stmts {
            let _ = self.stmt(s, out);
        }
    }

    pub(crate) fn scoped_block(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        self.scoped_block_binding(&[], stmts).1
    }

    /// A block in a fresh scope that first binds `vars` (name, dtype, span):
    /// a loop body and its loop variables.
    pub(crate) fn scoped_block_binding(
        &mut self,
        vars: &[(&str, DType, Span)],
        stmts: &[ast::Stmt],
    ) -> (Vec<VarId>, Vec<Stmt>) {
        self.scopes.push(HashMap::new());
        self.ks().var_scopes.push(HashMap::new());
        let ids = vars.iter().map(|&(name, dtype, span)| self.new_var(name, dtype, span)).collect();
        let mut out = vec![];
        self.block(stmts, &mut out);
        self.ks().var_scopes.pop();
        self.scopes.pop();
        (ids, out)
    }

    /// Device-only statements must follow `T.device_entry()`; a missing entry is
    /// reported once.
    pub(crate) fn require_device(&mut self, span: Span) -> R<()> {
        if self.ks().device {
            return Ok(());
        }
        self.ks().device = true;
        self.fail(
            Diagnostic::error(span, "device code before `T.device_entry()`")
                .with_label("this runs on the GPU")
                .with_help("put `T.device_entry()` after the `T.match_buffer` lines and before device code"),
        )
    }

    pub(crate) fn stmt(&mut self, s: &ast::Stmt, out: &mut Vec<Stmt>) -> R<()> {
        if self.too_many(s) {
            return Err(());
        }
        match &s.kind {
            AS::Pass => Ok(()),
            AS::Expr(e) => self.expr_stmt(e, out),
            AS::Assign { target, value } => {
                let r = self.assign(target, value, s.span, out);
                self.poison_on_error(r, target)
            }
            AS::AnnAssign { target, annotation, value } => {
                let r = self.ann_assign(target, annotation, value.as_ref(), s.span, out);
                self.poison_on_error(r, target)
            }
            AS::AugAssign { target, op, value } => {
                if let AK::Name(n) = &target.kind {
                    if let Some(Val::Scalar(_)) = self.raw_binding(n) {
                        let lhs = self.eval(target)?;
                        let rhs = self.eval(value)?;
                        let v = self.binary(*op, lhs, target.span, rhs, value.span, s.span)?;
                        let n = n.clone();
                        return self.assign_scalar(&n, target.span, v, None, s.span, out);
                    }
                }
                let AK::Subscript(..) = &target.kind else {
                    return self.fail(
                        Diagnostic::error(
                            target.span,
                            "bindings are immutable; augmented assignment is only for buffer elements",
                        )
                        .with_help("bind a new name (`x2 = x + 1`) or store into a local buffer"),
                    );
                };
                let lhs = self.eval(target)?;
                let rhs = self.eval(value)?;
                let v = self.binary(*op, lhs, target.span, rhs, value.span, s.span)?;
                self.store(target, v, value.span, s.span, out)
            }
            AS::For { target, iter, body } => self.for_loop(target, iter, body, s.span, out),
            AS::If { cond, body, orelse } => {
                let c = self.eval(cond)?;
                if let Some(t) = truthy(&c) {
                    // A compile-time condition selects its branch at parse time;
                    // like Python, names it defines stay visible afterwards.
                    self.block(if t { body } else { orelse }, out);
                    return Ok(());
                }
                let cond = self.bool_expr(c, cond.span)?;
                self.require_device(s.span)?;
                let then_body = self.scoped_block(body);
                let else_body = self.scoped_block(orelse);
                out.push(Stmt { kind: StmtKind::If { cond, then_body, else_body }, span: s.span });
                Ok(())
            }
            AS::FromImport { .. } | AS::Import { .. } => self.fail(
                Diagnostic::error(s.span, "imports belong at module level")
                    .with_help("move the import above the kernel"),
            ),
            AS::FuncDef { name_span, .. } => self.fail(
                Diagnostic::error(*name_span, "nested functions are not supported")
                    .with_help("define helpers at module level"),
            ),
            AS::While { cond, body } => self.while_loop(cond, body, s.span, out),
            AS::With { .. } => self.fail(
                Diagnostic::error(s.span, "`with` blocks are not supported in TIRx kernels")
                    .with_help("write the body directly"),
            ),
            AS::Return(_) => self.fail(
                Diagnostic::error(s.span, "kernels do not return values")
                    .with_help("write results to an output buffer"),
            ),
        }
    }

    pub(crate) fn expr_stmt(&mut self, e: &ast::Expr, out: &mut Vec<Stmt>) -> R<()> {
        if let AK::Call(f, args) = &e.kind {
            let fv = self.eval(f)?;
            if let Val::Builtin(b) = fv {
                if is_statement_builtin(b) {
                    return self.builtin_stmt(b, args, None, e.span, out);
                }
            }
            match fv {
                Val::Method(..) => {
                    return self.fail(
                        Diagnostic::error(e.span, "a buffer view must be bound to a name")
                            .with_help("write `X_local = X.local()`"),
                    )
                }
                Val::PtxPath(p) => return self.ptx_path_stmt(&p, args, None, e.span, out),
                Val::MbarMethod(o, m) => return self.mbar_method_stmt(&o, m, args, None, e.span, out),
                Val::PoolMethod(_, PoolMethod::Commit) => {
                    // The pool's size is the sum of its allocations (docs/tile-primitives.md §8.3).
                    let (pos, kw) = self.eval_args(args)?;
                    let mut a = Args::new("pool.commit".into(), pos, kw, e.span);
                    a.opt(self, "size")?;
                    return a.finish(self);
                }
                Val::PoolMethod(_, PoolMethod::Alloc) => {
                    return self.fail(
                        Diagnostic::error(e.span, "`pool.alloc(...)` declares a buffer: bind it to a name")
                            .with_help("write `A_s = pool.alloc(shape, dtype)`"),
                    )
                }
                _ => {}
            }
        }
        if let AK::Str(_) = e.kind {
            return Ok(()); // docstring
        }
        self.eval(e)?;
        self.fail(
            Diagnostic::error(e.span, "expression statement has no effect")
                .with_label("value is discarded")
                .with_help("assign it to a name or remove it"),
        )
    }

    pub(crate) fn builtin_stmt(
        &mut self,
        b: Builtin,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        match b {
            Builtin::DeviceEntry => {
                self.no_target(target, "T.device_entry()")?;
                if !args.is_empty() {
                    return self.fail(Diagnostic::error(span, "`T.device_entry()` takes no arguments"));
                }
                if let Some(prev) = self.ks().device_span {
                    return self.fail(
                        Diagnostic::error(span, "`T.device_entry()` appears twice")
                            .with_secondary(prev, "first here")
                            .with_help("a kernel has one device entry"),
                    );
                }
                let ks = self.ks();
                if ks.device {
                    // Already reported as missing; keep going quietly.
                    return Ok(());
                }
                ks.device = true;
                ks.device_span = Some(span);
                out.push(Stmt { kind: StmtKind::DeviceEntry, span });
                Ok(())
            }
            Builtin::Assume => {
                self.no_target(target, "`T.assume`")?;
                self.assume(args, span)
            }
            Builtin::CtaSync | Builtin::WarpSync | Builtin::ThreadFence => {
                let what = if b == Builtin::ThreadFence { "a fence" } else { "a barrier" };
                self.no_target(target, what)?;
                if !args.is_empty() {
                    return self.fail(Diagnostic::error(span, format!("{what} takes no arguments")));
                }
                self.require_device(span)?;
                let k = match b {
                    Builtin::CtaSync => BarrierKind::Cta,
                    Builtin::WarpSync => BarrierKind::Warp,
                    _ => BarrierKind::Fence,
                };
                out.push(Stmt { kind: StmtKind::Barrier(k), span });
                Ok(())
            }
            Builtin::Evaluate => self.evaluate(args, target, span, out),
            Builtin::Printf => self.printf(args, target, span, out),
            Builtin::ScopeId(kind) => self.scope_id(kind, args, target, span, out),
            Builtin::Ptx(op) => self.ptx_stmt(op, args, target, span, out),
            Builtin::SmemPool => self.smem_pool(args, target, span),
            Builtin::MBarrier => self.mbarrier_new(args, target, span, out),
            Builtin::Collective(kind) => self.collective(kind, args, target, None, span, out),
            Builtin::Atomic(op) => self.atomic(op, args, target, None, span, out),
            Builtin::Alloc(kind) => self.alloc(kind, args, target, span, out),
            Builtin::MatchBuffer => self.match_buffer(args, target, span),
            Builtin::Tile(scope, op) => {
                self.no_target(target, "a tile primitive")?;
                let call = self.tile_call(scope, op, args, span)?;
                self.require_device(span)?;
                out.push(Stmt { kind: StmtKind::Tile(call), span });
                Ok(())
            }
            Builtin::Serial | Builtin::Unroll | Builtin::Grid => self.fail(
                Diagnostic::error(span, "loop iterators belong in a `for` header")
                    .with_help("write `for i in T.serial(n):`"),
            ),
            _ => self.fail(Diagnostic::error(span, "unsupported statement")),
        }
    }

    /// `T.cuda.printf(fmt, *args)`: a string constant in C's format subset
    /// (`lir::debug`), then one scalar per conversion, of the conversion's kind.
    fn printf(&mut self, args: &[ast::Arg], target: Option<&ast::Expr>, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        use tirx_ir::lir::debug::{conversions, parse_format, printable};
        self.no_target(target, "`T.cuda.printf`")?;
        let (pos, kw) = self.eval_args(args)?;
        if let Some((k, ksp, ..)) = kw.first() {
            return self.fail(
                Diagnostic::error(*ksp, format!("`T.cuda.printf` takes no keyword arguments (got `{k}=`)"))
                    .with_help("pass the format, then the values in order: `T.cuda.printf(\"%d\\n\", x)`"),
            );
        }
        let mut pos = pos.into_iter();
        let format = match pos.next() {
            Some((Val::Str(s), fsp)) => match parse_format(&s) {
                Ok(_) => s,
                Err(e) => {
                    return self.fail(
                        Diagnostic::error(fsp, format!("bad `T.cuda.printf` format: {e}")).with_label("this format"),
                    )
                }
            },
            Some((v, fsp)) => return self.expected_kind("a format string", &v, fsp),
            None => {
                return self.fail(
                    Diagnostic::error(span, "`T.cuda.printf` needs a format string")
                        .with_help("`T.cuda.printf(\"x = %d\\n\", x)`"),
                )
            }
        };
        let convs = conversions(&format);
        let rest: Vec<(Val, Span)> = pos.collect();
        if rest.len() != convs.len() {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("the format has {} conversion(s) but {} value(s) follow it", convs.len(), rest.len()),
                )
                .with_help("pass one value per `%` conversion (`%%` prints a percent sign)"),
            );
        }
        let mut exprs = Vec::with_capacity(rest.len());
        for (c, (v, vsp)) in convs.into_iter().zip(rest) {
            let e = self.scalar(v, vsp)?;
            if !printable(c, e.dtype) {
                let want = if c.integral() { "an integer or bool" } else { "a float" };
                return self.fail(
                    Diagnostic::error(vsp, format!("`%{}` prints {want}, but this value is {}", c.kind, e.dtype))
                        .with_label(format!("{}", e.dtype))
                        .with_help(if c.integral() {
                            "print it with `%f`, `%e` or `%g`"
                        } else {
                            "print it with `%d`, or cast it"
                        }),
                );
            }
            exprs.push(e);
        }
        self.require_device(span)?;
        out.push(Stmt { kind: StmtKind::Printf { format, args: exprs }, span });
        Ok(())
    }

    /// `T.evaluate(e)`: one scalar, checked like any expression, that runs nothing.
    fn evaluate(&mut self, args: &[ast::Arg], target: Option<&ast::Expr>, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        self.no_target(target, "`T.evaluate`")?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("T.evaluate".into(), pos, kw, span);
        let (v, vspan) = a.req(self, "value")?;
        a.finish(self)?;
        let e = self.scalar(v, vspan)?;
        self.require_device(span)?;
        out.push(Stmt { kind: StmtKind::Evaluate(e), span });
        Ok(())
    }

    pub(crate) fn no_target(&mut self, target: Option<&ast::Expr>, what: &str) -> R<()> {
        match target {
            Some(t) => self.fail(
                Diagnostic::error(t.span, format!("{what} does not produce a value"))
                    .with_label("nothing to assign")
                    .with_help("call it as a statement"),
            ),
            None => Ok(()),
        }
    }

    // ------------------------------------------------------------------ bindings

    /// After a failed definition, its names fail silently from now on.
    pub(crate) fn poison_on_error(&mut self, r: R<()>, target: &ast::Expr) -> R<()> {
        if r.is_err() {
            let names: Vec<String> = match &target.kind {
                AK::Name(n) => vec![n.clone()],
                AK::Tuple(ts) | AK::List(ts) => {
                    ts.iter().filter_map(|t| if let AK::Name(n) = &t.kind { Some(n.clone()) } else { None }).collect()
                }
                _ => vec![],
            };
            for n in names {
                self.define(&n, Val::Poison);
            }
        }
        r
    }

    pub(crate) fn assign(&mut self, target: &ast::Expr, value: &ast::Expr, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        if let AK::Subscript(..) = &target.kind {
            let v = self.eval(value)?;
            return self.store(target, v, value.span, span, out);
        }
        if let AK::Call(f, args) = &value.kind {
            let fv = self.eval(f)?;
            match fv {
                Val::Builtin(b) if is_statement_builtin(b) => {
                    return self.builtin_stmt(b, args, Some(target), value.span, out)
                }
                Val::Method(buf, m) if m != Method::PtrTo => return self.view(buf, m, args, target, value.span, out),
                Val::PoolMethod(_, PoolMethod::Alloc) => return self.pool_alloc(args, Some(target), value.span, out),
                Val::PtxPath(p) => return self.ptx_path_stmt(&p, args, Some(target), value.span, out),
                Val::MbarMethod(o, m) if m != MbarMethod::PtrTo => {
                    return self.mbar_method_stmt(&o, m, args, Some(target), value.span, out)
                }
                _ => {}
            }
        }
        if let AK::Subscript(base, idx) = &value.kind {
            if let Val::Method(buf, Method::Sub) = self.eval(base)? {
                return self.sub_view(buf, idx, target, value.span, out);
            }
        }
        let v = self.eval(value)?;
        self.bind(target, v, span, out)
    }

    pub(crate) fn ann_assign(
        &mut self,
        target: &ast::Expr,
        ann: &ast::Expr,
        value: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let Some(value) = value else {
            return self
                .fail(Diagnostic::error(span, "a declaration needs a value").with_help("write `x: T.let = expr`"));
        };
        let a = self.eval(ann)?;
        // `s: T.float32 = T.cuda.warp_sum(v)`: a collective binds its own name.
        if let AK::Call(f, args) = &value.kind {
            match self.eval(f)? {
                Val::Builtin(Builtin::Collective(kind)) => {
                    return self.collective(kind, args, Some(target), Some((a, ann.span)), value.span, out)
                }
                Val::Builtin(Builtin::Atomic(op)) => {
                    return self.atomic(op, args, Some(target), Some((a, ann.span)), value.span, out)
                }
                _ => {}
            }
        }
        let v = self.eval(value)?;
        // `x: T.float32 = 0` where the kernel assigns `x` again: a mutable scalar of that dtype.
        if let (AK::Name(n), Val::Builtin(Builtin::DTypeFn(dt))) = (&target.kind, &a) {
            if self.is_mutable(n, &v) {
                let (n, dt) = (n.clone(), *dt);
                return self.assign_scalar(&n, target.span, v, Some(dt), span, out);
            }
        }
        let v = match a {
            // `x: T.let = e` is immutable even where the kernel assigns `x` again (an error there).
            Val::Builtin(Builtin::Let) if matches!(v, Val::Expr(_) | Val::Sub(_)) => {
                return self.bind_immutable(target, v, span, out)
            }
            Val::Builtin(Builtin::Let) => v,
            Val::Builtin(Builtin::DTypeFn(dt)) => {
                let e = self.scalar(v, value.span)?;
                let e = if e.dtype == dt { e } else { self.lit_as(e, dt, ann.span)? };
                Val::Expr(e)
            }
            _ => {
                return self
                    .fail(Diagnostic::error(ann.span, "binding annotations must be `T.let` or a dtype like `T.int32`"))
            }
        };
        let v = match v {
            Val::Int(_) | Val::Float(_) | Val::Bool(_) => Val::Expr(self.const_expr(&v, value.span)?),
            other => other,
        };
        self.bind(target, v, span, out)
    }

    /// `name = value`: runtime values become `Let` bindings, compile-time values
    /// and buffers just name the value.
    pub(crate) fn bind(&mut self, target: &ast::Expr, v: Val, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        match &target.kind {
            AK::Name(n) if self.is_mutable(n, &v) => self.assign_scalar(n, target.span, v, None, span, out),
            _ => self.bind_immutable(target, v, span, out),
        }
    }

    /// `name = value` as an immutable binding (a `Let` for a runtime value).
    fn bind_immutable(&mut self, target: &ast::Expr, v: Val, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        match &target.kind {
            AK::Name(n) => {
                self.check_rebind(n, target.span)?;
                match v {
                    Val::Expr(e) => {
                        self.require_device(span)?;
                        let var = self.new_var(n, e.dtype, target.span);
                        out.push(Stmt { kind: StmtKind::Let { var, value: e }, span });
                    }
                    Val::Sub(s) => {
                        let e = self.load(s)?;
                        self.require_device(span)?;
                        let var = self.new_var(n, e.dtype, target.span);
                        out.push(Stmt { kind: StmtKind::Let { var, value: e }, span });
                    }
                    other => self.define(n, other),
                }
                Ok(())
            }
            AK::Tuple(ts) | AK::List(ts) => {
                let Some(items) = v.items().map(<[Val]>::to_vec) else {
                    return self.expected_kind("a tuple to unpack", &v, target.span);
                };
                if items.len() != ts.len() {
                    let (want, got) = (ts.len(), items.len());
                    return self
                        .fail(Diagnostic::error(target.span, format!("cannot unpack {got} values into {want} names")));
                }
                for (t, x) in ts.iter().zip(items) {
                    self.bind(t, x, span, out)?;
                }
                Ok(())
            }
            _ => self.fail(
                Diagnostic::error(target.span, "cannot assign to this").with_label("not a name or buffer element"),
            ),
        }
    }

    /// Whether binding `v` to `name` is an assignment of a mutable scalar: the
    /// kernel assigns `name` more than once and `v` is a runtime value or a number.
    pub(crate) fn is_mutable(&self, name: &str, v: &Val) -> bool {
        let Some(k) = &self.k else { return false };
        // A `T.let` (immutable) binding of the name is in scope: rebinding it is an error.
        let bound_immutably = k.var_scopes.iter().any(|s| s.contains_key(name));
        k.mutable.contains(name)
            && !bound_immutably
            && (matches!(v, Val::Expr(_) | Val::Sub(_) | Val::Int(_) | Val::Float(_) | Val::Bool(_))
                || matches!(self.raw_binding(name), Some(Val::Scalar(_))))
    }

    /// The value `name` is bound to, without loading a mutable scalar.
    pub(crate) fn raw_binding(&self, name: &str) -> Option<&Val> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// `name = v` for a mutable scalar: the first assignment allocates the one-element
    /// local buffer (of `dtype`, else `v`'s type: a Python int is int32, a float
    /// float32, as in the reference), later ones store into it.
    pub(crate) fn assign_scalar(
        &mut self,
        name: &str,
        nspan: Span,
        v: Val,
        dtype: Option<DType>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let buf = match self.raw_binding(name) {
            Some(Val::Scalar(b)) => *b,
            Some(Val::Buffer(b)) => {
                // (a mutable scalar's first store would shadow the buffer its own value reads)
                let first = self.buffer(*b).span;
                return self.fail(
                    Diagnostic::error(
                        nspan,
                        format!("`{name}` names a buffer; assigning it a value makes it a mutable scalar"),
                    )
                    .with_secondary(first, "the buffer")
                    .with_help(format!("store into the buffer (`{name}[i] = ...`), or bind the value to a new name")),
                );
            }
            _ => {
                self.require_device(span)?;
                let e = self.scalar(v.clone(), span)?;
                let dtype = dtype.unwrap_or(e.dtype);
                let b = self.add_buffer(Buffer {
                    name: name.to_string(),
                    shape: vec![1],
                    dtype,
                    scope: MemScope::Local,
                    layout: tirx_layout::Layout::Tile(tirx_layout::TileLayout::row_major(&[1])),
                    origin: BufferOrigin::Alloc,
                    span: nspan,
                    dyn_outer: None,
                    dyn_strides: None,
                });
                out.push(Stmt { kind: StmtKind::Alloc(b), span });
                self.define(name, Val::Scalar(b));
                b
            }
        };
        let zero = Expr { kind: ExprKind::Int(0), dtype: DType::I32, span: nspan };
        self.store_elem(buf, vec![zero], v, span, nspan, span, out)
    }

    pub(crate) fn check_rebind(&mut self, name: &str, span: Span) -> R<()> {
        let prev = self.k.as_ref().and_then(|k| k.var_scopes.iter().rev().find_map(|s| s.get(name).copied()));
        let param = self.k.as_ref().and_then(|k| k.kernel.params.iter().find(|p| p.scalar.is_some() && p.name == name));
        if let (Some(prev), Some(_)) = (prev, param) {
            return self.fail(
                Diagnostic::error(span, format!("`{name}` is a scalar kernel parameter, which is immutable"))
                    .with_secondary(prev, "declared here")
                    .with_help(format!("bind a new name, e.g. `{name}2 = {name} + 1`")),
            );
        }
        if let Some(prev) = prev {
            return self.fail(
                Diagnostic::error(span, format!("`{name}` is already bound as `{name}: T.let`, which is immutable"))
                    .with_secondary(prev, "first bound here")
                    .with_help(format!("use a new name, or drop `T.let` to make `{name}` a mutable scalar")),
            );
        }
        Ok(())
    }

    /// A variable in the kernel's table, not bound to any name.
    pub(crate) fn fresh_var(&mut self, name: &str, dtype: DType, span: Span) -> VarId {
        let ks = self.ks();
        ks.kernel.vars.push(Var { name: name.to_string(), dtype, span });
        VarId(ks.kernel.vars.len() as u32 - 1)
    }

    /// A variable bound to `name` for the rest of the block (immutable).
    pub(crate) fn new_var(&mut self, name: &str, dtype: DType, span: Span) -> VarId {
        let id = self.fresh_var(name, dtype, span);
        let ks = self.ks();
        if let Some(s) = ks.var_scopes.last_mut() {
            s.insert(name.to_string(), span);
        }
        let e = Expr { kind: ExprKind::Var(id), dtype, span };
        self.define(name, Val::Expr(e));
        id
    }

    // ------------------------------------------------------------------ scope ids

    pub(crate) fn scope_id(
        &mut self,
        kind: ScopeIdKind,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let (pos, kw) = self.eval_args(args)?;
        let fname = format!("T.{}", kind.script_name());
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let mut dyn_extents = vec![];
        let extents = match a.opt(self, "extents")? {
            None => None,
            Some((v, sp)) => {
                let items = match v {
                    Val::Tuple(xs) | Val::List(xs) => xs,
                    other => vec![other],
                };
                let mut ext = vec![];
                for (d, x) in items.into_iter().enumerate() {
                    let (e, sym) = self.cta_extent(x, sp, d, kind == ScopeIdKind::CtaId)?;
                    ext.push(e);
                    dyn_extents.push(sym);
                }
                if dyn_extents.iter().all(Option::is_none) {
                    dyn_extents.clear();
                }
                let max_dims = if matches!(
                    kind,
                    ScopeIdKind::CtaId | ScopeIdKind::ThreadId | ScopeIdKind::ClusterId | ScopeIdKind::CtaIdInCluster
                ) {
                    3
                } else {
                    1
                };
                if ext.is_empty() || ext.len() > max_dims {
                    let want =
                        if max_dims == 1 { "exactly one extent".to_string() } else { "1 to 3 extents".to_string() };
                    return self.fail(
                        Diagnostic::error(sp, format!("`{fname}` takes {want}, found {}", ext.len()))
                            .with_label("extents")
                            .with_help(format!("for example `{fname}([{}])`", default_extent(kind))),
                    );
                }
                Some(ext)
            }
        };
        a.finish(self)?;
        self.require_device(span)?;
        let n = extents.as_ref().map_or(1, Vec::len);
        let names = self.scope_id_names(kind, n, target)?;
        let vars: Vec<VarId> = names
            .into_iter()
            .map(|(name, sp)| match sp {
                Some(sp) => self.new_var(&name, DType::I32, sp),
                // Unbound declarators get a variable no user code can name.
                None => self.fresh_var(&name, DType::I32, span),
            })
            .collect();
        self.ks().scope_ids.push((kind, vars.clone()));
        out.push(Stmt { kind: StmtKind::ScopeId(ScopeIdDef { kind, vars, extents, span, dyn_extents }), span });
        Ok(())
    }

    /// Names of the variables a declarator defines. Unbound ones get
    /// `cta_id` / `cta_id_0..` (the printer omits those bindings again).
    pub(crate) fn scope_id_names(
        &mut self,
        kind: ScopeIdKind,
        n: usize,
        target: Option<&ast::Expr>,
    ) -> R<Vec<(String, Option<Span>)>> {
        let base = kind.script_name();
        match target.map(|t| &t.kind) {
            None => Ok(if n == 1 {
                vec![(base.to_string(), None)]
            } else {
                (0..n).map(|i| (format!("{base}_{i}"), None)).collect()
            }),
            Some(AK::Name(name)) => {
                let sp = target.map(|t| t.span);
                self.check_rebind(name, sp.unwrap_or_default())?;
                Ok(if n == 1 {
                    vec![(name.clone(), sp)]
                } else {
                    (0..n).map(|i| (format!("{name}_{i}"), sp)).collect()
                })
            }
            Some(AK::Tuple(ts)) if ts.len() == n => {
                let mut names = vec![];
                for t in ts {
                    let AK::Name(name) = &t.kind else {
                        return self.fail(Diagnostic::error(t.span, "expected a name").with_label("not a name"));
                    };
                    self.check_rebind(name, t.span)?;
                    names.push((name.clone(), Some(t.span)));
                }
                Ok(names)
            }
            Some(_) => {
                let t = target.map(|t| t.span).unwrap_or_default();
                self.fail(
                    Diagnostic::error(t, format!("`T.{base}` declares {n} variable(s); the left side does not match"))
                        .with_help(format!("bind {n} name(s), e.g. `bx, by = T.cta_id([2, 2])`")),
                )
            }
        }
    }

    // ------------------------------------------------------------------ loops

    /// `while cond:`: a kernel value condition, evaluated before every trip.
    pub(crate) fn while_loop(
        &mut self,
        cond: &ast::Expr,
        body: &[ast::Stmt],
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let c = self.eval(cond)?;
        if truthy(&c).is_some() {
            return self.fail(
                Diagnostic::error(cond.span, "a `while` loop's condition is a compile-time value")
                    .with_label("never changes")
                    .with_help("loop on a kernel value that the body changes (a mutable scalar, a buffer element), or use `for i in range(n):`"),
            );
        }
        let c = self.bool_expr(c, cond.span)?;
        self.require_device(span)?;
        let body = self.scoped_block(body);
        out.push(Stmt { kind: StmtKind::While { cond: c, body }, span });
        Ok(())
    }

    pub(crate) fn for_loop(
        &mut self,
        target: &ast::Expr,
        iter: &ast::Expr,
        body: &[ast::Stmt],
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let not_an_iterator = || {
            Diagnostic::error(iter.span, "loops iterate over `range(...)`, `T.serial`, `T.unroll` or `T.grid`")
                .with_label("not a loop iterator")
        };
        let AK::Call(f, args) = &iter.kind else { return self.fail(not_an_iterator()) };
        let kind = match self.eval(f)? {
            Val::Builtin(Builtin::Range | Builtin::Serial) => ForKind::Serial,
            Val::Builtin(Builtin::Unroll) => ForKind::Unroll,
            Val::Builtin(Builtin::Grid) => return self.grid(target, args, iter.span, body, span, out),
            _ => return self.fail(not_an_iterator()),
        };
        let (pos, kw) = self.eval_args(args)?;
        if let Some(k) = kw.first() {
            return self.fail(Diagnostic::error(k.1, format!("unexpected keyword `{}` in a loop header", k.0)));
        }
        let (begin, extent) = match pos.len() {
            1 => {
                let (e, es) = pos[0].clone();
                let extent = self.int_expr(e, es)?;
                let begin = Expr { kind: ExprKind::Int(0), dtype: extent.dtype, span: es };
                (begin, extent)
            }
            2 => {
                let (b, bs) = pos[0].clone();
                let (e, es) = pos[1].clone();
                let b = self.int_expr(b, bs)?;
                let e = self.int_expr(e, es)?;
                let (b, e, _) = self.unify(b, e, es)?;
                let ext = self.extent_between(&b, &e, es)?;
                (b, ext)
            }
            _ => {
                return self.fail(
                    Diagnostic::error(iter.span, "loops take `(extent)` or `(begin, end)`; steps are not supported")
                        .with_label("wrong number of arguments"),
                )
            }
        };
        let AK::Name(name) = &target.kind else {
            return self.fail(
                Diagnostic::error(target.span, "the loop variable must be a single name").with_label("not a name"),
            );
        };
        self.require_device(span)?;
        let (vars, inner) = self.scoped_block_binding(&[(name, extent.dtype, target.span)], body);
        out.push(Stmt { kind: StmtKind::For { var: vars[0], begin, extent, kind, body: inner }, span });
        Ok(())
    }

    pub(crate) fn grid(
        &mut self,
        target: &ast::Expr,
        args: &[ast::Arg],
        ispan: Span,
        body: &[ast::Stmt],
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let (pos, kw) = self.eval_args(args)?;
        if let Some(k) = kw.first() {
            return self.fail(Diagnostic::error(k.1, format!("unexpected keyword `{}` in `T.grid`", k.0)));
        }
        let names: Vec<&ast::Expr> = match &target.kind {
            AK::Tuple(ts) => ts.iter().collect(),
            _ => vec![target],
        };
        if names.len() != pos.len() || pos.is_empty() {
            let (n, e) = (names.len(), pos.len());
            return self.fail(
                Diagnostic::error(ispan, format!("`T.grid` has {e} extents but the loop binds {n} variables"))
                    .with_secondary(target.span, format!("{n} variables"))
                    .with_help("bind one variable per extent: `for i, j in T.grid(4, 6):`"),
            );
        }
        let mut extents = vec![];
        for (v, sp) in pos {
            extents.push(self.int_expr(v, sp)?);
        }
        self.require_device(span)?;
        let mut bound: Vec<(&str, DType, Span)> = vec![];
        for (n, extent) in names.iter().zip(&extents) {
            let AK::Name(name) = &n.kind else {
                return self.fail(Diagnostic::error(n.span, "loop variables must be names"));
            };
            if bound.iter().any(|b| b.0 == name) {
                return self.fail(Diagnostic::error(n.span, format!("`{name}` is bound twice in this loop header")));
            }
            bound.push((name, extent.dtype, n.span));
        }
        let (vars, mut inner) = self.scoped_block_binding(&bound, body);
        // Innermost first: wrap the body from the last variable outwards.
        for (var, extent) in vars.into_iter().zip(extents).rev() {
            let begin = Expr { kind: ExprKind::Int(0), dtype: extent.dtype, span: extent.span };
            inner = vec![Stmt { kind: StmtKind::For { var, begin, extent, kind: ForKind::Serial, body: inner }, span }];
        }
        out.append(&mut inner);
        Ok(())
    }

    pub(crate) fn int_expr(&mut self, v: Val, span: Span) -> R<Expr> {
        let e = self.scalar(v, span)?;
        if !e.dtype.is_int() {
            let dt = e.dtype;
            return self.fail(
                Diagnostic::error(span, format!("expected an integer, found {dt}")).with_label("not an integer"),
            );
        }
        Ok(e)
    }

    /// `end - begin`: a constant when it is one for all variable values
    /// (`t * 8 : (t + 1) * 8`), `c` when `end` is `begin + c`, else a subtraction.
    pub(crate) fn extent_between(&mut self, begin: &Expr, end: &Expr, span: Span) -> R<Expr> {
        if let (ExprKind::Int(b), ExprKind::Int(e)) = (&begin.kind, &end.kind) {
            let Some(x) = e.checked_sub(*b) else { return self.overflow(span) };
            return Ok(Expr { kind: ExprKind::Int(x), dtype: end.dtype, span });
        }
        if let Some(x) = crate::affine::constant_difference(begin, end) {
            return Ok(Expr { kind: ExprKind::Int(x), dtype: end.dtype, span });
        }
        if let ExprKind::Binary(BinOp::Add, l, r) = &end.kind {
            if crate::spans::same_expr(l, begin) {
                return Ok((**r).clone());
            }
        }
        let (b, e) = (begin.clone(), end.clone());
        Ok(Expr { dtype: e.dtype, span, kind: ExprKind::Binary(BinOp::Sub, Box::new(e), Box::new(b)) })
    }
}
fn default_extent(kind: ScopeIdKind) -> &'static str {
    match kind {
        ScopeIdKind::LaneId => "32",
        ScopeIdKind::WarpIdInWg => "4",
        ScopeIdKind::ThreadIdInWg => "128",
        ScopeIdKind::ThreadId => "128",
        _ => "1",
    }
}

/// Names a kernel body assigns at two or more places, or augments (`x += 1`):
/// the reference's mutable scalars (`docs/tile-primitives.md` §1.7).
fn reassigned_names(body: &[ast::Stmt]) -> std::collections::HashSet<String> {
    fn targets(t: &ast::Expr, n: usize, count: &mut HashMap<String, usize>) {
        match &t.kind {
            AK::Name(x) => *count.entry(x.clone()).or_default() += n,
            AK::Tuple(ts) | AK::List(ts) => ts.iter().for_each(|t| targets(t, n, count)),
            _ => {}
        }
    }
    fn walk(stmts: &[ast::Stmt], count: &mut HashMap<String, usize>) {
        for s in stmts {
            match &s.kind {
                AS::Assign { target, .. } | AS::AnnAssign { target, .. } => targets(target, 1, count),
                AS::AugAssign { target, .. } => targets(target, 2, count),
                AS::For { body, .. } | AS::While { body, .. } => walk(body, count),
                AS::If { body, orelse, .. } => {
                    walk(body, count);
                    walk(orelse, count);
                }
                _ => {}
            }
        }
    }
    let mut count = HashMap::new();
    walk(body, &mut count);
    count.into_iter().filter(|(_, n)| *n >= 2).map(|(x, _)| x).collect()
}
