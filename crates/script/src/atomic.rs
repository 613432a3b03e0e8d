//! `T.cuda.atomic_add(p, v)` (docs/tile-primitives.md §8.11): an atomic read-modify-write of
//! one element of a global or shared integer buffer, bound to a name (`old = ...`, the value
//! before the addition) or a statement of its own (the value dropped), through
//! [`StmtKind::Atomic`]; and `while` loops, whose conditions such values change.

use crate::ast;
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::names::atomic_name;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::{DType, Diagnostic, Span};

/// The element types an atomic takes: the widths `atomicAdd` has for integers.
pub(crate) const ATOMIC_TYPES: [DType; 3] = [DType::I32, DType::U32, DType::U64];

impl Builder<'_> {
    /// `[old =] T.cuda.atomic_<op>(p, value)` (with `ann`, the annotation of `old: T.int32 = ...`).
    pub(crate) fn atomic(
        &mut self,
        op: AtomicOp,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        ann: Option<(Val, Span)>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = format!("T.cuda.{}", atomic_name(op));
        let name = match target.map(|t| &t.kind) {
            None => None,
            Some(ast::ExprKind::Name(n)) => Some(n.clone()),
            Some(_) => {
                return self.fail(
                    Diagnostic::error(target.map_or(span, |t| t.span), format!("`{fname}` binds a plain name"))
                        .with_help(format!("write `old = {fname}(p, v)`")),
                )
            }
        };
        let tspan = target.map_or(span, |t| t.span);
        // A name the kernel assigns again is a mutable scalar: the value goes through a
        // binding of its own, then into the scalar.
        let mutable = name.as_ref().is_some_and(|n| self.is_mutable(n, &Val::Int(0)));
        if let (Some(n), false) = (&name, mutable) {
            self.check_rebind(n, tspan)?;
        }
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let (p, ps) = a.req(self, "ptr")?;
        let (v, vs) = a.req(self, "value")?;
        a.finish(self)?;
        let elem = self.atomic_elem(p, ps, &fname)?;
        let dtype = self.buffer(elem.buf).dtype;
        let value = self.scalar(v, vs)?;
        let value = match value.kind {
            ExprKind::Int(_) if value.dtype != dtype => {
                let e = self.lit_as(value, dtype, vs)?;
                self.int_literal_fits(&e, vs)?;
                e
            }
            _ if value.dtype != dtype => {
                let from = value.dtype;
                return self.fail(
                    Diagnostic::error(vs, format!("`{fname}` adds a {from} value to a {dtype} element"))
                        .with_label(format!("this is {from}"))
                        .with_help(format!("cast it: `T.cast(..., \"{dtype}\")`")),
                );
            }
            _ => value,
        };
        self.binding_annotation(ann, dtype, &format!("`{fname}` of a {dtype} element returns {dtype}"))?;
        self.require_device(span)?;
        let var = match &name {
            Some(n) if mutable => Some(self.fresh_var(n, dtype, tspan)),
            Some(n) => Some(self.new_var(n, dtype, tspan)),
            None => None,
        };
        out.push(Stmt { kind: StmtKind::Atomic { var, atomic: Atomic { op, elem, value } }, span });
        match (name, var) {
            (Some(n), Some(v)) if mutable => {
                let e = Expr { kind: ExprKind::Var(v), dtype, span: tspan };
                self.assign_scalar(&n, tspan, Val::Expr(e), Some(dtype), span, out)
            }
            _ => Ok(()),
        }
    }

    /// The element operand `W.ptr_to([i])`: global or shared, of an atomic's dtype.
    fn atomic_elem(&mut self, v: Val, sp: Span, fname: &str) -> R<MbarRef> {
        let Val::Ptr(buf, index) = v else {
            return self.expected_kind("an element's address like `W.ptr_to([i])`", &v, sp);
        };
        let b = self.buffer(buf);
        let (n, sc, dt) = (b.name.clone(), b.scope.name(), b.dtype);
        if b.scope == MemScope::Local {
            return self.fail(
                Diagnostic::error(sp, format!("`{fname}` of `{n}`, a local buffer"))
                    .with_label("registers are a thread's own")
                    .with_help("atomics are for global or shared memory; a thread updates its own registers with a plain store"),
            );
        }
        if !ATOMIC_TYPES.contains(&dt) {
            let ok: Vec<&str> = ATOMIC_TYPES.iter().map(|t| t.name()).collect();
            return self.fail(
                Diagnostic::error(sp, format!("`{fname}` of `{n}` ({sc} {dt})"))
                    .with_label(format!("{dt} element"))
                    .with_help(format!("atomics take {} elements", ok.join(", "))),
            );
        }
        Ok(MbarRef { buf, index, span: sp })
    }

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
}
