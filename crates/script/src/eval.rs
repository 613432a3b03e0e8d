//! Expression evaluation: one evaluator for module-level constants and kernel
//! bodies. Compile-time values fold with Python semantics; anything that
//! touches a runtime value becomes a HIR [`Expr`] with a dtype.

use crate::ast::{self, BinOp as AOp, CmpOp, CompKind, ExprKind as AK, UnOp as AUn};
use crate::builder::{Builder, R};
use crate::names::{cuda_attr, layout_import, script_names, t_attr, tx_attr, Namespace};
use crate::value::*;
use std::collections::HashMap;
use tirx_ir::hir::Expr;
use tirx_ir::hir::{BinOp, ExprKind, UnOp};
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::{Axis, ExecScope, Layout};

impl Builder<'_> {
    pub(crate) fn eval(&mut self, e: &ast::Expr) -> R<Val> {
        match &e.kind {
            AK::Name(n) => self.lookup(n, e.span),
            AK::Int(v) => Ok(Val::Int(*v)),
            AK::Float(v) => Ok(Val::Float(*v)),
            AK::Str(s) => Ok(Val::Str(s.clone())),
            AK::Bool(b) => Ok(Val::Bool(*b)),
            AK::None => Ok(Val::None),
            AK::Lambda(params, body) => Ok(Val::Lambda(Box::new((params.clone(), (**body).clone())))),
            AK::Tuple(items) => {
                let v = Val::Tuple(self.eval_items(items)?);
                self.bounded(v, e.span)
            }
            AK::List(items) => {
                let v = Val::List(self.eval_items(items)?);
                self.bounded(v, e.span)
            }
            AK::Dict(items) => self.dict_literal(items, e.span),
            AK::Attr(base, name, nsp) => {
                let b = self.eval(base)?;
                self.attr(b, name, *nsp, e.span)
            }
            AK::Call(f, args) => {
                let fv = self.eval(f)?;
                self.call(fv, args, e.span, f.span)
            }
            AK::Subscript(base, idx) => {
                let b = self.eval(base)?;
                self.subscript(b, idx, e.span)
            }
            AK::Slice(lo, hi, step) => {
                if let Some(s) = step {
                    return self
                        .fail(Diagnostic::error(s.span, "slice steps are not supported").with_help("use `a:b`"));
                }
                let lo = lo.as_ref().map(|x| self.eval(x)).transpose()?;
                let hi = hi.as_ref().map(|x| self.eval(x)).transpose()?;
                self.bounded(Val::Slice(lo.map(Box::new), hi.map(Box::new)), e.span)
            }
            AK::Binary(op, l, r) => self.eval_binary(*op, l, r, e.span),
            AK::Unary(op, x) => {
                let v = self.eval(x)?;
                self.unary(*op, v, e.span)
            }
            AK::Compare(first, rest) => self.compare_chain(first, rest, e.span),
            AK::IfExp(c, a, b) => {
                let cv = self.eval(c)?;
                match cv {
                    Val::Bool(t) => self.eval(if t { a } else { b }),
                    Val::Int(i) => self.eval(if i != 0 { a } else { b }),
                    other => {
                        let c = self.bool_expr(other, c.span)?;
                        let av = self.eval(a)?;
                        let bv = self.eval(b)?;
                        self.select(c, av, a.span, bv, b.span, e.span).map(Val::Expr)
                    }
                }
            }
            AK::Comp { kind, elt, target, iter, cond } => {
                let items = self.comprehension(elt, target, iter, cond.as_deref())?;
                let v = match kind {
                    CompKind::Gen => Val::Tuple(items),
                    CompKind::List => Val::List(items),
                };
                self.bounded(v, e.span)
            }
            AK::Starred(_) => self.fail(
                Diagnostic::error(e.span, "`*` splat is only allowed in calls, tuples and lists")
                    .with_label("not allowed here"),
            ),
        }
    }

    fn eval_items(&mut self, items: &[ast::Expr]) -> R<Vec<Val>> {
        let mut out = vec![];
        // The size of the value being built, checked before each item joins it.
        let mut total = 1usize;
        for it in items {
            if let AK::Starred(inner) = &it.kind {
                let v = self.eval(inner)?;
                match v.items() {
                    Some(xs) => {
                        total = total.saturating_add(weight(&v, MAX_SEQ).saturating_sub(1));
                        if total > MAX_SEQ {
                            return self.too_large(it.span);
                        }
                        out.extend_from_slice(xs)
                    }
                    None => return self.expected_kind("a tuple or list to splat", &v, inner.span),
                }
            } else {
                let v = self.eval(it)?;
                total = total.saturating_add(weight(&v, MAX_SEQ));
                if total > MAX_SEQ {
                    return self.too_large(it.span);
                }
                out.push(v);
            }
            if out.len() > MAX_SEQ {
                return self.fail(
                    Diagnostic::error(it.span, "sequence too long")
                        .with_help(format!("keep sequences under {MAX_SEQ} items")),
                );
            }
        }
        Ok(out)
    }

    /// A compile-time value would exceed [`MAX_SEQ`] items (nested ones included).
    pub(crate) fn too_large<T>(&mut self, span: Span) -> R<T> {
        self.fail(
            Diagnostic::error(span, "value too large")
                .with_label(format!("this would hold more than {MAX_SEQ} items"))
                .with_help(format!("keep compile-time values under {MAX_SEQ} items, nested ones included")),
        )
    }

    /// Rejects values nested or sized beyond what scripts need (fuzz guard:
    /// `t = (t, t)` repeated would otherwise grow exponentially).
    pub(crate) fn bounded(&mut self, v: Val, span: Span) -> R<Val> {
        fn walk(v: &Val, depth: usize, budget: &mut usize) -> bool {
            if depth > MAX_VAL_DEPTH || *budget == 0 {
                return false;
            }
            *budget -= 1;
            match v {
                Val::Tuple(xs) | Val::List(xs) => xs.iter().all(|x| walk(x, depth + 1, budget)),
                Val::Dict(kv) => kv.iter().all(|(k, v)| walk(k, depth + 1, budget) && walk(v, depth + 1, budget)),
                Val::Slice(a, b) => a.iter().chain(b.iter()).all(|x| walk(x, depth + 1, budget)),
                Val::Str(s) => {
                    *budget = budget.saturating_sub(s.len() / 16);
                    *budget > 0
                }
                _ => true,
            }
        }
        let mut budget = MAX_SEQ;
        let fits = walk(&v, 0, &mut budget);
        self.charge(MAX_SEQ - budget, span)?;
        if fits {
            Ok(v)
        } else {
            self.fail(
                Diagnostic::error(span, "value too large or too deeply nested")
                    .with_help(format!("keep compile-time values under {MAX_SEQ} items and {MAX_VAL_DEPTH} levels")),
            )
        }
    }

    pub(crate) fn expected_kind<T>(&mut self, what: &str, v: &Val, span: Span) -> R<T> {
        self.fail(
            Diagnostic::error(span, format!("expected {what}, found {}", v.kind_name()))
                .with_label(format!("expected {what}")),
        )
    }

    // ------------------------------------------------------------------ names

    pub(crate) fn lookup(&mut self, name: &str, span: Span) -> R<Val> {
        for scope in self.scopes.iter().rev() {
            if let Some(v) = scope.get(name) {
                if *v == Val::Poison {
                    return Err(());
                }
                // Copying a large constant is work too (`[len(big) for i in range(60000)]`).
                let cost = match v {
                    Val::Tuple(_) | Val::List(_) | Val::Str(_) | Val::Slice(..) => weight(v, self.work),
                    _ => 1,
                };
                let v = v.clone();
                self.charge(cost, span)?;
                if let Val::Scalar(b) = v {
                    let zero = Expr { kind: ExprKind::Int(0), dtype: DType::I32, span };
                    let dtype = self.buffer(b).dtype;
                    return Ok(Val::Expr(Expr { kind: ExprKind::Load(b, vec![zero]), dtype, span }));
                }
                return Ok(respan(v, span));
            }
        }
        if let Some(b) = python_builtin(name) {
            return Ok(Val::Builtin(b));
        }
        let mut d = Diagnostic::error(span, format!("unknown name `{name}`")).with_label("not defined");
        let first_dim = format!("{name}_0");
        if let Some(h) = import_hint(name) {
            d = d.with_help(h);
        } else if self.scopes.iter().any(|s| s.contains_key(&first_dim)) {
            // `rank = T.cta_id_in_cluster([4, 8])` binds one name per dimension.
            d = d.with_help(format!(
                "`{name} = ...` bound an id of several dimensions as `{name}_0`, `{name}_1`, ...; use those, or bind one name per dimension (`x, y = T.cta_id([4, 8])`)"
            ));
        } else if self.diags.len() < MAX_SUGGESTED_ERRORS {
            // Suggestions only for the errors anyone will read: a file of thousands
            // of typos must not cost thousands × names edit distances.
            let cands = self.scopes.iter().flat_map(|s| s.keys().map(String::as_str));
            let cands = cands.chain(PY_BUILTINS.iter().map(|(n, _)| *n));
            if let Some(c) = closest(name, cands) {
                d = d.with_help(format!("did you mean `{c}`?"));
            }
        }
        self.fail(d)
    }

    fn attr(&mut self, base: Val, name: &str, nsp: Span, span: Span) -> R<Val> {
        let unknown = |ns: &str, cands: &[&str]| {
            let mut d =
                Diagnostic::error(nsp, format!("`{ns}` has no attribute `{name}`")).with_label("unknown attribute");
            if let Some(c) = closest(name, cands.iter().copied()) {
                d = d.with_help(format!("did you mean `{ns}.{c}`?"));
            }
            d
        };
        let names = |ns: Namespace| script_names(ns).collect::<Vec<_>>();
        let ops: Vec<&str> = tirx_ir::hir::TileOp::all().map(|o| o.name()).collect();
        match base {
            Val::Builtin(Builtin::T) => match t_attr(name) {
                Some(b) => Ok(Val::Builtin(b)),
                None => self.fail(unknown("T", &names(Namespace::T))),
            },
            Val::Builtin(Builtin::TPtx) => Ok(Val::PtxPath(name.to_string())),
            Val::PtxPath(p) => Ok(Val::PtxPath(format!("{p}.{name}"))),
            Val::Pool(id) => match name {
                "alloc" => Ok(Val::PoolMethod(id, PoolMethod::Alloc)),
                "commit" => Ok(Val::PoolMethod(id, PoolMethod::Commit)),
                _ => self.fail(unknown("pool", &["alloc", "commit"])),
            },
            Val::MBarrier(o) => match name {
                "init" => Ok(Val::MbarMethod(o, MbarMethod::Init)),
                "wait" => Ok(Val::MbarMethod(o, MbarMethod::Wait)),
                "arrive" => Ok(Val::MbarMethod(o, MbarMethod::Arrive)),
                "ptr_to" => Ok(Val::MbarMethod(o, MbarMethod::PtrTo)),
                "buf" => Ok(Val::Buffer(o.buf)),
                "depth" => Ok(Val::Int(o.depth)),
                _ => self.fail(unknown("MBarrier", &["init", "wait", "arrive", "ptr_to", "buf", "depth"])),
            },
            Val::Builtin(Builtin::TCuda) => match cuda_attr(name) {
                Some(b) => Ok(Val::Builtin(b)),
                None => self.fail(unknown("T.cuda", &names(Namespace::Cuda))),
            },
            Val::Builtin(Builtin::Tx) => match tx_attr(name) {
                Some(b) => Ok(Val::Builtin(b)),
                None => self.fail(
                    unknown("Tx", &names(Namespace::Tx))
                        .with_note("tile primitives are `Tx.<op>` (thread scope) or `Tx.<scope>.<op>`"),
                ),
            },
            Val::Builtin(Builtin::TxScope(s)) => match tirx_ir::hir::TileOp::from_name(name) {
                Some(op) => Ok(Val::Builtin(Builtin::Tile(s, op))),
                None => {
                    let ns = format!("Tx.{}", scope_word(s));
                    self.fail(unknown(&ns, &ops).with_note(format!("tile primitives: {}", ops.join(", "))))
                }
            },
            Val::Builtin(Builtin::AxisNs) => match Axis::from_name(name) {
                Some(a) => Ok(Val::Axis(a)),
                None if name == "get" => Ok(Val::Builtin(Builtin::AxisGet)),
                None => {
                    let mut names: Vec<&str> = Axis::ALL.iter().map(|a| a.name()).collect();
                    names.push("get");
                    self.fail(unknown("Axis", &names))
                }
            },
            Val::Builtin(Builtin::TileLayout) => match name {
                "from_iters" => Ok(Val::Builtin(Builtin::FromIters)),
                _ => self.fail(unknown("TileLayout", &["from_iters"])),
            },
            Val::Builtin(Builtin::SwizzleModeNs) => self.swizzle_mode_attr(name, nsp),
            Val::Layout(l) => self.layout_attr(l, name, nsp),
            // `S[...].tile_to(...)`: a spec is the TileLayout it builds.
            Val::Spec(sp) => self.layout_attr(Layout::Tile(sp.into_tile()), name, nsp),
            Val::Iter(it) => self.iter_attr(it, name, nsp),
            Val::Axis(a) => self.axis_attr(a, name, nsp),
            Val::Buffer(b) => match name {
                "local" => Ok(Val::Method(b, Method::Local)),
                "view" => Ok(Val::Method(b, Method::View)),
                "ptr_to" => Ok(Val::Method(b, Method::PtrTo)),
                "sub" => Ok(Val::Method(b, Method::Sub)),
                "shape" => {
                    let buf = self.buffer(b);
                    let mut dims: Vec<Val> = buf.shape.iter().map(|&e| Val::Int(e)).collect();
                    if let (Some(e), Some(d0)) = (&buf.dyn_outer, dims.first_mut()) {
                        *d0 = Val::Expr(Expr { span, ..e.clone() });
                    }
                    Ok(Val::Tuple(dims))
                }
                "dtype" => Ok(Val::Str(self.buffer(b).dtype.name().to_string())),
                "ndim" => Ok(Val::Int(self.buffer(b).shape.len() as i64)),
                _ => {
                    let bn = self.buffer(b).name.clone();
                    self.fail(unknown(&bn, &["local", "view", "ptr_to", "sub", "shape", "dtype", "ndim"]))
                }
            },
            Val::Builtin(Builtin::Opaque) => self.fail(
                Diagnostic::error(
                    span,
                    format!("`.{name}` of an unmodelled module is not supported in kernel scripts"),
                )
                .with_help("kernel scripts may use `T`, `Tx`, the layout builders and Python constants"),
            ),
            other => {
                let k = other.kind_name();
                self.fail(
                    Diagnostic::error(nsp, format!("{k} has no attribute `{name}`")).with_label("unknown attribute"),
                )
            }
        }
    }

    // ------------------------------------------------------------------ calls

    /// Evaluates call arguments: positional (with `*splat`) and keyword.
    pub(crate) fn eval_args(&mut self, args: &[ast::Arg]) -> R<(Vec<Posarg>, Vec<Kwarg>)> {
        let mut pos = vec![];
        let mut kw: Vec<Kwarg> = vec![];
        for a in args {
            let v = self.eval(&a.value)?;
            match &a.name {
                Some((n, nsp)) => {
                    if kw.iter().any(|k| &k.0 == n) {
                        return self.fail(
                            Diagnostic::error(*nsp, format!("keyword argument `{n}` given twice"))
                                .with_label("repeated"),
                        );
                    }
                    kw.push((n.clone(), *nsp, v, a.value.span));
                }
                None if !kw.is_empty() => {
                    return self.fail(
                        Diagnostic::error(a.value.span, "positional argument after keyword arguments")
                            .with_help("move positional arguments first"),
                    )
                }
                None if a.star => match v.items() {
                    Some(xs) => pos.extend(xs.iter().cloned().map(|x| (x, a.value.span))),
                    None => return self.expected_kind("a tuple or list to splat", &v, a.value.span),
                },
                None => pos.push((v, a.value.span)),
            }
        }
        Ok((pos, kw))
    }

    fn call(&mut self, f: Val, args: &[ast::Arg], span: Span, fspan: Span) -> R<Val> {
        let b = match f {
            Val::Builtin(b) => b,
            Val::LayoutMethod(l, m) => {
                let (pos, kw) = self.eval_args(args)?;
                return self.layout_method(*l, m, pos, kw, span);
            }
            Val::Method(buf, Method::PtrTo) => return self.ptr_to(buf, args, span),
            Val::MbarMethod(o, MbarMethod::PtrTo) => return self.ptr_to(o.buf, args, span),
            Val::PtxPath(p) => {
                return self.fail(
                    Diagnostic::error(span, format!("`T.ptx.{p}(...)` is an instruction, not a value"))
                        .with_label("not allowed here")
                        .with_help("write it on its own line inside the kernel"),
                )
            }
            Val::MbarMethod(o, m) => {
                let n = self.buffer(o.buf).name.clone();
                return self.fail(
                    Diagnostic::error(span, format!("`{n}.{}(...)` is a statement, not a value", mbar_method_name(m)))
                        .with_label("not allowed here")
                        .with_help("write it on its own line inside the kernel"),
                );
            }
            Val::PoolMethod(..) => {
                return self.fail(
                    Diagnostic::error(span, "pool methods are statements: `A_s = pool.alloc(...)`, `pool.commit()`")
                        .with_label("not allowed here"),
                )
            }
            Val::Method(..) => {
                return self.fail(
                    Diagnostic::error(span, "buffer views must be bound to a name")
                        .with_help("write `X_local = X.local()` on its own line, then use `X_local`"),
                )
            }
            other => {
                let k = other.kind_name();
                return self.fail(Diagnostic::error(fspan, format!("{k} is not callable")).with_label("called here"));
            }
        };
        if is_statement_builtin(b) {
            return self.fail(statement_only(b, span));
        }
        let (pos, kw) = self.eval_args(args)?;
        self.call_builtin(b, pos, kw, span)
    }

    fn call_builtin(&mut self, b: Builtin, pos: Vec<(Val, Span)>, kw: Vec<Kwarg>, span: Span) -> R<Val> {
        let mut a = Args::new(self.builtin_name(b), pos, kw, span);
        let r = match b {
            Builtin::Slice => {
                let lo = a.req(self, "start")?;
                let hi = a.opt(self, "stop")?;
                let (lo, hi) = match hi {
                    Some(hi) => (Some(lo.0), hi.0),
                    None => (None, lo.0),
                };
                let norm = |v: Val| if v == Val::None { None } else { Some(Box::new(v)) };
                Val::Slice(lo.and_then(norm), norm(hi))
            }
            Builtin::Tuple | Builtin::List => {
                let items = match a.opt(self, "iterable")? {
                    None => vec![],
                    Some((v, sp)) => self.iterate(v, sp)?,
                };
                if b == Builtin::Tuple {
                    Val::Tuple(items)
                } else {
                    Val::List(items)
                }
            }
            Builtin::Range => {
                let (x, xs) = a.req(self, "start")?;
                let y = a.opt(self, "stop")?;
                let (lo, hi) = match y {
                    Some((y, ys)) => (self.const_int(x, xs)?, self.const_int(y, ys)?),
                    None => (0, self.const_int(x, xs)?),
                };
                let n = hi.saturating_sub(lo).max(0);
                if n as u64 > MAX_SEQ as u64 {
                    return self.fail(
                        Diagnostic::error(span, format!("range of {n} items is too large"))
                            .with_help(format!("keep ranges under {MAX_SEQ} items")),
                    );
                }
                Val::Tuple((lo..hi).map(Val::Int).collect())
            }
            Builtin::Len => {
                let (v, sp) = a.req(self, "obj")?;
                match v.items() {
                    Some(xs) => Val::Int(xs.len() as i64),
                    None => match v {
                        Val::Str(s) => Val::Int(s.chars().count() as i64),
                        Val::Dict(kv) => Val::Int(kv.len() as i64),
                        other => return self.expected_kind("a tuple, list or string", &other, sp),
                    },
                }
            }
            Builtin::Min | Builtin::Max | Builtin::TMin | Builtin::TMax => {
                let op = if matches!(b, Builtin::Min | Builtin::TMin) { BinOp::Min } else { BinOp::Max };
                let mut items = a.rest();
                if items.len() == 1 {
                    let (v, sp) = items.remove(0);
                    items = self.iterate(v, sp)?.into_iter().map(|x| (x, sp)).collect();
                }
                if items.is_empty() {
                    return self.fail(Diagnostic::error(span, "min/max needs at least one value"));
                }
                let mut it = items.into_iter();
                let (mut acc, mut acc_span) = it.next().ok_or(())?;
                for (v, sp) in it {
                    acc = self.minmax(op, acc, acc_span, v, sp, span)?;
                    acc_span = acc_span.to(sp);
                }
                acc
            }
            Builtin::Int | Builtin::Float | Builtin::Abs => {
                let (v, sp) = a.req(self, "x")?;
                match (b, v) {
                    (Builtin::Int, Val::Int(i)) => Val::Int(i),
                    (Builtin::Int, Val::Float(f)) if f.is_finite() && f.abs() < 9.2e18 => Val::Int(f.trunc() as i64),
                    (Builtin::Int, Val::Bool(x)) => Val::Int(x as i64),
                    (Builtin::Float, Val::Int(i)) => Val::Float(i as f64),
                    (Builtin::Float, Val::Float(f)) => Val::Float(f),
                    (Builtin::Float, Val::Bool(x)) => Val::Float(f64::from(u8::from(x))),
                    (Builtin::Float, Val::Str(text)) => match py_float(&text) {
                        Some(f) => Val::Float(f),
                        None => {
                            return self.fail(
                                Diagnostic::error(sp, format!("could not convert string to float: {text:?}"))
                                    .with_label("not a number")
                                    .with_help("write a number, or \"inf\", \"-inf\" or \"nan\""),
                            )
                        }
                    },
                    (Builtin::Abs, Val::Int(i)) => match i.checked_abs() {
                        Some(v) => Val::Int(v),
                        None => return self.overflow(sp),
                    },
                    (Builtin::Abs, Val::Float(f)) => Val::Float(f.abs()),
                    (Builtin::Abs, v @ (Val::Expr(_) | Val::Sub(_))) => {
                        let e = self.scalar(v, sp)?;
                        self.math(tirx_ir::hir::MathFn::Abs, e, span)?
                    }
                    (_, other) => return self.expected_kind("a number", &other, sp),
                }
            }
            Builtin::S | Builtin::R => {
                return self.fail(
                    Diagnostic::error(span, "layout specs are written with brackets")
                        .with_help("write `S[(32, 8):(8, 1)]`, not `S(...)`"),
                )
            }
            Builtin::TileLayout => {
                let (v, sp) = a.req(self, "spec")?;
                match v {
                    Val::Spec(s) => Val::Layout(Layout::Tile(s.into_tile())),
                    Val::Layout(Layout::Tile(t)) => Val::Layout(Layout::Tile(t)),
                    other => return self.expected_kind("a layout spec like `S[(32, 8):(8, 1)]`", &other, sp),
                }
            }
            Builtin::ComposeLayout => self.compose_layout(&mut a)?,
            Builtin::WgLocalLayout
            | Builtin::FromIters
            | Builtin::Iter
            | Builtin::AxisGet
            | Builtin::MmaSharedLayout
            | Builtin::MmaAtomLayout
            | Builtin::MmaAtomShape
            | Builtin::Tcgen05AtomLayout
            | Builtin::FragmentLayout(_) => self.layout_helper(b, &mut a, span)?,
            Builtin::Cast => {
                let (v, vs) = a.req(self, "value")?;
                let (d, ds) = a.req(self, "dtype")?;
                let dt = self.dtype_of(d, ds)?;
                let e = self.scalar(v, vs)?;
                Val::Expr(Expr { dtype: dt, span, kind: ExprKind::Cast(Box::new(e)) })
            }
            Builtin::DTypeFn(dt) => {
                let (v, vs) = a.req(self, "value")?;
                match v {
                    Val::Int(_) | Val::Float(_) | Val::Bool(_) => {
                        let e = self.const_expr(&v, span)?;
                        let e = self.lit_as(e, dt, vs)?;
                        self.int_literal_fits(&e, vs)?;
                        Val::Expr(e)
                    }
                    other => {
                        let e = self.scalar(other, vs)?;
                        Val::Expr(Expr { dtype: dt, span, kind: ExprKind::Cast(Box::new(e)) })
                    }
                }
            }
            Builtin::IfThenElse => {
                let (c, cs) = a.req(self, "cond")?;
                let (x, xs) = a.req(self, "true_value")?;
                let (y, ys) = a.req(self, "false_value")?;
                let c = self.bool_expr(c, cs)?;
                Val::Expr(self.select(c, x, xs, y, ys, span)?)
            }
            Builtin::Math(f) => {
                let (v, vs) = a.req(self, "x")?;
                let e = self.scalar(v, vs)?;
                self.math(f, e, span)?
            }
            Builtin::T
            | Builtin::TCuda
            | Builtin::TPtx
            | Builtin::Tx
            | Builtin::TxScope(_)
            | Builtin::AxisNs
            | Builtin::SwizzleModeNs
            | Builtin::Opaque => {
                return self.fail(Diagnostic::error(span, "a module is not callable").with_label("called here"))
            }
            Builtin::PrimFunc | Builtin::Handle | Builtin::Buffer | Builtin::Let => {
                return self.fail(
                    Diagnostic::error(
                        span,
                        format!("`{}` is only valid as a decorator or annotation", self.builtin_name(b)),
                    )
                    .with_label("not allowed here"),
                )
            }
            _ => return self.fail(statement_only(b, span)),
        };
        a.finish(self)?;
        Ok(r)
    }

    fn math(&mut self, f: tirx_ir::hir::MathFn, e: Expr, span: Span) -> R<Val> {
        let e = if e.dtype.is_float() || f == tirx_ir::hir::MathFn::Abs {
            e
        } else if is_literal(&e) {
            self.lit_as(e, DType::F32, span)?
        } else {
            let dt = e.dtype;
            return self.fail(
                Diagnostic::error(e.span, format!("`T.{}` needs a float operand, found {dt}", f.name()))
                    .with_label(format!("{dt}"))
                    .with_help("cast first: `T.cast(x, \"float32\")`"),
            );
        };
        Ok(Val::Expr(Expr { dtype: e.dtype, span, kind: ExprKind::Call(f, vec![e]) }))
    }

    /// Items of a compile-time iterable.
    pub(crate) fn iterate(&mut self, v: Val, span: Span) -> R<Vec<Val>> {
        match v {
            Val::Tuple(xs) | Val::List(xs) => Ok(xs),
            Val::Str(s) if s.chars().nth(MAX_SEQ).is_some() => self.too_large(span),
            Val::Str(s) => Ok(s.chars().map(|c| Val::Str(c.to_string())).collect()),
            other => self.expected_kind("a tuple, list or range", &other, span),
        }
    }

    fn comprehension(
        &mut self,
        elt: &ast::Expr,
        target: &ast::Expr,
        iter: &ast::Expr,
        cond: Option<&ast::Expr>,
    ) -> R<Vec<Val>> {
        let it = self.eval(iter)?;
        let items = self.iterate(it, iter.span)?;
        let mut out = vec![];
        let mut total = 1usize;
        self.scopes.push(HashMap::new());
        let r = (|| {
            for item in items {
                self.charge(1, iter.span)?;
                self.bind_const_target(target, item)?;
                if let Some(c) = cond {
                    match self.eval(c)? {
                        Val::Bool(true) => {}
                        Val::Bool(false) => continue,
                        other => return self.expected_kind("a compile-time condition", &other, c.span),
                    }
                }
                let v = self.eval(elt)?;
                total = total.saturating_add(weight(&v, MAX_SEQ));
                if total > MAX_SEQ {
                    return self.too_large(elt.span);
                }
                out.push(v);
            }
            Ok(())
        })();
        self.scopes.pop();
        r.map(|_| out)
    }

    /// Binds `a` or `a, b` to a compile-time value in the innermost scope.
    pub(crate) fn bind_const_target(&mut self, target: &ast::Expr, v: Val) -> R<()> {
        match &target.kind {
            AK::Name(n) => {
                self.define(n, v);
                Ok(())
            }
            AK::Tuple(ts) | AK::List(ts) => {
                let Some(items) = v.items() else { return self.expected_kind("a tuple to unpack", &v, target.span) };
                if items.len() != ts.len() {
                    let (want, got) = (ts.len(), items.len());
                    return self.fail(
                        Diagnostic::error(target.span, format!("cannot unpack {got} values into {want} names"))
                            .with_label(format!("{want} names")),
                    );
                }
                let items = items.to_vec();
                for (t, x) in ts.iter().zip(items) {
                    self.bind_const_target(t, x)?;
                }
                Ok(())
            }
            _ => self.fail(Diagnostic::error(target.span, "can only bind names here").with_label("not a name")),
        }
    }

    // ------------------------------------------------------------------ subscripts

    fn subscript(&mut self, base: Val, idx: &ast::Expr, span: Span) -> R<Val> {
        match base {
            Val::Builtin(Builtin::S) => self.layout_spec(idx, true),
            Val::Builtin(Builtin::R) => self.layout_spec(idx, false),
            Val::Buffer(b) => self.buffer_subscript(b, idx, span),
            Val::Dict(items) => self.dict_subscript(items, idx),
            Val::Tuple(xs) | Val::List(xs) => {
                let i = self.eval(idx)?;
                let i = self.const_int(i, idx.span)?;
                let n = xs.len() as i64;
                let k = if i < 0 { i + n } else { i };
                if !(0..n).contains(&k) {
                    return self.fail(
                        Diagnostic::error(idx.span, format!("index {i} out of range for a sequence of {n}"))
                            .with_label("out of range"),
                    );
                }
                Ok(xs[k as usize].clone())
            }
            Val::Method(b, Method::Sub) => {
                let n = self.buffer(b).name.clone();
                self.fail(
                    Diagnostic::error(span, format!("a `{n}.sub[...]` view must be bound to a name"))
                        .with_label("unnamed view")
                        .with_help(format!("write `V = {n}.sub[...]` on its own line, then use `V`")),
                )
            }
            Val::Method(..) => self.fail(
                Diagnostic::error(span, "call the view method before indexing")
                    .with_help("write `X_local = X.local()` then `X_local[i]`"),
            ),
            other => {
                let k = other.kind_name();
                self.fail(Diagnostic::error(span, format!("{k} cannot be indexed")).with_label("indexed here"))
            }
        }
    }

    pub(crate) fn buffer_subscript(&mut self, b: tirx_ir::hir::BufId, idx: &ast::Expr, span: Span) -> R<Val> {
        let parts: Vec<&ast::Expr> = match &idx.kind {
            AK::Tuple(items) => items.iter().collect(),
            _ => vec![idx],
        };
        let mut indices = vec![];
        for p in parts {
            if let AK::Slice(lo, hi, step) = &p.kind {
                if let Some(s) = step {
                    return self.fail(
                        Diagnostic::error(s.span, "slice steps are not supported in regions").with_help("use `a:b`"),
                    );
                }
                let lo = lo.as_ref().map(|x| self.eval(x)).transpose()?;
                let hi = hi.as_ref().map(|x| self.eval(x)).transpose()?;
                indices.push((Index::Slice(lo.map(Box::new), hi.map(Box::new), p.span), p.span));
                continue;
            }
            let v = self.eval(p)?;
            self.push_index(v, p.span, &mut indices)?;
        }
        Ok(Val::Sub(Sub { buf: b, indices, span }))
    }

    /// A constant like `fs = (slice(0, 32), slice(0, 8))` splices its items.
    fn push_index(&mut self, v: Val, sp: Span, out: &mut Vec<(Index, Span)>) -> R<()> {
        match v {
            Val::Slice(lo, hi) => out.push((Index::Slice(lo, hi, sp), sp)),
            Val::Tuple(xs) | Val::List(xs) => {
                for x in xs {
                    self.push_index(x, sp, out)?;
                }
            }
            other => out.push((Index::Point(other), sp)),
        }
        Ok(())
    }

    // ------------------------------------------------------------------ operators

    fn eval_binary(&mut self, op: AOp, l: &ast::Expr, r: &ast::Expr, span: Span) -> R<Val> {
        let lv = self.eval(l)?;
        if matches!(op, AOp::And | AOp::Or) {
            // Python short-circuit on compile-time values.
            if let Some(t) = truthy(&lv) {
                if (op == AOp::And) != t {
                    return Ok(lv);
                }
                return self.eval(r);
            }
            let rv = self.eval(r)?;
            let a = self.bool_expr(lv, l.span)?;
            let b = self.bool_expr(rv, r.span)?;
            let hop = if op == AOp::And { BinOp::And } else { BinOp::Or };
            return Ok(Val::Expr(Expr {
                dtype: DType::Bool,
                span,
                kind: ExprKind::Binary(hop, Box::new(a), Box::new(b)),
            }));
        }
        let rv = self.eval(r)?;
        self.binary(op, lv, l.span, rv, r.span, span)
    }

    pub(crate) fn binary(&mut self, op: AOp, lv: Val, ls: Span, rv: Val, rs: Span, span: Span) -> R<Val> {
        use Val::*;
        match (op, &lv, &rv) {
            (AOp::MatMul, Int(k), Axis(a)) => return Ok(AxisStride(*k, *a)),
            (AOp::MatMul, _, _) => {
                return self.fail(
                    Diagnostic::error(span, "`@` builds an axis stride: `k @ axis`")
                        .with_label(format!("{} @ {}", lv.kind_name(), rv.kind_name()))
                        .with_help("write an int stride on the left and an axis (e.g. `laneid`) on the right"),
                )
            }
            (AOp::Add, Spec(_), _) | (AOp::Add, _, Spec(_)) => return self.spec_add(lv, rv, span),
            // `S[...] - 5@warpid`: a negative offset (as `Display` prints it).
            (AOp::Sub, Spec(_), AxisStride(k, a)) => {
                let Some(neg) = k.checked_neg() else { return self.overflow(span) };
                return self.spec_add(lv.clone(), AxisStride(neg, *a), span);
            }
            (AOp::Sub, Spec(_), Int(k)) => {
                let Some(neg) = k.checked_neg() else { return self.overflow(span) };
                return self.spec_add(lv.clone(), Int(neg), span);
            }
            (AOp::Add, Tuple(a), Tuple(b)) | (AOp::Add, List(a), List(b)) => {
                if weight(&lv, MAX_SEQ).saturating_add(weight(&rv, MAX_SEQ)) > MAX_SEQ + 1 {
                    return self.too_large(span);
                }
                let mut v = a.clone();
                v.extend(b.iter().cloned());
                if v.len() > MAX_SEQ {
                    return self.fail(Diagnostic::error(span, "sequence too long"));
                }
                let v = if matches!(lv, Tuple(_)) { Tuple(v) } else { List(v) };
                return self.bounded(v, span);
            }
            (AOp::Mul, Tuple(a), Int(n)) | (AOp::Mul, List(a), Int(n)) => {
                let n = (*n).max(0) as usize;
                if a.len().saturating_mul(n) > MAX_SEQ {
                    return self.fail(
                        Diagnostic::error(span, "sequence too long")
                            .with_help(format!("keep sequences under {MAX_SEQ} items")),
                    );
                }
                // Checked before building: `[[0] * 60000] * 60000` is 60000 copies of 60001 items.
                let each = weight(&lv, MAX_SEQ).saturating_sub(1);
                if each.saturating_mul(n) > MAX_SEQ {
                    return self.too_large(span);
                }
                let v: Vec<Val> = (0..n).flat_map(|_| a.iter().cloned()).collect();
                let v = if matches!(lv, Tuple(_)) { Tuple(v) } else { List(v) };
                return self.bounded(v, span);
            }
            (AOp::Add, Str(a), Str(b)) => {
                let v = Str(format!("{a}{b}"));
                return self.bounded(v, span);
            }
            _ => {}
        }
        if let (Some(a), Some(b)) = (num(&lv), num(&rv)) {
            return self.fold(op, a, b, span);
        }
        let a = self.scalar(lv, ls)?;
        let b = self.scalar(rv, rs)?;
        self.runtime_binary(op, a, b, span).map(Val::Expr)
    }

    fn fold(&mut self, op: AOp, a: Num, b: Num, span: Span) -> R<Val> {
        use Num::*;
        let r = match (a, b) {
            (I(x), I(y)) => match op {
                AOp::Add => x.checked_add(y).map(Val::Int),
                AOp::Sub => x.checked_sub(y).map(Val::Int),
                AOp::Mul => x.checked_mul(y).map(Val::Int),
                AOp::FloorDiv | AOp::Mod if y == 0 => return self.div_zero(span),
                AOp::FloorDiv => py_floordiv(x, y).map(Val::Int),
                AOp::Mod => py_mod(x, y).map(Val::Int),
                AOp::Div if y == 0 => return self.div_zero(span),
                AOp::Div => Some(Val::Float(x as f64 / y as f64)),
                AOp::Pow if y < 0 => Some(Val::Float((x as f64).powf(y as f64))),
                AOp::Pow => u32::try_from(y).ok().and_then(|y| x.checked_pow(y)).map(Val::Int),
                AOp::BitAnd => Some(Val::Int(x & y)),
                AOp::BitOr => Some(Val::Int(x | y)),
                AOp::BitXor => Some(Val::Int(x ^ y)),
                AOp::Shl => {
                    u32::try_from(y).ok().filter(|&s| s < 63).and_then(|s| x.checked_mul(1i64 << s)).map(Val::Int)
                }
                AOp::Shr => u32::try_from(y).ok().map(|s| Val::Int(x >> s.min(63))),
                AOp::And | AOp::Or | AOp::MatMul => None,
            },
            (x, y) => {
                let (x, y) = (x.f(), y.f());
                let v = match op {
                    AOp::Add => x + y,
                    AOp::Sub => x - y,
                    AOp::Mul => x * y,
                    AOp::Div | AOp::FloorDiv | AOp::Mod if y == 0.0 => return self.div_zero(span),
                    AOp::Div => x / y,
                    AOp::FloorDiv => (x / y).floor(),
                    AOp::Mod => py_float_mod(x, y),
                    AOp::Pow => x.powf(y),
                    _ => {
                        return self.fail(
                            Diagnostic::error(span, format!("`{}` needs integer operands", op.symbol()))
                                .with_label("float operand"),
                        )
                    }
                };
                // Finite operands must give a finite result (an overflow is a mistake);
                // `float("inf") * 2` is inf, as in Python.
                Some(Val::Float(v)).filter(|_| v.is_finite() || !(x.is_finite() && y.is_finite()))
            }
        };
        match r {
            Some(v) => Ok(v),
            None => self.overflow(span),
        }
    }

    pub(crate) fn overflow<T>(&mut self, span: Span) -> R<T> {
        self.fail(
            Diagnostic::error(span, "arithmetic overflow in a constant expression")
                .with_label("result does not fit in int64 / a finite float"),
        )
    }

    fn div_zero<T>(&mut self, span: Span) -> R<T> {
        self.fail(Diagnostic::error(span, "division by zero").with_label("divisor is 0"))
    }

    fn unary(&mut self, op: AUn, v: Val, span: Span) -> R<Val> {
        match (op, v) {
            (AUn::Pos, v @ (Val::Int(_) | Val::Float(_))) => Ok(v),
            (AUn::Neg, Val::Int(i)) => i.checked_neg().map(Val::Int).map_or_else(|| self.overflow(span), Ok),
            (AUn::Neg, Val::Float(f)) => Ok(Val::Float(-f)),
            (AUn::Invert, Val::Int(i)) => Ok(Val::Int(!i)),
            (AUn::Not, v) if truthy(&v).is_some() => Ok(Val::Bool(!truthy(&v).unwrap_or(false))),
            (op, v) => {
                let e = self.scalar(v, span)?;
                if let Some(folded) = fold_literal_unary(op, &e) {
                    return Ok(Val::Expr(Expr { span, ..folded }));
                }
                // `-flag` and `~flag` compute on the integer 0 or 1, as in Python.
                let e = if op == AUn::Not { e } else { bool_as_int(e) };
                let (uop, dt) = match op {
                    AUn::Pos => return Ok(Val::Expr(e)),
                    AUn::Neg => (UnOp::Neg, e.dtype),
                    AUn::Invert if e.dtype.is_int() => (UnOp::BitNot, e.dtype),
                    AUn::Invert => {
                        return self.fail(
                            Diagnostic::error(e.span, format!("`~` needs an integer, found {}", e.dtype))
                                .with_label("not an integer"),
                        )
                    }
                    AUn::Not => {
                        let e = self.require_bool(e)?;
                        return Ok(Val::Expr(Expr {
                            dtype: DType::Bool,
                            span,
                            kind: ExprKind::Unary(UnOp::Not, Box::new(e)),
                        }));
                    }
                };
                Ok(Val::Expr(Expr { dtype: dt, span, kind: ExprKind::Unary(uop, Box::new(e)) }))
            }
        }
    }

    fn compare_chain(&mut self, first: &ast::Expr, rest: &[(CmpOp, ast::Expr)], span: Span) -> R<Val> {
        let mut lv = self.eval(first)?;
        let mut ls = first.span;
        let mut acc: Option<Val> = None;
        for (op, r) in rest {
            let rv = self.eval(r)?;
            let c = self.compare(*op, lv.clone(), ls, rv.clone(), r.span, ls.to(r.span))?;
            acc = Some(match acc {
                None => c,
                Some(prev) => match (truthy(&prev), truthy(&c)) {
                    (Some(false), _) => prev,
                    (Some(true), _) => c,
                    (None, Some(true)) => prev,
                    (None, Some(false)) => c,
                    (None, None) => {
                        let (a, b) = (self.bool_expr(prev, span)?, self.bool_expr(c, span)?);
                        let sp = a.span.to(b.span);
                        Val::Expr(Expr {
                            dtype: DType::Bool,
                            span: sp,
                            kind: ExprKind::Binary(BinOp::And, Box::new(a), Box::new(b)),
                        })
                    }
                },
            });
            lv = rv;
            ls = r.span;
        }
        acc.ok_or(())
    }

    fn compare(&mut self, op: CmpOp, lv: Val, ls: Span, rv: Val, rs: Span, span: Span) -> R<Val> {
        if let (Some(a), Some(b)) = (num(&lv), num(&rv)) {
            let t = match (a, b) {
                (Num::I(x), Num::I(y)) => holds(op, x, y),
                _ => holds(op, a.f(), b.f()),
            };
            return Ok(Val::Bool(t));
        }
        if let (Val::Str(a), Val::Str(b)) = (&lv, &rv) {
            match op {
                CmpOp::Eq => return Ok(Val::Bool(a == b)),
                CmpOp::Ne => return Ok(Val::Bool(a != b)),
                _ => {}
            }
        }
        let mut a = self.scalar(lv, ls)?;
        let mut b = self.scalar(rv, rs)?;
        if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
            // Bools order as the integers 0 and 1, as in Python and C (`flag[0] > 0`).
            a = bool_as_int(a);
            b = bool_as_int(b);
        }
        let (a, b, _) = self.unify(a, b, span)?;
        let hop = match op {
            CmpOp::Eq => BinOp::Eq,
            CmpOp::Ne => BinOp::Ne,
            CmpOp::Lt => BinOp::Lt,
            CmpOp::Le => BinOp::Le,
            CmpOp::Gt => BinOp::Gt,
            CmpOp::Ge => BinOp::Ge,
        };
        Ok(Val::Expr(Expr { dtype: DType::Bool, span, kind: ExprKind::Binary(hop, Box::new(a), Box::new(b)) }))
    }

    fn minmax(&mut self, op: BinOp, a: Val, asp: Span, b: Val, bsp: Span, span: Span) -> R<Val> {
        if let (Some(x), Some(y)) = (num(&a), num(&b)) {
            let pick_a = match (x, y) {
                (Num::I(x), Num::I(y)) => (x <= y) == (op == BinOp::Min),
                // NaN propagates, as in kernels (docs/numerics.md §6).
                (x, y) if x.f().is_nan() || y.f().is_nan() => return Ok(Val::Float(f64::NAN)),
                (x, y) => (x.f() <= y.f()) == (op == BinOp::Min),
            };
            return Ok(if pick_a { a } else { b });
        }
        let x = self.scalar(a, asp)?;
        let y = self.scalar(b, bsp)?;
        let (x, y, dt) = self.unify(x, y, span)?;
        Ok(Val::Expr(Expr { dtype: dt, span, kind: ExprKind::Binary(op, Box::new(x), Box::new(y)) }))
    }

    fn runtime_binary(&mut self, op: AOp, a: Expr, b: Expr, span: Span) -> R<Expr> {
        let hop = match op {
            AOp::Add => BinOp::Add,
            AOp::Sub => BinOp::Sub,
            AOp::Mul => BinOp::Mul,
            AOp::Div => BinOp::Div,
            AOp::FloorDiv => BinOp::FloorDiv,
            AOp::Mod => BinOp::FloorMod,
            AOp::BitAnd => BinOp::BitAnd,
            AOp::BitOr => BinOp::BitOr,
            AOp::BitXor => BinOp::BitXor,
            AOp::Shl => BinOp::Shl,
            AOp::Shr => BinOp::Shr,
            AOp::Pow | AOp::MatMul | AOp::And | AOp::Or => {
                return self.fail(
                    Diagnostic::error(span, format!("`{}` is not supported on runtime values", op.symbol()))
                        .with_help("only compile-time constants may use `**`"),
                )
            }
        };
        let bitwise = matches!(hop, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor);
        if bitwise && a.dtype == DType::Bool && b.dtype == DType::Bool {
            // On bools these are the logical operators, as in Python (`a ^ b` is `a != b`).
            let hop = match hop {
                BinOp::BitAnd => BinOp::And,
                BinOp::BitOr => BinOp::Or,
                _ => BinOp::Ne,
            };
            return Ok(Expr { dtype: DType::Bool, span, kind: ExprKind::Binary(hop, Box::new(a), Box::new(b)) });
        }
        // Otherwise a bool computes as the integer 0 or 1, as in Python (`flag + 1`).
        let (a, b) = (bool_as_int(a), bool_as_int(b));
        let (a, b, dt) = self.unify(a, b, span)?;
        match hop {
            BinOp::Div if dt.is_int() => {
                return self.fail(
                    Diagnostic::error(span, "`/` on integers is not allowed in kernels")
                        .with_label(format!("both operands are {dt}"))
                        .with_help("use `//` for floor division"),
                )
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr if !dt.is_int() => {
                return self.fail(
                    Diagnostic::error(span, format!("`{}` needs integer operands, found {dt}", op.symbol()))
                        .with_label("not integers"),
                )
            }
            _ => {}
        }
        Ok(Expr { dtype: dt, span, kind: ExprKind::Binary(hop, Box::new(a), Box::new(b)) })
    }

    fn select(&mut self, c: Expr, x: Val, xs: Span, y: Val, ys: Span, span: Span) -> R<Expr> {
        let a = self.scalar(x, xs)?;
        let b = self.scalar(y, ys)?;
        let (a, b, dt) = self.unify(a, b, span)?;
        Ok(Expr { dtype: dt, span, kind: ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)) })
    }

    // ------------------------------------------------------------------ conversions

    /// Brings two operands to one dtype: a literal takes the other side's dtype;
    /// two non-literals must already agree. An integer literal that does not fit
    /// the other side's integer dtype (`tid + 3000000000`) widens that side to the
    /// literal's int64 instead, as TVM does.
    pub(crate) fn unify(&mut self, a: Expr, b: Expr, span: Span) -> R<(Expr, Expr, DType)> {
        if a.dtype == b.dtype {
            let dt = a.dtype;
            return Ok((a, b, dt));
        }
        if let Some((a, b)) = widen_for_literal(&a, &b)
            .map(|w| (w, b.clone()))
            .or_else(|| widen_for_literal(&b, &a).map(|w| (a.clone(), w)))
        {
            let dt = a.dtype;
            return Ok((a, b, dt));
        }
        if is_literal(&b) {
            let dt = a.dtype;
            let b = self.lit_as(b, dt, span)?;
            return Ok((a, b, dt));
        }
        if is_literal(&a) {
            let dt = b.dtype;
            let a = self.lit_as(a, dt, span)?;
            return Ok((a, b, dt));
        }
        let (ad, bd) = (a.dtype, b.dtype);
        self.fail(
            Diagnostic::error(b.span, format!("dtype mismatch: {bd} operand combined with {ad}"))
                .with_label(format!("this is {bd}"))
                .with_secondary(a.span, format!("this is {ad}"))
                .with_help(format!("cast one side, e.g. `T.cast(..., \"{ad}\")`")),
        )
    }

    /// A literal re-typed to `dt` (int→float allowed; float→int is an error).
    pub(crate) fn lit_as(&mut self, e: Expr, dt: DType, span: Span) -> R<Expr> {
        let kind = match (&e.kind, dt) {
            (ExprKind::Int(v), d) if d.is_float() => ExprKind::Float(*v as f64),
            (ExprKind::Int(v), d) if d.is_int() => ExprKind::Int(*v),
            (ExprKind::Int(v), DType::Bool) if *v == 0 || *v == 1 => ExprKind::Bool(*v == 1),
            (ExprKind::Float(v), d) if d.is_float() => ExprKind::Float(*v),
            (ExprKind::Bool(v), DType::Bool) => ExprKind::Bool(*v),
            (ExprKind::Bool(v), d) if d.is_int() => ExprKind::Int(*v as i64),
            _ => {
                let from = e.dtype;
                return self.fail(
                    Diagnostic::error(e.span, format!("dtype mismatch: {from} value used where {dt} is expected"))
                        .with_secondary(span, format!("expects {dt}"))
                        .with_help(format!("cast it: `T.cast(..., \"{dt}\")`")),
                );
            }
        };
        Ok(Expr { kind, dtype: dt, span: e.span })
    }

    /// An integer literal given a dtype explicitly (`T.int8(300)`) or stored
    /// into a buffer element must fit that dtype.
    pub(crate) fn int_literal_fits(&mut self, e: &Expr, at: Span) -> R<()> {
        let (ExprKind::Int(v), Some((lo, hi))) = (&e.kind, e.dtype.int_range()) else { return Ok(()) };
        if (lo..=hi).contains(v) {
            return Ok(());
        }
        let dt = e.dtype;
        self.fail(
            Diagnostic::error(e.span, format!("integer {v} does not fit {dt} ({lo}..={hi})"))
                .with_secondary(at, format!("{dt} here"))
                .with_help("use a value in that range or a wider dtype"),
        )
    }

    pub(crate) fn const_expr(&mut self, v: &Val, span: Span) -> R<Expr> {
        let (kind, dtype) = match v {
            // Python ints are int32 when they fit, int64 otherwise (as in TVM).
            Val::Int(i) => (ExprKind::Int(*i), if i32::try_from(*i).is_ok() { DType::I32 } else { DType::I64 }),
            Val::Float(f) => (ExprKind::Float(*f), DType::F32),
            Val::Bool(b) => (ExprKind::Bool(*b), DType::Bool),
            other => return self.expected_kind("a scalar", other, span),
        };
        Ok(Expr { kind, dtype, span })
    }

    /// Any scalar-valued thing as a HIR expression (a buffer subscript becomes a load).
    pub(crate) fn scalar(&mut self, v: Val, span: Span) -> R<Expr> {
        match v {
            Val::Expr(e) => Ok(e),
            Val::Int(_) | Val::Float(_) | Val::Bool(_) => self.const_expr(&v, span),
            Val::Sub(s) => self.load(s),
            Val::Buffer(b) => {
                let n = self.buffer(b).name.clone();
                self.fail(
                    Diagnostic::error(span, format!("buffer `{n}` used as a scalar"))
                        .with_label("a whole buffer")
                        .with_help(format!("index it: `{n}[i, j]`")),
                )
            }
            other => self.expected_kind("a scalar value", &other, span),
        }
    }

    pub(crate) fn bool_expr(&mut self, v: Val, span: Span) -> R<Expr> {
        let e = self.scalar(v, span)?;
        self.require_bool(e)
    }

    fn require_bool(&mut self, e: Expr) -> R<Expr> {
        if e.dtype == DType::Bool {
            return Ok(e);
        }
        let dt = e.dtype;
        self.fail(
            Diagnostic::error(e.span, format!("expected a condition (bool), found {dt}"))
                .with_label("not a comparison")
                .with_help("compare explicitly, e.g. `x != 0`"),
        )
    }

    pub(crate) fn const_int(&mut self, v: Val, span: Span) -> R<i64> {
        match v {
            Val::Int(i) => Ok(i),
            Val::Expr(e) => match e.kind {
                ExprKind::Int(i) => Ok(i),
                _ => self.fail(
                    Diagnostic::error(span, "expected a compile-time integer, found a runtime value")
                        .with_label("depends on a runtime value")
                        .with_help("use a constant here"),
                ),
            },
            other => self.expected_kind("an integer", &other, span),
        }
    }

    pub(crate) fn positive_int(&mut self, v: Val, span: Span) -> R<i64> {
        let i = self.const_int(v, span)?;
        if i <= 0 {
            return self.fail(
                Diagnostic::error(span, format!("expected a positive extent, found {i}")).with_label("must be > 0"),
            );
        }
        Ok(i)
    }

    pub(crate) fn dtype_of(&mut self, v: Val, span: Span) -> R<DType> {
        match v {
            Val::Str(s) => match DType::from_name(&s) {
                Some(d) => Ok(d),
                None => {
                    let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
                    let d = Diagnostic::error(span, format!("unknown dtype `{s}`")).with_label("not a dtype");
                    self.fail(did_you_mean(d, &s, &names, "dtypes", true))
                }
            },
            Val::Builtin(Builtin::DTypeFn(d)) => Ok(d),
            other => self.expected_kind("a dtype string like \"float32\"", &other, span),
        }
    }

    pub(crate) fn builtin_name(&self, b: Builtin) -> String {
        match b {
            Builtin::Slice => "slice".into(),
            Builtin::Tuple => "tuple".into(),
            Builtin::List => "list".into(),
            Builtin::Range => "range".into(),
            Builtin::Len => "len".into(),
            Builtin::Min => "min".into(),
            Builtin::Max => "max".into(),
            Builtin::Int => "int".into(),
            Builtin::Float => "float".into(),
            Builtin::Abs => "abs".into(),
            Builtin::S => "S".into(),
            Builtin::R => "R".into(),
            Builtin::TileLayout => "TileLayout".into(),
            Builtin::ComposeLayout => "ComposeLayout".into(),
            Builtin::WgLocalLayout => "wg_local_layout".into(),
            Builtin::FromIters => "TileLayout.from_iters".into(),
            Builtin::Iter => "Iter".into(),
            Builtin::AxisGet => "Axis.get".into(),
            Builtin::SwizzleModeNs => "SwizzleMode".into(),
            Builtin::MmaSharedLayout => "mma_shared_layout".into(),
            Builtin::MmaAtomLayout => "mma_atom_layout".into(),
            Builtin::MmaAtomShape => "mma_atom_shape".into(),
            Builtin::Tcgen05AtomLayout => "tcgen05_atom_layout".into(),
            Builtin::FragmentLayout(f) => f.name().into(),
            Builtin::PrimFunc => "T.prim_func".into(),
            Builtin::Handle => "T.handle".into(),
            Builtin::Buffer => "T.Buffer".into(),
            Builtin::MatchBuffer => "T.match_buffer".into(),
            Builtin::DeviceEntry => "T.device_entry".into(),
            Builtin::Assume => "T.assume".into(),
            Builtin::ScopeId(k) => format!("T.{}", k.script_name()),
            Builtin::Alloc(AllocKind::Buffer) => "T.alloc_buffer".into(),
            Builtin::Alloc(AllocKind::Shared) => "T.alloc_shared".into(),
            Builtin::Alloc(AllocKind::Local) => "T.alloc_local".into(),
            Builtin::Serial => "T.serial".into(),
            Builtin::Unroll => "T.unroll".into(),
            Builtin::Grid => "T.grid".into(),
            Builtin::Cast => "T.cast".into(),
            Builtin::IfThenElse => "T.if_then_else".into(),
            Builtin::Math(f) => format!("T.{}", f.name()),
            Builtin::TMin => "T.min".into(),
            Builtin::TMax => "T.max".into(),
            Builtin::DTypeFn(d) => format!("T.{}", d.name()),
            Builtin::Let => "T.let".into(),
            Builtin::Evaluate => "T.evaluate".into(),
            Builtin::CtaSync => "T.cuda.cta_sync".into(),
            Builtin::WarpSync => "T.cuda.warp_sync".into(),
            Builtin::ThreadFence => "T.cuda.thread_fence".into(),
            Builtin::Printf => "T.cuda.printf".into(),
            Builtin::Collective(k) => format!("T.cuda.{}", k.name()),
            Builtin::Atomic(op) => format!("T.cuda.{}", crate::names::atomic_name(op)),
            Builtin::TPtx => "T.ptx".into(),
            Builtin::Ptx(op) => op.script_name(),
            Builtin::SmemPool => "T.SMEMPool".into(),
            Builtin::MBarrier => "MBarrier".into(),
            Builtin::Tile(ExecScope::Thread, op) => format!("Tx.{}", op.name()),
            Builtin::Tile(s, op) => format!("Tx.{}.{}", scope_word(s), op.name()),
            Builtin::T => "T".into(),
            Builtin::TCuda => "T.cuda".into(),
            Builtin::Tx => "Tx".into(),
            Builtin::TxScope(s) => format!("Tx.{}", scope_word(s)),
            Builtin::AxisNs => "Axis".into(),
            Builtin::Opaque => "module".into(),
        }
    }
}

/// A positional argument and its span.
pub(crate) type Posarg = (Val, Span);

/// A keyword argument: name, name span, value, value span.
pub(crate) type Kwarg = (String, Span, Val, Span);

/// Argument matcher for builtins: positional-or-keyword parameters in order.
pub(crate) struct Args {
    fname: String,
    pos: std::collections::VecDeque<(Val, Span)>,
    kw: Vec<Kwarg>,
    pub span: Span,
    /// Parameter names asked for so far (suggestions for a misspelled keyword).
    known: Vec<String>,
}

impl Args {
    pub fn new(fname: String, pos: Vec<(Val, Span)>, kw: Vec<Kwarg>, span: Span) -> Args {
        Args { fname, pos: pos.into(), kw, span, known: vec![] }
    }

    pub fn opt(&mut self, b: &mut Builder, name: &str) -> R<Option<(Val, Span)>> {
        self.known.push(name.to_string());
        let kw = self.kw.iter().position(|k| k.0 == name);
        match (self.pos.pop_front(), kw) {
            (Some(_), Some(i)) => {
                let sp = self.kw[i].1;
                let f = self.fname.clone();
                b.fail(
                    Diagnostic::error(sp, format!("`{f}` got `{name}` both by position and by keyword"))
                        .with_label("given twice"),
                )
            }
            (Some(p), None) => Ok(Some(p)),
            (None, Some(i)) => {
                let k = self.kw.remove(i);
                Ok(Some((k.2, k.3)))
            }
            (None, None) => Ok(None),
        }
    }

    pub fn req(&mut self, b: &mut Builder, name: &str) -> R<(Val, Span)> {
        match self.opt(b, name)? {
            Some(v) => Ok(v),
            None => {
                let f = self.fname.clone();
                b.fail(
                    Diagnostic::error(self.span, format!("`{f}` is missing the argument `{name}`"))
                        .with_label("in this call"),
                )
            }
        }
    }

    /// Keyword-only argument.
    pub fn kw(&mut self, name: &str) -> Option<(Val, Span)> {
        self.known.push(name.to_string());
        let i = self.kw.iter().position(|k| k.0 == name)?;
        let k = self.kw.remove(i);
        Some((k.2, k.3))
    }

    pub fn rest(&mut self) -> Vec<(Val, Span)> {
        self.pos.drain(..).collect()
    }

    /// Errors on leftovers: too many positional or unknown keyword arguments.
    pub fn finish(&mut self, b: &mut Builder) -> R<()> {
        if let Some((_, sp)) = self.pos.front() {
            let f = self.fname.clone();
            return b.fail(
                Diagnostic::error(*sp, format!("too many arguments to `{f}`")).with_label("unexpected argument"),
            );
        }
        if let Some(k) = self.kw.first() {
            let f = self.fname.clone();
            let mut d = Diagnostic::error(k.1, format!("`{f}` has no parameter `{}`", k.0))
                .with_label("unknown keyword argument");
            if let Some(c) = closest(&k.0, self.known.iter().map(String::as_str)) {
                d = d.with_help(format!("did you mean `{c}=`?"));
            }
            return b.fail(d);
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

fn num(v: &Val) -> Option<Num> {
    match v {
        Val::Int(i) => Some(Num::I(*i)),
        Val::Bool(b) => Some(Num::I(*b as i64)),
        Val::Float(f) => Some(Num::F(*f)),
        _ => None,
    }
}

/// `x op y`; ints compare exactly, floats with IEEE semantics (NaN is unordered).
fn holds<T: PartialOrd>(op: CmpOp, x: T, y: T) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

/// `-lit`, `~lit`, `not lit` on a typed literal stay literals (as the printer writes them).
fn fold_literal_unary(op: AUn, e: &Expr) -> Option<Expr> {
    let kind = match (op, &e.kind) {
        (AUn::Neg, ExprKind::Int(v)) => ExprKind::Int(v.checked_neg()?),
        (AUn::Neg, ExprKind::Float(v)) => ExprKind::Float(-v),
        (AUn::Invert, ExprKind::Int(v)) if e.dtype.is_int() => ExprKind::Int(!v),
        (AUn::Not, ExprKind::Bool(b)) => ExprKind::Bool(!b),
        (AUn::Pos, ExprKind::Int(_) | ExprKind::Float(_)) => e.kind.clone(),
        _ => return None,
    };
    Some(Expr { kind, ..e.clone() })
}

pub(crate) fn is_literal(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_))
}

/// A looked-up value carries the span of its use, not of its definition.
fn respan(v: Val, span: Span) -> Val {
    match v {
        Val::Expr(mut e) => {
            e.span = span;
            Val::Expr(e)
        }
        other => other,
    }
}

pub(crate) fn scope_word(s: ExecScope) -> &'static str {
    match s {
        ExecScope::Warpgroup => "wg",
        other => other.name(),
    }
}

fn import_hint(name: &str) -> Option<String> {
    Some(match name {
        "T" => "add `from tvm.script import tirx as T`".into(),
        "Tx" => "add `from tvm.script.tirx import tile as Tx`".into(),
        _ if layout_import(name).is_some() => format!("add `from tvm.tirx.layout import {name}`"),
        _ => return None,
    })
}

fn statement_only(b: Builtin, span: Span) -> Diagnostic {
    let (what, help) = match b {
        Builtin::Serial | Builtin::Unroll | Builtin::Grid => ("a loop header", "use it as `for i in T.serial(n):`"),
        Builtin::Alloc(_) | Builtin::MatchBuffer => ("a buffer declaration", "assign it: `A = T.alloc_buffer(...)`"),
        Builtin::ScopeId(_) => ("a scope-id declaration", "write it as a statement: `tid = T.thread_id([32])`"),
        Builtin::Collective(k) => {
            return Diagnostic::error(
                span,
                format!("`T.cuda.{}` is a statement that binds a name, not a value inside an expression", k.name()),
            )
            .with_label("not allowed here")
            .with_help(format!("write it on its own line: `s = T.cuda.{}(...)`, then use `s`", k.name()))
        }
        Builtin::Atomic(op) => {
            let f = crate::names::atomic_name(op);
            return Diagnostic::error(
                span,
                format!("`T.cuda.{f}` is a statement (an atomic access of memory), not a value inside an expression"),
            )
            .with_label("not allowed here")
            .with_help(format!("write it on its own line: `old = T.cuda.{f}(p, v)`, then use `old`"));
        }
        _ => ("a statement", "write it on its own line inside the kernel"),
    };
    Diagnostic::error(span, format!("this call is {what}, not a value")).with_label("not allowed here").with_help(help)
}

/// `e` cast to int64 when `lit` is an int64 integer literal that does not fit `e`'s
/// narrower integer dtype; `None` otherwise.
fn widen_for_literal(e: &Expr, lit: &Expr) -> Option<Expr> {
    let ExprKind::Int(v) = lit.kind else { return None };
    let (lo, hi) = e.dtype.int_range()?;
    if lit.dtype != DType::I64 || e.dtype == DType::I64 || (lo..=hi).contains(&v) {
        return None;
    }
    Some(Expr { kind: ExprKind::Cast(Box::new(e.clone())), dtype: DType::I64, span: e.span })
}

/// A bool operand of arithmetic or of an ordering comparison as the int32 0 or 1.
fn bool_as_int(e: Expr) -> Expr {
    match e.kind {
        _ if e.dtype != DType::Bool => e,
        ExprKind::Bool(v) => Expr { kind: ExprKind::Int(v as i64), dtype: DType::I32, span: e.span },
        _ => Expr { span: e.span, dtype: DType::I32, kind: ExprKind::Cast(Box::new(e)) },
    }
}

/// Python's `float(str)`: a decimal number, or `inf`/`infinity`/`nan` in any
/// case, with an optional sign, surrounding whitespace and `_` between digits.
fn py_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    let b = body.as_bytes();
    if b.first().is_none_or(|c| matches!(c, b'+' | b'-')) {
        return None;
    }
    let digit_around = |i: usize| i > 0 && i + 1 < b.len() && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit();
    if (0..b.len()).any(|i| b[i] == b'_' && !digit_around(i)) {
        return None;
    }
    let plain: String = body.chars().filter(|&c| c != '_').collect();
    if !plain.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-')) {
        return None;
    }
    plain.parse::<f64>().ok().map(|v| sign * v)
}
